"""Canonical JSON: the same data always gives the same text.

Used for event logs, measurement records and sweep-point hashes: sorted keys, no
whitespace, mappings with string keys, tuples and sets as lists, typed results through
their ``to_dict()``, NumPy values as Python numbers, non-finite floats as strings
(JSON has no NaN or infinity), and optionally floats rounded to a fixed number of
significant digits so that logs are stable across platforms.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any


def plain(value: Any, float_digits: int | None = None) -> Any:
    """``value`` as plain JSON data (see the module docstring)."""
    if isinstance(value, float):
        if not math.isfinite(value):
            return str(value)
        return float(f"{value:.{float_digits}g}") if float_digits else value
    if isinstance(value, Mapping):
        return {str(k): plain(v, float_digits) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v, float_digits) for v in value]
    if hasattr(value, "to_dict"):          # typed results crossing a layer
        return plain(value.to_dict(), float_digits)
    if hasattr(value, "tolist") and not isinstance(value, (str, bytes)):   # numpy
        return plain(value.tolist(), float_digits)
    if isinstance(value, (set, frozenset)):
        return [plain(v, float_digits) for v in sorted(value)]
    return value


def dumps(value: Any, float_digits: int | None = None) -> str:
    """One canonical JSON text (no newline)."""
    return json.dumps(plain(value, float_digits), sort_keys=True, separators=(",", ":"))
