"""Units: bits from bytes, case-sensitive durations, ambiguous and unphysical values refused."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from testbed.errors import InputError
from testbed.units import (
    MAX_DURATION_S,
    parse_bandwidth_Bps,
    parse_duration_s,
    parse_size_bytes,
)


def test_bits_are_not_bytes():
    assert parse_bandwidth_Bps("100Gb/s") == 12.5e9          # a 100 Gb/s NIC
    assert parse_bandwidth_Bps("12.5GB/s") == 12.5e9
    assert parse_bandwidth_Bps("400Gbit/s") == 50e9
    assert parse_size_bytes("8Gb") == 10**9
    assert parse_size_bytes("2GiB") == 2**31 and parse_size_bytes("500MB") == 500 * 10**6
    assert parse_size_bytes("1KiB") == 1024 and parse_size_bytes("1kB") == 1000


@pytest.mark.parametrize("text", ["5M", "10mb", "3gb", "1G", "2mB", "7mo"])
def test_ambiguous_units_are_refused(text):
    parse = parse_duration_s if text in ("5M", "7mo") else parse_size_bytes
    with pytest.raises(InputError, match="ambiguous"):
        parse(text)


def test_durations_are_case_sensitive_and_bounded():
    assert parse_duration_s("5min") == 300 and parse_duration_s("5m") == 300
    assert parse_duration_s("2d") == 172800 and parse_duration_s("90") == 90
    with pytest.raises(InputError, match="case-sensitive"):
        parse_duration_s("5MIN")
    for bad in ("1e300h", "-5s", "nan", float("inf"), 1e40):
        with pytest.raises(InputError):
            parse_duration_s(bad)
    with pytest.raises(InputError, match="beyond any physical"):
        parse_size_bytes("1e30TB")
    with pytest.raises(InputError, match="beyond any physical"):
        parse_bandwidth_Bps("1e30GB/s")


@given(st.floats(min_value=0, max_value=MAX_DURATION_S / 3600, allow_nan=False))
def test_hours_round_trip(hours):
    assert math.isclose(parse_duration_s(f"{hours!r}h"), hours * 3600, rel_tol=1e-12)
