"""A 200-point sweep with 100 replications each survives two SIGKILLs.

The sweep runs on 2 local workers; at two seeded random moments (after a seeded
random number of points has landed, plus a seeded random delay) the whole process
group is killed with SIGKILL. The rerun finishes the sweep; the store then holds
exactly 200 × 100 rows, each (point, replication) once, identical — value for value,
and so in every aggregate — to an uninterrupted run.
"""

from __future__ import annotations

import os
import random
import signal
import sqlite3
import subprocess
import sys
import time

import pytest

from tests.whatif.conftest import INTERVALS, MTBFS, REPO, env, outcomes, points_done, run_testbed

POINTS, REPS = 200, 100


def _args(scenario, db):
    return ["sweep", str(scenario), "--grid", f"checkpoint.interval={INTERVALS}",
            "--grid", f"failures.mtbf={MTBFS}", "-r", str(REPS), "--workers", "2",
            "--store", str(db)]




def _run_and_kill(scenario, db, threshold: int, delay_s: float) -> int:
    """Start the sweep, SIGKILL its process group once ``threshold`` points are in."""
    proc = subprocess.Popen([sys.executable, "-m", "testbed", *_args(scenario, db), "-q"],
                            cwd=REPO, env=env(), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 120
    try:
        while points_done(db) < threshold:
            if proc.poll() is not None:
                pytest.fail(f"the sweep ended before the kill (exit {proc.returncode})")
            if time.monotonic() > deadline:
                pytest.fail("the sweep made no progress")
            time.sleep(0.005)
        time.sleep(delay_s)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    return points_done(db)


@pytest.mark.timeout(300)
def test_sweep_survives_two_sigkills(tmp_path, sweep_scenario):
    rng = random.Random(20261201)
    db = tmp_path / "killed.db"
    first = _run_and_kill(sweep_scenario, db, rng.randint(10, 70), rng.uniform(0, 0.05))
    assert 0 < first < POINTS, "the first kill must land mid-sweep"
    second = _run_and_kill(sweep_scenario, db, rng.randint(first + 10, 150),
                           rng.uniform(0, 0.05))
    assert first <= second < POINTS, "the second kill must land mid-sweep"

    e = env()
    e["TESTBED_PROGRESS"] = "1"
    rerun = run_testbed(*_args(sweep_scenario, db), env=e, timeout=240)
    assert rerun.returncode == 0, rerun.stderr
    assert f"{second} already done" in rerun.stdout
    assert f"{POINTS}/{POINTS}" in rerun.stderr, "no progress bar on stderr"

    con = sqlite3.connect(db)
    rows, distinct = con.execute(
        "SELECT COUNT(*), COUNT(DISTINCT point_key || ':' || replication) FROM results"
    ).fetchone()
    per_point = {n for (n,) in con.execute(
        "SELECT COUNT(*) FROM results GROUP BY point_key")}
    points = con.execute("SELECT COUNT(*) FROM points").fetchone()[0]
    con.close()
    assert rows == distinct == POINTS * REPS
    assert per_point == {REPS} and points == POINTS

    clean_db = tmp_path / "clean.db"
    clean = run_testbed(*_args(sweep_scenario, clean_db), "-q", timeout=240)
    assert clean.returncode == 0, clean.stderr
    killed, uninterrupted = outcomes(db), outcomes(clean_db)
    assert len(uninterrupted) == POINTS * REPS
    assert killed == uninterrupted

    import json
    agg_killed = json.loads(run_testbed(*_args(sweep_scenario, db), "--json").stdout)["results"]
    agg_clean = json.loads(run_testbed(*_args(sweep_scenario, clean_db), "--json").stdout)["results"]
    assert agg_killed == agg_clean
