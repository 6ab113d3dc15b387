"""The one place where sweeps and reports touch the simulator.

``testbed/`` must not import SimPy at module level, so everything from ``simulators``
is imported inside these functions. Keeping the coupling here means a change in the
simulator's API is one edit in one file.
"""

from __future__ import annotations

import time
from collections.abc import Callable

#: Per-replication outcome columns, in store order (see :class:`simulators.result.RepResult`).
OUTCOME_COLUMNS = ("wall_s", "useful_s", "checkpoint_s", "lost_s", "restart_s", "waiting_s",
                   "failures", "checkpoints", "ettr")
#: Where the time went, in plot order.
BREAKDOWN_COLUMNS = ("useful_s", "checkpoint_s", "lost_s", "restart_s", "waiting_s")


def resolve_spec(scenario):
    """The simulator's resolved spec of a validated scenario (may ask the oracle).

    An input error raised while resolving (an unknown system, a missing cause table
    or trace) is completed with the scenario's file and the line of its key when it
    lacks them, so that sweeps and reports always say where the problem is.
    """
    from testbed.errors import InputError
    from testbed.resilience.spec import resolve
    try:
        return resolve(scenario)
    except InputError as exc:
        if scenario.source and exc.field and (exc.source is None or exc.line is None) and \
                exc.source in (None, scenario.source):
            raise scenario.error(exc.message, exc.field) from None
        raise


#: How :func:`testbed.resilience.spec.resolve` words an oracle-infeasible configuration.
_INFEASIBLE = "the oracle finds this configuration infeasible: "


def infeasible_reason(exc) -> str | None:
    """The oracle's reason when ``exc`` says the configuration cannot run, else None.

    Such points are counted and skipped by sweeps rather than stopping them.
    """
    message = getattr(exc, "message", "")
    return message[len(_INFEASIBLE):] if message.startswith(_INFEASIBLE) else None


def spec_facts(spec) -> dict:
    """Deterministic facts of a resolved spec that reports plot next to the results."""
    plan = spec.plan
    mtbf = spec.job_mtbf_s if spec.job_mtbf_s != float("inf") else None
    cost = spec.ckpt_cost_s
    young, daly = optimum_intervals_s(cost, mtbf)
    return {
        "policy": spec.policy,
        "nodes": spec.nodes,
        "work_s": plan.work_s,
        "interval_s": plan.interval_s if plan.levels else None,
        "ckpt_cost_s": cost,
        "load_s": plan.restart_load_s,
        "restart_s": spec.restart_s,
        "job_mtbf_s": mtbf,
        "young_interval_s": young,
        "daly_interval_s": daly,
        "analytical_wall_s": spec.analytical_wall_s,
        "levels": [{"name": lv.name, "cost_s": lv.cost_s, "load_s": lv.load_s,
                    "every": lv.every} for lv in plan.levels],
    }


def optimum_intervals_s(cost_s: float, mtbf_s: float | None
                        ) -> tuple[float | None, float | None]:
    """Young's and Daly's (higher-order) optimum intervals, or None without failures."""
    from testbed.resilience import intervals
    if not mtbf_s or cost_s <= 0:
        return None, None
    return (intervals.young_interval_s(cost_s, mtbf_s),
            intervals.daly_higher_order_interval_s(cost_s, mtbf_s))


def run_replications(spec, seed: int, replications: int, engine: str = "fast"
                     ) -> list[tuple]:
    """``replications`` outcomes of a spec, each ``(rep, *OUTCOME_COLUMNS, run_s)``.

    ``run_s`` is the time this replication took to simulate (a timing column, the
    only place wall-clock time enters a result row).
    """
    from simulators.run import replicate

    marks = [time.perf_counter()]
    results = replicate(spec, replications, seed, engine,
                        progress=lambda _n: marks.append(time.perf_counter()))
    rows = []
    for rep, res in enumerate(results):
        rows.append((rep, res.wall_s, res.useful_s, res.checkpoint_s, res.lost_s, res.restart_s,
                     res.waiting_s, int(res.failures), int(res.checkpoints), res.ettr,
                     marks[rep + 1] - marks[rep]))
    return rows


def simulate_summary(spec, replications: int, seed: int, engine: str = "fast",
                     progress: Callable[[int], None] | None = None) -> dict:
    """The simulator's summary dict (``testbed simulate --json``) of a resolved spec."""
    from simulators.run import simulate
    return simulate(spec, replications, seed, engine, progress=progress)


def event_log(spec, seed: int, replication: int = 0) -> list[dict]:
    """The event log of one replication, from the step-by-step SimPy engine."""
    from simulators.engine import run_simpy
    log: list[dict] = []
    run_simpy(spec, seed, replication, log)
    return log


def mean_ci95(values) -> dict[str, float]:
    """Mean and Student-t 95% confidence interval (the simulator's own summary statistic)."""
    from simulators.summary import mean_ci95 as _mean_ci95
    return _mean_ci95(values)


def analytic_wall_s(spec) -> float | None:
    """The closed-form expected wall time of a spec, where its assumptions hold."""
    return spec.analytical_wall_s
