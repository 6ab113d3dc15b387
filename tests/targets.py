"""Speed targets of the benchmarks: exact in ``make bench``, with slack in ``make test``.

``make test`` runs every benchmark once (``--benchmark-disable``) on a busy 2-core CI
machine, where a target checked to the letter would fail on noise; there a target only
catches gross regressions (``SLACK`` times the limit). ``make bench`` runs them with
statistics and checks the target itself.
"""

from __future__ import annotations

#: How far over its target a benchmark may be when it runs once as a plain test.
SLACK = 3.0


def at_most(benchmark, value: float, limit: float, what: str) -> None:
    """``value`` (a time, lower is better) meets ``limit``."""
    bound = limit if not benchmark.disabled else limit * SLACK
    assert value < bound, f"{what}: {value:.4g} > {bound:.4g} (target {limit:.4g})"


def at_least(benchmark, value: float, limit: float, what: str) -> None:
    """``value`` (a rate, higher is better) meets ``limit``."""
    bound = limit if not benchmark.disabled else limit / SLACK
    assert value >= bound, f"{what}: {value:.4g} < {bound:.4g} (target {limit:.4g})"


def mean_s(benchmark, fallback_s: float) -> float:
    """The benchmark's mean time (``fallback_s``, one timed call, when disabled)."""
    return benchmark.stats.stats.mean if not benchmark.disabled else fallback_s
