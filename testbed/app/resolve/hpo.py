"""A scenario's ``hpo:`` section as the plan the HPO engines run.

:func:`hpo_plan` reads the files the section names (a cost table or trace, an
objective table) through :mod:`testbed.app.resolve.sources`, takes node failures from
the scenario's ``failures`` section when ``hpo.failures.nodes`` asks for them, and hands
both to the core's :func:`~testbed.hpo.plan.build_plan`.

A sweep that cannot finish in reasonable time is refused before it runs
(:func:`refuse_hpo_runaway`): the expected number of attempts (retries after sampled
failures, in closed form per trial) and of node failures (over the sweep's failure-free
makespan, and the preemptions of trials whose segments outlast the node MTBF) must stay
within :data:`MAX_HPO_EVENTS`, naming the key to change.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from testbed.app.resolve.failures import failure_model
from testbed.app.resolve.sources import csv_rows, jsonl_records
from testbed.errors import InputError, RunawayError
from testbed.scenario.hpo import MAX_TRIALS, PYCOMPSS_RETRIES
from testbed.scenario.schema import Scenario
from testbed.units import format_duration

if TYPE_CHECKING:      # the HPO core loads when a plan is asked for, not with every scenario
    from testbed.hpo.plan import HpoPlan, HpoSources

#: Most attempts and node failures one simulated sweep may expect: a million trials
#: (``MAX_TRIALS``) with PyCOMPSs' two retries each; the simulator runs about 20,000
#: attempts a second, so this is a few minutes at most.
MAX_HPO_EVENTS = MAX_TRIALS * (1 + PYCOMPSS_RETRIES)


def hpo_sources(sc: Scenario) -> HpoSources:
    """The rows of the files the scenario's ``hpo:`` section names."""
    from testbed.hpo.plan import HpoSources
    spec = sc.hpo
    if spec is None:
        return HpoSources()
    cost, objective = spec.cost, spec.objective
    table = trace = rows = None
    if cost is not None and isinstance(cost.table, str):
        table = csv_rows(sc, cost.table, "hpo.cost.table", ("epoch_time_s",))
    if cost is not None and cost.trace is not None:
        trace = jsonl_records(sc, cost.trace, "hpo.cost.trace")
    if isinstance(objective, str) and objective != "synthetic":
        rows = csv_rows(sc, objective, "hpo.objective", ("trial", "epoch", "value"))
    return HpoSources(cost_table=table, cost_trace=trace, objective_table=rows)


def hpo_plan(sc: Scenario, *, seed: int | None = None, slots: int | None = None) -> HpoPlan:
    """The scenario's HPO plan (``slots``: a real pool of that many workers on one node)."""
    from testbed.hpo.plan import build_plan
    if sc.hpo is None:
        raise sc.error("the scenario has no 'hpo' section", "hpo")
    model = None
    if sc.hpo.failures.nodes and slots is None:
        if sc.failures is None:
            raise sc.error("node failures come from the scenario's 'failures' section, "
                           "and it has none", "hpo.failures.nodes")
        model = failure_model(sc, sc.cluster.nodes or 1)
    plan = build_plan(sc, sources=hpo_sources(sc), seed=seed, slots=slots,
                      node_failures=model)
    refuse_hpo_runaway(sc, plan)
    return plan


def _expected_attempts(p_fail: float, retries: int) -> float:
    """E[attempts] of a trial whose attempts each fail with ``p_fail``, retried at most
    ``retries`` times: Σ_{k=0..r} p^k."""
    if p_fail <= 0:
        return 1.0
    if p_fail >= 1:
        return retries + 1.0
    return -math.expm1((retries + 1) * math.log(p_fail)) / (1.0 - p_fail)


#: Trials whose costs the estimate reads (an even sample of a larger sweep, scaled).
ESTIMATE_TRIALS = 10_000


def _trial_costs(plan: HpoPlan) -> tuple[list[tuple[float, int]], float]:
    """(failure-free seconds, GPUs) of the trials known before the sweep, and the number
    of trials each stands for: every trial of a grid or random search up to
    :data:`ESTIMATE_TRIALS`, an even sample of a larger one; for TPE the first
    configuration's cost when it does not depend on the configuration."""
    if plan.configs is not None:
        n = len(plan.configs)
        stride = max(1, -(-n // ESTIMATE_TRIALS))
        sample = [(plan.full_duration_s(i, plan.configs[i]),
                   plan.trial_shape(plan.configs[i]).gpus) for i in range(0, n, stride)]
        return sample, n / max(len(sample), 1)
    try:
        one = (plan.full_duration_s(0, {}), plan.trial_shape({}).gpus)
    except (InputError, KeyError, TypeError, ValueError):
        return [], 1.0
    return [one], float(plan.spec.planned_trials or 1)


def refuse_hpo_runaway(sc: Scenario, plan: HpoPlan) -> None:
    """Refuse a sweep whose expected attempts or node failures exceed
    :data:`MAX_HPO_EVENTS` (see the module docstring)."""
    spec, f = plan.spec, plan.spec.failures
    model = plan.node_failures
    nodes_fail = model is not None and model.has_failures
    if not f.probability and f.trial_mtbf is None and not nodes_fail:
        return
    costs, weight = _trial_costs(plan)
    retries = spec.max_retries if spec.on_failure == "retry" else 0
    attempts = 0.0
    for duration_s, _ in costs:
        survive = 1.0 - f.probability
        if f.trial_mtbf is not None:
            survive *= math.exp(-duration_s / f.trial_mtbf)
        attempts += weight * _expected_attempts(1.0 - survive, retries)
    if attempts > MAX_HPO_EVENTS:
        key = "hpo.failures.trial_mtbf" if f.trial_mtbf is not None else \
            "hpo.failures.probability"
        raise RunawayError(f"this sweep cannot finish in reasonable time: it expects "
                           f"{attempts:,.3g} attempts (each fails with the sampled failures "
                           f"and is retried up to {retries} times), more than "
                           f"{MAX_HPO_EVENTS:,}; lower the failure rate or hpo.max_retries",
                           source=sc.source, field=key, line=_line(sc, key))
    if model is None or not nodes_fail or not costs:
        return
    _refuse_node_runaway(sc, plan, model.job_mtbf_s, costs, weight, attempts)


def _refuse_node_runaway(sc: Scenario, plan: HpoPlan, mtbf_s: float,
                         costs: list[tuple[float, int]], weight: float,
                         attempts: float) -> None:
    """Node failures over the failure-free makespan, and the preemptions of trials
    whose checkpoint segment (or whole run, without checkpoints) outlasts a node's
    MTBF (the closed form for restarts from a segment's start: e^{L/M} − 1 each)."""
    spec = plan.spec
    slots = max(plan.slots, 1)
    makespan_s = weight * sum(d * max(g, 1) for d, g in costs) / slots
    failures = makespan_s / mtbf_s if mtbf_s > 0 else math.inf
    node_mtbf_s = mtbf_s * max(plan.nodes, 1)
    every = spec.checkpoint_every_epochs
    for duration_s, _ in costs:
        top = spec.max_epochs or 1
        segments = math.ceil(top / every) if every else 1
        length = duration_s / segments + spec.startup_time + spec.restore_time
        exponent = length / node_mtbf_s if node_mtbf_s > 0 else math.inf
        failures += math.inf if exponent > 700 else \
            weight * segments * math.expm1(exponent)
        if failures + attempts > MAX_HPO_EVENTS:
            break
    if failures + attempts > MAX_HPO_EVENTS:
        key = "failures.node_mtbf" if sc.failures is not None and \
            sc.failures.node_mtbf is not None else "failures.mtbf"
        raise RunawayError(f"this sweep cannot finish in reasonable time: with a node "
                           f"failure every {format_duration(mtbf_s)} it expects "
                           f"{failures:,.3g} node failures and preemptions, more than "
                           f"{MAX_HPO_EVENTS:,}; checkpoint more often "
                           "(hpo.checkpoint_every_epochs) or lower the failure rate",
                           source=sc.source, field=key, line=_line(sc, key))


def _line(sc: Scenario, key: str) -> int | None:
    from testbed.io.schema import line_for
    return line_for(sc.lines, key)
