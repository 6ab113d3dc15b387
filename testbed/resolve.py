"""The one resolver: a validated scenario → what the engines and the oracle need.

Every command that runs a scenario (``run``, ``simulate``, ``sweep``, ``report``)
goes through here, so a scenario means the same thing everywhere:

* **paths**: every relative path in a scenario (``system:``, ``failures.trace``,
  ``failures.causes``) resolves against the scenario file's folder; a bare name
  (``abci-v100``, ``llama3_405b``) is a shipped profile or table;
* **the oracle**: :func:`oracle_request` builds the one :class:`~testbed.oracle.Request`
  for the scenario's model, parallelism and system; :func:`oracle_comparison` the
  strategy comparison ``testbed run`` prints;
* **the engines' input**: :func:`resolve` decides the work and step time (given or
  from the oracle), the node count, the checkpoint cost and load time (given, or the
  state bytes through the storage model), the failure model with its cause mix, the
  interval of the checkpoint policy and the closed-form expectation; it returns a
  frozen :class:`~testbed.resilience.spec.SimSpec`.

Errors raised while resolving are completed with the scenario's file, line and key,
so they always say where the problem is; a configuration the oracle cannot run
raises :class:`~testbed.errors.Infeasible`, which sweeps count and skip.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from testbed.errors import Infeasible, InputError, RunawayError
from testbed.oracle import Estimate, Request, estimate, resolve_model
from testbed.oracle.request import DEFAULT_SCHEDULE
from testbed.oracle.sweep import SweepResult, sweep
from testbed.resilience.causes import CauseRow, ResolvedCause, load_cause_table, resolve_causes
from testbed.resilience.ckpt_cost import checkpoint_cost, pfs_transfer_s
from testbed.resilience.distributions import Drawn, Interarrival
from testbed.resilience.failures import FailureModel, TraceFailure
from testbed.resilience.lifecycle import (
    Lifecycle,
    RepairStage,
    Retirement,
    ScoreRule,
    WindowRule,
)
from testbed.resilience.maintenance import Windows
from testbed.resilience.plan import CkptLevel, JobPlan
from testbed.resilience.spec import (
    RunLimits,
    SimSpec,
    TargetCI,
    closed_form_wall_s,
    policy_interval_s,
)
from testbed.scenario import Failures, Scenario, Workload
from testbed.schema import line_for
from testbed.systems import SystemProfile, default_restart_s, load_system
from testbed.units import parse_shape

#: Global batch and GPU count of the strategy comparison when a scenario gives no
#: parallelism (a typical data-parallel batch on one node).
DEFAULT_COMPARISON_BATCH = 256


@contextmanager
def at(sc: Scenario, field: str) -> Iterator[None]:
    """Re-raise an input error from a referenced name or file at the scenario's key."""
    try:
        yield
    except Infeasible:
        raise
    except InputError as exc:
        if exc.source not in (None, sc.source):
            if exc.field is None and exc.line is None:   # the file as a whole (a FIFO, too
                exc.field = field                        # large): say which key named it
                exc.args = (exc.format(),)
            raise   # the error is inside another file (a trace, a cause table): keep it
        sub = exc.field if exc.field and exc.field != field.rsplit(".", 1)[-1] else None
        key = f"{field}.{sub}" if sub and field in ("model", "parallelism") else field
        raise sc.error(exc.message, key) from None


def scenario_dir(sc: Scenario) -> Path | None:
    """The folder relative paths of the scenario resolve against."""
    return Path(sc.source).parent if sc.source and not sc.source.startswith("<") else None


def relative_path(sc: Scenario, ref: str) -> Path:
    """A path written in the scenario, resolved against the scenario file's folder."""
    path = Path(ref)
    base = scenario_dir(sc)
    if path.is_absolute() or base is None:
        return path
    return base / path


def system_ref(sc: Scenario) -> str:
    """The scenario's ``system:`` as a profile name or a path resolved against its folder."""
    ref = sc.system or ""
    if "/" in ref or ref.endswith((".yaml", ".yml")):
        return str(relative_path(sc, ref))
    return ref


def scenario_system(sc: Scenario) -> SystemProfile | None:
    """The scenario's system profile (None when it names none)."""
    if sc.system is None:
        return None
    return _named_system(sc)


def _named_system(sc: Scenario) -> SystemProfile:
    """The profile of the scenario's ``system:`` (which the caller knows is given)."""
    with at(sc, "system"):
        return load_system(system_ref(sc))


# --------------------------------------------------------------------------- oracle

def _input_shape(sc: Scenario) -> tuple[int, ...] | None:
    shape = sc.model.input_shape if sc.model else None
    if isinstance(shape, str):
        with at(sc, "model.input_shape"):
            return parse_shape(shape)
    return tuple(shape) if shape is not None else None


def oracle_request(sc: Scenario, *, field: str = "workload.steps") -> Request:
    """The oracle request for the scenario's model, parallelism and system."""
    p, m = sc.parallelism, sc.model
    if sc.system is None or m is None or p is None:
        missing = [k for k in ("system", "model", "parallelism") if getattr(sc, k) is None]
        raise sc.error(f"needs {', '.join(missing)} to ask the oracle (or give step_time)",
                       field)
    system = _named_system(sc)
    w = sc.workload
    with at(sc, "model"):
        model = resolve_model(m.name, _input_shape(sc))
        return Request(model=model, system=system, strategy=p.strategy, gpus=p.gpus,
                       global_batch=p.global_batch, group_size=p.group_size,
                       precision=m.precision, optimizer=m.optimizer,
                       micro_batches=p.micro_batches,
                       checkpoint_writers=sc.checkpoint.writers,
                       checkpoint_tier=sc.checkpoint.tier,
                       schedule=p.schedule or DEFAULT_SCHEDULE,
                       input_precision=w.input_precision if w is not None and w.input_precision
                       else None)


def oracle_estimate(sc: Scenario, *, field: str = "workload.steps") -> Estimate:
    """The oracle's estimate for the scenario; infeasible raises :class:`Infeasible`."""
    req = oracle_request(sc, field=field)
    with at(sc, "parallelism"):
        est = estimate(req)
    if not est.feasible:
        raise Infeasible(est.reason or "infeasible", source=sc.source, field="parallelism",
                         line=sc.lines.get("parallelism"))
    return est


@dataclass(frozen=True)
class OracleComparison:
    """The oracle's strategy comparison for a scenario (what ``testbed run`` prints)."""

    model: str
    system: str
    global_batch: int
    max_gpus: int
    result: SweepResult
    chosen: Estimate | None

    @property
    def best_per_strategy(self) -> list[Estimate]:
        return self.result.best_per_strategy(self.global_batch)

    def to_dict(self) -> dict:
        return {"model": self.model, "system": self.system, "global_batch": self.global_batch,
                "max_gpus": self.max_gpus,
                "best_per_strategy": [e.to_dict() for e in self.best_per_strategy],
                "chosen": self.chosen.to_dict() if self.chosen else None}


def oracle_comparison(sc: Scenario) -> OracleComparison | None:
    """Every strategy at the scenario's batch on 1 … its GPU count, ranked (None without
    a model and a system)."""
    if sc.model is None or sc.system is None:
        return None
    system = _named_system(sc)
    with at(sc, "model"):
        model = resolve_model(sc.model.name, _input_shape(sc))
    par = sc.parallelism
    batch = par.global_batch if par else DEFAULT_COMPARISON_BATCH
    max_gpus = par.gpus if par else system.node.gpus_per_node
    with at(sc, "model"):
        # every strategy's best configuration, however far behind the fastest: the
        # comparison shows what each costs (the sweep's efficiency floor is for ranking)
        result = sweep(model, system, [batch], max_gpus=max_gpus,
                       group_size=par.group_size if par else None,
                       precision=sc.model.precision, optimizer=sc.model.optimizer,
                       min_efficiency=0.0)
    chosen = None
    if par is not None:
        with at(sc, "parallelism"):
            chosen = estimate(oracle_request(sc, field="parallelism"))
    return OracleComparison(model=model.name, system=system.name, global_batch=batch,
                            max_gpus=max_gpus, result=result, chosen=chosen)


# --------------------------------------------------------------------------- simulator

def _nodes(sc: Scenario, system: SystemProfile | None) -> int:
    if sc.cluster.nodes is not None:
        return sc.cluster.nodes
    if sc.parallelism is not None:
        per_node = sc.cluster.gpus_per_node or (system.node.gpus_per_node if system else 1)
        return max(1, -(-sc.parallelism.gpus // per_node))
    return 1


def _storage_bandwidths(sc: Scenario, system: SystemProfile | None
                        ) -> tuple[float, float, float | None, float | None]:
    """(PFS write, PFS read, per-node write, per-node read) in bytes/s: the scenario's
    ``storage`` section over the system profile's."""
    st = sc.storage
    store = system.storage if system is not None else None

    def pick(own, profile):
        return own if own else profile
    write = pick(st and st.pfs_write_bandwidth, store.pfs_write_bandwidth_Bps if store else None)
    read = pick(st and st.pfs_read_bandwidth, store.pfs_read_bandwidth_Bps if store else None)
    node_w = pick(st and st.node_write_bandwidth, store.pfs_per_node_Bps if store else None)
    node_r = pick(st and st.node_read_bandwidth, store.pfs_per_node_Bps if store else None)
    if write is None or read is None:
        raise sc.error("no storage bandwidth: give storage.pfs_write_bandwidth and "
                       "pfs_read_bandwidth, or a system profile", "storage")
    return write, read, node_w, node_r


def _physics_cost(sc: Scenario, nodes: int, state: int, system: SystemProfile,
                  est: Estimate | None) -> dict:
    """The checkpoint's cost terms from the storage physics of the system profile: the
    oracle's (which knows the state's layout over model and data parallelism), else the
    scenario's state written by its nodes."""
    if est is not None and est.checkpoint:
        return dict(est.checkpoint)
    gpu = system.gpu
    with at(sc, "checkpoint"):
        return checkpoint_cost(
            state, nodes, nodes, system.storage, gpus_per_node=system.node.gpus_per_node,
            writers=sc.checkpoint.writers, tier=sc.checkpoint.tier,
            host_link_Bps=gpu.host_link_GBps * 1e9 if gpu.host_link_GBps else None).to_dict()


def _checkpoint_costs(sc: Scenario, nodes: int, state: int | None,
                      system: SystemProfile | None, est: Estimate | None = None
                      ) -> tuple[float, float, dict | None]:
    """Checkpoint blocking cost, load time and (when derived from the physics) its terms.

    Given values win; else the system profile's storage physics
    (:func:`~testbed.resilience.ckpt_cost.checkpoint_cost`); a scenario that overrides
    bandwidths in ``storage`` (or has no system) gets state over the writers' aggregate
    bandwidth."""
    ck = sc.checkpoint
    cost, load = ck.cost, ck.restart
    if (cost is not None and load is not None) or ck.policy in ("none", "multilevel"):
        return (cost or 0.0), (load or 0.0), None
    if state is None:
        raise sc.error("give 'cost' and 'restart', or a 'state' size (or a model via the "
                       "oracle) to derive them", "checkpoint.cost" if cost is None
                       else "checkpoint.restart")
    if system is not None and sc.storage is None:
        terms = _physics_cost(sc, nodes, state, system, est)
        return (terms["write_s"] if cost is None else cost,
                terms["read_s"] if load is None else load, terms)
    write, read, node_w, node_r = _storage_bandwidths(sc, system)
    meta = sc.storage.metadata_per_writer if sc.storage else 0.0
    if cost is None:
        cost = pfs_transfer_s(state, nodes, write, node_w, meta)
    if load is None:
        load = pfs_transfer_s(state, nodes, read, node_r, meta)
    return cost, load, None


def _cause_rows(sc: Scenario, f: Failures, costs: dict[str, dict]) -> list[CauseRow]:
    if isinstance(f.causes, str):
        with at(sc, "failures.causes"):
            return load_cause_table(f.causes, base_dir=scenario_dir(sc), source=sc.source)
    if f.causes:
        for c in f.causes:
            costs[c.name] = {k: getattr(c, k) for k in ("repair", "detect", "restart",
                                                         "survives", "job_induced")}
        return [CauseRow(c.name, c.category or c.name, c.weight) for c in f.causes]
    return [CauseRow("failure", "failure", 1.0)]


def _causes(sc: Scenario, f: Failures, trace_names: list[str] | None
            ) -> tuple[ResolvedCause, ...]:
    costs = {k: v.model_dump() for k, v in f.category_costs.items()}
    rows = _cause_rows(sc, f, costs)
    if trace_names:
        known = {r.name for r in rows}
        rows += [CauseRow(n, n, 1e-12) for n in trace_names if n not in known]
    return resolve_causes(rows, costs, repair_s=sc.cluster.repair, detect_s=f.detect,
                          restart_s=_default_restart_s(sc, f))


def _default_restart_s(sc: Scenario, f: Failures) -> float:
    """The requeue/restart time of a failure: the scenario's ``failures.restart`` when it
    gives one, else the restart a calibrated profile measured (process start, framework
    import, model build; :func:`testbed.systems.default_restart_s`), else 0."""
    if "restart" in f.model_fields_set or sc.system is None:
        return f.restart
    measured = default_restart_s(_named_system(sc))
    return measured if measured is not None else f.restart


def _trace(sc: Scenario, f: Failures, nodes: int
           ) -> tuple[tuple[TraceFailure, ...] | None, tuple[ResolvedCause, ...]]:
    """(trace failures, causes) of a scenario that replays a trace, else (None, causes)."""
    if f.trace is None:
        return None, _causes(sc, f, None)
    from testbed.traces import load_trace
    with at(sc, "failures.trace"):
        rows = load_trace(relative_path(sc, f.trace), field="failures.trace",
                          referrer=sc.source)
    causes = _causes(sc, f, sorted({r.cause for r in rows}))
    index = {c.name: i for i, c in enumerate(causes)}
    trace = tuple(TraceFailure(r.t_s, r.node % nodes, index[r.cause],
                               r.repair_s if r.repair_s is not None
                               else causes[index[r.cause]].repair_s)
                  for r in rows)
    return trace, causes


def failure_model(sc: Scenario, nodes: int) -> FailureModel:
    """The scenario's failure model for a job of ``nodes`` nodes."""
    f = sc.failures
    if f is None:
        return FailureModel(nodes=nodes, causes=())
    trace, causes = _trace(sc, f, nodes)
    inter = None
    per_node = False
    if trace is None:
        if f.distribution == "weibull" and f.shape is None:
            raise sc.error("weibull needs 'shape'", "failures.shape")
        if f.distribution == "lognormal" and f.sigma is None:
            raise sc.error("lognormal needs 'sigma'", "failures.sigma")
        mean = f.mtbf if f.mtbf is not None else f.node_mtbf
        assert mean is not None     # without a trace the schema needs mtbf or node_mtbf
        per_node = f.node_mtbf is not None
        inter = Interarrival(f.distribution, mean, shape=f.shape or 1.0, sigma=f.sigma or 1.0)
    b, m = f.bursts, f.maintenance
    if b is not None and b.size > nodes:
        raise sc.error(f"a burst of {b.size} more failed nodes is larger than the job's "
                       f"{nodes} node(s)", "failures.bursts.size")
    if f.exposure == "running" and f.idle_rate_factor:
        raise sc.error("idle_rate_factor applies to exposure 'in_use' (with 'running' "
                       "nothing fails unless the job runs)", "failures.idle_rate_factor")
    return FailureModel(
        nodes=nodes, causes=causes, interarrival=inter, per_node=per_node, trace=trace,
        burst_probability=b.probability if b else 0.0, burst_size=b.size if b else 0,
        burst_window_s=b.window if b else 0.0,
        maintenance_every_s=m.every if m else None,
        maintenance_duration_s=m.duration if m else 0.0,
        maintenance_first_s=m.first if m else None,
        start=f.start, exposure=f.exposure, idle_rate_factor=f.idle_rate_factor,
        lose_work=f.lose_work)


# --------------------------------------------------------------------------- cluster operations

def _drawn(d) -> Drawn:
    return Drawn(d.distribution, d.mean, d.shape or 1.0, d.sigma or 1.0)


def _node_rates(sc: Scenario, ref: str) -> tuple[float, ...]:
    """Relative failure rates per node from a failure trace: (failures + ½) per node,
    normalised to mean 1 (the scenario's node MTBF sets the level)."""
    from testbed.traces import load_trace
    with at(sc, "cluster.node_rates"):
        rows = load_trace(relative_path(sc, ref), field="cluster.node_rates",
                          referrer=sc.source)
    if not rows:
        raise sc.error("the trace has no failures to estimate per-node rates from",
                       "cluster.node_rates")
    count = max(r.node for r in rows) + 1
    weights = [0.5] * count
    for r in rows:
        weights[r.node] += 1.0
    mean = sum(weights) / count
    return tuple(w / mean for w in weights)


def _spares(sc: Scenario, nodes: int) -> int | None:
    cl = sc.cluster
    if cl.working_pool is None:
        return cl.spares
    idle = cl.working_pool - nodes - cl.standbys
    if idle < 0:
        raise sc.error(f"a working pool of {cl.working_pool} node(s) cannot hold the job's "
                       f"{nodes} node(s) and {cl.standbys} warm standby(s)",
                       "cluster.working_pool")
    return idle


def lifecycle(sc: Scenario, nodes: int) -> Lifecycle:
    """The scenario's cluster operations (pools, costs, repairs, diagnosis, nodes)."""
    cl = sc.cluster
    spares = _spares(sc, nodes)
    if spares is None and (cl.standbys or cl.spare_pool):
        key = "cluster.standbys" if cl.standbys else "cluster.spare_pool"
        raise sc.error("warm standbys and a spare pool need a finite working pool: give "
                       "'spares' (idle nodes) or 'working_pool'", key)
    policy_fn = None
    if ":" in cl.host_selection:
        from testbed.resilience.policies import load_policy
        policy_fn = load_policy(cl.host_selection, source=sc.source,
                                field="cluster.host_selection")
    rep, ret, f = cl.repairs, cl.retirement, sc.failures
    per_node = f is not None and f.node_mtbf is not None
    for key, given in (("cluster.bad_nodes", cl.bad_nodes),
                       ("cluster.node_rates", cl.node_rates)):
        if given is not None and not per_node:
            raise sc.error("per-node failure rates need failures.node_mtbf", key)
    return Lifecycle(
        standbys=cl.standbys, spares=spares, spare_pool=cl.spare_pool,
        swap=_drawn(cl.costs.swap), host_selection=_drawn(cl.costs.host_selection),
        preemption=_drawn(cl.costs.preemption), host_policy=cl.host_selection,
        host_policy_fn=policy_fn,
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
        retirement=None if ret is None else Retirement(
            window=WindowRule(ret.window.failures, ret.window.within) if ret.window else None,
            score=ScoreRule(ret.score.initial, ret.score.penalty, ret.score.increment,
                            ret.score.period, ret.score.threshold) if ret.score else None,
            combine=ret.combine))


def _windows(sc: Scenario, plan: JobPlan) -> Windows | None:
    """Planned maintenance windows, refused where a job could never finish between them."""
    f = sc.failures
    m = f.maintenance if f else None
    if f is None or m is None:
        return None
    stop = plan.stop_ckpt_s if f.lose_work else 0.0
    if stop + m.duration >= m.every:
        raise sc.error(f"a planned stop (checkpoint {stop:g} s + window {m.duration:g} s) "
                       f"must be shorter than the maintenance period ({m.every:g} s), or the "
                       "job never runs", "failures.maintenance.duration")
    if not plan.checkpoints and f.lose_work and plan.work_s > m.every - m.duration:
        raise sc.error(f"without checkpoints a planned stop loses the job's progress, and "
                       f"{plan.work_s:g} s of work cannot fit between maintenance windows "
                       f"({m.every - m.duration:g} s apart): choose a checkpoint policy",
                       "checkpoint.policy")
    return Windows(m.every, m.duration, m.first if m.first is not None else m.every)


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


def _levels(sc: Scenario, cost: float, load: float) -> tuple[CkptLevel, ...]:
    ck = sc.checkpoint
    if ck.policy == "multilevel":
        return tuple(CkptLevel(lv.name, lv.cost, lv.restart, lv.every)
                     for lv in ck.levels or ())      # the schema needs levels here
    if ck.policy == "none":
        return ()
    return (CkptLevel("checkpoint", cost, load, 1),)


def _interval(sc: Scenario, cost: float, restart: float, mtbf: float, work_s: float,
              step_s: float | None) -> float | None:
    ck = sc.checkpoint
    fixed = ck.interval
    if ck.policy == "fixed" and ck.every_steps is not None:
        if step_s is None:
            raise sc.error("'every_steps' needs a workload in steps", "checkpoint.every_steps")
        fixed = ck.every_steps * step_s
    try:
        return policy_interval_s(ck.policy, cost_s=cost, restart_s=restart, mtbf_s=mtbf,
                                 work_s=work_s, daly_order=ck.daly_order,
                                 fixed_interval_s=fixed)
    except ValueError as exc:
        raise sc.error(str(exc), "checkpoint.cost") from None


def resolve(sc: Scenario) -> SimSpec:
    """Everything the engines need from a scenario (may ask the oracle).

    An input error without a file (from a unit parser, a name lookup) is completed with
    the scenario's file and the line of its key, so it always says where it is.
    """
    try:
        return _resolve(sc)
    except Infeasible:
        raise
    except InputError as exc:
        if sc.source and exc.field and exc.source in (None, sc.source) and exc.line is None:
            raise sc.error(exc.message, exc.field) from None
        raise


def _resolve(sc: Scenario) -> SimSpec:
    if sc.workload is None:
        raise sc.error("a simulation needs a 'workload' (compute_time or steps)", "workload")
    system = scenario_system(sc)
    nodes = _nodes(sc, system)
    work_s, step_s, steps, est = _work(sc, sc.workload)
    state = sc.checkpoint.state
    if state is None and sc.model is not None and sc.parallelism is not None and \
            sc.system is not None and (sc.checkpoint.cost is None or sc.checkpoint.restart is None):
        est = est or oracle_estimate(sc, field="checkpoint.cost")
        state = est.state_bytes
    cost, load, terms = _checkpoint_costs(sc, nodes, state, system,
                                          est if sc.checkpoint.state is None else None)
    model = failure_model(sc, nodes)
    life = lifecycle(sc, nodes)
    if not model.lose_work and sc.checkpoint.policy != "none":
        raise sc.error("a job that loses no work at a failure needs no checkpoints: set "
                       "checkpoint.policy to none", "failures.lose_work")
    mean_extra = sum(c.probability * (c.detect_s + c.restart_s) for c in model.causes)
    mtbf = model.job_mtbf_s
    if model.per_node and life.bad_fraction and life.bad_multiplier:
        mtbf /= 1.0 + life.bad_fraction * life.bad_multiplier
    levels = _levels(sc, cost, load)
    if sc.checkpoint.policy == "multilevel":
        cost, load = levels[0].cost_s, levels[-1].load_s
    restart = load + mean_extra
    interval = _interval(sc, cost, restart, mtbf, work_s, step_s)
    plan = JobPlan.build(work_s, interval, levels, persist_s=sc.checkpoint.persist,
                         restart_load_s=load, step_s=step_s, steps=steps)
    windows = _windows(sc, plan)
    analytical, daly = closed_form_wall_s(model, plan, cost_s=cost, restart_s=restart,
                                          mtbf_s=mtbf, spares=life.spares, life=life,
                                          nodes=nodes, windows=windows)
    limits = RunLimits(max_failures=sc.simulation.max_failures,
                       max_simulated_s=sc.simulation.max_simulated_time, source=sc.source)
    target = _target(sc)
    refuse_runaway(sc, plan, mtbf, restart, limits,
                   replications=target.max_reps if target else None)
    return SimSpec(name=sc.name, plan=plan, failures=model, spares=life.spares,
                   lifecycle=life, windows=windows, target=target, nodes=nodes, policy=sc.checkpoint.policy, job_mtbf_s=mtbf, ckpt_cost_s=cost,
                   restart_s=restart, analytical_wall_s=analytical, daly_formula_wall_s=daly,
                   step_s=step_s, state_bytes=state, limits=limits, checkpoint_terms=terms)


#: Most failures all replications of one run may simulate together (about ten minutes
#: of one core at the fast path's ~2 µs per failure).
MAX_TOTAL_FAILURES = 300_000_000


def expected_failures(plan: JobPlan, mtbf_s: float, restart_s: float,
                      lose_work: bool = True) -> float:
    """Failures one replication can expect, from the closed form for exponential failures
    (E[wall] / M with E[wall] = Σ M e^{R/M}(e^{L/M} − 1) over segments of length L); inf
    when it overflows. An estimate for other distributions, exact in expectation for the
    exponential one. A job that loses no work at a failure expects at most
    (failure-free time / M)·e^{R/M}."""
    if not math.isfinite(mtbf_s):
        return 0.0
    if mtbf_s <= 0:
        return math.inf
    if not lose_work:
        exponent = restart_s / mtbf_s
        return math.inf if exponent > 700 else plan.failure_free_s() / mtbf_s * math.exp(
            exponent)
    def cost(j: int) -> float:
        return plan.cost_of(j) if plan.levels else 0.0
    lengths = [plan.segment_s(j) + cost(j) for j in (1, plan.n_segments)]
    counts = [plan.n_segments - 1, 1] if plan.n_segments > 1 else [0, 1]
    total = 0.0
    for length, count in zip(lengths, counts, strict=True):
        exponent = (length + restart_s) / mtbf_s
        if exponent > 700:
            return math.inf
        total += count * math.exp(restart_s / mtbf_s) * math.expm1(length / mtbf_s)
    return total


def _runaway_field(sc: Scenario, plan: JobPlan, mtbf_s: float, restart_s: float) -> str:
    """The key to change: the MTBF when even a restart outlasts it, the policy when there
    are no checkpoints, else the checkpoint section."""
    f = sc.failures
    if f is not None and restart_s >= mtbf_s:
        return "failures.node_mtbf" if f.node_mtbf is not None else "failures.mtbf"
    if not plan.levels:
        return "checkpoint.policy"
    return "checkpoint"


def refuse_runaway(sc: Scenario, plan: JobPlan, mtbf_s: float, restart_s: float,
                   limits: RunLimits, replications: int | None = None) -> None:
    """Refuse, before simulating, a job that cannot finish in reasonable time: more
    expected failures per replication than the cap, or over all replications more than
    :data:`MAX_TOTAL_FAILURES`, or an expected wall time beyond the simulated-time cap."""
    n = expected_failures(plan, mtbf_s, restart_s,
                          sc.failures.lose_work if sc.failures else True)
    wall_s = n * mtbf_s if math.isfinite(n) else math.inf
    reps = replications or sc.simulation.replications
    if n > limits.max_failures or wall_s > limits.max_simulated_s or n * reps > MAX_TOTAL_FAILURES:
        from testbed.units import format_duration
        years = "more than 10^300 years" if not math.isfinite(wall_s) else format_duration(wall_s)
        where = _runaway_field(sc, plan, mtbf_s, restart_s)
        raise RunawayError(
            f"this job cannot finish in reasonable time: each replication expects "
            f"{n:,.3g} failures and {years} of wall time (closed form, job MTBF "
            f"{format_duration(mtbf_s)}, longest segment "
            f"{format_duration(plan.segment_s(1) + (plan.cost_of(1) if plan.levels else 0))}"
            f", restart "
            f"{format_duration(restart_s)}); checkpoint more often, restart faster or "
            f"simulate fewer replications (limits: simulation.max_failures, "
            f"simulation.max_simulated_time)", source=sc.source, field=where,
            line=line_for(sc.lines, where))


def resolve_or_infeasible(sc: Scenario) -> SimSpec | Infeasible:
    """:func:`resolve`, with an infeasible configuration returned instead of raised."""
    try:
        return resolve(sc)
    except Infeasible as exc:
        return exc

