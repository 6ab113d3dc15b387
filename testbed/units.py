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
_SIZE_B = {
    "": 1, "b": 1, "byte": 1, "bytes": 1,
    "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12, "pb": 10**15,
    "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40, "pib": 2**50,
}
_NUMBER_UNIT = re.compile(r"^\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*([A-Za-zµ/]*)\s*$")


def _split(text: str, what: str, source: str | None, field: str | None) -> tuple[float, str]:
    m = _NUMBER_UNIT.match(text)
    if not m:
        raise InputError(f"cannot read {text!r} as a {what}", source=source, field=field)
    return float(m.group(1)), m.group(2)


def _unknown_unit(unit: str, table: dict, what: str, source, field) -> InputError:
    close = difflib.get_close_matches(unit.lower(), [k for k in table if k], n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return InputError(f"unknown {what} unit {unit!r}{hint}", source=source, field=field)


def parse_duration_s(value: str | float | int, *, source: str | None = None,
                     field: str | None = None) -> float:
    """``'5min'`` → 300.0. Plain numbers are seconds. Negative or non-finite values fail."""
    if isinstance(value, bool):
        raise InputError(f"expected a duration, got {value!r}", source=source, field=field)
    if isinstance(value, (int, float)):
        seconds = float(value)
    else:
        number, unit = _split(str(value), "duration", source, field)
        factor = _DURATION_S.get(unit) or _DURATION_S.get(unit.lower())
        if factor is None:
            raise _unknown_unit(unit, _DURATION_S, "time", source, field)
        seconds = number * factor
    if not math.isfinite(seconds) or seconds < 0:
        raise InputError(f"duration must be a finite value >= 0, got {value!r}",
                         source=source, field=field)
    return seconds


def parse_size_bytes(value: str | float | int, *, source: str | None = None,
                     field: str | None = None) -> int:
    """``'2GiB'`` → 2147483648; ``'500MB'`` → 500000000. Plain numbers are bytes."""
    if isinstance(value, bool):
        raise InputError(f"expected a size, got {value!r}", source=source, field=field)
    if isinstance(value, (int, float)):
        size = float(value)
    else:
        number, unit = _split(str(value), "size", source, field)
        factor = _SIZE_B.get(unit.lower())
        if factor is None:
            raise _unknown_unit(unit, _SIZE_B, "size", source, field)
        size = number * factor
    if not math.isfinite(size) or size < 0:
        raise InputError(f"size must be a finite value >= 0, got {value!r}",
                         source=source, field=field)
    return int(round(size))


def parse_bandwidth_Bps(value: str | float | int, *, source: str | None = None,
                        field: str | None = None) -> float:
    """``'12.5GB/s'`` → 1.25e10 bytes per second. Plain numbers are bytes per second."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(parse_size_bytes(value, source=source, field=field))
    text = str(value).strip()
    if not text.lower().endswith("/s"):
        raise InputError(f"bandwidth {value!r} needs a '/s' unit, e.g. '12.5GB/s'",
                         source=source, field=field)
    number, unit = _split(text[:-2], "bandwidth", source, field)
    factor = _SIZE_B.get(unit.lower())
    if factor is None:
        raise _unknown_unit(unit, _SIZE_B, "size", source, field)
    return number * factor


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
