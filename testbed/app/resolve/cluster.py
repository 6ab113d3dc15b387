"""The cluster operations of a scenario: pools, costs, repairs, diagnosis, per-node rates."""

from __future__ import annotations

from testbed.app.resolve.sources import trace_rows
from testbed.errors import InputError
from testbed.resilience.distributions import Drawn
from testbed.resilience.lifecycle import (
    CONVENTION_PRESETS,
    Conventions,
    Lifecycle,
    Regeneration,
    RepairStage,
    Retirement,
    ScoreRule,
    WindowRule,
)
from testbed.scenario.schema import Scenario


def _drawn(d) -> Drawn:
    return Drawn(d.distribution, d.mean, d.shape or 1.0, d.sigma or 1.0)


def _node_rates(sc: Scenario, ref: str) -> tuple[float, ...]:
    """Relative failure rates per node from a failure trace: (failures + ½) per node,
    normalised to mean 1 (the scenario's node MTBF sets the level)."""
    rows = trace_rows(sc, ref, "cluster.node_rates")
    if not rows:
        raise sc.error("the trace has no failures to estimate per-node rates from",
                       "cluster.node_rates")
    count = max(r.node for r in rows) + 1
    weights = [0.5] * count
    for r in rows:
        weights[r.node] += 1.0
    mean = sum(weights) / count
    return tuple(w / mean for w in weights)


def spares(sc: Scenario, nodes: int) -> int | None:
    """Idle nodes of the working pool (None: unlimited replacements)."""
    cl = sc.cluster
    if cl.working_pool is None:
        return cl.spares
    idle = cl.working_pool - nodes - cl.standbys
    if idle < 0:
        raise sc.error(f"a working pool of {cl.working_pool} node(s) cannot hold the job's "
                       f"{nodes} node(s) and {cl.standbys} warm standby(s)",
                       "cluster.working_pool")
    return idle


def conventions(sc: Scenario) -> Conventions:
    """``cluster.conventions``: a preset by name, or each operation's convention."""
    given = sc.cluster.conventions
    if isinstance(given, str):
        return CONVENTION_PRESETS[given]
    return Conventions(given.host_selection, given.preemption, given.initial_selection,
                       given.depletion, given.stalls)


class GuardedPolicy:
    """A user's host-selection policy whose failure is one line naming the scenario's
    key, not a traceback from inside the simulator (picklable, for sweep workers)."""

    def __init__(self, fn, ref: str, source: str | None) -> None:
        self.fn, self.ref, self.source = fn, ref, source

    def __call__(self, candidates, count, rng):
        from testbed.resilience.policies import checked_choice
        try:
            chosen = self.fn(candidates, count, rng)
        except Exception as exc:   # noqa: BLE001 - the user's code may raise anything
            raise InputError(f"host-selection policy {self.ref!r} failed "
                             f"({type(exc).__name__}): {str(exc)[:200]}", source=self.source,
                             field="cluster.host_selection") from None
        try:
            return checked_choice(chosen, candidates, count, self.ref)
        except InputError as exc:
            raise InputError(exc.message, source=self.source,
                             field="cluster.host_selection") from None


def _host_policy(sc: Scenario) -> GuardedPolicy | None:
    """The user's host-selection function a ``module:function`` reference names (None:
    a built-in policy)."""
    ref = sc.cluster.host_selection
    if ":" not in ref:
        return None
    from testbed.resilience.policies import load_policy
    return GuardedPolicy(load_policy(ref, source=sc.source, field="cluster.host_selection"),
                         ref, sc.source)


def lifecycle(sc: Scenario, nodes: int) -> Lifecycle:
    """The scenario's cluster operations (pools, costs, repairs, diagnosis, nodes)."""
    cl = sc.cluster
    idle = spares(sc, nodes)
    if idle is None and (cl.standbys or cl.spare_pool):
        key = "cluster.standbys" if cl.standbys else "cluster.spare_pool"
        raise sc.error("warm standbys and a spare pool need a finite working pool: give "
                       "'spares' (idle nodes) or 'working_pool'", key)
    rep, ret, f = cl.repairs, cl.retirement, sc.failures
    per_node = f is not None and f.node_mtbf is not None
    for key, given in (("cluster.bad_nodes", cl.bad_nodes),
                       ("cluster.node_rates", cl.node_rates)):
        if given is not None and not per_node:
            raise sc.error("per-node failure rates need failures.node_mtbf", key)
    return Lifecycle(
        standbys=cl.standbys, spares=idle, spare_pool=cl.spare_pool,
        swap=_drawn(cl.costs.swap), host_selection=_drawn(cl.costs.host_selection),
        preemption=_drawn(cl.costs.preemption), host_policy=cl.host_selection,
        automatic=RepairStage(_drawn(rep.automatic.duration), rep.automatic.silent_failure)
        if rep else None,
        manual=RepairStage(_drawn(rep.manual.duration), rep.manual.silent_failure)
        if rep and rep.manual else None,
        escalation=rep.escalation if rep else 0.0, escalate=rep.escalate if rep else "always",
        technicians=cl.technicians, diagnosis_miss=cl.diagnosis.miss,
        diagnosis_wrong=cl.diagnosis.wrong_node,
        bad_fraction=cl.bad_nodes.fraction if cl.bad_nodes else 0.0,
        bad_multiplier=cl.bad_nodes.multiplier if cl.bad_nodes else 0.0,
        node_rates=_node_rates(sc, cl.node_rates) if cl.node_rates else None,
        conventions=conventions(sc),
        regeneration=Regeneration(cl.bad_nodes.regeneration.every,
                                  cl.bad_nodes.regeneration.share)
        if cl.bad_nodes and cl.bad_nodes.regeneration else None,
        retirement=None if ret is None else Retirement(
            window=WindowRule(ret.window.failures, ret.window.within) if ret.window else None,
            score=ScoreRule(ret.score.initial, ret.score.penalty, ret.score.increment,
                            ret.score.period, ret.score.threshold) if ret.score else None,
            combine=ret.combine),
        host_policy_fn=_host_policy(sc))
