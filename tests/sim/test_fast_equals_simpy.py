"""The fast exact path equals the step-by-step SimPy engine for the same seed.

Equality is exact for every discrete outcome (failures, their causes, checkpoints
committed, every cluster-operation count: repairs, swaps, host selections, preemptions,
stalls, retirements, depletion) and holds to float round-off (relative 1e-9) for times:
the SimPy engine adds step times one at a time while the fast path multiplies. The
strategy draws every feature of the node lifecycle: standbys, pools, costs (fixed and
drawn), host-selection policies, repair pipelines with technicians, diagnosis misses and
wrong blames, bad nodes, retirement, idle failures, exposure modes, stationary and fresh
starts, job-induced causes, planned maintenance, no-loss mode, AIReSim's conventions
(whole-job host selection, preemption only when the job is short, the counted first
host selection, its depletion rule and stall count) and bad-node regeneration.
"""

from __future__ import annotations

import math

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from simulators.engine import run_simpy
from simulators.fast import is_simple, run_fast, run_simple
from simulators.fast_ops import run_general
from testbed.app.resolve import resolve
from testbed.errors import ScenarioError as RunawayRefused
from testbed.scenario.schema import scenario_from_dict

REL = 1e-9


def _close(a: float, b: float, scale: float) -> bool:
    return math.isclose(a, b, rel_tol=REL, abs_tol=REL * scale)


OPS_TIMES = ("stall_s", "swap_s", "host_selection_s", "preemption_s", "maintenance_s")


def _same(fast, slow) -> None:
    assert fast.failures == slow.failures
    assert fast.checkpoints == slow.checkpoints
    assert fast.by_cause == slow.by_cause
    scale = slow.wall_s
    for field in ("wall_s", "useful_s", "checkpoint_s", "lost_s", "restart_s", "waiting_s"):
        assert _close(getattr(fast, field), getattr(slow, field), scale), (
            field, getattr(fast, field), getattr(slow, field))
    a, b = fast.ops.to_dict(), slow.ops.to_dict()
    for key in a:
        if key in OPS_TIMES:
            assert _close(a[key], b[key], scale), (key, a[key], b[key])
        else:
            assert a[key] == b[key], (key, a[key], b[key])


def assert_same(spec, seed: int, rep: int) -> None:
    slow, _ = run_simpy(spec, seed, rep)
    _same(run_fast(spec, seed, rep), slow)
    if is_simple(spec):     # the inlined loop and the general one agree too
        _same(run_general(spec, seed, rep), run_simple(spec, seed, rep))


@st.composite
def small_scenarios(draw):
    stepped = draw(st.booleans())
    doc: dict = {"name": "prop"}
    if stepped:
        steps, step_s = draw(st.integers(1, 400)), draw(st.floats(1.0, 120.0))
        doc["workload"] = {"steps": steps, "step_time": step_s}
        work_s = steps * step_s
    else:
        work_s = draw(st.floats(600.0, 40 * 3600.0))
        doc["workload"] = {"compute_time": work_s}
    policy = draw(st.sampled_from(["none", "fixed", "young", "daly", "multilevel"]
                                  if work_s <= 6 * 3600 else ["fixed", "young", "daly",
                                                              "multilevel"]))
    ck: dict = {"policy": policy, "restart": draw(st.floats(0.0, 900.0))}
    if policy == "multilevel":
        ck["levels"] = [
            {"name": "local", "cost": draw(st.floats(1.0, 60.0)),
             "restart": draw(st.floats(0.0, 300.0)), "every": 1},
            {"name": "pfs", "cost": draw(st.floats(30.0, 600.0)),
             "restart": draw(st.floats(0.0, 900.0)), "every": draw(st.sampled_from([1, 2, 3, 5]))},
        ]
        ck.pop("restart")
    elif policy != "none":
        ck["cost"] = draw(st.floats(1.0, 900.0))
        if draw(st.booleans()):
            ck["persist"] = draw(st.floats(0.0, 600.0))
    if policy == "fixed":
        ck["interval"] = draw(st.floats(300.0, 3 * 3600.0))
    if policy == "daly":
        ck["daly_order"] = draw(st.sampled_from(["first", "higher", "exact"]))
    doc["checkpoint"] = ck
    nodes = draw(st.integers(1, 8))
    cluster: dict = {"nodes": nodes}
    if draw(st.booleans()):
        cluster["spares"] = draw(st.integers(0, 2))
        cluster["repair"] = draw(st.floats(60.0, 10 * 3600.0))
    doc["cluster"] = cluster
    dist = draw(st.sampled_from(["exponential", "weibull", "lognormal"]))
    fail: dict = {"distribution": dist, "detect": draw(st.floats(0.0, 300.0)),
                  "restart": draw(st.floats(0.0, 300.0))}
    key = draw(st.sampled_from(["mtbf", "node_mtbf"]))
    # job MTBF between half and three times the work, so that runs stay short
    mtbf = draw(st.floats(max(600.0, work_s / 2), max(1200.0, 3 * work_s)))
    fail[key] = mtbf * (nodes if key == "node_mtbf" else 1)
    if "repair" in cluster:   # repairs shorter than the job MTBF keep runs short
        cluster["repair"] = min(cluster["repair"], mtbf)
    if dist == "weibull":
        fail["shape"] = draw(st.floats(0.6, 1.6))
    if dist == "lognormal":
        fail["sigma"] = draw(st.floats(0.3, 1.5))
    if draw(st.booleans()):
        survives = [["local", "pfs"], ["pfs"], []] if policy == "multilevel" else [None, None, []]
        fail["causes"] = [
            {"name": f"c{i}", "weight": draw(st.floats(0.1, 5.0)),
             "detect": draw(st.floats(0.0, 200.0)), "restart": draw(st.floats(0.0, 600.0)),
             "repair": min(draw(st.floats(0.0, 8 * 3600.0)), mtbf),
             **({"survives": survives[i]} if survives[i] is not None else {})}
            for i in range(3)]
    if draw(st.booleans()):
        fail["bursts"] = {"probability": draw(st.floats(0.05, 1.0)),
                          "size": draw(st.integers(1, min(3, nodes))),
                          "window": draw(st.floats(1.0, 1800.0))}
    no_loss = draw(st.integers(0, 2)) == 0
    if no_loss:
        fail["lose_work"] = False
        doc["checkpoint"] = {"policy": "none", "restart": ck.get("restart", 60.0)}
        for cause in fail.get("causes", []):
            cause.pop("survives", None)
    if draw(st.booleans()) and (doc["checkpoint"]["policy"] != "none" or no_loss):
        every = draw(st.floats(4 * 3600.0, 48 * 3600.0))
        fail["maintenance"] = {"every": every, "duration": draw(st.floats(60.0, every / 4))}
    semantics(draw, fail)
    doc["failures"] = fail
    if draw(st.booleans()):
        operations(draw, cluster, nodes, mtbf, key == "node_mtbf")
    return doc, draw(st.integers(0, 2**32 - 1))


def semantics(draw, fail: dict) -> None:
    """Failure semantics: start, exposure, idle failures, job-induced causes."""
    fail["start"] = draw(st.sampled_from(["stationary", "fresh"]))
    fail["exposure"] = draw(st.sampled_from(["in_use", "in_use", "running"]))
    if fail["exposure"] == "in_use" and draw(st.booleans()):
        fail["idle_rate_factor"] = draw(st.floats(0.0, 1.0))
    if "causes" in fail:
        for cause in fail["causes"]:
            if draw(st.integers(0, 2)) == 0:
                cause["job_induced"] = True


def operations(draw, cluster: dict, nodes: int, mtbf: float, per_node: bool) -> None:
    """Standbys, pools, costs, policies, repairs, diagnosis, bad nodes, retirement."""
    cluster["spares"] = draw(st.integers(0, 3))
    cluster["standbys"] = draw(st.integers(0, 2))
    cluster["spare_pool"] = draw(st.integers(0, 2))
    cluster.setdefault("repair", draw(st.floats(60.0, mtbf)))
    costs = {}
    for name in ("swap", "host_selection", "preemption"):
        if draw(st.booleans()):
            d = draw(st.sampled_from(["fixed", "exponential"]))
            mean = draw(st.floats(1.0, 1800.0))
            costs[name] = mean if d == "fixed" else {"distribution": d, "mean": mean}
    cluster["costs"] = costs
    if draw(st.booleans()):
        cluster["technicians"] = draw(st.integers(1, 2))
    if draw(st.booleans()):
        stage = lambda: {"duration": {"distribution": draw(st.sampled_from(  # noqa: E731
            ["exponential", "fixed"])), "mean": draw(st.floats(60.0, mtbf / 2))},
            "silent_failure": draw(st.floats(0.0, 1.0))}
        cluster["repairs"] = {"automatic": stage(), "manual": stage(),
                              "escalation": draw(st.floats(0.0, 1.0)),
                              "escalate": draw(st.sampled_from(["always", "on_failure"]))}
    if draw(st.booleans()):
        cluster["diagnosis"] = {"miss": draw(st.floats(0.0, 0.5)),
                                "wrong_node": draw(st.floats(0.0, 0.5))}
    if per_node and draw(st.booleans()):
        cluster["bad_nodes"] = {"fraction": draw(st.floats(0.0, 1.0)),
                                "multiplier": draw(st.floats(0.0, 5.0))}
        if draw(st.booleans()):
            cluster["bad_nodes"]["regeneration"] = {"every": draw(st.floats(600.0, mtbf)),
                                                    "share": draw(st.floats(0.05, 1.0))}
    conv = draw(st.sampled_from(["testbed", "airesim", "mixed"]))
    if conv == "mixed":
        cluster["conventions"] = {
            "host_selection": draw(st.sampled_from(["empty_slots", "whole_job"])),
            "preemption": draw(st.sampled_from(["to_refill_standbys", "when_job_short"])),
            "initial_selection": draw(st.sampled_from(["free", "counted"])),
            "depletion": draw(st.sampled_from(["no_repair_pending",
                                               "below_job_and_standbys"])),
            "stalls": draw(st.sampled_from(["episodes", "wake_ups"]))}
    elif conv == "airesim":
        cluster["conventions"] = "airesim"
    policy = draw(st.sampled_from(["random", "fewest_failures", "highest_score"]))
    if policy == "highest_score" or draw(st.booleans()):
        ret: dict = {}
        if draw(st.booleans()):
            ret["window"] = {"failures": draw(st.integers(1, 3)),
                             "within": draw(st.floats(600.0, 10 * mtbf))}
        if policy == "highest_score" or not ret or draw(st.booleans()):
            ret["score"] = {"initial": 100.0, "penalty": draw(st.floats(0.0, 80.0)),
                            "increment": draw(st.floats(0.0, 20.0)),
                            "period": draw(st.floats(600.0, mtbf)),
                            "threshold": draw(st.sampled_from([None, 0.0, 50.0]))}
        ret["combine"] = draw(st.sampled_from(["any", "all"]))
        cluster["retirement"] = ret
    cluster["host_selection"] = policy


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(small_scenarios())
def test_fast_path_equals_simpy_engine(case):
    doc, seed = case
    try:
        spec = resolve(scenario_from_dict(doc))
    except RunawayRefused as exc:     # the resolver refuses a job that cannot finish
        assume("cannot finish in reasonable time" not in str(exc))
        raise
    for rep in range(2):
        assert_same(spec, seed, rep)


def test_equal_on_published_daly_case():
    from testbed.scenario.schema import load_scenario
    spec = resolve(load_scenario("scenarios/daly-6h.yaml"))
    for rep in range(5):
        assert_same(spec, 1, rep)


@st.composite
def lean_scenarios(draw):
    """The cluster :meth:`ClusterOps.fail_over` fuses (identical exponential nodes that
    fail only while the job runs, one-stage repairs into a small random idle pool, no
    standbys): per-cause detection, requeue and repair (zero: back at once), job-induced
    causes, a fixed or drawn host-selection cost, work lost or not; a pool of 0–2 nodes
    often cannot fill the job, where the steps go on in :meth:`ClusterOps.recover`. A
    third of the cases fail while restarting too (exposure ``in_use``): there the fast
    path takes :meth:`ClusterOps.strike` and :meth:`ClusterOps.recover` (its inlined
    replacement from the pool) and failures cut holds short."""
    nodes = draw(st.integers(1, 8))
    work_s = draw(st.floats(600.0, 10 * 3600.0))
    mtbf = draw(st.floats(work_s / 2, 3 * work_s))
    cluster: dict = {"nodes": nodes, "spares": draw(st.integers(0, 2)),
                     "repair": draw(st.floats(60.0, mtbf))}
    if draw(st.booleans()):
        mean = draw(st.floats(1.0, 1800.0))
        cluster["costs"] = {"host_selection": draw(st.sampled_from(
            [mean, {"distribution": "exponential", "mean": mean}]))}
    fail: dict = {"distribution": "exponential", "node_mtbf": mtbf * nodes,
                  "exposure": draw(st.sampled_from(["running", "running", "in_use"])),
                  "detect": draw(st.sampled_from([0.0, 45.0])),
                  "restart": draw(st.floats(0.0, 300.0)),
                  "start": draw(st.sampled_from(["stationary", "fresh"])),
                  "lose_work": draw(st.booleans())}
    if draw(st.booleans()):
        fail["causes"] = [
            {"name": f"c{i}", "weight": draw(st.floats(0.1, 5.0)),
             "detect": draw(st.sampled_from([0.0, draw(st.floats(0.0, 200.0))])),
             "restart": draw(st.sampled_from([0.0, draw(st.floats(0.0, 600.0))])),
             "repair": draw(st.sampled_from([0.0, draw(st.floats(0.0, mtbf))])),
             **({"job_induced": True} if draw(st.integers(0, 2)) == 0 else {})}
            for i in range(3)]
    doc = {"name": "lean", "workload": {"compute_time": work_s}, "cluster": cluster,
           "failures": fail, "checkpoint": {"policy": "none",
                                            "restart": draw(st.floats(0.0, 900.0))}}
    return doc, draw(st.integers(0, 2**32 - 1))


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(lean_scenarios())
def test_fused_failure_and_restart_equal_simpy_engine(case):
    # the general loop's fused failure-and-restart (ClusterOps.fail_over) against the
    # SimPy engine's ClusterOps.fail and ClusterOps.recovery, step by step
    from testbed.resilience.ops import ClusterOps
    doc, seed = case
    spec = resolve(scenario_from_dict(doc))
    ops = ClusterOps(spec.failures, spec.lifecycle, spec.nodes, seed, 0, spec.limits)
    assert ops._lean_quiet or doc["failures"]["exposure"] == "in_use", doc
    for rep in range(2):
        _same(run_general(spec, seed, rep), run_simpy(spec, seed, rep)[0])


def _cluster_state(ops) -> tuple:
    """Everything the cluster knows node by node (aggregate results cannot tell which
    identical node went where)."""
    clock = ops.jclock
    return (list(ops.slots), list(ops.filled), list(ops.fpos), list(ops.slot_of),
            list(ops.empty), list(ops.idle), dict(ops.ipos), list(ops.state), list(ops.fails),
            list(ops.repairs_done), list(ops.last_fail), list(ops.rheap), dict(ops.counts),
            ops.in_repair, ops.busy, ops.phase, ops.run_start, ops.key,
            (clock.value, clock.t_ref, clock.rate), ops._back, ops._back_seen,
            ops._stalling, ops._in_loop, ops._preempting,
            [len(b.buf) for b in (ops.gaps, ops.u_nodes, ops.u_causes, ops.u_select)],
            list(ops.standby), list(ops.spare), list(ops.rqueue), list(ops.score), ops.G,
            list(ops.gjoin), list(ops.bad), ops.ikey, ops.trace_i, list(ops.followers))


def _restart_by_generator(ops, t: float, detect_s: float, requeue_s: float,
                          load_s: float) -> tuple[int, float]:
    """The SimPy engine's way through a restart: the :meth:`ClusterOps.recovery`
    generator, each hold cut by the next failure, the job set running at the end."""
    from testbed.resilience import ops as cops
    holds = ops.recovery(t, detect_s, requeue_s, load_s)
    try:
        hold = next(holds)
        while True:
            if hold.kind == cops.DEPLETED:
                return cops.EXHAUSTED, t
            f = ops.next_failure_s()
            if f <= hold.until_s:
                return cops.CUT, f
            t = hold.until_s
            hold = holds.send(t)
    except StopIteration:
        ops.set_phase(t, cops.RUNNING)
        return cops.RECOVERED, t


def _same_cluster_failure_after_failure(spec, seed: int, fused: bool) -> None:
    """:meth:`ClusterOps.fail` + :func:`_restart_by_generator` against the fast path's
    :meth:`ClusterOps.fail_over` (``fused``) or :meth:`ClusterOps.strike` +
    :meth:`ClusterOps.recover`, 150 failures: the same cluster, node by node."""
    from testbed.resilience import ops as cops
    from testbed.resilience.ops import ClusterOps, HoldTimes
    load_s = spec.plan.load_of(0)
    causes = spec.failures.causes
    a, b = (ClusterOps(spec.failures, spec.lifecycle, spec.nodes, seed, 1, spec.limits)
            for _ in range(2))
    assert _cluster_state(a) == _cluster_state(b)
    books, t = HoldTimes(), 0.0
    for _ in range(150):
        t = a.next_failure_s()
        assert t == b.next_failure_s()
        if t == math.inf:
            break
        cause = a.fail(t).cause
        detect_s, requeue_s = ((causes[cause].detect_s, causes[cause].restart_s) if causes
                               else (0.0, 0.0))
        res_a, t_a = _restart_by_generator(a, t, detect_s, requeue_s, load_s)
        if fused:
            res_b, t_b = b.fail_over(t, load_s, books)
            assert b.struck_cause == cause
        else:
            assert b.strike(t) == cause
            res_b, t_b = b.recover(t, detect_s, requeue_s, load_s, books)
        assert (res_a, t_a) == (res_b, t_b)
        assert _cluster_state(a) == _cluster_state(b)
        if res_a == cops.EXHAUSTED:
            break


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(lean_scenarios())
def test_fused_failure_and_restart_move_the_same_nodes(case):
    # fail_over (and strike + recover, where failures can cut a restart) against fail
    # and the recovery generator: aggregate results cannot tell identical nodes apart
    from testbed.resilience.ops import ClusterOps
    doc, seed = case
    spec = resolve(scenario_from_dict(doc))
    assert ClusterOps(spec.failures, spec.lifecycle, spec.nodes, seed, 1,
                      spec.limits)._lean_quiet or doc["failures"]["exposure"] == "in_use"
    _same_cluster_failure_after_failure(spec, seed, fused=True)
    _same_cluster_failure_after_failure(spec, seed, fused=False)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(small_scenarios())
def test_strike_and_recover_move_the_same_nodes(case):
    # the general loop's strike and recover (inlined failure, replacement and phases)
    # against fail and the recovery generator, on every feature but maintenance windows
    doc, seed = case
    assume("maintenance" not in doc["failures"])
    try:
        spec = resolve(scenario_from_dict(doc))
    except RunawayRefused as exc:
        assume("cannot finish in reasonable time" not in str(exc))
        raise
    _same_cluster_failure_after_failure(spec, seed, fused=False)
