"""Throughput of the sweep machinery: points per second on a 2-worker local pool.

One round runs 40 points × 100 replications of the test scenario through the whole
path (planning and validation, process pool, SQLite transactions) into a fresh
store; ``extra_info`` records points and replications per second for the README.
"""

from __future__ import annotations

import itertools

from testbed.app.results_db import Store
from testbed.app.sweep import plan_sweep, run_sweep
from tests.whatif.conftest import INTERVALS

POINTS, REPS = 40, 100


def test_bench_sweep_points_per_second(benchmark, tmp_path, sweep_scenario):
    plan = plan_sweep(sweep_scenario, [f"checkpoint.interval={INTERVALS}",
                                       "failures.mtbf=3h,6h"], replications=REPS)
    assert len(plan.points) == POINTS
    counter = itertools.count()

    def once():
        with Store(tmp_path / f"bench-{next(counter)}.db") as store:
            return run_sweep(plan, store, executor="local", workers=2)

    stats = benchmark.pedantic(once, rounds=1, iterations=1)
    assert stats.ran == POINTS and stats.rows == POINTS * REPS
    benchmark.extra_info["points_per_s"] = stats.points_per_s
    benchmark.extra_info["replications_per_s"] = stats.rows / stats.elapsed_s
    assert stats.points_per_s > 1.0
