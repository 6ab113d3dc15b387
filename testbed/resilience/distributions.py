"""Inter-arrival distributions of failures, parametrised by their mean, and drawn durations.

Users give a mean time between failures and, for Weibull, a shape k (scale =
mean / Γ(1 + 1/k)) or, for lognormal, σ of the underlying normal
(μ = ln(mean) − σ²/2). Draws come from a caller's ``numpy.random.Generator``.

:meth:`Interarrival.equilibrium` draws the *residual life* of a renewal process that has
been running for a long time (density S(t)/mean): a node of a cluster that was already
in service when the job started. It is sampled exactly through the length-biased
distribution (density x·f(x)/mean) times an independent uniform fraction:

* Weibull(k, λ): (L/λ)^k ~ Gamma(1 + 1/k, 1), so L = λ·G^(1/k);
* lognormal(μ, σ): the length-biased law is lognormal(μ + σ², σ);
* exponential: memoryless, the residual is exponential with the same mean.

:class:`Drawn` is a duration that is either fixed or drawn from one of these families
(repair times, host-selection and swap costs).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal, get_args

import numpy as np

#: Families of inter-arrival and repair-time distributions.
Family = Literal["exponential", "weibull", "lognormal"]
FAMILIES: tuple[str, ...] = get_args(Family)
#: A duration's kind: fixed, or drawn from a family.
DrawnKind = Literal["fixed", Family]
DRAWN_KINDS: tuple[str, ...] = get_args(DrawnKind)


@dataclass(frozen=True)
class Interarrival:
    """An inter-arrival distribution with mean ``mean_s``."""

    kind: str            # exponential | weibull | lognormal
    mean_s: float
    shape: float = 1.0   # weibull k
    sigma: float = 1.0   # lognormal σ

    def __post_init__(self) -> None:
        if self.kind not in FAMILIES:
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

    def equilibrium(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """``n`` residual lives of a stationary renewal process (density S(t)/mean)."""
        if self.kind == "exponential":
            return rng.exponential(self.mean_s, n)
        if self.kind == "weibull":
            length = self.weibull_scale_s * rng.gamma(1.0 + 1.0 / self.shape, 1.0, n) ** (
                1.0 / self.shape)
        else:
            length = rng.lognormal(self.lognormal_mu + self.sigma ** 2, self.sigma, n)
        return length * rng.random(n)

    def scaled(self, factor: float) -> Interarrival:
        """The same family with the mean multiplied by ``factor``."""
        return Interarrival(self.kind, self.mean_s * factor, self.shape, self.sigma)


@dataclass(frozen=True)
class Drawn:
    """A duration in seconds: fixed (``kind='fixed'``) or drawn from a family with mean
    ``mean_s`` (shape for Weibull, σ for lognormal)."""

    kind: str = "fixed"
    mean_s: float = 0.0
    shape: float = 1.0
    sigma: float = 1.0

    def __post_init__(self) -> None:
        if self.kind != "fixed" and self.kind not in FAMILIES:
            raise ValueError(f"unknown distribution {self.kind!r}")
        if not (math.isfinite(self.mean_s) and self.mean_s >= 0):
            raise ValueError("mean_s must be finite and >= 0")
        if self.kind != "fixed" and self.mean_s <= 0:
            raise ValueError("a drawn duration needs a mean > 0")

    @property
    def is_zero(self) -> bool:
        return self.kind == "fixed" and self.mean_s == 0.0

    @property
    def is_fixed(self) -> bool:
        return self.kind == "fixed"

    def draw(self, rng: np.random.Generator) -> float:
        """One duration (no draw at all when fixed)."""
        if self.kind == "fixed":
            return self.mean_s
        return float(Interarrival(self.kind, self.mean_s, self.shape, self.sigma).draw(rng, 1)[0])


#: A duration of zero seconds (no cost).
ZERO = Drawn()
