"""Run R replications of a resolved job on either engine and summarise them."""

from __future__ import annotations

from collections.abc import Callable

from simulators.engine import run_simpy
from simulators.fast import run_fast
from testbed.outcomes import Analytical, RepResult, SimSummary, replicated
from testbed.resilience.spec import SimSpec

ENGINES = ("fast", "simpy")


def replicate(spec: SimSpec, replications: int, seed: int, engine: str = "fast",
              progress: Callable[[int], None] | None = None) -> list[RepResult]:
    """Results of replications 0..R−1 (replication r uses the streams of (seed, r))."""
    if engine not in ENGINES:
        raise ValueError(f"unknown engine {engine!r}")
    out = []
    for rep in range(replications):
        if engine == "fast":
            out.append(run_fast(spec, seed, rep))
        else:
            out.append(run_simpy(spec, seed, rep)[0])
        if progress is not None:
            progress(1)
    return out


def summarize(spec: SimSpec, results: list[RepResult], seed: int, engine: str) -> SimSummary:
    """The typed summary of a job's replications, with its analytical side."""
    facts = spec.facts
    plan = spec.plan
    analytical = Analytical(
        wall_time_s=spec.analytical_wall_s, daly_formula_wall_time_s=spec.daly_formula_wall_s,
        ettr=plan.work_s / spec.analytical_wall_s if spec.analytical_wall_s else None)
    return SimSummary(
        scenario=spec.name, engine=engine, seed=seed, policy=spec.policy, nodes=spec.nodes,
        work_s=plan.work_s, step_s=spec.step_s, job_mtbf_s=facts.job_mtbf_s,
        checkpoint_interval_s=facts.interval_s, checkpoint_cost_s=spec.ckpt_cost_s,
        restart_s=spec.restart_s, young_interval_s=facts.young_interval_s,
        daly_interval_s=facts.daly_interval_s,
        stats=replicated(results, [c.name for c in spec.failures.causes]),
        analytical=analytical)


def simulate(spec: SimSpec, replications: int, seed: int, engine: str = "fast",
             progress: Callable[[int], None] | None = None) -> SimSummary:
    """Replicate a job and summarise it (see :class:`testbed.outcomes.SimSummary`)."""
    return summarize(spec, replicate(spec, replications, seed, engine, progress), seed, engine)


def event_log(spec: SimSpec, seed: int, replication: int = 0) -> list[dict]:
    """The event log of one replication, from the step-by-step SimPy engine."""
    log: list[dict] = []
    run_simpy(spec, seed, replication, log)
    return log
