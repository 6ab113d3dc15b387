"""Parsing of human-written quantities: durations, sizes, bandwidths, shapes.

Internally the testbed uses seconds and bytes. Users may write ``30s``, ``5min``,
``24h``, ``2d``, ``2GiB``, ``500MB``, ``12.5GB/s`` or plain numbers (taken in the base
unit) in YAML files and on the command line.
"""

from __future__ import annotations

import difflib
import math
import re

from testbed.errors import InputError

_DURATION_S = {
    "": 1.0, "s": 1.0, "sec": 1.0, "second": 1.0, "seconds": 1.0,
    "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9,
    "m": 60.0, "min": 60.0, "mins": 60.0, "minute": 60.0, "minutes": 60.0,
    "h": 3600.0, "hr": 3600.0, "hour": 3600.0, "hours": 3600.0,
    "d": 86400.0, "day": 86400.0, "days": 86400.0,
    "w": 604800.0, "week": 604800.0, "weeks": 604800.0,
    "y": 31557600.0, "yr": 31557600.0, "year": 31557600.0, "years": 31557600.0,
}
#: Bytes per unit. Upper-case ``B`` is a byte, lower-case ``b`` a bit; a prefix alone
#: (``5M``) or a lower-case prefix with ``b`` where it could mean either (``mb``) is
#: refused as ambiguous rather than guessed.
_SIZE_B: dict[str, float] = {
    "": 1, "B": 1, "byte": 1, "bytes": 1,
    "kB": 1e3, "KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12, "PB": 1e15,
    "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40, "PiB": 2**50,
    "b": 0.125, "bit": 0.125, "bits": 0.125,
    "kb": 125.0, "Kb": 125.0, "Mb": 1.25e5, "Gb": 1.25e8, "Tb": 1.25e11,
    "kbit": 125.0, "Mbit": 1.25e5, "Gbit": 1.25e8, "Tbit": 1.25e11,
    "Kib": 2**10 / 8, "Mib": 2**20 / 8, "Gib": 2**30 / 8, "Tib": 2**40 / 8,
}
_AMBIGUOUS = {"k", "K", "M", "G", "T", "P", "mb", "gb", "tb", "pb", "kib", "mib", "gib",
              "tib", "mB", "gB", "tB"}
#: Largest physical values accepted (beyond them a number is a typo, and would
#: overflow the closed forms): a thousand years, an exabyte, 100 PB/s.
MAX_DURATION_S = 1000 * 31557600.0
MAX_SIZE_BYTES = 10**18
MAX_BANDWIDTH_BPS = 1e17
_NUMBER_UNIT = re.compile(r"^\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*([A-Za-zµ/]*)\s*$")


def _split(text: str, what: str, source: str | None, field: str | None) -> tuple[float, str]:
    m = _NUMBER_UNIT.match(text)
    if not m:
        raise InputError(f"cannot read {text!r} as a {what}", source=source, field=field)
    return float(m.group(1)), m.group(2)


def _unknown_unit(unit: str, table: dict, what: str, source, field) -> InputError:
    same = [k for k in table if k and k.lower() == unit.lower()]
    close = same or difflib.get_close_matches(unit, [k for k in table if k], n=1)
    hint = f" (did you mean {close[0]!r}? units are case-sensitive)" if close else ""
    return InputError(f"unknown {what} unit {unit!r}{hint}", source=source, field=field)


def _check_range(value: float, text, what: str, limit: float, unit: str, source, field
                 ) -> None:
    if not math.isfinite(value) or value < 0:
        raise InputError(f"{what} must be a finite value >= 0, got {text!r}", source=source,
                         field=field)
    if value > limit:
        raise InputError(f"{what} {text!r} is beyond any physical value (more than "
                         f"{limit:.3g} {unit})", source=source, field=field)


def parse_duration_s(value: str | float | int, *, source: str | None = None,
                     field: str | None = None) -> float:
    """``'5min'`` → 300.0. Plain numbers are seconds. Negative, non-finite or absurd
    (over a thousand years) values fail. Units are case-sensitive (``5M`` is refused:
    write ``5min``)."""
    if isinstance(value, bool):
        raise InputError(f"expected a duration, got {value!r}", source=source, field=field)
    if isinstance(value, (int, float)):
        seconds = float(value)
    else:
        number, unit = _split(str(value), "duration", source, field)
        if unit in ("M", "mo", "month", "months"):
            raise InputError(f"ambiguous time unit {unit!r}: write min for minutes, or days "
                             "(30d) for months", source=source, field=field)
        factor = _DURATION_S.get(unit)
        if factor is None:
            raise _unknown_unit(unit, _DURATION_S, "time", source, field)
        seconds = number * factor
    _check_range(seconds, value, "duration", MAX_DURATION_S, "s", source, field)
    return seconds


def _size_factor(unit: str, source, field) -> float:
    if unit in _AMBIGUOUS:
        raise InputError(f"ambiguous size unit {unit!r}: write B for bytes or b for bits, "
                         "e.g. MB, MiB or Mb", source=source, field=field)
    factor = _SIZE_B.get(unit)
    if factor is None:
        raise _unknown_unit(unit, _SIZE_B, "size", source, field)
    return float(factor)


def parse_size_bytes(value: str | float | int, *, source: str | None = None,
                     field: str | None = None) -> int:
    """``'2GiB'`` → 2147483648; ``'500MB'`` → 500000000; ``'8Gb'`` → 10⁹. Plain numbers are
    bytes."""
    if isinstance(value, bool):
        raise InputError(f"expected a size, got {value!r}", source=source, field=field)
    if isinstance(value, (int, float)):
        size = float(value)
    else:
        number, unit = _split(str(value), "size", source, field)
        size = number * _size_factor(unit, source, field)
    _check_range(size, value, "size", MAX_SIZE_BYTES, "bytes", source, field)
    return int(round(size))


def parse_bandwidth_Bps(value: str | float | int, *, source: str | None = None,
                        field: str | None = None) -> float:
    """``'12.5GB/s'`` → 1.25e10 and ``'100Gb/s'`` → 1.25e10 bytes per second. Plain
    numbers are bytes per second."""
    if isinstance(value, bool):
        raise InputError(f"expected a bandwidth, got {value!r}", source=source, field=field)
    if isinstance(value, (int, float)):
        bw = float(value)
    else:
        text = str(value).strip()
        if not text.endswith("/s"):
            raise InputError(f"bandwidth {value!r} needs a '/s' unit, e.g. '12.5GB/s'",
                             source=source, field=field)
        number, unit = _split(text[:-2], "bandwidth", source, field)
        bw = number * _size_factor(unit, source, field)
    _check_range(bw, value, "bandwidth", MAX_BANDWIDTH_BPS, "B/s", source, field)
    return bw


def parse_shape(text: str, *, source: str | None = None, field: str | None = None) -> tuple[int, ...]:
    """``'3x224x224'`` → (3, 224, 224). Every dimension must be a positive integer."""
    parts = str(text).lower().replace("×", "x").split("x")
    try:
        dims = tuple(int(p) for p in parts)
    except ValueError:
        raise InputError(f"cannot read shape {text!r}; write it like 3x224x224",
                         source=source, field=field) from None
    if not dims or any(d <= 0 for d in dims):
        raise InputError(f"shape {text!r} must have positive dimensions",
                         source=source, field=field)
    return dims


def format_duration(seconds: float) -> str:
    """Short human form: 0.184 s → '184 ms', 5400 → '1.50 h'."""
    if seconds < 1e-3:
        return f"{seconds * 1e6:.1f} µs"
    if seconds < 1:
        return f"{seconds * 1e3:.1f} ms"
    if seconds < 120:
        return f"{seconds:.2f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    if seconds < 172800:
        return f"{seconds / 3600:.2f} h"
    return f"{seconds / 86400:.2f} d"


def format_bytes(n: float) -> str:
    """Binary-prefixed size: 15434845696 → '14.37 GiB'."""
    for unit, factor in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(n) >= factor:
            return f"{n / factor:.2f} {unit}"
    return f"{n:.0f} B"


def did_you_mean(name: str, choices) -> str:
    """' (did you mean X?)' for the closest choice, or '' when nothing is close."""
    close = difflib.get_close_matches(str(name), list(choices), n=1, cutoff=0.5)
    return f" (did you mean {close[0]!r}?)" if close else ""
