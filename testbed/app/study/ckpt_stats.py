"""A distribution-free interval for a speed-up measured a few times on each side.

The writers measurement times a save ``m`` times with one writer and ``n`` times with N;
on a shared machine single runs are noisy, so the speed-up is estimated as the
Hodges–Lehmann shift of the log times — the median of all ``m·n`` ratios ``t₁ᵢ / t_Nⱼ``
— with Moses' interval: the k-th smallest and k-th largest of those ratios, k chosen
from the exact null distribution of the Mann–Whitney U statistic so that the interval
covers the true ratio with at least the stated confidence (Hollander, Wolfe & Chicken,
*Nonparametric Statistical Methods*, 3rd ed., §4.3). No random draws; with too few runs
for the confidence (m = n = 2) the interval is the whole range and says so
(``achieved`` below the confidence).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from functools import cache

from testbed.stats import CONFIDENCE


@dataclass(frozen=True)
class RatioInterval:
    """The Hodges–Lehmann ratio and its Moses interval (``achieved``: its coverage)."""

    estimate: float
    low: float
    high: float
    achieved: float

    def to_dict(self) -> dict:
        return asdict(self)


@cache
def _ways(u: int, m: int, n: int) -> int:
    """Orderings of m x's and n y's with U = u (x before y pairs)."""
    if u < 0 or u > m * n:
        return 0
    if m == 0 or n == 0:
        return 1 if u == 0 else 0
    return _ways(u - n, m - 1, n) + _ways(u, m, n - 1)


def _lower_tail(k: int, m: int, n: int) -> float:
    """P(U ≤ k) under the null hypothesis."""
    return sum(_ways(u, m, n) for u in range(k + 1)) / math.comb(m + n, m)


def ratio_interval(one: Sequence[float], many: Sequence[float],
                   confidence: float = CONFIDENCE) -> RatioInterval:
    """``one / many`` (e.g. one writer's times over N writers'): estimate and interval."""
    if not one or not many or min(*one, *many) <= 0:
        raise ValueError("need positive times on both sides")
    logs = sorted(math.log(a) - math.log(b) for a in one for b in many)
    m, n = len(one), len(many)
    alpha = 1.0 - confidence
    k = 0                       # the largest k with P(U ≤ k − 1) ≤ α/2
    while k + 1 <= m * n // 2 and _lower_tail(k, m, n) <= alpha / 2:
        k += 1
    mid = len(logs) // 2
    estimate = (logs[mid] if len(logs) % 2 else 0.5 * (logs[mid - 1] + logs[mid]))
    if k == 0:
        return RatioInterval(math.exp(estimate), math.exp(logs[0]), math.exp(logs[-1]),
                             1.0 - 2 * _lower_tail(0, m, n))
    return RatioInterval(math.exp(estimate), math.exp(logs[k - 1]), math.exp(logs[-k]),
                         1.0 - 2 * _lower_tail(k - 1, m, n))
