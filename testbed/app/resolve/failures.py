"""The failure model of a scenario: causes, a trace or a distribution, bursts, maintenance."""

from __future__ import annotations

from testbed.app.resolve.sources import cause_rows, named_system, trace_rows
from testbed.resilience.causes import CauseRow, ResolvedCause, resolve_causes
from testbed.resilience.distributions import Interarrival
from testbed.resilience.failures import FailureModel, TraceFailure
from testbed.resilience.maintenance import Windows
from testbed.resilience.plan import JobPlan
from testbed.scenario.schema import Failures, Scenario


def _cause_rows(sc: Scenario, f: Failures, costs: dict[str, dict]) -> list[CauseRow]:
    if isinstance(f.causes, str):
        return cause_rows(sc, f.causes)
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
    import, model build; :func:`testbed.systems.profile.default_restart_s`), else 0."""
    if "restart" in f.model_fields_set or sc.system is None:
        return f.restart
    from testbed.systems.profile import default_restart_s  # only with a profile
    measured = default_restart_s(named_system(sc))
    return measured if measured is not None else f.restart


def _trace(sc: Scenario, f: Failures, nodes: int
           ) -> tuple[tuple[TraceFailure, ...] | None, tuple[ResolvedCause, ...]]:
    """(trace failures, causes) of a scenario that replays a trace, else (None, causes)."""
    if f.trace is None:
        return None, _causes(sc, f, None)
    rows = trace_rows(sc, f.trace, "failures.trace")
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


def windows(sc: Scenario, plan: JobPlan) -> Windows | None:
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
