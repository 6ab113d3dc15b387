"""Run R replications of a resolved job on either engine and summarise them.

Replication ``r`` always uses the streams of ``(seed, r)``, so any count of
replications is a prefix of a longer run. With ``simulation.target_ci`` the count is
adaptive: replications run in deterministic batches until the 95% interval of the chosen
figure is narrow enough (or the maximum is reached); the summary says how many ran and
why they stopped.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from simulators.fast import run_fast
from testbed.outcomes import (
    Analytical,
    Replicated,
    RepResult,
    Semantics,
    SimSummary,
    replicated,
)
from testbed.resilience.exposure import cause_tables
from testbed.resilience.spec import SimSpec, TargetCI

ENGINES = ("fast", "simpy")
#: An adaptive run grows by at most this factor per batch (and at least by its minimum).
MAX_GROWTH = 4.0


def _one(spec: SimSpec, seed: int, rep: int, engine: str) -> RepResult:
    if engine == "fast":
        return run_fast(spec, seed, rep)
    from simulators.engine import run_simpy  # SimPy only when the step-by-step engine runs
    return run_simpy(spec, seed, rep)[0]


def replicate(spec: SimSpec, replications: int, seed: int, engine: str = "fast",
              progress: Callable[[int], None] | None = None, start: int = 0
              ) -> list[RepResult]:
    """Results of replications ``start`` … ``start + replications − 1``."""
    if engine not in ENGINES:
        raise ValueError(f"unknown engine {engine!r}")
    runner = None
    if engine == "fast":     # many replications: the compiled inlined loop, when it applies
        from simulators.fast_kernel import batch_runner
        runner = batch_runner(spec, replications)
    out = []
    for rep in range(start, start + replications):
        out.append(runner(seed, rep) if runner is not None else _one(spec, seed, rep, engine))
        if progress is not None:
            progress(1)
    return out


def _figure(stats: Replicated, figure: str):
    return {"ettr": stats.ettr, "wall_time": stats.wall_time_s, "failures": stats.failures}[
        figure]


def replicate_to_target(spec: SimSpec, target: TargetCI, seed: int, engine: str = "fast",
                        progress: Callable[[int], None] | None = None
                        ) -> tuple[list[RepResult], str]:
    """Replications until ``target`` is met: (results, why it stopped).

    Batches are deterministic: after n replications with relative half-width h, the
    next count is n·(h/target)² (the CLT prediction) with 10% margin, at least n + min
    and at most ``MAX_GROWTH``·n, capped at the maximum.
    """
    names = [c.name for c in spec.failures.causes]
    results = replicate(spec, target.min_reps, seed, engine, progress)
    while True:
        fig = _figure(replicated(results, names), target.figure)
        rel = fig.relative_half_width
        if rel <= target.relative_half_width and fig.half_width >= 0:
            return results, "target reached"
        n = len(results)
        if n >= target.max_reps:
            return results, "maximum reached"
        want = n * (rel / target.relative_half_width) ** 2 * 1.1 if rel > 0 else n + 1
        nxt = int(min(target.max_reps, max(n + target.min_reps, min(MAX_GROWTH * n,
                                                                    math.ceil(want)))))
        results += replicate(spec, nxt - n, seed, engine, progress, start=n)


def semantics(spec: SimSpec) -> Semantics:
    """The failure semantics ``spec`` simulates (for the summary)."""
    fm = spec.failures
    return Semantics(start=fm.start, exposure=fm.exposure,
                     idle_rate_factor=fm.idle_rate_factor,
                     hardware_share=cause_tables(fm)[2], lose_work=fm.lose_work,
                     failure_rate_per_h=3600.0 * spec.failure_rate_per_s)


def summarize(spec: SimSpec, results: list[RepResult], seed: int, engine: str,
              stopped: str = "fixed") -> SimSummary:
    """The typed summary of a job's replications, with its analytical side."""
    facts = spec.facts
    plan = spec.plan
    analytical = Analytical(
        wall_time_s=spec.analytical_wall_s, daly_formula_wall_time_s=spec.daly_formula_wall_s,
        ettr=plan.work_s / spec.analytical_wall_s if spec.analytical_wall_s else None)
    target = spec.target
    return SimSummary(
        scenario=spec.name, engine=engine, seed=seed, policy=spec.policy, nodes=spec.nodes,
        work_s=plan.work_s, step_s=spec.step_s, job_mtbf_s=facts.job_mtbf_s,
        checkpoint_interval_s=facts.interval_s, checkpoint_cost_s=spec.ckpt_cost_s,
        restart_s=spec.restart_s, young_interval_s=facts.young_interval_s,
        daly_interval_s=facts.daly_interval_s,
        stats=replicated(results, [c.name for c in spec.failures.causes]),
        analytical=analytical, semantics=semantics(spec), stopped=stopped,
        target_ci=None if target is None or stopped == "fixed" else {
            "figure": target.figure, "relative_half_width": target.relative_half_width,
            "min": target.min_reps, "max": target.max_reps})


def simulate(spec: SimSpec, replications: int | None, seed: int, engine: str = "fast",
             progress: Callable[[int], None] | None = None) -> SimSummary:
    """Replicate a job and summarise it (see :class:`testbed.outcomes.SimSummary`).

    ``replications=None`` with a ``target`` in the spec replicates adaptively."""
    if replications is None and spec.target is not None:
        results, stopped = replicate_to_target(spec, spec.target, seed, engine, progress)
        return summarize(spec, results, seed, engine, stopped)
    if replications is None:
        raise ValueError("give a replication count or a target")
    return summarize(spec, replicate(spec, replications, seed, engine, progress), seed, engine)


def event_log(spec: SimSpec, seed: int, replication: int = 0) -> list[dict]:
    """The event log of one replication, from the step-by-step SimPy engine."""
    from simulators.engine import run_simpy
    log: list[dict] = []
    run_simpy(spec, seed, replication, log)
    return log
