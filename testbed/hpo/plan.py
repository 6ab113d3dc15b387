"""A scenario's ``hpo:`` section resolved into a frozen plan the engines run.

:func:`build_plan` checks what the schema alone cannot (a trial needing more GPUs,
cores or memory than a node has; an injection naming a node that does not exist),
reads the cost table or trace and the objective table through the input boundary,
turns the rows of its cost table or trace and objective table (:class:`HpoSources`,
read by the application's resolver: the core reads no file of a scenario's) into costs
and an objective, and draws the grid or random configurations. Errors name the
scenario's file, line and key (``hpo.trial_resources.gpus``).

The real driver builds the same plan with ``slots=W``: one node with ``W`` GPU slots
(its W workers), so that a trial needing more than W GPUs is refused the same way.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from testbed.errors import ScenarioError
from testbed.hpo.cluster import Shape
from testbed.hpo.cost import ConstantCost, MeasuredCost, OracleEpochCost, TableCost
from testbed.hpo.hyperband import brackets, trials_per_iteration
from testbed.hpo.objective import SyntheticObjective, TableObjective
from testbed.hpo.space import grid, random_configs
from testbed.hpo.timing import Attempt, TrialCost
from testbed.scenario.hpo import MAX_SLOTS, HpoSpec
from testbed.scenario.schema import Scenario


@dataclass(frozen=True)
class NodeInjection:
    """A node failure at ``t_s`` (absolute), away for ``repair_s``."""

    t_s: float
    node: int
    repair_s: float


@dataclass(frozen=True)
class HpoPlan:
    """Everything an engine needs to run the sweep (see :mod:`testbed.scenario.hpo`)."""

    name: str
    source: str | None
    spec: HpoSpec
    nodes: int
    gpus_per_node: int
    cores_per_node: int | None
    memory_per_node_bytes: int | None
    seed: int
    configs: tuple[dict[str, Any], ...] | None       # grid / random, known up front
    cost: Any = field(repr=False)                     # .epoch_times(index, config, gpus)
    objective: Any = field(repr=False)                # .value(index, config, epoch)
    node_injections: tuple[NodeInjection, ...] = ()
    node_repair_s: float = 0.0
    node_failures: Any = field(default=None, repr=False)   # FailureModel (application)
    startup_overrides: Mapping[tuple[int, int], float] = field(default_factory=dict,
                                                                repr=False)
    #: real runs: every trial holds at least one worker slot, even with ``gpus: 0``
    min_trial_gpus: int = 0
    _trial_costs: dict = field(default_factory=dict, repr=False, compare=False)

    # ------------------------------------------------------------------ per trial

    @property
    def slots(self) -> int:
        return self.nodes * self.gpus_per_node

    @property
    def multi_fidelity(self) -> bool:
        return self.spec.scheduler in ("asha", "hyperband")

    def trial_epochs(self, config: Mapping[str, Any]) -> int:
        """The full budget of a trial (its ``epochs``, or the top rung)."""
        if self.multi_fidelity:
            return self.spec.max_epochs
        return int(config.get("epochs", self.spec.epochs))

    def trial_shape(self, config: Mapping[str, Any]) -> Shape:
        r = self.spec.trial_resources
        return Shape(max(int(config.get("gpus", r.gpus)), self.min_trial_gpus), r.cores,
                     r.memory)

    @property
    def fewest_gpus(self) -> int:
        """The fewest GPUs any trial of the sweep holds."""
        gpus = [self.spec.trial_resources.gpus]
        gpus += self.spec.space_gpus
        if self.configs is not None and "gpus" in (self.configs[0] if self.configs else {}):
            gpus += [int(c.get("gpus", gpus[0])) for c in self.configs]
        return max(min(gpus), self.min_trial_gpus)

    def trial_cost(self, index: int, config: Mapping[str, Any]) -> TrialCost:
        """The :class:`TrialCost` of trial ``index`` (shared between equal costs)."""
        s = self.spec
        per = self.cost.epoch_times(index, config, self.trial_shape(config).gpus)
        key = per if isinstance(per, tuple) else float(per)
        got = self._trial_costs.get(key)
        if got is None:
            got = TrialCost.make(key, s.startup_time, s.restore_time, s.checkpoint_time)
            self._trial_costs[key] = got
        return got

    def full_duration_s(self, index: int, config: Mapping[str, Any]) -> float:
        """Failure-free seconds of the whole trial in one attempt (longest_first's key)."""
        top = self.trial_epochs(config)
        return Attempt(self.trial_cost(index, config), 0, top, top,
                       self.spec.checkpoint_every_epochs).duration_s


# ---------------------------------------------------------------------- building

@dataclass(frozen=True)
class HpoSources:
    """What the files an ``hpo:`` section names hold, as read by the resolver
    (:mod:`testbed.app.resolve.hpo`): the rows of ``hpo.cost.table`` or the records of
    ``hpo.cost.trace`` when they are paths, and the rows of ``hpo.objective``."""

    cost_table: list[dict[str, Any]] | None = None
    cost_trace: list[tuple[int, Any]] | None = None
    objective_table: list[dict[str, Any]] | None = None


def _given(rows, sc: Scenario, field: str):
    if rows is None:
        raise ScenarioError(f"'{field}' names a file that was not read (plan the sweep "
                            "through the resolver)", source=sc.source, field=field)
    return rows


def _cost(sc: Scenario, spec: HpoSpec, sources: HpoSources):
    if spec.epoch_time is not None:
        return ConstantCost(spec.epoch_time)
    c = spec.cost
    assert c is not None      # the schema gives exactly one of epoch_time and cost
    if c.oracle is not None:
        return OracleEpochCost(c.oracle, source=sc.source, field="hpo.cost.oracle")
    if c.trace is not None:
        from testbed.hpo.trace import measured_epochs
        records = _given(sources.cost_trace, sc, "hpo.cost.trace")
        return MeasuredCost(measured_epochs(records, source=c.trace))
    if isinstance(c.table, str):
        rows = [dict(r) for r in _given(sources.cost_table, sc, "hpo.cost.table")]
        for row in rows:
            for k, v in row.items():
                row[k] = _number(v)
        return TableCost.from_rows(rows, source=c.table, field="hpo.cost.table",
                                   key="epoch_time_s")
    assert c.table is not None    # the schema gives exactly one of table, oracle, trace
    return TableCost.from_rows(c.table, source=sc.source, field="hpo.cost.table")


def _number(text: Any) -> Any:
    if not isinstance(text, str):
        return text
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def _objective(sc: Scenario, spec: HpoSpec, seed: int, sources: HpoSources):
    obj = spec.objective
    if obj == "synthetic":
        return SyntheticObjective(spec.space, seed, spec.metric.mode)
    if isinstance(obj, str):
        rows = _given(sources.objective_table, sc, "hpo.objective")
        return TableObjective(rows, source=obj, field="hpo.objective")
    return TableObjective(obj, source=sc.source, field="hpo.objective")


def _check_fit(sc: Scenario, spec: HpoSpec, gpus_per_node: int, what: str) -> None:
    r = spec.trial_resources
    need = [("hpo.trial_resources.gpus", r.gpus)]
    need += [("hpo.space.gpus", g) for g in spec.space_gpus]
    for key, gpus in need:
        if gpus > gpus_per_node:
            raise sc.error(f"a trial needs {gpus} GPU(s) but {what} has only "
                           f"{gpus_per_node}; a trial runs on one node", key)
    nr = spec.node_resources
    if nr.cores is not None and r.cores > nr.cores:
        raise sc.error(f"a trial needs {r.cores} cores but a node has only {nr.cores}",
                       "hpo.trial_resources.cores")
    if nr.memory is not None and r.memory > nr.memory:
        raise sc.error(f"a trial needs {r.memory} bytes of memory but a node has only "
                       f"{nr.memory}", "hpo.trial_resources.memory")


def build_plan(sc: Scenario, *, sources: HpoSources | None = None, seed: int | None = None,
               slots: int | None = None, node_failures: Any = None) -> HpoPlan:
    """Resolve ``sc.hpo`` (see the module docstring)."""
    spec = sc.hpo
    if spec is None:
        raise ScenarioError("the scenario has no 'hpo' section", source=sc.source, field="hpo")
    sources = sources or HpoSources()
    if slots is not None:
        nodes, gpn, what = 1, slots, f"the pool of {slots} worker(s)"
    else:
        nodes = sc.cluster.nodes or 1
        per_node = sc.cluster.gpus_per_node
        if per_node is None:
            if spec.trial_resources.gpus > 0 or "gpus" in spec.space:
                raise sc.error("the trials use GPUs: give cluster.gpus_per_node",
                               "cluster.gpus_per_node")
            per_node = 0
        gpn = per_node
        what = "a node"
        if nodes * gpn > MAX_SLOTS:
            raise sc.error(f"{nodes:,} nodes x {gpn} GPUs are {nodes * gpn:,} trial slots, "
                           f"more than the {MAX_SLOTS:,} an HPO sweep may schedule",
                           "cluster.nodes")
    _check_fit(sc, spec, gpn, what)
    if seed is None:
        seed = spec.seed if spec.seed is not None else sc.simulation.seed
    node_inj = []
    for i, inj in enumerate(spec.inject_failures):
        if inj.node is None:
            continue
        if inj.node >= nodes:
            raise sc.error(f"there is no node {inj.node}: the cluster has {nodes} node(s), "
                           f"numbered 0 to {nodes - 1}", f"hpo.inject_failures[{i}].node")
        repair = inj.repair if inj.repair is not None else _repair(sc, spec)
        at_s = inj.at
        assert at_s is not None       # the schema requires 'at' of a node injection
        node_inj.append(NodeInjection(at_s, inj.node, repair))
    configs = None
    if spec.search == "grid":
        configs = tuple(grid(spec.value_lists, spec.planned_trials))
    elif spec.search == "random":
        configs = tuple(random_configs(spec.space, _random_trials(spec), seed))
    plan = HpoPlan(
        name=sc.name, source=sc.source, spec=spec, nodes=nodes, gpus_per_node=gpn,
        cores_per_node=spec.node_resources.cores,
        memory_per_node_bytes=spec.node_resources.memory, seed=seed, configs=configs,
        cost=_cost(sc, spec, sources), objective=_objective(sc, spec, seed, sources),
        node_injections=tuple(sorted(node_inj, key=lambda n: (n.t_s, n.node))),
        node_repair_s=_repair(sc, spec), node_failures=node_failures,
        min_trial_gpus=1 if slots is not None else 0)
    if configs is not None:      # every trial's cost is known: fail now, not mid-run
        for i, cfg in enumerate(configs):
            plan.trial_cost(i, cfg)
    return plan


def _random_trials(spec: HpoSpec) -> int:
    """Configurations a random search draws: ``n_trials``, or one Hyperband iteration
    (the only scheduler that may run without ``n_trials``)."""
    if spec.n_trials is not None:
        return spec.n_trials
    r = spec.rungs
    return trials_per_iteration(brackets(r.min_epochs, spec.max_epochs, r.reduction_factor))


def _repair(sc: Scenario, spec: HpoSpec) -> float:
    if spec.failures.repair is not None:
        return spec.failures.repair
    return sc.cluster.repair
