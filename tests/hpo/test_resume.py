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
    """The table of each policy's sweep, run straight through on the local pool."""
    folder = tmp_path_factory.mktemp("uninterrupted")
    out = {}
    for policy in INJECTED:
        scen = _scenario(folder, policy)
        out[policy] = _run(_command(scen, folder / f"{policy}.db", "local"))
        assert out[policy]["outage_s"] == 0 and out[policy]["preemptions"] == 0
    return out


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


def _cut_by_the_stop(policy: str, out: dict, reference: dict, events: list[dict]) -> set[int]:
    """Trials ``fail`` cancelled while they ran that the uninterrupted sweep completed.

    Under ``fail`` the first failure cancels what is still running. The lost driver's
    preempted attempts are re-run after the resume, so one of them may still be running
    when the injected failure comes, where the uninterrupted sweep had finished it: which
    trial that is depends on the machine's speed, not on the code. Such a trial must have
    been running when the failure came (started, not ended); every other trial's row is
    the uninterrupted sweep's, bit for bit."""
    if policy != "fail":
        return set()
    ref = {row["trial"]: row for row in reference["trials_table"]}
    cut = {row["trial"] for row in out["trials_table"]
           if row["status"] == "cancelled" and ref[row["trial"]]["status"] == "completed"}
    failed_at = next(i for i, e in enumerate(events) if e["event"] == "trial_failed"
                     and e.get("cause") != "driver_lost")
    for trial in cut:
        mine = [(i, e["event"]) for i, e in enumerate(events) if e.get("trial") == trial]
        started = [i for i, kind in mine if kind == "trial_start" and i < failed_at]
        ended = [i for i, kind in mine if kind == "trial_end"]
        assert started and not ended, (trial, mine)
    return cut


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
    events = [json.loads(line) for line in trace.read_text().splitlines()]
    lost = [e for e in events if e.get("cause") == "driver_lost"]
    assert {e["event"] for e in lost} <= {"trial_preempted"}
    assert [e["event"] for e in events].count("sweep_resumed") == 1
    cut = _cut_by_the_stop(policy, out, reference, events)
    keep = [row for row in reference["trials_table"] if row["trial"] not in cut]
    assert [row for row in out["trials_table"] if row["trial"] not in cut] == keep
    counts = dict(reference, trials_completed=reference["trials_completed"] - len(cut),
                  trials_cancelled=reference["trials_cancelled"] + len(cut))
    assert {k: out[k] for k in KEYS} == {k: counts[k] for k in KEYS}
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
