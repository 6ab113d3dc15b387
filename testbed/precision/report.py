"""What a precision transform costs and loses: bytes per value and the error it made.

Every transform in :mod:`testbed.precision` returns the values as they come back out of
storage (float64 arrays) together with a :class:`TransformReport` measured on the data
it was applied to, so that a study can show the loss next to the saving.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np


@dataclass(frozen=True)
class TransformReport:
    """The error of one transform on one array.

    ``max_abs_error`` is ``max |stored - original|``; ``max_rel_error`` is
    ``max |stored - original| / |original|`` over the non-zero originals (a zero has no
    relative error). Both are ``inf`` where a finite value overflowed to infinity.
    ``bytes_per_value`` is the storage cost of one value, bit-packed where the format
    has fewer than 8 bits (an int4 value costs 0.5 bytes); scale factors stored once per
    feature are not counted.
    """

    precision: str
    bytes_per_value: float
    max_abs_error: float
    max_rel_error: float
    values: int

    def to_dict(self) -> dict:
        return asdict(self)


def measure(original: np.ndarray, stored: np.ndarray, *, precision: str,
            bytes_per_value: float) -> TransformReport:
    """The :class:`TransformReport` of ``stored`` against ``original`` (same shape)."""
    original = np.asarray(original, dtype=np.float64)
    stored = np.asarray(stored, dtype=np.float64)
    if original.shape != stored.shape:
        raise ValueError(f"shapes differ: {original.shape} and {stored.shape}")
    finite = np.isfinite(original)
    with np.errstate(invalid="ignore", over="ignore"):
        diff = np.abs(stored[finite] - original[finite])
    diff = np.where(np.isnan(diff), np.inf, diff)   # finite -> NaN counts as lost
    nonzero = original[finite] != 0
    max_abs = float(diff.max()) if diff.size else 0.0
    rel = diff[nonzero] / np.abs(original[finite][nonzero])
    max_rel = float(rel.max()) if rel.size else 0.0
    return TransformReport(precision=precision, bytes_per_value=float(bytes_per_value),
                           max_abs_error=max_abs, max_rel_error=max_rel,
                           values=int(original.size))
