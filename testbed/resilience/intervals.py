"""Optimum checkpoint intervals and the expected wall time of a checkpointed job.

Notation (Daly 2006, "A higher order estimate of the optimum checkpoint interval for
restart dumps", FGCS 22): ``work_s`` failure-free compute T_s, ``interval_s`` compute
between checkpoints τ, ``cost_s`` checkpoint time δ, ``restart_s`` restart time R,
``mtbf_s`` the job's mean time between (exponentially distributed) failures M.
Failures may strike during checkpoints and during restarts.
"""

from __future__ import annotations

import math


def _check(**values: float) -> None:
    for name, value in values.items():
        if not math.isfinite(value) or value <= 0:
            raise ValueError(f"{name} must be finite and > 0, got {value!r}")


def young_interval_s(cost_s: float, mtbf_s: float) -> float:
    """Young (1974): τ = √(2 δ M)."""
    _check(cost_s=cost_s, mtbf_s=mtbf_s)
    return math.sqrt(2.0 * cost_s * mtbf_s)


def daly_first_order_interval_s(cost_s: float, mtbf_s: float, restart_s: float = 0.0) -> float:
    """Daly's first-order estimate: τ = √(2 δ (M + R))."""
    _check(cost_s=cost_s, mtbf_s=mtbf_s)
    return math.sqrt(2.0 * cost_s * (mtbf_s + restart_s))


def daly_higher_order_interval_s(cost_s: float, mtbf_s: float) -> float:
    """Daly's higher-order estimate (eq. 37).

    τ = √(2δM)·[1 + ⅓·√(δ/2M) + ⅑·(δ/2M)] − δ for δ < 2M, and τ = M otherwise.
    """
    _check(cost_s=cost_s, mtbf_s=mtbf_s)
    if cost_s >= 2.0 * mtbf_s:
        return mtbf_s
    x = cost_s / (2.0 * mtbf_s)
    return math.sqrt(2.0 * cost_s * mtbf_s) * (1.0 + math.sqrt(x) / 3.0 + x / 9.0) - cost_s


def daly_exact_interval_s(cost_s: float, mtbf_s: float) -> float:
    """The τ that minimises Daly's expected-time formula exactly.

    Minimising (e^{(τ+δ)/M} − 1)/τ gives e^{(τ+δ)/M}(τ/M − 1) + 1 = 0, whose root is
    τ = M·(1 + W₀(−e^{−1−δ/M})) with W₀ the principal branch of Lambert's W.
    """
    _check(cost_s=cost_s, mtbf_s=mtbf_s)
    from scipy.special import lambertw  # lazily: scipy costs 0.15 s to import
    w = lambertw(-math.exp(-1.0 - cost_s / mtbf_s), 0).real
    return mtbf_s * (1.0 + w)


def segment_expected_s(length_s: float, restart_s: float, mtbf_s: float) -> float:
    """Expected time to get through ``length_s`` of uninterrupted time with restarts.

    With exponential failures of mean M and a restart of R after each (itself
    interruptible): M·e^{R/M}·(e^{L/M} − 1); infinite where that overflows a float.
    """
    if (restart_s + length_s) / mtbf_s > 700.0:
        return math.inf
    return mtbf_s * math.exp(restart_s / mtbf_s) * math.expm1(length_s / mtbf_s)


def daly_expected_wall_time_s(work_s: float, interval_s: float, cost_s: float,
                              restart_s: float, mtbf_s: float) -> float:
    """Daly's expected wall time: T_w = M·e^{R/M}·(e^{(τ+δ)/M} − 1)·T_s/τ (eq. 13)."""
    _check(work_s=work_s, interval_s=interval_s, mtbf_s=mtbf_s)
    return segment_expected_s(interval_s + cost_s, restart_s, mtbf_s) * work_s / interval_s


def expected_wall_time_s(work_s: float, interval_s: float, cost_s: float, restart_s: float,
                         mtbf_s: float, final_checkpoint: bool = True) -> float:
    """Exact expected wall time of the simulator's job under Daly's assumptions.

    The job runs ⌊T_s/τ⌋ full segments of τ + δ and a last partial segment (of the
    remaining work plus a final checkpoint when ``final_checkpoint``); every segment's
    expected time is :func:`segment_expected_s`. This differs from Daly's formula only
    by the last segment, which the formula counts as a fraction of a full one.
    """
    _check(work_s=work_s, interval_s=interval_s, mtbf_s=mtbf_s)
    full = math.floor(work_s / interval_s + 1e-9)
    rest = work_s - full * interval_s
    if rest <= 1e-9 * work_s:
        rest = 0.0
    total = full * segment_expected_s(interval_s + cost_s, restart_s, mtbf_s)
    if rest > 0:
        total += segment_expected_s(rest + (cost_s if final_checkpoint else 0.0),
                                    restart_s, mtbf_s)
    return total


def no_checkpoint_expected_s(work_s: float, restart_s: float, mtbf_s: float) -> float:
    """Expected wall time without checkpoints: the whole run is one segment."""
    return segment_expected_s(work_s, restart_s, mtbf_s)
