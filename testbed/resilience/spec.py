"""Turn a validated :class:`~testbed.scenario.Scenario` into what the engines need.

:func:`resolve` decides the job's work and step time (given, or from the oracle), the
node count, the checkpoint cost and load time (given, or state bytes over storage
bandwidth), the failure model with its cause mix, and the checkpoint interval of the
policy; it also gives the closed-form expected wall time where one applies.
"""

from __future__ import annotations

import math
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from testbed.errors import InputError
from testbed.resilience import intervals
from testbed.resilience.causes import CauseRow, load_cause_table, resolve_causes
from testbed.resilience.ckpt_cost import pfs_transfer_s
from testbed.resilience.distributions import Interarrival
from testbed.resilience.failures import FailureModel, TraceFailure
from testbed.resilience.plan import CkptLevel, JobPlan
from testbed.scenario import Scenario


@dataclass(frozen=True)
class SimSpec:
    """A resolved scenario: plan, failure model, spares and the analytical estimate."""

    name: str
    plan: JobPlan
    failures: FailureModel
    spares: int | None
    nodes: int
    policy: str
    job_mtbf_s: float
    ckpt_cost_s: float
    restart_s: float                   # load + detection + requeue (mean over causes)
    analytical_wall_s: float | None    # exact expectation of this job where a closed form holds
    daly_formula_wall_s: float | None  # Daly's T_w = M e^{R/M}(e^{(τ+δ)/M} − 1) T_s/τ
    step_s: float | None = None
    state_bytes: int | None = None


@contextmanager
def _at(sc: Scenario, field: str):
    """Re-raise an input error from a referenced name or file at the scenario's key."""
    try:
        yield
    except InputError as exc:
        if exc.source not in (None, sc.source):
            raise   # the error is inside another file (a trace, a cause table): keep it
        sub = exc.field if exc.field and exc.field != field.rsplit(".", 1)[-1] else None
        key = f"{field}.{sub}" if sub and field in ("model", "parallelism") else field
        raise sc.error(exc.message, key) from None


def _oracle(sc: Scenario):
    """The oracle's estimate for the scenario's model/system/parallelism."""
    missing = [k for k in ("system", "model", "parallelism") if getattr(sc, k) is None]
    if missing:
        raise sc.error(f"needs {', '.join(missing)} to ask the oracle (or give step_time)",
                       "workload.steps")
    from testbed.oracle import predict
    from testbed.units import parse_shape
    shape = sc.model.input_shape
    if isinstance(shape, str):
        with _at(sc, "model.input_shape"):
            shape = parse_shape(shape)
    elif shape is not None:
        shape = tuple(shape)
    p = sc.parallelism
    with _at(sc, "system"):
        _system(sc)
    with _at(sc, "model"):
        est = predict(system=_system_ref(sc), model=sc.model.name, strategy=p.strategy, gpus=p.gpus,
                      global_batch=p.global_batch, group_size=p.group_size,
                      input_shape=shape, precision=sc.model.precision,
                      optimizer=sc.model.optimizer, micro_batches=p.micro_batches,
                      **({"schedule": p.schedule} if p.schedule else {}))
    if not est.feasible:
        raise sc.error(f"the oracle finds this configuration infeasible: {est.reason}",
                       "parallelism")
    return est


def _system_ref(sc: Scenario) -> str:
    ref = sc.system
    if sc.source and ("/" in ref or ref.endswith((".yaml", ".yml"))):
        cand = Path(sc.source).parent / ref
        if cand.is_file():
            return str(cand)
    return ref


def _system(sc: Scenario):
    if sc.system is None:
        return None
    from testbed.systems import load_system
    with _at(sc, "system"):
        return load_system(_system_ref(sc))


def _nodes(sc: Scenario, system) -> int:
    if sc.cluster.nodes is not None:
        return sc.cluster.nodes
    if sc.parallelism is not None:
        per_node = sc.cluster.gpus_per_node or (system.node.gpus_per_node if system else 1)
        return max(1, -(-sc.parallelism.gpus // per_node))
    return 1


def _costs(sc: Scenario, nodes: int, state: int | None, system) -> tuple[float, float]:
    """Checkpoint blocking cost and load time, given or from state bytes over bandwidth."""
    ck = sc.checkpoint
    cost, load = ck.cost, ck.restart
    if (cost is None or load is None) and ck.policy not in ("none", "multilevel"):
        if state is None:
            raise sc.error("give 'cost' and 'restart', or a 'state' size (or a model via the "
                           "oracle) to derive them", "checkpoint.cost" if cost is None
                           else "checkpoint.restart")
        st = sc.storage
        store = system.storage if system is not None else None
        write = (st.pfs_write_bandwidth if st and st.pfs_write_bandwidth else
                 store.pfs_write_bandwidth_Bps if store else None)
        read = (st.pfs_read_bandwidth if st and st.pfs_read_bandwidth else
                store.pfs_read_bandwidth_Bps if store else None)
        node_bw = (st.node_write_bandwidth if st and st.node_write_bandwidth else
                   store.pfs_per_node_Bps if store else None)
        node_rbw = (st.node_read_bandwidth if st and st.node_read_bandwidth else
                    store.pfs_per_node_Bps if store else None)
        meta = st.metadata_per_writer if st else 0.0
        if write is None or read is None:
            raise sc.error("no storage bandwidth: give storage.pfs_write_bandwidth and "
                           "pfs_read_bandwidth, or a system profile", "storage")
        if cost is None:
            cost = pfs_transfer_s(state, nodes, write, node_bw, meta)
        if load is None:
            load = pfs_transfer_s(state, nodes, read, node_rbw, meta)
    return (cost or 0.0), (load or 0.0)


def _causes(sc: Scenario, trace_names: list[str] | None):
    f = sc.failures
    costs = {k: v.model_dump() for k, v in f.category_costs.items()}
    base = Path(sc.source).parent if sc.source else None
    if isinstance(f.causes, str):
        with _at(sc, "failures.causes"):
            rows = load_cause_table(f.causes, base_dir=base, source=sc.source)
    elif f.causes:
        rows = [CauseRow(c.name, c.category or c.name, c.weight) for c in f.causes]
        for c in f.causes:
            costs[c.name] = {k: getattr(c, k) for k in ("repair", "detect", "restart",
                                                         "survives")}
    else:
        rows = [CauseRow("failure", "failure", 1.0)]
    if trace_names:
        known = {r.name for r in rows}
        rows += [CauseRow(n, n, 1e-12) for n in trace_names if n not in known]
    return resolve_causes(rows, costs, repair_s=sc.cluster.repair, detect_s=f.detect,
                          restart_s=f.restart)


def _failure_model(sc: Scenario, nodes: int) -> FailureModel:
    f = sc.failures
    if f is None:
        return FailureModel(nodes=nodes, causes=())
    trace = None
    trace_rows = None
    if f.trace is not None:
        from testbed.traces import load_trace
        path = Path(f.trace)
        if not path.is_absolute() and sc.source:
            cand = Path(sc.source).parent / path
            path = cand if cand.exists() or not path.exists() else path
        with _at(sc, "failures.trace"):
            trace_rows = load_trace(path, field="failures.trace", referrer=sc.source)
    causes = _causes(sc, sorted({r.cause for r in trace_rows}) if trace_rows else None)
    if trace_rows is not None:
        index = {c.name: i for i, c in enumerate(causes)}
        trace = tuple(TraceFailure(r.t_s, r.node % nodes, index[r.cause],
                                   r.repair_s if r.repair_s is not None
                                   else causes[index[r.cause]].repair_s)
                      for r in trace_rows)
    inter = None
    per_node = False
    if trace is None:
        mean = f.mtbf if f.mtbf is not None else f.node_mtbf
        per_node = f.node_mtbf is not None
        inter = Interarrival(f.distribution, mean, shape=f.shape or 1.0, sigma=f.sigma or 1.0)
        if f.distribution == "weibull" and f.shape is None:
            raise sc.error("weibull needs 'shape'", "failures.shape")
        if f.distribution == "lognormal" and f.sigma is None:
            raise sc.error("lognormal needs 'sigma'", "failures.sigma")
    b, m = f.bursts, f.maintenance
    return FailureModel(
        nodes=nodes, causes=causes, interarrival=inter, per_node=per_node, trace=trace,
        burst_probability=b.probability if b else 0.0, burst_size=b.size if b else 0,
        burst_window_s=b.window if b else 0.0,
        maintenance_every_s=m.every if m else None,
        maintenance_duration_s=m.duration if m else 0.0,
        maintenance_first_s=m.first if m else None)


def resolve(sc: Scenario) -> SimSpec:
    """Everything the engines need from a scenario (may ask the oracle)."""
    if sc.workload is None:
        raise sc.error("a simulation needs a 'workload' (compute_time or steps)", "workload")
    system = _system(sc)
    nodes = _nodes(sc, system)
    est = None
    w = sc.workload
    step_s = None
    steps = None
    if w.steps is not None:
        steps = w.steps
        if w.step_time is not None:
            step_s = w.step_time
        else:
            est = _oracle(sc)
            step_s = est.time_per_iteration_s
        work_s = steps * step_s
    else:
        work_s = w.compute_time
    state = sc.checkpoint.state
    if state is None and sc.model is not None and sc.parallelism is not None and \
            sc.system is not None and (sc.checkpoint.cost is None or sc.checkpoint.restart is None):
        est = est or _oracle(sc)
        state = est.state_bytes
    cost, load = _costs(sc, nodes, state, system)
    model = _failure_model(sc, nodes)
    ck = sc.checkpoint
    causes = model.causes
    if causes:
        mean_extra = sum(c.probability * (c.detect_s + c.restart_s) for c in causes)
    else:
        mean_extra = 0.0
    mtbf = model.job_mtbf_s
    if ck.policy == "multilevel":
        levels = tuple(CkptLevel(lv.name, lv.cost, lv.restart, lv.every) for lv in ck.levels)
        cost, load = levels[0].cost_s, levels[-1].load_s
    elif ck.policy == "none":
        levels = ()
    else:
        levels = (CkptLevel("checkpoint", cost, load, 1),)
    restart = load + mean_extra
    interval = _interval(sc, cost, restart, mtbf, work_s, step_s)
    plan = JobPlan.build(work_s, interval, levels, persist_s=ck.persist, restart_load_s=load,
                         step_s=step_s, steps=steps)
    analytical, daly = _analytical(sc, model, plan, cost, restart, mtbf)
    return SimSpec(name=sc.name, plan=plan, failures=model, spares=sc.cluster.spares,
                   nodes=nodes, policy=ck.policy, job_mtbf_s=mtbf, ckpt_cost_s=cost,
                   restart_s=restart, analytical_wall_s=analytical, daly_formula_wall_s=daly,
                   step_s=step_s, state_bytes=state)


def _interval(sc: Scenario, cost: float, restart: float, mtbf: float, work_s: float,
              step_s: float | None) -> float | None:
    ck = sc.checkpoint
    if ck.policy == "none":
        return None
    if ck.policy == "fixed":
        if ck.every_steps is not None:
            if step_s is None:
                raise sc.error("'every_steps' needs a workload in steps", "checkpoint.every_steps")
            return ck.every_steps * step_s
        return ck.interval
    if not math.isfinite(mtbf):
        return work_s
    if cost <= 0:
        raise sc.error(f"policy {ck.policy!r} needs a checkpoint cost > 0", "checkpoint.cost")
    if ck.policy == "young":
        return intervals.young_interval_s(cost, mtbf)
    if ck.daly_order == "first":
        return intervals.daly_first_order_interval_s(cost, mtbf, restart)
    if ck.daly_order == "exact":
        return intervals.daly_exact_interval_s(cost, mtbf)
    return intervals.daly_higher_order_interval_s(cost, mtbf)


def _analytical(sc: Scenario, model: FailureModel, plan: JobPlan, cost: float, restart: float,
                mtbf: float) -> tuple[float | None, float | None]:
    """Closed forms where their assumptions hold (else None)."""
    if not model.has_failures:
        return plan.failure_free_s(), None
    if (model.trace is not None or model.interarrival.kind != "exponential"
            or model.burst_probability or model.maintenance_every_s is not None
            or sc.cluster.spares is not None or len(plan.levels) > 1 or plan.persist_s):
        return None, None
    extras = {c.detect_s + c.restart_s for c in model.causes}
    if len(extras) > 1 or any(c.survives is not None for c in model.causes):
        return None, None
    if not plan.levels:
        return intervals.no_checkpoint_expected_s(plan.work_s, restart, mtbf), None
    exact = intervals.segment_expected_s(plan.interval_s + cost, restart, mtbf) * (
        plan.n_segments - 1) + intervals.segment_expected_s(plan.last_s + cost, restart, mtbf)
    daly = intervals.daly_expected_wall_time_s(plan.work_s, plan.interval_s, cost, restart, mtbf)
    return exact, daly
