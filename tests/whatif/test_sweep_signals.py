"""Process hygiene of ``testbed sweep``: no worker outlives its sweep (SIGKILL of the
driver alone, SIGTERM, Ctrl-C), interruption exits 130 and says how to resume, the
resumed sweep gives exactly the rows of an uninterrupted one, and two sweeps on one
store never compute the same point."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.whatif.conftest import INTERVALS, REPO, env, outcomes, points_done, run_testbed

MTBFS_SMALL = "2h,4h,6h"
POINTS = 20 * 3


def _args(scenario: Path, db: Path, reps: int = 60) -> list[str]:
    return ["sweep", str(scenario), "--grid", f"checkpoint.interval={INTERVALS}",
            "--grid", f"failures.mtbf={MTBFS_SMALL}", "-r", str(reps), "--workers", "2",
            "--store", str(db), "-q"]




def _children(pid: int) -> set[int]:
    """Processes whose parent is ``pid`` (from /proc)."""
    out = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            if ppid == pid:
                out.add(int(entry.name))
    return out


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _start(scenario: Path, db: Path, reps: int = 60) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "testbed", *_args(scenario, db, reps)],
                            cwd=REPO, env=env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)


def _wait_for_points(proc: subprocess.Popen, db: Path, n: int) -> set[int]:
    deadline = time.monotonic() + 120
    while points_done(db) < n:
        assert proc.poll() is None, proc.stderr.read()
        assert time.monotonic() < deadline, "the sweep made no progress"
        time.sleep(0.01)
    workers = _children(proc.pid)
    assert len(workers) >= 2, workers   # the pool's two workers (and its manager)
    return workers


def _gone(pids: set[int], within_s: float = 10.0) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if not any(_alive(p) for p in pids):
            return True
        time.sleep(0.05)
    return False


@pytest.mark.timeout(300)
def test_sigkill_of_the_driver_alone_kills_its_workers(tmp_path, sweep_scenario):
    db = tmp_path / "k.db"
    proc = _start(sweep_scenario, db)
    workers = _wait_for_points(proc, db, 3)
    os.kill(proc.pid, signal.SIGKILL)          # the driver only, not its process group
    proc.wait(timeout=30)
    assert _gone(workers), f"workers still alive: {[p for p in workers if _alive(p)]}"


@pytest.mark.timeout(300)
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_sigterm_and_ctrl_c_exit_130_and_the_rerun_resumes_exactly(tmp_path, sweep_scenario,
                                                                    sig):
    db = tmp_path / "t.db"
    proc = _start(sweep_scenario, db)
    workers = _wait_for_points(proc, db, 5)
    os.kill(proc.pid, sig)
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "interrupted" in err and "point(s) are stored in" in err and "resume" in err, err
    assert "Traceback" not in err
    assert _gone(workers)
    stored = points_done(db)
    assert 5 <= stored < POINTS
    rerun = run_testbed(*_args(sweep_scenario, db), timeout=240)
    assert rerun.returncode == 0, rerun.stderr
    clean = tmp_path / "clean.db"
    assert run_testbed(*_args(sweep_scenario, clean), timeout=240).returncode == 0
    assert outcomes(db) == outcomes(clean)


@pytest.mark.timeout(300)
def test_two_sweeps_on_one_store_never_compute_the_same_point(tmp_path, sweep_scenario):
    # 3,000 replications a point keep the first sweep busy for ~10 s (the second one's
    # start-up takes ~2 s), so the second always finds points in flight elsewhere
    db = tmp_path / "shared.db"
    first = _start(sweep_scenario, db, reps=3000)
    _wait_for_points(first, db, 2)
    second = run_testbed(*_args(sweep_scenario, db, reps=3000), "--json", timeout=240)
    assert second.returncode == 0, second.stderr
    report = json.loads(second.stdout)
    out, err = first.communicate(timeout=240)
    assert first.returncode == 0, err
    assert report["ran"] + report["skipped"] + report["in_flight_elsewhere"] == POINTS
    assert report["in_flight_elsewhere"] > 0
    con = sqlite3.connect(db)
    per_point = con.execute("SELECT COUNT(*) FROM points").fetchone()[0]
    rows, distinct = con.execute("SELECT COUNT(*), COUNT(DISTINCT point_key || ':' || "
                                 "replication) FROM results").fetchone()
    con.close()
    assert rows == distinct and per_point <= POINTS
    final = run_testbed(*_args(sweep_scenario, db, reps=3000), "--json", timeout=240)
    assert json.loads(final.stdout)["ran"] + per_point == POINTS
