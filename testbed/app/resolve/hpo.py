"""A scenario's ``hpo:`` section as the plan the HPO engines run.

:func:`hpo_plan` reads the files the section names (a cost table or trace, an
objective table) through :mod:`testbed.app.resolve.sources`, takes node failures from
the scenario's ``failures`` section when ``hpo.failures.nodes`` asks for them, and hands
both to the core's :func:`~testbed.hpo.plan.build_plan`.
"""

from __future__ import annotations

from testbed.app.resolve.failures import failure_model
from testbed.app.resolve.sources import csv_rows, jsonl_records
from testbed.hpo.plan import HpoPlan, HpoSources, build_plan
from testbed.scenario.schema import Scenario


def hpo_sources(sc: Scenario) -> HpoSources:
    """The rows of the files the scenario's ``hpo:`` section names."""
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
    if sc.hpo is None:
        raise sc.error("the scenario has no 'hpo' section", "hpo")
    model = None
    if sc.hpo.failures.nodes and slots is None:
        if sc.failures is None:
            raise sc.error("node failures come from the scenario's 'failures' section, "
                           "and it has none", "hpo.failures.nodes")
        model = failure_model(sc, sc.cluster.nodes or 1)
    return build_plan(sc, sources=hpo_sources(sc), seed=seed, slots=slots,
                      node_failures=model)
