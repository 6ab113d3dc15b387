"""Jobs that cannot finish in reasonable time are refused before any simulation.

The closed form for exponential failures bounds what a replication can expect (failures
and wall time); a scenario beyond ``simulation.max_failures``, ``max_simulated_time`` or
:data:`MAX_TOTAL_FAILURES` over all replications is refused with the key to change.
"""

from __future__ import annotations

import math

from testbed.errors import RunawayError
from testbed.resilience.plan import JobPlan
from testbed.resilience.spec import RunLimits, SimSpec
from testbed.scenario.schema import Scenario
from testbed.units import format_duration

#: Most failures all replications of one run may simulate together (about ten minutes
#: of one core at the fast path's ~2 µs per failure).
MAX_TOTAL_FAILURES = 300_000_000
#: Most checkpoint segments the step-by-step SimPy engine may walk in one replication,
#: and so the most an event log (which it writes) may hold: measured here, 10⁵ segments
#: take 2 s without a log and 5.5 s with one (3·10⁵ events, 24 MB); 2·10⁵ is ten
#: seconds and ~50 MB. The fast engine has no such limit (closed forms per failure).
MAX_STEPWISE_SEGMENTS = 200_000


def expected_failures(plan: JobPlan, mtbf_s: float, restart_s: float,
                      lose_work: bool = True) -> float:
    """Failures one replication can expect, from the closed form for exponential failures
    (E[wall] / M with E[wall] = Σ M e^{R/M}(e^{L/M} − 1) over segments of length L); inf
    when it overflows. An estimate for other distributions, exact in expectation for the
    exponential one. A job that loses no work at a failure expects at most
    (failure-free time / M)·e^{R/M}."""
    if not math.isfinite(mtbf_s):
        return 0.0
    if mtbf_s <= 0:
        return math.inf
    if not lose_work:
        exponent = restart_s / mtbf_s
        return math.inf if exponent > 700 else plan.failure_free_s() / mtbf_s * math.exp(
            exponent)

    def cost(j: int) -> float:
        return plan.cost_of(j) if plan.levels else 0.0
    lengths = [plan.segment_s(j) + cost(j) for j in (1, plan.n_segments)]
    counts = [plan.n_segments - 1, 1] if plan.n_segments > 1 else [0, 1]
    total = 0.0
    for length, count in zip(lengths, counts, strict=True):
        exponent = (length + restart_s) / mtbf_s
        if exponent > 700:
            return math.inf
        total += count * math.exp(restart_s / mtbf_s) * math.expm1(length / mtbf_s)
    return total


def _runaway_field(sc: Scenario, plan: JobPlan, mtbf_s: float, restart_s: float) -> str:
    """The key to change: the MTBF when even a restart outlasts it, the policy when there
    are no checkpoints, else the checkpoint section."""
    f = sc.failures
    if f is not None and restart_s >= mtbf_s:
        return "failures.node_mtbf" if f.node_mtbf is not None else "failures.mtbf"
    if not plan.levels:
        return "checkpoint.policy"
    return "checkpoint"


def refuse_runaway(sc: Scenario, plan: JobPlan, mtbf_s: float, restart_s: float,
                   limits: RunLimits, replications: int | None = None) -> None:
    """Refuse, before simulating, a job that cannot finish in reasonable time: more
    expected failures per replication than the cap, or over all replications more than
    :data:`MAX_TOTAL_FAILURES`, or an expected wall time beyond the simulated-time cap.
    The error names the key to change; :func:`testbed.app.resolve.resolve` adds its line."""
    n = expected_failures(plan, mtbf_s, restart_s,
                          sc.failures.lose_work if sc.failures else True)
    wall_s = n * mtbf_s if math.isfinite(n) else math.inf
    reps = replications or sc.simulation.replications
    if n > limits.max_failures or wall_s > limits.max_simulated_s or n * reps > MAX_TOTAL_FAILURES:
        years = "more than 10^300 years" if not math.isfinite(wall_s) else format_duration(wall_s)
        where = _runaway_field(sc, plan, mtbf_s, restart_s)
        raise RunawayError(
            f"this job cannot finish in reasonable time: each replication expects "
            f"{n:,.3g} failures and {years} of wall time (closed form, job MTBF "
            f"{format_duration(mtbf_s)}, longest segment "
            f"{format_duration(plan.segment_s(1) + (plan.cost_of(1) if plan.levels else 0))}"
            f", restart "
            f"{format_duration(restart_s)}); checkpoint more often, restart faster or "
            f"simulate fewer replications (limits: simulation.max_failures, "
            f"simulation.max_simulated_time)", source=sc.source, field=where)


def refuse_stepwise(spec: SimSpec, *, engine: str, events: bool, option: str | None = None
                    ) -> None:
    """Refuse, before simulating, a plan too long for the step-by-step engine or an
    event log (more than :data:`MAX_STEPWISE_SEGMENTS` segments), naming the key."""
    if engine != "simpy" and not events:
        return
    n = spec.plan.n_segments
    if n > MAX_STEPWISE_SEGMENTS:
        what = "an event log" if events else "the step-by-step simpy engine"
        hint = f" ({option})" if option and events else ""
        raise RunawayError(
            f"{n:,} checkpoint segments are more than {what} can walk "
            f"({MAX_STEPWISE_SEGMENTS:,}){hint}; checkpoint less often or use the fast "
            "engine", source=spec.limits.source if spec.limits else None,
            field="checkpoint.interval")
