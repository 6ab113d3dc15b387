"""Young/Daly intervals and Daly's expected wall time against the published figures."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from testbed.resilience import intervals as iv

C, R, W = 300.0, 600.0, 500 * 3600.0


@pytest.mark.parametrize("mtbf_s, published_h", [(24 * 3600, 547.9), (6 * 3600, 610.2),
                                                 (15 * 60, 2504.2)])
def test_daly_published_expected_wall_times(mtbf_s, published_h):
    tau = iv.daly_higher_order_interval_s(C, mtbf_s)
    wall_h = iv.daly_expected_wall_time_s(W, tau, C, R, mtbf_s) / 3600
    assert wall_h == pytest.approx(published_h, abs=0.05)


def test_young_costs_about_2_8_percent_more_at_15_min():
    m = 900.0
    best = iv.daly_expected_wall_time_s(W, iv.daly_exact_interval_s(C, m), C, R, m)
    young = iv.daly_expected_wall_time_s(W, iv.young_interval_s(C, m), C, R, m)
    assert young / best - 1 == pytest.approx(0.028, abs=0.001)


def test_daly_higher_order_at_large_cost_is_mtbf():
    assert iv.daly_higher_order_interval_s(1000.0, 400.0) == 400.0


@given(st.floats(1.0, 3600.0), st.floats(60.0, 1e6), st.floats(0.01, 100.0))
def test_exact_optimum_minimises_daly_formula(cost_s, mtbf_s, factor):
    exact = iv.daly_exact_interval_s(cost_s, mtbf_s)
    other = exact * factor
    f = lambda tau: iv.daly_expected_wall_time_s(W, tau, cost_s, R, mtbf_s)  # noqa: E731
    assert f(exact) <= f(other) * (1 + 1e-12)


@given(st.floats(1.0, 600.0), st.floats(3600.0, 1e7))
def test_daly_estimates_approach_young_when_mtbf_dominates(cost_s, mtbf_s):
    young = iv.young_interval_s(cost_s, mtbf_s)
    higher = iv.daly_higher_order_interval_s(cost_s, mtbf_s)
    exact = iv.daly_exact_interval_s(cost_s, mtbf_s)
    # all within a few δ of each other when δ ≪ M
    assert abs(higher - exact) <= 0.05 * exact
    assert abs(young - exact) <= cost_s + 0.2 * young * math.sqrt(cost_s / mtbf_s) + 1e-9


@given(st.floats(1.0, 900.0), st.floats(0.0, 900.0), st.floats(600.0, 1e6),
       st.floats(1.01, 10.0))
def test_expected_wall_time_grows_with_failure_rate(cost_s, restart_s, mtbf_s, factor):
    tau = iv.daly_higher_order_interval_s(cost_s, mtbf_s)
    rare = iv.expected_wall_time_s(W, tau, cost_s, restart_s, mtbf_s)
    often = iv.expected_wall_time_s(W, tau, cost_s, restart_s, mtbf_s / factor)
    assert often >= rare
