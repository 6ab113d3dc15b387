"""Summary statistics of replicated simulations: the mean and its 95% confidence interval.

One estimator for every figure the testbed reports over replications: the sample mean
with a Student-t 95% interval (n − 1 degrees of freedom), clipped to the quantity's
range so that a count is never negative and a ratio never above 1.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np

#: Two-sided confidence level of every interval the testbed prints.
CONFIDENCE = 0.95


@dataclass(frozen=True)
class MeanCI:
    """Sample mean, its 95% confidence interval and the sample standard deviation."""

    mean: float
    ci95_low: float
    ci95_high: float
    std: float
    n: int = 1

    def to_dict(self) -> dict:
        return asdict(self)

    @property
    def half_width(self) -> float:
        return 0.5 * (self.ci95_high - self.ci95_low)

    @property
    def relative_half_width(self) -> float:
        """Half-width of the interval over |mean| (0 for a single value or a zero mean)."""
        return self.half_width / abs(self.mean) if self.mean else 0.0

    @classmethod
    def from_dict(cls, data: dict) -> MeanCI:
        return cls(float(data["mean"]), float(data["ci95_low"]), float(data["ci95_high"]),
                   float(data.get("std", 0.0)), int(data.get("n", 1)))


def mean_ci95(values: Sequence[float], low: float = -math.inf,
              high: float = math.inf) -> MeanCI:
    """Mean and the 95% confidence interval of the mean, clipped to [``low``, ``high``]."""
    x = np.asarray(values, dtype=float)
    if x.size == 0:
        raise ValueError("no values")
    mean = float(x.mean())
    if x.size < 2:
        return MeanCI(mean, mean, mean, 0.0, int(x.size))
    sd = float(x.std(ddof=1))
    from scipy import stats as scipy_stats  # lazily: scipy.stats costs 0.3 s to import
    t = float(scipy_stats.t.ppf(0.5 + CONFIDENCE / 2, x.size - 1))
    half = t * sd / math.sqrt(x.size)
    return MeanCI(mean, max(mean - half, low), min(mean + half, high), sd, int(x.size))
