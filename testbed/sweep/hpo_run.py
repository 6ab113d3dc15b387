"""Run an HPO sweep for real: placeholder (being written)."""

from __future__ import annotations

from testbed.hpo.plan import HpoPlan, build_plan
from testbed.scenario import Scenario


def plan_for(sc: Scenario, *, seed: int | None = None, slots: int | None = None) -> HpoPlan:
    """The scenario's HPO plan, with node failures from its ``failures`` section when
    ``hpo.failures.nodes`` asks for them (through the one resolver)."""
    if sc.hpo is None:
        raise sc.error("the scenario has no 'hpo' section", "hpo")
    model = None
    if sc.hpo.failures.nodes:
        if sc.failures is None:
            raise sc.error("node failures come from the scenario's 'failures' section, "
                           "and it has none", "hpo.failures.nodes")
        from testbed.resolve import failure_model
        model = failure_model(sc, sc.cluster.nodes or 1)
    return build_plan(sc, seed=seed, slots=slots, node_failures=model)
