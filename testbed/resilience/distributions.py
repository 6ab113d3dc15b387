"""Inter-arrival distributions of failures, parametrised by their mean.

Users give a mean time between failures and, for Weibull, a shape k (scale =
mean / Γ(1 + 1/k)) or, for lognormal, σ of the underlying normal
(μ = ln(mean) − σ²/2). Draws come from a caller's ``numpy.random.Generator``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Interarrival:
    """An inter-arrival distribution with mean ``mean_s``."""

    kind: str            # exponential | weibull | lognormal
    mean_s: float
    shape: float = 1.0   # weibull k
    sigma: float = 1.0   # lognormal σ

    def __post_init__(self) -> None:
        if self.kind not in ("exponential", "weibull", "lognormal"):
            raise ValueError(f"unknown distribution {self.kind!r}")
        if not (math.isfinite(self.mean_s) and self.mean_s > 0):
            raise ValueError("mean_s must be finite and > 0")

    @property
    def weibull_scale_s(self) -> float:
        return self.mean_s / math.gamma(1.0 + 1.0 / self.shape)

    @property
    def lognormal_mu(self) -> float:
        return math.log(self.mean_s) - 0.5 * self.sigma ** 2

    def draw(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """``n`` inter-arrival times in seconds."""
        if self.kind == "exponential":
            return rng.exponential(self.mean_s, n)
        if self.kind == "weibull":
            return rng.weibull(self.shape, n) * self.weibull_scale_s
        return rng.lognormal(self.lognormal_mu, self.sigma, n)

    def scaled(self, factor: float) -> Interarrival:
        """The same family with the mean multiplied by ``factor``."""
        return Interarrival(self.kind, self.mean_s * factor, self.shape, self.sigma)
