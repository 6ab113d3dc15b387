"""Run R replications of a resolved scenario on either engine and summarise them."""

from __future__ import annotations

from simulators.engine import run_simpy
from simulators.fast import run_fast
from simulators.result import RepResult
from simulators.summary import summarize
from testbed.resilience.spec import SimSpec


def replicate(spec: SimSpec, replications: int, seed: int, engine: str = "fast",
              progress=None) -> list[RepResult]:
    """Results of replications 0..R−1 (replication r uses the streams of (seed, r))."""
    out = []
    for rep in range(replications):
        if engine == "fast":
            out.append(run_fast(spec, seed, rep))
        else:
            out.append(run_simpy(spec, seed, rep)[0])
        if progress is not None:
            progress(1)
    return out


def simulate(spec: SimSpec, replications: int, seed: int, engine: str = "fast",
             progress=None) -> dict:
    """The summary dict (see :func:`simulators.summary.summarize`) plus the analytical side."""
    results = replicate(spec, replications, seed, engine, progress)
    summary = summarize(results, [c.name for c in spec.failures.causes])
    plan = spec.plan
    summary.update({
        "scenario": spec.name,
        "engine": engine,
        "seed": seed,
        "policy": spec.policy,
        "checkpoint_interval_s": plan.interval_s if plan.levels else None,
        "checkpoint_cost_s": spec.ckpt_cost_s,
        "restart_s": spec.restart_s,
        "job_mtbf_s": spec.job_mtbf_s if spec.job_mtbf_s != float("inf") else None,
        "nodes": spec.nodes,
        "work_s": plan.work_s,
        "step_s": spec.step_s,
        "analytical": {"wall_time_s": spec.analytical_wall_s,
                       "daly_formula_wall_time_s": spec.daly_formula_wall_s,
                       "ettr": (plan.work_s / spec.analytical_wall_s
                                if spec.analytical_wall_s else None)},
    })
    return summary
