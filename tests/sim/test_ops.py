"""Cluster operations and failure semantics against closed forms (tolerances that fail).

* one node with repairs and no spare, against its exact expectation
  (testbed/resilience/closed_forms.py);
* a stationary Weibull (and lognormal) start gives the renewal rate N/μ from t = 0,
  where a fresh start does not;
* a maintenance window costs exactly its checkpoint and its duration;
* AIReSim's exposure (failures only while computing, no work lost) gives
  ETTR = 1/(1 + R/M) in expectation;
* few spares and a one-day repair no longer snowball.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from simulators.engine import run_simpy
from simulators.fast import run_fast
from simulators.run import replicate, simulate
from testbed.app.resolve import resolve
from testbed.scenario.schema import scenario_from_dict


def _spec(doc: dict):
    return resolve(scenario_from_dict(doc))


def _within_ci(values, expected: float, z: float = 4.0) -> bool:
    x = np.asarray(values, dtype=float)
    return abs(x.mean() - expected) <= z * x.std(ddof=1) / math.sqrt(x.size)


ONE_NODE = {"workload": {"compute_time": "200h"},
            "cluster": {"nodes": 1, "spares": 0, "repair": "2h"},
            "failures": {"node_mtbf": "10h", "detect": "5min", "restart": "5min"},
            "checkpoint": {"policy": "fixed", "interval": "1h", "cost": 60, "restart": 120}}


def test_one_node_with_repairs_and_no_spare_matches_its_closed_form():
    spec = _spec(ONE_NODE)
    exact = spec.analytical_wall_s
    assert exact is not None
    # by hand: E[A] = (max(d, R_p) + (1 − e^{−R₂/M})·M)/e^{−R₂/M}, R₂ = requeue + load
    m, r2 = 36000.0, 300.0 + 120.0
    down = (7200.0 + (1 - math.exp(-r2 / m)) * m) / math.exp(-r2 / m)
    assert exact == pytest.approx(200 * math.expm1(3660.0 / m) * (m + down), rel=1e-12)
    walls = [r.wall_s for r in replicate(spec, 3000, 5)]
    assert _within_ci(walls, exact)
    assert np.mean(walls) == pytest.approx(exact, rel=0.01)
    # the wait for the node's own repair shows as waiting time
    assert all(r.waiting_s > 0 for r in replicate(spec, 5, 5) if r.failures)


def _count_spec(dist: dict, start: str):
    """64 nodes of MTBF 100 h, 10 h of work, restarts free: wall = work, and the
    failures counted are the superposed renewal processes' in [0, 10 h]."""
    return _spec({"workload": {"compute_time": "10h"}, "cluster": {"nodes": 64},
                  "failures": {"node_mtbf": "100h", "start": start, "lose_work": False,
                               **dist},
                  "checkpoint": {"policy": "none", "restart": 0}})


@pytest.mark.parametrize("dist", [{"distribution": "weibull", "shape": 0.7},
                                  {"distribution": "weibull", "shape": 1.5},
                                  {"distribution": "lognormal", "sigma": 1.0}])
def test_stationary_start_gives_the_renewal_rate_from_t0(dist):
    expected = 64 * 10 / 100      # N·T/μ
    stationary = [r.failures for r in replicate(_count_spec(dist, "stationary"), 2000, 3)]
    assert _within_ci(stationary, expected)
    assert np.mean(stationary) == pytest.approx(expected, rel=0.03)
    fresh = [r.failures for r in replicate(_count_spec(dist, "fresh"), 2000, 3)]
    # a fresh start is far from the stationary rate: more failures early for k < 1 (a
    # decreasing hazard), fewer for k > 1 and the lognormal (no failures at age 0)
    assert abs(np.mean(fresh) - expected) > 0.15 * expected


def test_a_maintenance_window_costs_only_its_checkpoint_and_duration():
    doc = {"workload": {"compute_time": "100h"}, "cluster": {"nodes": 4},
           "failures": {"mtbf": 3e10, "maintenance": {"every": "24h", "duration": "2h",
                                                      "first": "10h"}},
           "checkpoint": {"policy": "fixed", "interval": "7h", "cost": 60, "restart": 300}}
    spec = _spec(doc)
    ff = spec.plan.failure_free_s()
    stop = spec.plan.stop_ckpt_s
    assert stop == 60.0
    # windows at 10 h, 34 h, 58 h, 82 h, 106 h fall before the (stretched) end
    t, k = ff, 0
    while 10 * 3600 + k * 86400 < t:
        t += stop + 7200
        k += 1
    for engine in ("fast", "simpy"):
        (r,) = replicate(spec, 1, 0, engine)
        assert r.failures == 0 and r.ops.planned_stops == k == 5
        assert r.wall_s == pytest.approx(ff + k * (stop + 7200.0), rel=1e-12)
        assert r.lost_s == pytest.approx(0.0, abs=1e-6)
        assert r.waiting_s == pytest.approx(k * 7200.0, rel=1e-12)
        assert r.checkpoint_s == pytest.approx(spec.plan.failure_free_s() - 100 * 3600
                                               + k * stop, rel=1e-12)


def test_a_segment_longer_than_the_gap_between_windows_finishes():
    # 30 h without a failure-free stretch of 30 h: planned stops commit the progress
    doc = {"workload": {"compute_time": "30h"},
           "failures": {"mtbf": 3e10, "maintenance": {"every": "10h", "duration": "1h"}},
           "checkpoint": {"policy": "fixed", "interval": "30h", "cost": 60, "restart": 60}}
    (r,) = replicate(_spec(doc), 1, 0)
    assert r.ops.planned_stops == 3 and r.lost_s == pytest.approx(0.0, abs=1e-6)


def test_airesim_exposure_reproduces_one_over_one_plus_r_over_m():
    # failures only while computing, no work lost: E[wall] = W (1 + R/M) exactly
    doc = {"workload": {"compute_time": "30d"}, "cluster": {"nodes": 512},
           "failures": {"node_mtbf": "500d", "restart": "20min", "exposure": "running",
                        "lose_work": False},
           "checkpoint": {"policy": "none", "restart": 0}}
    spec = _spec(doc)
    m = 500 * 86400 / 512
    expected = 1 / (1 + 1200 / m)
    assert spec.analytical_wall_s == pytest.approx(30 * 86400 * (1 + 1200 / m), rel=1e-12)
    s = simulate(spec, 300, 8)
    assert s.analytical.ettr == pytest.approx(expected, rel=1e-12)
    assert s.stats.ettr.ci95_low <= expected <= s.stats.ettr.ci95_high
    assert s.stats.ettr.mean == pytest.approx(expected, rel=0.002)
    assert s.stats.breakdown_s.lost_s == pytest.approx(0.0, abs=1e-6)


def _erlang_b(servers: int, load: float) -> float:
    """Erlang's loss probability B(c, a) by its recursion."""
    b = 1.0
    for c in range(1, servers + 1):
        b = load * b / (c + load * b)
    return b


@pytest.mark.parametrize("spares, repair", [(1, "12h"), (3, "30h")])
def test_stalls_for_repairs_match_the_erlang_loss_formula(spares, repair):
    # failures only while running (N·λ), each node away R_p, the job runs iff at most
    # `spares` nodes are away: an Erlang loss system with spares + 1 servers, insensitive
    # to the repair distribution, running a fraction 1 − B(spares + 1, N·λ·R_p)
    doc = {"workload": {"compute_time": "3000h"},
           "cluster": {"nodes": 16, "spares": spares, "repair": repair},
           "failures": {"node_mtbf": "100h", "exposure": "running", "lose_work": False},
           "checkpoint": {"policy": "none", "restart": 0}}
    spec = _spec(doc)
    load = 16 / 100 * float(repair.removesuffix("h"))
    s = simulate(spec, 60, 9)
    assert s.stats.ettr.mean == pytest.approx(1 - _erlang_b(spares + 1, load), rel=0.02)


def test_few_spares_and_long_repairs_no_longer_snowball():
    # Llama-3-like: 2,048 nodes, 54 d, node MTBF 6,334.5 h, 2 spares, 1-day repair. With
    # the nodes of a waiting job failing at the full rate the deficit snowballed
    # (ETTR ≈ 1.5%, issue 14); now a waiting node's clock stops (idle_rate_factor 0)
    doc = {"workload": {"compute_time": "54d"},
           "cluster": {"nodes": 2048, "spares": 2, "repair": "24h"},
           "failures": {"node_mtbf": "6334.5h", "detect": "1min"},
           "checkpoint": {"policy": "daly", "cost": 30, "restart": "10min"}}
    s = simulate(_spec(doc), 20, 1)
    assert 0.15 < s.stats.ettr.mean < 0.6
    snow = simulate(_spec({**doc, "failures": {**doc["failures"], "idle_rate_factor": 1.0}}),
                    4, 1)
    assert snow.stats.ettr.mean < 0.08


def test_depletion_ends_the_run_with_a_flag():
    # every repaired node retires: the cluster runs out and the job cannot finish
    doc = {"workload": {"compute_time": "200h"},
           "cluster": {"nodes": 4, "spares": 2, "repair": "1h",
                       "retirement": {"window": {"failures": 1, "within": "1000d"}}},
           "failures": {"node_mtbf": "50h"},
           "checkpoint": {"policy": "fixed", "interval": "1h", "cost": 10, "restart": 10}}
    spec = _spec(doc)
    for rep in range(3):
        fast, (slow, _) = run_fast(spec, 2, rep), run_simpy(spec, 2, rep)
        assert fast.ops.depleted and slow.ops.depleted
        assert fast.ops.retirements == slow.ops.retirements == 3
        assert fast.useful_s < spec.plan.work_s and fast.wall_s == pytest.approx(slow.wall_s)
    s = simulate(spec, 5, 2)
    assert s.stats.depleted_runs == 5


def test_bad_nodes_fail_more_until_repaired():
    base = {"workload": {"compute_time": "20d"},
            "cluster": {"nodes": 64, "spares": 8, "repair": "2h"},
            "failures": {"node_mtbf": "100d"},
            "checkpoint": {"policy": "fixed", "interval": "1h", "cost": 10, "restart": 10}}
    plain = simulate(_spec(base), 200, 4).stats.failures.mean
    bad = {**base, "cluster": {**base["cluster"], "bad_nodes": {"fraction": 0.25,
                                                                "multiplier": 9}}}
    s = simulate(_spec(bad), 200, 4)
    # bad nodes fail at 10x until their first repair cures them: more failures, and
    # (nearly) every bad node that failed was cured by its (perfect) repair
    assert s.stats.failures.mean > plain * 1.2
    assert s.stats.ops["bad_nodes_cured"] > 0.8 * s.stats.ops["failures_systematic"]


def test_job_induced_causes_do_not_strike_a_restarting_job():
    doc = {"workload": {"compute_time": "5d"}, "cluster": {"nodes": 8},
           "failures": {"mtbf": "2h", "detect": "30min", "restart": "30min",
                        "causes": [{"name": "bug", "weight": 1, "job_induced": True},
                                   {"name": "gpu", "weight": 1}]},
           "checkpoint": {"policy": "fixed", "interval": "1h", "cost": 10, "restart": 10}}
    log: list[dict] = []
    run_simpy(_spec(doc), 3, 0, log)
    phase = "running"
    for rec in log:
        if rec["event"] == "restart_begin":
            phase = "restarting"
        elif rec["event"] == "restart_end":
            phase = "running"
        elif rec["event"] == "failure" and rec["cause"] == "bug":
            assert phase == "running"
