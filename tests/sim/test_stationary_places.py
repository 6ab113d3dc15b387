"""Stationary places: the job sees N·T/μ with any pool, and idle nodes fail at the idle rate.

Renewal clocks belong to places (the job's slots, the pool's places), nodes move
between them (``testbed/resilience/ops.py``). With 32 warm standbys and 32 idle nodes
and Weibull (k 0.7) or lognormal (σ 1.5) nodes the job used to see 0.92 and 0.87 of
N·T/μ (a pool node's residual frozen at t = 0 entered the job; a repaired node's fresh
clock waited in the pool), and repaired Weibull nodes failed far more while idle than
``idle_rate_factor`` says. Both are exact expectations now:

* no work lost and failures only while the job runs, so each slot's clock runs for
  exactly the job's work W: E[failures] = N·W/μ (a stationary renewal process over a
  fixed horizon);
* a pool whose nodes come back at once (repair 0 s) holds its places occupied all the
  time: E[idle failures] = places · f · wall/μ.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from simulators.run import replicate
from testbed.app.resolve import resolve
from testbed.scenario.schema import scenario_from_dict

DISTS = [{"distribution": "weibull", "shape": 0.7}, {"distribution": "lognormal", "sigma": 1.5}]


def _mean_within(values, expected: float, rel: float) -> None:
    x = np.asarray(values, dtype=float)
    half = 4.0 * x.std(ddof=1) / math.sqrt(x.size)
    assert abs(x.mean() - expected) <= max(half, 1e-12), (x.mean(), expected, half)
    assert x.mean() == pytest.approx(expected, rel=rel)


@pytest.mark.parametrize("dist", DISTS, ids=["weibull-0.7", "lognormal-1.5"])
def test_the_job_sees_n_t_over_mu_with_standbys_and_an_idle_pool(dist):
    # 64 nodes, node MTBF 100 h, 400 h of work: each slot fails about 4 times, every
    # replacement comes from the pool (32 standbys, 32 idle, 6 h repairs)
    spec = resolve(scenario_from_dict({
        "workload": {"compute_time": "400h"},
        "cluster": {"nodes": 64, "standbys": 32, "spares": 32, "repair": "6h"},
        "failures": {"node_mtbf": "100h", "exposure": "running", "lose_work": False,
                     **dist},
        "checkpoint": {"policy": "none", "restart": 0}}))
    results = replicate(spec, 300, 7)
    assert all(r.ops.stalls == 0 and r.ops.swaps > 0 for r in results)
    _mean_within([r.failures for r in results], 64 * 400 / 100, rel=0.02)


@pytest.mark.parametrize("conventions", ["testbed", "airesim"])
def test_the_job_sees_n_t_over_mu_under_either_convention(conventions):
    # whole-job host selection moves nodes that did not fail: the slots keep their clocks
    spec = resolve(scenario_from_dict({
        "workload": {"compute_time": "400h"},
        "cluster": {"nodes": 32, "standbys": 2, "spares": 6, "spare_pool": 4, "repair": "30h",
                    "conventions": conventions},
        "failures": {"node_mtbf": "100h", "exposure": "running", "lose_work": False,
                     "distribution": "weibull", "shape": 0.7},
        "checkpoint": {"policy": "none", "restart": 0}}))
    results = replicate(spec, 400, 11)
    assert sum(r.ops.host_selections for r in results) > 400
    _mean_within([r.failures for r in results], 32 * 400 / 100, rel=0.03)


@pytest.mark.parametrize("dist", DISTS[:1] + [{"distribution": "lognormal", "sigma": 1.0}],
                         ids=["weibull-0.7", "lognormal-1.0"])
def test_idle_nodes_fail_at_the_idle_rate(dist):
    # 4 nodes run the job (rarely failing), 64 wait (32 standbys, 32 idle) failing at
    # half the rate; a failed idle node is back at once, so the 64 places stay occupied
    spec = resolve(scenario_from_dict({
        "workload": {"compute_time": "1000h"},
        "cluster": {"nodes": 4, "standbys": 32, "spares": 32, "repair": "0s"},
        "failures": {"node_mtbf": "1000h", "idle_rate_factor": 0.5, "lose_work": False,
                     **dist},
        "checkpoint": {"policy": "none", "restart": 0}}))
    results = replicate(spec, 400, 5)
    assert all(r.wall_s == pytest.approx(1000 * 3600) for r in results)
    _mean_within([r.ops.failures_idle for r in results], 64 * 0.5 * 1000 / 1000, rel=0.03)


def _idle_node_s(log: list[dict], first_idle: range, wall_s: float) -> tuple[float, int]:
    """(node-seconds spent in the pool, idle failures) from a SimPy event log."""
    since = {n: 0.0 for n in first_idle}
    idle_s, failures = 0.0, 0
    for e in log:
        kind, t = e["event"], e["t_s"]
        if kind == "node_up" and e.get("to") in ("idle", "standby"):
            since[e["node"]] = t
        elif kind in ("host_selection", "standby_swap"):
            for n in e["nodes"]:
                idle_s += t - since.pop(n)
        elif kind == "idle_failure":
            idle_s += t - since.pop(e["node"])
            failures += 1
    return idle_s + sum(wall_s - s for s in since.values()), failures


def test_repaired_nodes_cycling_through_the_pool_fail_at_the_idle_rate():
    # 32 Weibull (k 0.7) nodes fail every 3 h or so, come back after 2 h and wait in an
    # 8-node pool until a failure takes them: short stays. A fresh clock per repaired
    # node failed 2.04x as often as idle_rate_factor says; a place's clock does not
    from simulators.engine import run_simpy
    spec = resolve(scenario_from_dict({
        "workload": {"compute_time": "2000h"},
        "cluster": {"nodes": 32, "spares": 8, "repair": "2h"},
        "failures": {"node_mtbf": "100h", "idle_rate_factor": 0.5, "lose_work": False,
                     "distribution": "weibull", "shape": 0.7, "detect": "1min"},
        "checkpoint": {"policy": "none", "restart": 0}}))
    observed = expected = 0.0
    for rep in range(30):
        log: list[dict] = []
        result, _ = run_simpy(spec, 3, rep, log)
        idle_s, failures = _idle_node_s(log, range(32, 40), result.wall_s)
        observed += failures
        expected += 0.5 * idle_s / (100 * 3600)
    assert observed > 1500
    assert observed / expected == pytest.approx(1.0, abs=0.07), observed / expected
