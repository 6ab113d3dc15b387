"""SIGKILL the real HPO driver while two attempts run, rerun it, and get the table of an
uninterrupted sweep — under ``retry``, ``ignore`` and ``fail``, on the local pool and
under ``mpiexec``.

The sweep is ``scenarios/hpo-digits-real.yaml`` (12 PyTorch CNNs on the digits, 2
workers, a checkpoint every epoch) with one injected SIGKILL of a trial's process. A
lost driver is a preemption of the attempts it ran (no retry spent, no failure
counted), their journaled epochs are kept, and the outage is marked and taken out of
the replay; before, ``fail`` could never resume (``KeyError``), ``ignore`` failed the
running trials, ``retry`` spent their retries and their epochs' values were lost.

The table is :func:`testbed.hpo.trace.trial_table` (per trial: configuration, status,
final value and the value after every epoch — bit for bit, training is deterministic
from a checkpoint) plus the summary's counts and best.
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
from pathlib import Path

import pytest

from tests.conftest import REPO

pytestmark = [pytest.mark.frameworks, pytest.mark.measured]
SCEN = REPO / "scenarios" / "hpo-digits-real.yaml"
#: the injected SIGKILL per policy: under `fail` the last trial, so that which trials
#: the stop cancels does not depend on how fast the workers are
INJECTED = {"retry": 5, "ignore": 5, "fail": 11}
KEYS = ("trials_completed", "trials_failed", "trials_cancelled", "trials_stopped_early",
        "retries", "failures", "best_trial", "best_value", "best_config", "status")


def _env() -> dict:
    e = dict(os.environ)
    e.update({"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
              "OMPI_MCA_rmaps_base_oversubscribe": "1", "PYTHONHASHSEED": "0",
              "PYTHONPATH": str(REPO)})
    return e


def _scenario(folder: Path, policy: str) -> Path:
    text = SCEN.read_text().replace("on_failure: retry", f"on_failure: {policy}")
    text = text.replace("{trial: 5, at_epoch: 3}", f"{{trial: {INJECTED[policy]}, at_epoch: 3}}")
    assert f"on_failure: {policy}" in text
    path = folder / f"digits-{policy}.yaml"
    path.write_text(text)
    return path


def _command(scen: Path, db: Path, executor: str, extra: tuple[str, ...] = ()) -> list[str]:
    args = ["-m", "testbed", "hpo", "run", str(scen), "--store", str(db), "--json", *extra]
    if executor == "local":
        return [sys.executable, *args, "--workers", "2"]
    mpiexec = shutil.which("mpiexec") or shutil.which("mpirun")
    if mpiexec is None:
        pytest.fail("mpiexec not found: install openmpi-bin (make setup does)")
    return [mpiexec, "-n", "3", "--oversubscribe", sys.executable, "-m", "mpi4py.futures",
            *args, "--executor", "mpi"]


def _run(cmd: list[str]) -> dict:
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, env=_env(), timeout=240)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout)


def _query(db: Path, sql: str) -> list:
    try:
        con = sqlite3.connect(db, timeout=5)
        try:
            return con.execute(sql).fetchall()
        finally:
            con.close()
    except sqlite3.OperationalError:
        return []


def _two_running(db: Path) -> bool:
    """At least 3 trials finished and two attempts running (started, not over)."""
    (rows,) = _query(db, "SELECT sum(event = 'trial_end'), sum(event = 'trial_start'), "
                         "sum(event IN ('trial_failed', 'trial_preempted', "
                         "'trial_cancelled')) FROM hpo_events") or [(None, None, None)]
    ends, starts, other = (x or 0 for x in rows)
    return ends >= 3 and starts - ends - other >= 2


def _driver_pid(proc: subprocess.Popen, executor: str) -> int:
    """The driver's pid: the command itself, or rank 0 under mpiexec."""
    if executor == "local":
        return proc.pid
    for _ in range(500):
        for child in Path("/proc").iterdir():
            if not child.name.isdigit():
                continue
            try:
                env = (child / "environ").read_bytes()
                stat = (child / "stat").read_text().split()
            except OSError:
                continue
            if b"OMPI_COMM_WORLD_RANK=0\0" in env and int(stat[3]) == proc.pid:
                return int(child.name)
        time.sleep(0.02)
    pytest.fail("rank 0 of mpiexec not found")


def _kill_while_two_run(cmd: list[str], db: Path, executor: str) -> None:
    proc = subprocess.Popen(cmd, cwd=REPO, env=_env(), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        driver = _driver_pid(proc, executor)
        deadline = time.time() + 180
        while time.time() < deadline and proc.poll() is None and not _two_running(db):
            time.sleep(0.01)
        assert proc.poll() is None, "the sweep ended before it could be killed"
        os.kill(driver, signal.SIGKILL)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory) -> dict[str, dict]:
    """The table of each policy's sweep, run straight through on the local pool, with
    its trace's events under ``"events"``."""
    folder = tmp_path_factory.mktemp("uninterrupted")
    out = {}
    for policy in INJECTED:
        scen = _scenario(folder, policy)
        trace = folder / f"{policy}.jsonl"
        out[policy] = _run(_command(scen, folder / f"{policy}.db", "local",
                                    ("--trace", str(trace))))
        assert out[policy]["outage_s"] == 0 and out[policy]["preemptions"] == 0
        out[policy]["events"] = _events(trace)
    return out


def _events(trace: Path) -> list[dict]:
    return [json.loads(line) for line in trace.read_text().splitlines()]


def _replay(trace: Path, out: dict) -> None:
    """The replay of a resumed sweep predicts it without its outage (before the outage
    was counted as trial time and the replay predicted 0.31 of the wall time)."""
    import io
    from contextlib import redirect_stdout

    from testbed.app.cli.main import main
    buf = io.StringIO()
    with redirect_stdout(buf):
        main(["hpo", "replay", str(trace), "--json"])
    rep = json.loads(buf.getvalue())
    assert rep["measured_outage_s"] == pytest.approx(out["outage_s"])
    busy = out["makespan_s"] - out["outage_s"]
    assert abs(rep["makespan_s"] - busy) / busy < 0.15, (rep["makespan_s"], busy)
    assert rep["retries"] == out["retries"]
    # the replay stops every attempt its own schedule runs at the instant the driver was
    # lost; its schedule is the measured one within its timing error, so an attempt that
    # really ended just before the kill (MPI workers can outlive rank 0 long enough to
    # finish one) may still run in the replay, or one that ran may have ended: one apart
    assert abs(rep["preemptions"] - out["preemptions"]) <= 1, \
        (rep["preemptions"], out["preemptions"])


def _running_at_the_failure(events: list[dict], trial: int) -> bool:
    """Whether ``trial`` had started and never ended when the sweep's first real failure
    (not a lost driver) came, in that sweep's own trace."""
    failed_at = next(i for i, e in enumerate(events) if e["event"] == "trial_failed"
                     and e.get("cause") != "driver_lost")
    mine = [(i, e["event"]) for i, e in enumerate(events) if e.get("trial") == trial]
    started = [i for i, kind in mine if kind == "trial_start" and i < failed_at]
    ended = [i for i, kind in mine if kind == "trial_end"]
    return bool(started) and not ended


def _cut_by_the_stop(policy: str, out: dict, reference: dict,
                     events: list[dict]) -> tuple[set[int], set[int]]:
    """Trials ``fail`` cancelled in one sweep while they ran and the other completed:
    (cancelled in the resumed sweep, cancelled in the uninterrupted one).

    Under ``fail`` the first failure cancels what is still running. Which trials run
    beside the injected failure depends on the machine's speed, not on the code: the
    lost driver's preempted attempts are re-run after the resume, so one of them may
    still run when the failure comes where the uninterrupted sweep had finished it, and
    under load the uninterrupted sweep may be the slower one. Such a trial must have been
    running at the failure (started, not ended) in the sweep that cancelled it, by its
    own trace; every other trial's row is the uninterrupted sweep's, bit for bit."""
    if policy != "fail":
        return set(), set()
    ref = {row["trial"]: row["status"] for row in reference["trials_table"]}
    mine = {row["trial"]: row["status"] for row in out["trials_table"]}
    cut_here = {t for t, s in mine.items() if s == "cancelled" and ref[t] == "completed"}
    cut_there = {t for t, s in mine.items() if s == "completed" and ref[t] == "cancelled"}
    for trial in cut_here:
        assert _running_at_the_failure(events, trial), ("resumed", trial)
    for trial in cut_there:
        assert _running_at_the_failure(reference["events"], trial), ("uninterrupted", trial)
    return cut_here, cut_there


def _check_resumed(policy: str, executor: str, tmp_path: Path, reference: dict) -> dict:
    scen = _scenario(tmp_path, policy)
    db = tmp_path / "hpo.db"
    _kill_while_two_run(_command(scen, db, executor), db, executor)
    trace = tmp_path / "trace.jsonl"
    out = _run(_command(scen, db, executor, ("--trace", str(trace))))
    assert out["resumed"] and out["outage_s"] > 0
    # the running attempts were preempted by the lost driver, never failed (one that
    # its journal shows at its target is finished instead: MPI workers may outlive
    # rank 0 long enough to finish a short attempt before mpiexec ends them)
    events = _events(trace)
    lost = [e for e in events if e.get("cause") == "driver_lost"]
    assert {e["event"] for e in lost} <= {"trial_preempted"}
    assert [e["event"] for e in events].count("sweep_resumed") == 1
    cut_here, cut_there = _cut_by_the_stop(policy, out, reference, events)
    cut = cut_here | cut_there
    keep = [row for row in reference["trials_table"] if row["trial"] not in cut]
    assert [row for row in out["trials_table"] if row["trial"] not in cut] == keep
    moved = len(cut_here) - len(cut_there)
    counts = dict(reference, trials_completed=reference["trials_completed"] - moved,
                  trials_cancelled=reference["trials_cancelled"] + moved)
    keys = KEYS
    if cut and {out["best_trial"], reference["best_trial"]} & cut:
        # a trial only one sweep completed may be that sweep's best: the best is then
        # its own completed row's
        keys = tuple(k for k in KEYS if not k.startswith("best_"))
        best = next(r for r in out["trials_table"] if r["trial"] == out["best_trial"])
        assert best["status"] == "completed" and best["value"] == out["best_value"], best
    assert {k: out[k] for k in keys} == {k: counts[k] for k in keys}
    out["lost"] = len(lost)
    if policy == "retry":
        _replay(trace, out)
    return out


@pytest.mark.timeout(600)
@pytest.mark.parametrize("policy", list(INJECTED))
def test_sigkill_and_resume_on_the_local_pool_gives_the_uninterrupted_table(
        policy, uninterrupted, tmp_path):
    out = _check_resumed(policy, "local", tmp_path, uninterrupted[policy])
    assert out["failures"] == 1          # the injected kill only
    assert out["lost"] >= 1 and out["preemptions"] == out["lost"]


@pytest.mark.mpi
@pytest.mark.timeout(600)
@pytest.mark.parametrize("policy", list(INJECTED))
def test_sigkill_and_resume_under_mpiexec_gives_the_uninterrupted_table(
        policy, uninterrupted, tmp_path):
    out = _check_resumed(policy, "mpi", tmp_path, uninterrupted[policy])
    assert out["executor"] == "mpi" and out["workers"] == 2
