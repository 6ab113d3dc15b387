"""The one resolver: a validated scenario → what the engines and the oracle need.

Every command that runs a scenario (``run``, ``simulate``, ``sweep``, ``report``,
``hpo``) goes through this package, so a scenario means the same thing everywhere. It
is split by concern, bottom up:

* :mod:`~testbed.app.resolve.paths` — relative paths (against the scenario's folder)
  and errors completed with the scenario's file, line and key;
* :mod:`~testbed.app.resolve.sources` — every file a scenario refers to, read here
  and only here;
* :mod:`~testbed.app.resolve.oracle` — the oracle request, its estimate and the
  strategy comparison;
* :mod:`~testbed.app.resolve.checkpoint` — checkpoint cost and load time from the
  storage physics, the policy's levels and interval;
* :mod:`~testbed.app.resolve.failures`, :mod:`~testbed.app.resolve.cluster` — the
  failure model and the cluster operations;
* :mod:`~testbed.app.resolve.runaway` — jobs that cannot finish, refused before any
  simulation;
* :mod:`~testbed.app.resolve.hpo` — the HPO plan.

:func:`resolve` (this module) assembles them into the frozen
:class:`~testbed.resilience.spec.SimSpec` both simulator engines run.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from testbed.app.resolve.checkpoint import checkpoint_costs, interval_s, levels
from testbed.app.resolve.cluster import lifecycle
from testbed.app.resolve.failures import failure_model, windows
from testbed.app.resolve.hpo import hpo_plan
from testbed.app.resolve.oracle import (
    OracleComparison,
    oracle_comparison,
    oracle_estimate,
    oracle_request,
)
from testbed.app.resolve.paths import relative_path, scenario_errors
from testbed.app.resolve.runaway import expected_failures, refuse_runaway
from testbed.app.resolve.sources import scenario_system
from testbed.errors import Infeasible, InputError
from testbed.resilience.ckpt_policy import JobFigures
from testbed.resilience.plan import JobPlan
from testbed.resilience.spec import RunLimits, SimSpec, TargetCI, closed_form_wall_s
from testbed.scenario.schema import Scenario, Workload

__all__ = ["OracleComparison", "expected_failures", "failure_model", "hpo_plan",
           "lifecycle", "oracle_comparison", "oracle_estimate", "oracle_request",
           "refuse_runaway", "relative_path", "resolve", "resolve_or_infeasible",
           "scenario_system"]

if TYPE_CHECKING:   # annotations only: the oracle and the profiles load when they are used
    from testbed.oracle.estimate import Estimate
    from testbed.systems.profile import SystemProfile


def _nodes(sc: Scenario, system: SystemProfile | None) -> int:
    if sc.cluster.nodes is not None:
        return sc.cluster.nodes
    if sc.parallelism is not None:
        per_node = sc.cluster.gpus_per_node or (system.node.gpus_per_node if system else 1)
        return max(1, -(-sc.parallelism.gpus // per_node))
    return 1


def _target(sc: Scenario) -> TargetCI | None:
    t = sc.simulation.target_ci
    if t is None:
        return None
    return TargetCI(t.figure, t.relative_half_width, t.min, t.max)


def _work(sc: Scenario, w: Workload
          ) -> tuple[float, float | None, int | None, Estimate | None]:
    """(work seconds, step seconds, steps, oracle estimate if asked)."""
    if w.steps is None:
        assert w.compute_time is not None   # the schema needs compute_time or steps
        return w.compute_time, None, None, None
    if w.step_time is not None:
        return w.steps * w.step_time, w.step_time, w.steps, None
    est = oracle_estimate(sc)
    return w.steps * est.iteration_s, est.iteration_s, w.steps, est


def resolve(sc: Scenario) -> SimSpec:
    """Everything the engines need from a scenario (may ask the oracle).

    An input error without a file (from a unit parser, a name lookup, a policy) is
    completed with the scenario's file and the line of its key, so it always says where
    it is.
    """
    with scenario_errors(sc):
        return _resolve(sc)


def _resolve(sc: Scenario) -> SimSpec:
    if sc.workload is None:     # completed with the scenario's file and line by resolve()
        raise InputError("a simulation needs a 'workload' (compute_time or steps)",
                         field="workload")
    system = scenario_system(sc)
    nodes = _nodes(sc, system)
    # what fails and how the cluster answers, from the scenario alone; then what the
    # job and its checkpoints cost (the oracle, the storage)
    model = failure_model(sc, nodes)
    life = lifecycle(sc, nodes)
    work_s, step_s, steps, est = _work(sc, sc.workload)
    ck = sc.checkpoint
    state = ck.state
    if state is None and sc.model is not None and sc.parallelism is not None and \
            sc.system is not None and (ck.cost is None or ck.restart is None):
        est = est or oracle_estimate(sc, field="checkpoint.cost")
        state = est.state_bytes
    cost, load, terms = checkpoint_costs(sc, nodes, state, system,
                                         est if ck.state is None else None)
    lv = levels(sc, cost, load)
    if not model.lose_work and lv:
        raise sc.error("a job that loses no work at a failure needs no checkpoints: set "
                       "checkpoint.policy to none", "failures.lose_work")
    mean_extra = sum(c.probability * (c.detect_s + c.restart_s) for c in model.causes)
    mtbf = model.job_mtbf_s
    if model.per_node and life.bad_fraction and life.bad_multiplier:
        mtbf /= 1.0 + life.bad_fraction * life.bad_multiplier
    if lv:     # the first level is the one the interval is for; a restart loads the last
        cost, load = lv[0].cost_s, lv[-1].load_s
    restart = load + mean_extra
    interval = interval_s(sc, JobFigures(cost_s=cost, restart_s=restart, mtbf_s=mtbf,
                                         work_s=work_s, step_s=step_s))
    plan = JobPlan.build(work_s, interval, lv, persist_s=ck.persist, restart_load_s=load,
                         step_s=step_s, steps=steps)
    win = windows(sc, plan)
    limits = RunLimits(max_failures=sc.simulation.max_failures,
                       max_simulated_s=sc.simulation.max_simulated_time, source=sc.source)
    target = _target(sc)
    # a job that cannot finish is refused before the closed forms, which have no
    # finite answer for it (a restart that never completes divides by zero)
    refuse_runaway(sc, plan, mtbf, restart, limits,
                   replications=target.max_reps if target else None)
    try:
        analytical, daly = closed_form_wall_s(model, plan, cost_s=cost, restart_s=restart,
                                              mtbf_s=mtbf, spares=life.spares, life=life,
                                              nodes=nodes, windows=win)
    except (ZeroDivisionError, OverflowError):     # no finite closed form: none shown
        analytical, daly = None, None
    return SimSpec(name=sc.name, plan=plan, failures=model, spares=life.spares,
                   lifecycle=life, windows=win, target=target, nodes=nodes, policy=ck.policy,
                   job_mtbf_s=mtbf, ckpt_cost_s=cost, restart_s=restart,
                   analytical_wall_s=analytical, daly_formula_wall_s=daly, step_s=step_s,
                   state_bytes=state, limits=limits, checkpoint_terms=terms)


def resolve_or_infeasible(sc: Scenario) -> SimSpec | Infeasible:
    """:func:`resolve`, with an infeasible configuration returned instead of raised."""
    try:
        return resolve(sc)
    except Infeasible as exc:
        return exc
