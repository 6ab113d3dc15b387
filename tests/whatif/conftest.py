"""Shared pieces of the what-if tests: a small sweep scenario and a CLI runner."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

#: A cheap scenario for sweep tests: 24 h of work, failures every few hours.
SWEEP_SCENARIO = """\
# A day of work with failures every few hours; the sweep tests vary the interval and MTBF.
name: sweep-test
workload:
  compute_time: 24h
failures:
  distribution: exponential
  mtbf: 6h
checkpoint:
  policy: fixed
  interval: 1h
  cost: 5min
  restart: 10min
simulation:
  replications: 100
  seed: 3
"""

#: 20 intervals x 10 MTBFs = 200 points.
INTERVALS = ",".join(f"{m}min" for m in range(10, 210, 10))
MTBFS = ",".join(f"{h}h" for h in range(2, 12))


def env() -> dict:
    e = dict(os.environ)
    e.update({"SETUPTOOLS_USE_DISTUTILS": "stdlib", "OMPI_ALLOW_RUN_AS_ROOT": "1",
              "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1", "OMPI_MCA_rmaps_base_oversubscribe": "1",
              "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONPATH": str(REPO)})
    return e


def run_testbed(*args: str, timeout: float = 120, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "testbed", *args], capture_output=True,
                          text=True, cwd=REPO, timeout=timeout, env=kw.pop("env", env()), **kw)


def outcomes(db: Path) -> list[tuple]:
    """Every result row without its timing column, in a fixed order."""
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return con.execute(
            "SELECT sp.idx, r.replication, r.seed, r.scenario_hash, r.wall_s, r.useful_s, "
            "r.checkpoint_s, r.lost_s, r.restart_s, r.waiting_s, r.failures, r.checkpoints, "
            "r.ettr FROM results r JOIN sweep_points sp ON sp.point_key = r.point_key "
            "ORDER BY sp.idx, r.replication").fetchall()
    finally:
        con.close()


@pytest.fixture
def sweep_scenario(tmp_path) -> Path:
    path = tmp_path / "sweep-test.yaml"
    path.write_text(SWEEP_SCENARIO)
    return path


def points_done(db) -> int:
    """Points a sweep has stored so far (0 before its tables exist); read-only, so a
    running sweep is not disturbed."""
    if not Path(db).exists():
        return 0
    try:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
        try:
            return con.execute("SELECT COUNT(*) FROM points").fetchone()[0]
        finally:
            con.close()
    except sqlite3.Error:   # tables not created yet
        return 0
