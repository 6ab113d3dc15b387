"""Floating-point storage formats: float32, float16, bfloat16 and mantissa truncation.

Each function takes any real array and returns, as float64, the values a reader gets
back after storing them in the format (so errors can be measured and a network fed
with them). Conversions round to nearest, ties to even (IEEE 754 ``roundTiesToEven``);
a finite value beyond the format's largest finite number becomes ±inf, as a cast does.

bfloat16 is emulated in NumPy, which has no such type: the value is first rounded to
float32 (NumPy's cast, round-to-nearest-even), then the 32-bit pattern is rounded to
its top 16 bits, round-to-nearest-even, by adding ``0x7FFF`` plus the lowest kept bit
and shifting right by 16 — the same bit trick as TensorFlow's and PyTorch's
float32→bfloat16 conversion (NaN stays a quiet NaN). :func:`bfloat16_bits` gives the
stored uint16 patterns and :func:`from_bfloat16_bits` the float32 they stand for.
From float64 this is two roundings (to float32, then to bfloat16): a value within
2⁻²⁴ (relative) of a bfloat16 tie can land one bfloat16 step from a direct rounding —
what a float32 pipeline that converts to bfloat16 produces, and well inside the
2⁻⁸ relative error bound of the format.

Mantissa truncation (:func:`truncate_mantissa`) keeps the sign, the float64 exponent
and the top ``m`` of the 52 explicit mantissa bits, dropping the rest (round toward
zero): relative error below 2⁻ᵐ for normal values, and the kept bits cost
``1 + 11 + m`` bits a value when packed.
"""

from __future__ import annotations

import numpy as np

#: Explicit mantissa bits of float64 (IEEE 754 binary64).
FLOAT64_MANTISSA_BITS = 52
#: Sign plus exponent bits of float64 (1 + 11).
FLOAT64_SIGN_EXPONENT_BITS = 12
#: Largest finite float16, (2 − 2⁻¹⁰)·2¹⁵ (IEEE 754 binary16).
FLOAT16_MAX = 65504.0
#: Smallest positive normal float16, 2⁻¹⁴.
FLOAT16_MIN_NORMAL = 2.0 ** -14
#: Unit roundoff of float16 (10 explicit mantissa bits): 2⁻¹¹.
FLOAT16_UNIT_ROUNDOFF = 2.0 ** -11
#: Unit roundoff of bfloat16 (7 explicit mantissa bits): 2⁻⁸.
BFLOAT16_UNIT_ROUNDOFF = 2.0 ** -8
#: Largest finite bfloat16, (2 − 2⁻⁷)·2¹²⁷ (bit pattern 0x7F7F).
BFLOAT16_MAX = float(np.array([0x7F7F0000], dtype=np.uint32).view(np.float32)[0])
#: Rounding bias of the float32→bfloat16 bit trick (half of the dropped 16 bits, minus 1).
_BF16_ROUND_BIAS = 0x7FFF
#: Quiet-NaN bfloat16 pattern (exponent all ones, top mantissa bit set).
_BF16_QUIET_NAN = 0x7FC0


def _as_float64(x) -> np.ndarray:
    return np.asarray(x, dtype=np.float64)


def to_float32(x) -> np.ndarray:
    """``x`` stored as float32 and read back as float64."""
    with np.errstate(over="ignore"):
        return _as_float64(x).astype(np.float32).astype(np.float64)


def to_float16(x) -> np.ndarray:
    """``x`` stored as float16 (NumPy's direct float64→float16 cast) and read back."""
    with np.errstate(over="ignore"):
        return _as_float64(x).astype(np.float16).astype(np.float64)


def bfloat16_bits(x) -> np.ndarray:
    """The uint16 bfloat16 patterns of ``x`` (round-to-nearest-even; see module doc)."""
    with np.errstate(over="ignore"):
        f32 = _as_float64(x).astype(np.float32)
    bits = f32.view(np.uint32)
    lsb = (bits >> 16) & 1
    rounded = ((bits + np.uint32(_BF16_ROUND_BIAS) + lsb) >> 16).astype(np.uint16)
    sign = ((bits >> 16) & 0x8000).astype(np.uint16)
    return np.where(np.isnan(f32), sign | np.uint16(_BF16_QUIET_NAN), rounded)


def from_bfloat16_bits(bits) -> np.ndarray:
    """The float32 values that uint16 bfloat16 patterns stand for."""
    wide = np.asarray(bits, dtype=np.uint16).astype(np.uint32) << 16
    return wide.view(np.float32)


def to_bfloat16(x) -> np.ndarray:
    """``x`` stored as bfloat16 and read back as float64."""
    return from_bfloat16_bits(bfloat16_bits(x)).astype(np.float64)


def truncate_mantissa(x, bits: int) -> np.ndarray:
    """``x`` with all but the top ``bits`` (0…52) float64 mantissa bits cleared.

    Non-finite values pass through unchanged (clearing a NaN's payload could make it
    an infinity).
    """
    if not 0 <= int(bits) <= FLOAT64_MANTISSA_BITS:
        raise ValueError(f"mantissa bits must be in 0…{FLOAT64_MANTISSA_BITS}, got {bits}")
    values = np.array(x, dtype=np.float64)   # a copy: the view below is written to
    drop = FLOAT64_MANTISSA_BITS - int(bits)
    mask = np.uint64((0xFFFFFFFFFFFFFFFF >> drop) << drop)
    finite = np.isfinite(values)
    raw = values.view(np.uint64)
    raw[finite] &= mask
    return values


def mantissa_bytes_per_value(bits: int) -> float:
    """Packed storage of a value with ``bits`` mantissa bits (sign, float64 exponent)."""
    return (FLOAT64_SIGN_EXPONENT_BITS + int(bits)) / 8
