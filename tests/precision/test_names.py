"""Named precisions: parsing, bytes per value, reports."""

from __future__ import annotations

import numpy as np
import pytest

from testbed.errors import InputError, UnknownNameError
from testbed.precision import apply_precision, parse_precision, parse_precisions


@pytest.mark.parametrize("name, bytes_per_value", [
    ("fp64", 8), ("fp32", 4), ("fp16", 2), ("bf16", 2), ("int16", 2), ("int8", 1),
    ("int4", 0.5), ("int2", 0.25), ("mant7", 19 / 8), ("mant52", 8), ("FP16", 2)])
def test_bytes_per_value(name, bytes_per_value):
    assert parse_precision(name).bytes_per_value == bytes_per_value


@pytest.mark.parametrize("name, message", [
    ("fp8", "unknown precision"), ("int1", "2…16"), ("int17", "2…16"), ("int", "unknown"),
    ("mant53", "0…52"), ("", "unknown")])
def test_bad_names_name_the_field(name, message):
    with pytest.raises(InputError, match=message) as info:
        parse_precision(name, field="--precisions")
    assert info.value.field == "--precisions"


def test_unknown_is_an_unknown_name_error():
    with pytest.raises(UnknownNameError):
        parse_precision("float8")


def test_lists_and_ranges():
    names = [p.name for p in parse_precisions("fp64, int2..int5,fp16,int4")]
    assert names == ["fp64", "int2", "int3", "int4", "int5", "fp16"]
    for bad in ("fp64,,fp16", "int8..int4", "fp16..int4", "int2..int20"):
        with pytest.raises(InputError):
            parse_precisions(bad)


def test_reports_measure_the_data():
    x = np.array([[0.1, 100.0], [0.2, 300.0], [0.3, 200.0]])
    stored, rep = apply_precision(parse_precision("fp64"), x)
    assert rep.max_abs_error == 0 and rep.bytes_per_value == 8 and rep.values == 6
    stored, rep = apply_precision(parse_precision("int2"), x)
    assert rep.max_abs_error == pytest.approx(100 / 3)   # 200 sits on a tie: 1.5 steps -> 2
    assert set(rep.to_dict()) == {"precision", "bytes_per_value", "max_abs_error",
                                  "max_rel_error", "values"}
    _, rep16 = apply_precision(parse_precision("fp16"), np.array([1e5, 0.0]))
    assert rep16.max_abs_error == np.inf
    _, rep_zero = apply_precision(parse_precision("fp16"), np.zeros(4))
    assert rep_zero.max_rel_error == 0.0
