"""One resumable step of a Slurm job: ``python -m real_runs.requeue``.

Every step of the sbatch scripts that ``testbed real-run slurm`` writes runs through
this wrapper::

    python -m real_runs.requeue --results DIR --step NAME [--commits FILE
        --commit-event EVENT] [--grace-s S] [--max-requeues N] [--preempted] -- COMMAND…

* **Done steps are skipped.** A step that ended with status 0 leaves
  ``DIR/steps/NAME.done`` (when, in which Slurm job and incarnation, how long); a
  requeued or resubmitted job with the same results folder skips it, so a job resumes
  at the step it was in.
* **The time-limit warning stops the step at its next commit.** Slurm sends SIGUSR1
  to the batch shell ``S`` seconds before the limit (``#SBATCH --signal=B:USR1@S``);
  the shell passes it to this wrapper. The wrapper waits until the command *commits*
  — a new line with ``"event": EVENT`` in ``FILE`` (a checkpoint in a supervised
  run's timeline, a finished part of the calibration set) — or until the command ends
  on its own, for at most ``--grace-s``; then it stops the command (SIGTERM, which
  every testbed command answers by keeping what it has written) and requeues the job
  (``scontrol requeue $SLURM_JOB_ID``; the job needs ``--requeue``). The next
  incarnation resumes from that commit. Without ``--commits`` the command is given the
  grace period to finish, then stopped (a step without commits reruns from its start).
* **The command never sees SIGUSR1** (it is ignored in the child, and so in its
  children — an ignored signal stays ignored across ``exec``): a framework process
  killed by a stray SIGUSR1 would lose the work since its last checkpoint.
* **SIGTERM or SIGINT** (``scancel``, the time limit itself, a requeue by an
  administrator): passed on to the command as SIGTERM; the wrapper waits for it and
  exits 143. Slurm then requeues or ends the job as it decided.

Exit status: 0 done (or skipped); the command's status when it failed; 75
(``EX_TEMPFAIL``) stopped for a requeue, or stopped with no requeue possible (outside
Slurm, or ``--max-requeues`` reached: the message says to resubmit); 143 terminated.

Only the standard library is imported: the wrapper costs milliseconds per step.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

#: Exit status of a step stopped so that the job can be requeued (sysexits EX_TEMPFAIL).
REQUEUED_STATUS = 75
#: Exit status after a SIGTERM/SIGINT passed on to the command (128 + SIGTERM).
TERMINATED_STATUS = 143
#: How long a stopped command may take to exit after SIGTERM before it is killed.
STOP_WAIT_S = 30.0
#: How often the wrapper looks at the command and the commit file.
POLL_S = 0.1
#: The folder (under the results) of the done markers.
STEPS_FOLDER = "steps"


def say(message: str) -> None:
    """One line on standard error (the job log), time-stamped."""
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    print(f"[{stamp}] testbed step: {message}", file=sys.stderr, flush=True)


def slurm_job() -> tuple[str | None, int]:
    """This job's id (None outside Slurm) and its incarnation (Slurm's restart count)."""
    job = os.environ.get("SLURM_JOB_ID") or None
    try:
        restarts = int(os.environ.get("SLURM_RESTART_COUNT", "0") or 0)
    except ValueError:
        restarts = 0
    return job, restarts


@dataclass
class CommitWatch:
    """New lines of a JSONL file that carry ``"event": event`` (complete lines only),
    counted from the moment :meth:`arm` is called."""

    path: Path | None
    event: str
    offset: int = 0
    pending: bytes = b""
    armed: bool = False

    def arm(self) -> None:
        self.armed = True
        self.pending = b""
        try:
            self.offset = self.path.stat().st_size if self.path is not None else 0
        except OSError:
            self.offset = 0

    def committed(self) -> bool:
        """Whether a commit was appended since :meth:`arm`."""
        if not self.armed or self.path is None:
            return False
        try:
            with open(self.path, "rb") as stream:
                stream.seek(self.offset)
                data = stream.read()
        except OSError:
            return False
        self.offset += len(data)
        lines = (self.pending + data).split(b"\n")
        self.pending = lines.pop()
        for line in lines:
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if isinstance(record, dict) and record.get("event") == self.event:
                return True
        return False


@dataclass
class Signals:
    """What the wrapper was told, by signal."""

    warned_at: float | None = None
    terminated: bool = False
    seen: list[str] = field(default_factory=list)

    def install(self) -> None:
        signal.signal(signal.SIGUSR1, self._warn)
        signal.signal(signal.SIGTERM, self._terminate)
        signal.signal(signal.SIGINT, self._terminate)

    def _warn(self, _signum, _frame) -> None:
        if self.warned_at is None:
            self.warned_at = time.monotonic()
            self.seen.append("warning")

    def _terminate(self, _signum, _frame) -> None:
        self.terminated = True


def _ignore_usr1() -> None:
    signal.signal(signal.SIGUSR1, signal.SIG_IGN)


def _stop(proc: subprocess.Popen) -> int:
    """SIGTERM the command, wait for it (killing it after :data:`STOP_WAIT_S`)."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=STOP_WAIT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    _reap_group(proc)
    return proc.returncode


def _reap_group(proc: subprocess.Popen) -> None:
    """Kill what is left of the command's process group once it has ended (a child
    it left behind would hold the job's CPUs, and escape a requeue's kill)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _requeue(max_requeues: int) -> str:
    """Requeue this job; what happened, in words."""
    job, restarts = slurm_job()
    if job is None:
        return "not in a Slurm job, so not requeued: run the job again to resume"
    if restarts >= max_requeues:
        return (f"not requeued: job {job} was requeued {restarts} times already "
                f"(--max-requeues {max_requeues}); resubmit it to resume")
    proc = subprocess.run(["scontrol", "requeue", job], capture_output=True, text=True,
                          timeout=60)
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()
        return f"scontrol requeue {job} failed: {tail[-1] if tail else proc.returncode}"
    return f"requeued job {job}: incarnation {restarts + 1} resumes from here"


def _mark_done(marker: Path, name: str, started: float) -> None:
    job, restarts = slurm_job()
    marker.parent.mkdir(parents=True, exist_ok=True)
    tmp = marker.with_suffix(".tmp")
    tmp.write_text(json.dumps({
        "step": name, "job_id": job, "incarnation": restarts,
        "finished_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "wall_s": round(time.monotonic() - started, 3)}) + "\n", encoding="utf-8")
    os.replace(tmp, marker)


def _watch(proc: subprocess.Popen, signals: Signals, commits: CommitWatch,
           grace_s: float) -> str:
    """Follow the command until it ends or must be stopped: ``"ended"``,
    ``"preempt"`` (stop it for a requeue) or ``"terminate"``."""
    while proc.poll() is None:
        if signals.terminated:
            return "terminate"
        if signals.warned_at is not None:
            if not commits.armed:
                commits.arm()
                say(f"Slurm warns of the time limit: stopping at the next commit "
                    f"(at most {grace_s:g} s)")
            if commits.committed():
                say("committed: stopping here")
                return "preempt"
            if time.monotonic() - signals.warned_at >= grace_s:
                say(f"no commit within {grace_s:g} s: stopping now")
                return "preempt"
        time.sleep(POLL_S)
    return "ended"


def run_step(name: str, command: list[str], results: Path, *, commits: CommitWatch,
             grace_s: float, max_requeues: int, preempted: bool,
             stdout: Path | None = None) -> int:
    """Run one step (see the module docstring); the exit status."""
    marker = results / STEPS_FOLDER / f"{name}.done"
    if marker.exists():
        say(f"{name}: done in an earlier incarnation, skipped")
        return 0
    job, restarts = slurm_job()
    if preempted:
        say(f"{name}: the time limit is near before it started")
        say(_requeue(max_requeues))
        return REQUEUED_STATUS
    say(f"{name}: started (job {job or 'outside Slurm'}, incarnation {restarts})")
    signals = Signals()
    signals.install()
    started = time.monotonic()
    out = None
    try:
        if stdout is not None:
            out = open(stdout, "w", encoding="utf-8")
        # its own process group, so that what it leaves behind can be found (_reap_group)
        proc = subprocess.Popen(command, preexec_fn=_ignore_usr1, process_group=0, stdout=out)
    except OSError as exc:
        say(f"{name}: cannot start {command[0]!r}: {exc.strerror or exc}")
        return 127
    finally:
        if out is not None:
            out.close()
    outcome = _watch(proc, signals, commits, grace_s)
    if outcome == "terminate":
        say(f"{name}: terminated; passing SIGTERM on to the command")
        _stop(proc)
        return TERMINATED_STATUS
    code = _stop(proc)
    if outcome == "ended" and code == 0:
        _mark_done(marker, name, started)
        say(f"{name}: done in {time.monotonic() - started:.1f} s")
    elif outcome == "ended":
        say(f"{name}: failed with status {code}")
        return code if code > 0 else 128 - code     # killed by signal N: 128 + N
    else:
        say(f"{name}: stopped (status {code}); what it committed is kept")
    if signals.warned_at is None:
        return 0
    say(_requeue(max_requeues))
    return REQUEUED_STATUS


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="real_runs.requeue",
                                     description="One resumable step of a Slurm job.")
    parser.add_argument("--results", required=True, help="the job's results folder")
    parser.add_argument("--step", required=True, help="the step's name (its done marker)")
    parser.add_argument("--commits", default=None, help="JSONL file the command commits to")
    parser.add_argument("--commit-event", default="checkpoint_commit",
                        help="the event of a commit line")
    parser.add_argument("--grace-s", type=float, default=60.0,
                        help="longest wait for a commit after the warning")
    parser.add_argument("--max-requeues", type=int, default=10,
                        help="requeue at most this many times (Slurm's restart count)")
    parser.add_argument("--stdout", default=None,
                        help="the command's standard output goes here (when it runs)")
    parser.add_argument("--preempted", action="store_true",
                        help="the warning came before this step started")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the command after --")
    if not args.step.replace("-", "").replace("_", "").isalnum():
        parser.error("--step: letters, digits, - and _ only")
    commits = CommitWatch(Path(args.commits) if args.commits else None, args.commit_event)
    return run_step(args.step, command, Path(args.results), commits=commits,
                    grace_s=args.grace_s, max_requeues=args.max_requeues,
                    preempted=args.preempted,
                    stdout=Path(args.stdout) if args.stdout else None)


if __name__ == "__main__":
    sys.exit(main())
