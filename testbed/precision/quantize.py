"""k-bit uniform quantisation (k = 2…16) with a per-feature or global scale.

A :class:`QuantScale` maps the range ``[low, high]`` of the data it was fitted on onto
the integer codes ``0 … 2ᵏ − 1``: ``step = (high − low) / (2ᵏ − 1)``, code
``c = round((x − low) / step)`` and the value read back is ``low + c·step``. Values
outside the fitted range (test data quantised with the training scale) are clipped to
it first. A feature whose values are all equal gets ``step = 1`` and code 0, exactly;
a range so narrow (a few subnormals) that the step would underflow to 0 gets the
smallest subnormal as its step.

Rounding modes:

* ``nearest`` — round to the nearest level (ties to even): error ≤ step / 2;
* ``truncate`` — the level at or below: error < step, biased by about −step / 2;
* ``stochastic`` — up with probability equal to the fractional part, from a NumPy
  ``Generator`` built on a ``SeedSequence`` the caller passes (no global RNG):
  error < step and unbiased, ``E[read back] = x``.

A value that already sits on a level (within :data:`LEVEL_ULPS` float64 ulps of the
data's scale, the rounding error of reading a level back) keeps that level in every
mode, so quantising quantised data with the same scale changes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from testbed.errors import InputError

#: Quantisation widths supported, in bits per value.
MIN_BITS, MAX_BITS = 2, 16
#: A value within this many float64 ulps of the data's scale — ``span + max(|low|,
#: |high|)``, the size of the rounding error of ``low + c·step`` and of
#: ``(x − low) / step`` — counts as lying on a level. The tolerance is a distance in
#: value units, the same for every k, so nested grids (k | j) stay nested.
LEVEL_ULPS = 16

#: The smallest positive float64 (a subnormal), the least step a scale may have.
_TINIEST = float(np.finfo(np.float64).smallest_subnormal)

Rounding = Literal["nearest", "truncate", "stochastic"]
ROUNDINGS = ("nearest", "truncate", "stochastic")


def check_bits(bits: int, *, field: str | None = None) -> int:
    """``bits`` as an int in 2…16, else an :class:`InputError` naming ``field``."""
    if isinstance(bits, bool) or int(bits) != bits or not MIN_BITS <= bits <= MAX_BITS:
        raise InputError(f"quantisation bits k must be an integer in {MIN_BITS}…{MAX_BITS}, "
                         f"got {bits}", field=field)
    return int(bits)


@dataclass(frozen=True)
class QuantScale:
    """Levels ``low + c·step`` for codes ``c = 0 … levels``; arrays broadcast over the
    feature axes (all axes but the first), or scalars for a global scale."""

    bits: int
    low: np.ndarray
    step: np.ndarray
    per_feature: bool

    @property
    def levels(self) -> int:
        """The largest code, 2ᵏ − 1."""
        return 2 ** self.bits - 1

    @property
    def high(self) -> np.ndarray:
        return self.low + self.levels * self.step

    def to_dict(self) -> dict:
        return {"bits": self.bits, "per_feature": self.per_feature,
                "low": np.asarray(self.low).tolist(), "step": np.asarray(self.step).tolist()}


def fit_scale(x, bits: int, *, per_feature: bool = True) -> QuantScale:
    """The scale spanning ``x``'s range: per feature (reduced over the first axis, the
    samples) or one for the whole array."""
    bits = check_bits(bits)
    data = np.asarray(x, dtype=np.float64)
    if data.size == 0:
        raise InputError("cannot fit a quantisation scale to no data")
    if not np.all(np.isfinite(data)):
        raise InputError("cannot quantise non-finite values (NaN or inf)")
    axis = 0 if per_feature and data.ndim > 1 else None
    low, high = data.min(axis=axis), data.max(axis=axis)
    with np.errstate(over="ignore"):
        span = high - low
    if not np.all(np.isfinite(span)):
        raise InputError("the data's range exceeds float64 (over 1.8e308): cannot quantise")
    # A range of a few subnormals would give step 0: the smallest subnormal is the floor.
    step = np.where(span > 0, np.maximum(span / (2 ** bits - 1), _TINIEST), 1.0)
    return QuantScale(bits=bits, low=np.asarray(low, dtype=np.float64),
                      step=np.asarray(step, dtype=np.float64),
                      per_feature=axis is not None)


def quantize(x, scale: QuantScale, *, rounding: Rounding = "nearest",
             seed: np.random.SeedSequence | None = None) -> np.ndarray:
    """Integer codes (uint8 for k ≤ 8, else uint16) of ``x`` under ``scale``."""
    if rounding not in ROUNDINGS:
        raise InputError(f"unknown rounding {rounding!r}; choose one of {', '.join(ROUNDINGS)}",
                         field="rounding")
    data = np.asarray(x, dtype=np.float64)
    if not np.all(np.isfinite(data)):
        raise InputError("cannot quantise non-finite values (NaN or inf)")
    position = np.clip((data - scale.low) / scale.step, 0.0, float(scale.levels))
    nearest = np.rint(position)
    magnitude = np.maximum(np.abs(scale.low), np.abs(scale.high))
    tolerance = LEVEL_ULPS * np.finfo(np.float64).eps * (scale.levels + magnitude / scale.step)
    on_level = np.abs(position - nearest) <= tolerance
    if rounding == "nearest":
        codes = nearest
    elif rounding == "truncate":
        codes = np.where(on_level, nearest, np.floor(position))
    else:
        if seed is None:
            raise InputError("stochastic rounding needs a seed", field="seed")
        rng = np.random.Generator(np.random.PCG64(seed))
        draws = rng.random(position.shape)
        codes = np.where(on_level, nearest, np.floor(position + draws))
    codes = np.clip(codes, 0, scale.levels)
    return codes.astype(np.uint8 if scale.bits <= 8 else np.uint16)


def dequantize(codes, scale: QuantScale) -> np.ndarray:
    """The float64 values that ``codes`` stand for under ``scale``."""
    return scale.low + np.asarray(codes, dtype=np.float64) * scale.step


def quantize_values(x, bits: int, *, per_feature: bool = True, rounding: Rounding = "nearest",
                    seed: np.random.SeedSequence | None = None,
                    scale: QuantScale | None = None) -> np.ndarray:
    """``x`` quantised to ``bits`` and read back (the scale fitted to ``x`` unless given)."""
    scale = scale or fit_scale(x, bits, per_feature=per_feature)
    return dequantize(quantize(x, scale, rounding=rounding, seed=seed), scale)
