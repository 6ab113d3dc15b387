"""Run one attempt of an HPO trial in a fresh child process, and kill it when told.

:func:`run_attempt` is what a pool worker (a local process or an MPI rank of
``mpi4py.futures``) executes for the driver. The worker imports PyTorch and loads
the digits once; for each attempt it forks a child — a new process with its own
pid, holding no state from earlier attempts — that trains and streams its records
(an epoch's value, a checkpoint on disk) through a pipe. The worker is the child's
supervisor: at the attempt's ``kill_at_epoch`` (the child reports the epoch, then
waits before its checkpoint) or after ``kill_at_s`` seconds it sends SIGKILL to the
child, for real. A child dies with its worker, and a local worker with the driver
(``PR_SET_PDEATHSIG``), so a killed driver leaves no trial running behind it.

**The journal.** The child also appends every record, as it happens, to the attempt's
journal (``task['journal']``, one JSON line each, ``O_APPEND``), so that what an
attempt did survives a driver that is killed before the attempt's result reaches it:
a rerun reads the journals of the attempts that were running (see
:mod:`testbed.app.hpo.driver`). An epoch's record is written before its checkpoint,
so a checkpoint on disk always has its epoch's value in the journal; a line cut short
by the kill is ignored by the reader.

**Times.** Every record carries ``t``: seconds since this worker received the task,
on the worker's own monotonic clock (the child is a fork on the same machine). Only
such per-process differences leave the machine: under MPI the driver and its workers
may be on different nodes, whose monotonic clocks are unrelated, so the driver places
a record at (when it submitted the attempt, on its clock) + ``t``.

The worker itself never trains (it imports PyTorch and builds a throw-away model
and optimizers on one thread, so that their lazy imports are paid once, and never
starts a thread pool, so forking it is safe) and returns a plain dict: status (completed | killed | error),
the epoch records, the child's pid and the host.
"""

from __future__ import annotations

import ctypes
import json
import os
import select
import signal
import socket
import time
from typing import Any

_DATA: Any = None
#: prctl option that sends a signal to a process when its parent dies (Linux).
PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """Ask the kernel to SIGKILL this process when its parent dies (Linux only)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    except (OSError, AttributeError):   # pragma: no cover - not Linux
        pass


def init_worker() -> None:
    """Initializer of a local pool worker: die with the driver, warm up."""
    die_with_parent()
    warm()


def warm():
    """Import PyTorch and load the data once per worker process."""
    global _DATA
    if _DATA is None:
        import torch

        from real_runs.hpo.trial import load_data, warm_up
        torch.set_num_threads(1)     # no thread pool is ever started: forking stays safe
        warm_up()
        _DATA = load_data()
    return _DATA


def warm_and_wait(_: int) -> int:
    """A warm-up task: load everything, then hold the worker briefly so that the
    driver's other warm-up tasks go to other workers."""
    warm()
    time.sleep(0.2)
    return os.getpid()


def _child(task: dict[str, Any], data, fd: int, received: float) -> None:
    from real_runs.hpo.trial import train
    journal = task.get("journal")
    jfd = None
    if journal:
        os.makedirs(os.path.dirname(journal), exist_ok=True)
        jfd = os.open(journal, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def emit(rec: dict) -> None:
        line = (json.dumps({**rec, "t": time.monotonic() - received}) + "\n").encode()
        if jfd is not None and rec.get("kind") in ("epoch", "ckpt"):
            os.write(jfd, line)
        os.write(fd, line)

    def pause() -> None:
        emit({"kind": "awaiting_kill"})
        time.sleep(3600)

    try:
        train(task, data, emit, pause)
    except Exception as exc:   # reported to the driver, which applies the failure policy
        emit({"kind": "error", "error": f"{type(exc).__name__}: {exc}"})
        os._exit(3)


def run_attempt(task: dict[str, Any]) -> dict[str, Any]:
    """Run one attempt (see the module docstring); never raises for a trial's fault."""
    from real_runs.hpo.trial import merge_records
    data = warm()
    received = time.monotonic()
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:                                  # the trial's own process
        os.close(r)
        die_with_parent()
        code = 0
        try:
            _child(task, data, w, received)
        except BaseException:   # noqa: BLE001 - the child must never return into the pool
            code = 4
        os._exit(code)
    os.close(w)
    records, killed, buf = [], False, b""
    deadline = received + task["kill_at_s"] if task.get("kill_at_s") is not None else None
    while True:
        timeout = None if deadline is None else max(deadline - time.monotonic(), 0.0)
        ready, _, _ = select.select([r], [], [], timeout)
        if not ready:                             # kill_at_s reached
            os.kill(pid, signal.SIGKILL)
            killed = True
            deadline = None
            continue
        chunk = os.read(r, 65536)
        if not chunk:
            break
        buf += chunk
        *lines, buf = buf.split(b"\n")
        for line in lines:
            rec = json.loads(line)
            if rec["kind"] == "awaiting_kill":
                os.kill(pid, signal.SIGKILL)
                killed = True
            else:
                records.append(rec)
    os.close(r)
    _, status = os.waitpid(pid, 0)
    error = next((rec["error"] for rec in records if rec["kind"] == "error"), None)
    if killed:
        outcome = "killed"
    elif os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0 and error is None:
        outcome = "completed"
    else:
        outcome = "error"
        if error is None:
            error = f"trial process ended with status {status}"
    return {"status": outcome, "error": error, "pid": pid, "host": socket.gethostname(),
            "ended": time.monotonic() - received,
            "ready": next((rec["t"] for rec in records if rec["kind"] == "ready"), None),
            "epochs": merge_records(records)}
