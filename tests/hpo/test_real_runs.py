"""Real HPO sweeps: PyTorch CNNs on the digits, a real SIGKILL, replay, MPI, resume.

``scenarios/hpo-digits-real.yaml``: 12 trials (3 optimizers × 2 learning rates ×
3 or 5 epochs), checkpoints every epoch, trial 5's process killed after epoch 3.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time

import pytest

from tests.conftest import REPO, each

SCEN = str(REPO / "scenarios" / "hpo-digits-real.yaml")
pytestmark = pytest.mark.frameworks


def _env() -> dict:
    e = dict(os.environ)
    e.update({"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
              "OMPI_MCA_rmaps_base_oversubscribe": "1", "PYTHONHASHSEED": "0",
              "PYTHONPATH": str(REPO)})
    return e


def _run(*args, timeout=180):
    return subprocess.run([sys.executable, "-m", "testbed", "hpo", *args], capture_output=True,
                          text=True, cwd=REPO, env=_env(), timeout=timeout)


def _in_process(capsys, *args):
    from testbed.app.cli.main import main
    capsys.readouterr()
    main(["hpo", *args])
    return json.loads(capsys.readouterr().out)


def _events(trace):
    return [json.loads(line) for line in open(trace)]


def _check_sweep(trace, out):
    assert out["trials_completed"] == 12 and out["trials_failed"] == 0
    assert out["retries"] == 1
    ev = _events(trace)
    failed = [e for e in ev if e["event"] == "trial_failed"]
    assert len(failed) == 1 and failed[0]["trial"] == 5 and failed[0]["cause"] == "injected"
    assert failed[0]["epoch"] == 3 and failed[0]["resume_epoch"] == 2   # killed before ckpt 3
    t5 = [e for e in ev if e["event"] == "trial_start" and e["trial"] == 5]
    assert [(e["attempt"], e["from_epoch"], e["kind"]) for e in t5] == [(0, 0, "new"),
                                                                        (1, 2, "retry")]
    assert t5[0]["slots"] == t5[1]["slots"]                 # retried on the same worker
    ends = {e["trial"]: e for e in ev if e["event"] == "trial_end"}
    assert failed[0]["pid"] != ends[5]["pid"]             # a new process after the kill
    # the injected kill is a real SIGKILL: the trial's epoch 3 ran twice, once per process
    assert sum(1 for e in ev if e["event"] == "trial_result" and e["trial"] == 5
               and e["epoch"] == 3) == 2
    return ev


@pytest.mark.timeout(300)
def test_local_sweep_with_a_worker_kill_replays_within_ten_percent(tmp_path, capsys):
    trace, db = tmp_path / "trace.jsonl", tmp_path / "hpo.db"
    r = _run("run", SCEN, "--workers", "2", "--store", str(db), "--trace", str(trace),
             "--json")
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout)
    assert out["workers"] == 2 and out["executor"] == "local" and not out["resumed"]
    _check_sweep(trace, out)
    rep = _in_process(capsys, "replay", str(trace), "--json")
    assert rep["measured_makespan_s"] == pytest.approx(out["makespan_s"])
    assert abs(rep["makespan_error"]) < 0.10, rep["makespan_error"]
    assert rep["trials_completed"] == 12 and rep["retries"] == 1
    # the same command again: everything is finished, nothing runs (no pool is started)
    again = _in_process(capsys, "run", SCEN, "--workers", "2", "--store", str(db), "--json")
    assert again["ran"] == 0 and again["skipped"] == 12 and again["resumed"]
    assert again["makespan_s"] == out["makespan_s"]


@pytest.mark.mpi
@pytest.mark.timeout(300)
def test_same_sweep_under_mpiexec(tmp_path):
    mpiexec = shutil.which("mpiexec") or shutil.which("mpirun")
    if mpiexec is None:
        pytest.fail("mpiexec not found: install openmpi-bin (make setup does)")
    trace, db = tmp_path / "trace.jsonl", tmp_path / "hpo.db"
    proc = subprocess.run(
        [mpiexec, "-n", "3", "--oversubscribe", sys.executable, "-m", "mpi4py.futures",
         "-m", "testbed", "hpo", "run", SCEN, "--executor", "mpi", "--store", str(db),
         "--trace", str(trace), "--json"],
        cwd=REPO, env=_env(), capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout)
    assert out["executor"] == "mpi" and out["workers"] == 2
    _check_sweep(trace, out)


def _count(db, sql):
    try:
        con = sqlite3.connect(db, timeout=5)
        try:
            return con.execute(sql).fetchall()
        finally:
            con.close()
    except sqlite3.OperationalError:
        return []


@pytest.mark.timeout(300)
def test_killing_the_driver_and_rerunning_resumes(tmp_path):
    db = tmp_path / "hpo.db"
    args = [sys.executable, "-m", "testbed", "hpo", "run", SCEN, "--workers", "2",
            "--store", str(db), "--json"]
    proc = subprocess.Popen(args, cwd=REPO, env=_env(), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    ends = []
    while time.time() < deadline and proc.poll() is None:
        ends = _count(db, "SELECT json_extract(fields, '$.trial') FROM hpo_events "
                          "WHERE event = 'trial_end'")
        if len(ends) >= 3:
            break
        time.sleep(0.02)
    assert proc.poll() is None, "the sweep ended before it could be killed"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    finished = {t for (t,) in _count(db, "SELECT json_extract(fields, '$.trial') FROM "
                                         "hpo_events WHERE event = 'trial_end'")}
    starts_before = dict(_count(db, "SELECT json_extract(fields, '$.trial'), count(*) FROM "
                                    "hpo_events WHERE event = 'trial_start' GROUP BY 1"))
    assert len(finished) >= 3 and len(finished) < 12
    r = _run("run", SCEN, "--workers", "2", "--store", str(db), "--json")
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout)
    assert out["resumed"] and out["trials_completed"] == 12 and out["skipped"] >= len(finished)
    starts_after = dict(_count(db, "SELECT json_extract(fields, '$.trial'), count(*) FROM "
                                   "hpo_events WHERE event = 'trial_start' GROUP BY 1"))
    for t in each(finished):                       # finished trials were not run again
        assert starts_after[t] == starts_before[t]
    lost = _count(db, "SELECT json_extract(fields, '$.trial') FROM hpo_events WHERE "
                      "json_extract(fields, '$.cause') = 'driver_lost'")
    running = {t for t, n in starts_before.items() if t not in finished}
    assert {t for (t,) in lost} == running    # the running ones were retried
    assert sorted(starts_after) == list(range(12))


def test_resuming_from_a_checkpoint_is_bitwise_identical(tmp_path):
    from real_runs.hpo.worker import run_attempt
    task = {"config": {"optimizer": "sgd", "lr": 0.05, "batch_size": 32}, "seed": 3,
            "from_epoch": 0, "to_epoch": 3, "max_epochs": 3, "every": 1,
            "ckpt_dir": str(tmp_path / "a")}
    straight = run_attempt(task)
    killed = run_attempt({**task, "ckpt_dir": str(tmp_path / "b"), "kill_at_epoch": 2})
    resumed = run_attempt({**task, "ckpt_dir": str(tmp_path / "b"), "from_epoch": 1})
    assert straight["status"] == "completed" and killed["status"] == "killed"
    assert [e["epoch"] for e in killed["epochs"]] == [1, 2]
    assert [e["value"] for e in straight["epochs"]][1:] == [e["value"] for e in resumed["epochs"]]
    assert killed["pid"] != resumed["pid"]
