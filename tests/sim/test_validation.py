"""Simulated means against Daly's published cases (tolerances that fail) and exactness."""

from __future__ import annotations

import pytest

from simulators.run import replicate, simulate
from testbed.app.resolve import resolve
from testbed.resilience import intervals as iv
from testbed.scenario.schema import load_scenario, scenario_from_dict


@pytest.mark.parametrize("name, reps, published_h", [("daly-24h", 2000, 547.9),
                                                     ("daly-6h", 1000, 610.2),
                                                     ("daly-15min", 60, 2504.2)])
def test_daly_cases_within_one_percent(name, reps, published_h):
    spec = resolve(load_scenario(f"scenarios/{name}.yaml"))
    s = simulate(spec, reps, 1)
    mean_h = s.stats.wall_time_s.mean / 3600
    assert mean_h == pytest.approx(published_h, rel=0.01)
    # and the exact expectation of this job lies inside the 95% confidence interval
    # (or within 0.2% of the mean: the CI of 60 replications at 15 min is narrow)
    exact = spec.analytical_wall_s
    lo, hi = s.stats.wall_time_s.ci95_low, s.stats.wall_time_s.ci95_high
    assert lo <= exact <= hi or exact == pytest.approx(s.stats.wall_time_s.mean, rel=0.002)


def test_young_costs_about_2_8_percent_more_than_optimum_at_15_min():
    doc = load_scenario("scenarios/daly-15min.yaml").model_dump(exclude={"source", "lines"})
    young = dict(doc, checkpoint={**doc["checkpoint"], "policy": "young"})
    exact = dict(doc, checkpoint={**doc["checkpoint"], "daly_order": "exact"})
    y = simulate(resolve(scenario_from_dict(young)), 60, 7).stats.wall_time_s.mean
    e = simulate(resolve(scenario_from_dict(exact)), 60, 7).stats.wall_time_s.mean
    assert y / e - 1 == pytest.approx(0.028, abs=0.006)


@pytest.mark.parametrize("extra", [{}, {"persist": 90.0}, {"persist": 5000.0}])
@pytest.mark.parametrize("engine", ["fast", "simpy"])
def test_no_failures_wall_time_is_work_plus_checkpoints(extra, engine):
    doc = {"workload": {"steps": 1000, "step_time": 7.5},
           "checkpoint": {"policy": "fixed", "every_steps": 130, "cost": 45.0, "restart": 60,
                          **extra}}
    spec = resolve(scenario_from_dict(doc))
    (r,) = replicate(spec, 1, 0, engine)
    n = -(-1000 // 130)
    assert r.checkpoints == n
    persist = extra.get("persist", 0.0)
    stalls = (n - 2) * max(0.0, persist - 130 * 7.5) + max(0.0, persist - (1000 - 7 * 130) * 7.5)
    expected = 1000 * 7.5 + n * 45.0 + persist + (stalls if persist else 0.0)
    if not persist:
        assert r.wall_s == pytest.approx(7500.0 + n * 45.0, rel=1e-12)
        assert r.wall_s == spec.plan.failure_free_s()
    assert r.wall_s == pytest.approx(expected, rel=1e-12)
    assert r.failures == 0 and r.lost_s == pytest.approx(0.0, abs=1e-6)
    assert r.ettr == pytest.approx(7500.0 / expected)


def test_no_failures_fast_path_is_exact():
    spec = resolve(scenario_from_dict({"workload": {"compute_time": "500h"},
                                       "checkpoint": {"policy": "fixed", "interval": "2h",
                                                      "cost": "5min", "restart": "10min"}}))
    (r,) = replicate(spec, 1, 0)
    assert r.wall_s == 500 * 3600 + 250 * 300
    assert r.checkpoint_s == 250 * 300


def test_analytical_equals_daly_formula_for_whole_segments():
    doc = {"workload": {"compute_time": 100 * 3600}, "failures": {"mtbf": "10h"},
           "checkpoint": {"policy": "fixed", "interval": "1h", "cost": 60, "restart": 120}}
    spec = resolve(scenario_from_dict(doc))
    assert spec.analytical_wall_s == pytest.approx(
        iv.daly_expected_wall_time_s(360000, 3600, 60, 120, 36000), rel=1e-12)
