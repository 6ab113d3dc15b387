"""Supervisor: runs training as a child process, kills it, restarts it, writes a timeline.

The supervisor starts ``real_runs.worker`` with a checkpoint directory, reads its
JSON-line events, and sends SIGKILL when the current incarnation's kill spec fires
(after a step, at a wall-clock time, or in the middle of a checkpoint write). It then
optionally damages the newest checkpoint, restarts the worker — which loads the newest
*intact* checkpoint — and carries on until the run completes. The timeline uses the
event vocabulary of :mod:`testbed.events`, so it can be compared with the simulator's
event log.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from real_runs.ckpt_store import CheckpointStore
from real_runs.env import ERROR_PREFIX, INPUT_ERROR_STATUS, ChildFailed, child_env, python_cmd
from real_runs.faults import KillSpec, damage_checkpoint
from real_runs.harness import RunConfig
from real_runs.loadprobe import (
    PROBE_EVERY_S,
    core_probe_ms,
    cpu_stretch,
    runnable_besides_me,
    sched_ns,
)
from testbed import events as ev
from testbed.errors import InputError

#: How long the worker pauses inside a checkpoint write when a kill is planned there.
SLOW_WRITE_S = 5.0


class WorkerFailed(ChildFailed):
    """The worker exited on its own with an error (not killed by us): the command says
    so in one line and exits 1 (it is not the user's input that is wrong)."""


@dataclass
class Timeline:
    """Timeline records (t_s since the supervisor started) in the shared vocabulary.

    With a ``sink`` every record is appended to that file as it happens, flushed and
    fsynced, so a Ctrl-C, a kill of the supervisor or a power cut keeps everything up to
    that moment; a resumed run in the same folder appends its own run (a new
    ``job_start``) after the earlier history instead of overwriting it.
    """

    t0: float = field(default_factory=time.perf_counter)
    records: list[dict[str, Any]] = field(default_factory=list)
    sink: Path | None = None
    written: int = 0

    def add(self, event: str, t_s: float | None = None, **fields: Any) -> None:
        """Book ``event`` at ``t_s`` seconds after the run began (default: now)."""
        if event not in ev.EVENT_KINDS:
            raise ValueError(event)
        now = time.perf_counter() - self.t0
        t = now if t_s is None else min(max(t_s, 0.0), now)
        if self.records:                 # the timeline stays in order
            t = max(t, self.records[-1]["t_s"])
        record = {"t_s": t, "event": event, **fields}
        self.records.append(record)
        # ``job_start`` waits for the run's first real event: a run refused before it
        # trains (another run's checkpoint, say) leaves the folder exactly as it was
        if self.sink is not None and event != ev.JOB_START:
            for pending in self.records[self.written:]:
                self._append(self.sink, pending)
            self.written = len(self.records)

    def _append(self, sink: Path, record: dict[str, Any]) -> None:
        try:
            with open(sink, "a", encoding="utf-8") as stream:
                ev.write_events([record], stream)
                stream.flush()
                os.fsync(stream.fileno())
        except OSError as exc:
            from testbed.io.write import os_reason
            raise InputError(f"cannot append to the timeline: {os_reason(exc)}",
                             source=str(self.sink), field="--timeline") from None


def _reader(stream, out: queue.Queue) -> None:
    for line in stream:
        line = line.strip()
        if line:
            try:
                out.put(json.loads(line))
            except json.JSONDecodeError:
                continue
    out.put(None)


@dataclass
class Incarnation:
    proc: subprocess.Popen
    lines: queue.Queue
    started: float
    stderr_path: Path
    spawn_wall: float = 0.0


@dataclass
class RestartClock:
    """What one restart's parts took (supervisor clock, seconds), filled as the new
    process reports: its own start (``ready.started_wall`` minus the spawn), set-up
    (framework import, model build), checkpoint load, first step."""

    killed_t: float
    process_start_s: float = 0.0
    import_s: float = 0.0
    setup_s: float = 0.0
    load_s: float = 0.0
    ready_t: float | None = None
    load_t: float | None = None
    ckpt_bytes: int = 0
    #: runnable tasks besides the supervisor, read while this restart is under way
    runnable: list[int] = field(default_factory=list)
    #: the new worker's (on-CPU, waiting) ns from its spawn to its first step
    sched: tuple[int, int] | None = None
    #: the supervisor's core probe (ms, real_runs.loadprobe) timed while it was under way
    probe: list[float] = field(default_factory=list)

    def fields(self, resumed_t: float) -> dict[str, float]:
        after = self.load_t if self.load_t is not None else self.ready_t
        out = {"process_start_s": self.process_start_s, "import_s": self.import_s,
               "setup_s": self.setup_s,
               "load_s": self.load_s, "ckpt_bytes": self.ckpt_bytes,
               "first_step_s": max(resumed_t - after, 0.0) if after is not None else 0.0}
        if self.runnable:
            out["runnable_tasks"] = round(sum(self.runnable) / len(self.runnable), 3)
        if self.sched is not None and (s := cpu_stretch(*self.sched)) is not None:
            out["cpu_stretch"] = round(s, 4)
            out["on_cpu_s"] = round(self.sched[0] / 1e9, 6)
        if self.probe:
            out["core_probe_ms"] = round(sum(self.probe) / len(self.probe), 4)
        return out


_PR_SET_PDEATHSIG = 1


def _prctl():
    """libc's ``prctl``, looked up once in the supervisor (the child between fork and
    exec must not load libraries), or None off Linux."""
    try:
        import ctypes
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


_PRCTL = _prctl()


def _die_with_supervisor(parent_pid: int):
    """``preexec_fn`` of the worker: the kernel SIGKILLs it when the supervisor dies
    (``PR_SET_PDEATHSIG``, kept across exec), so a SIGKILLed supervisor leaves no worker
    training on; a supervisor already gone before the request took effect ends it."""
    def arm() -> None:
        if _PRCTL is not None:
            _PRCTL(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent_pid:
            os._exit(1)
    return arm


def _spawn(request: dict[str, Any], extra_env: dict[str, str] | None = None) -> Incarnation:
    err = tempfile.NamedTemporaryFile(prefix="worker-", suffix=".err", delete=False)
    spawn_wall = time.time()
    proc = subprocess.Popen(python_cmd("real_runs.worker", "--request", json.dumps(request)),
                            stdout=subprocess.PIPE, stderr=err, text=True,
                            env=child_env(extra_env),
                            preexec_fn=_die_with_supervisor(os.getpid()))
    err.close()
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=_reader, args=(proc.stdout, lines), daemon=True).start()
    return Incarnation(proc, lines, time.perf_counter(), Path(err.name), spawn_wall)


def _stderr_tail(inc: Incarnation) -> str:
    try:
        text = inc.stderr_path.read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return ""
    return text.splitlines()[-1] if text else ""


def run_reference(cfg: RunConfig, timeout_s: float = 600.0) -> dict[str, Any]:
    """The uninterrupted run (no checkpoints), in its own process."""
    inc = _spawn({"cfg": cfg.to_dict(), "ckpt_dir": None})
    return _drain(inc, timeout_s)


def _drain(inc: Incarnation, timeout_s: float) -> dict[str, Any]:
    deadline = time.perf_counter() + timeout_s
    result = None
    while True:
        try:
            rec = inc.lines.get(timeout=max(deadline - time.perf_counter(), 0.01))
        except queue.Empty:
            inc.proc.kill()
            raise WorkerFailed("worker timed out") from None
        if rec is None:
            break
        if rec.get("type") == "result":
            result = rec
    code = inc.proc.wait()
    inc.stderr_path.unlink(missing_ok=True)
    if code != 0 or result is None:
        raise WorkerFailed(f"worker exited with status {code}")
    return result


def run_config_fields(cfg: RunConfig) -> dict[str, Any]:
    """The measurement-record view of a run configuration (``TrainConfig`` fields)."""
    return {"framework": cfg.framework, "model": cfg.model,
            "model_options": {"width": cfg.width, "depth": cfg.depth},
            "input_shape": "x".join(str(d) for d in cfg.shape), "precision": cfg.precision,
            "batch_size": cfg.batch_size, "processes": 1, "backend": "none",
            "device": "gpu" if cfg.device == "cuda" else "cpu"}


@dataclass
class _Run:
    """The bookkeeping of one supervised run across its incarnations."""

    timeline: Timeline
    kills: int = 0
    kills_during_restart: int = 0
    restarts: int = 0
    lost_steps: int = 0
    aborts: int = 0
    commits: int = 0
    corruptions: list[dict[str, Any]] = field(default_factory=list)
    damages: list[str] = field(default_factory=list)
    restart_parts: list[dict[str, Any]] = field(default_factory=list)
    commit_bytes: dict[int, int] = field(default_factory=dict)
    result: dict[str, Any] | None = None
    last_step_before_kill: int | None = None
    clock: RestartClock | None = None
    #: runnable tasks besides the supervisor, read while the run trains (no restart
    #: under way): a single-threaded step's wall time is its CPU time stretched by them
    #: (sum of the counts read, reads) — a run of a million steps keeps two numbers
    train_runnable: list[int] = field(default_factory=lambda: [0, 0])
    #: the workers' (on-CPU, waiting) ns: the first start (spawn to first step), and
    #: training (first step to the kill or the result), over the incarnations
    start_sched: tuple[int, int] | None = None
    train_sched: list[int] = field(default_factory=lambda: [0, 0])
    #: when the first worker's first step was done, and the last worker's last step
    #: (seconds after the run began)
    start_s: float | None = None
    last_step_t: float | None = None
    #: the supervisor's core probe (ms) during the first start and while training
    #: (sum, count), and when it last timed it (perf counter)
    start_probe: list[float] = field(default_factory=lambda: [0.0, 0])
    train_probe: list[float] = field(default_factory=lambda: [0.0, 0])
    probed_t: float = 0.0


@dataclass
class _Incarnation:
    """State of the incarnation being watched."""

    inc: Incarnation
    spec: KillSpec | None
    resumed: bool
    range_start: int | None = None
    step: int | None = None
    writing: int | None = None
    trained: bool = False                 # its first step is done
    last_step_t: float | None = None      # when its last reported step was done
    #: the worker's (on-CPU, waiting) ns at its first step (None: not yet, or unknown)
    sched_at_first_step: tuple[int, int] | None = None

    def sched_now(self) -> tuple[int, int] | None:
        return sched_ns(self.inc.proc.pid)


def event_time_s(run: _Run, rec: dict[str, Any]) -> float:
    """When a worker's event happened, in seconds since the run began: its ``at`` (the
    worker's reading of the system-wide monotonic clock), else when it was read; never
    later than now nor before the run began."""
    now = time.perf_counter() - run.timeline.t0
    at = rec.get("at")
    if isinstance(at, (int, float)) and not isinstance(at, bool) and at == at:
        return min(max(float(at) - run.timeline.t0, 0.0), now)
    return now


def _on_record(run: _Run, cur: _Incarnation, rec: dict[str, Any]) -> None:
    """Book one record of the worker's protocol, at the time it happened."""
    tl = run.timeline
    kind = rec.get("event")
    when = event_time_s(run, rec)
    if rec.get("type") == "result":
        run.result = rec
        _book_training(run, cur)
    elif kind == "ready" and run.clock is not None:
        run.clock.ready_t = when
        run.clock.setup_s = float(rec.get("setup_s", 0.0))
        run.clock.import_s = float(rec.get("import_s", 0.0))
        run.clock.process_start_s = max(float(rec.get("started_wall", cur.inc.spawn_wall))
                                        - cur.inc.spawn_wall, 0.0)
    elif kind == "corruption_detected":
        run.corruptions.append({"step": rec["step"], "reason": rec["reason"]})
        tl.add(ev.CORRUPTION_DETECTED, t_s=when, step=rec["step"], reason=rec["reason"])
    elif kind == "load":
        tl.add(ev.LOAD, t_s=when, step=rec["step"], duration_s=rec["duration_s"])
        if run.clock is not None:
            run.clock.load_t = when
            run.clock.load_s = float(rec["duration_s"])
            run.clock.ckpt_bytes = run.commit_bytes.get(int(rec["step"]), 0)
    elif kind == "step":
        cur.step, cur.last_step_t = rec["step"], when
        if not cur.trained:
            cur.trained = True
            _first_step(run, cur, when)
        if not cur.resumed:
            _resumed(run, cur.step, when)
            cur.resumed = True
        if cur.range_start is None:
            cur.range_start = cur.step
    elif kind == "checkpoint_begin":
        if cur.range_start is not None:
            tl.add(ev.STEPS, t_s=when, start_step=cur.range_start, end_step=rec["step"])
            cur.range_start = None
        cur.writing = rec["step"]
        tl.add(ev.CHECKPOINT_BEGIN, t_s=when, step=rec["step"])
    elif kind == "checkpoint_commit":
        cur.writing = None
        run.commits += 1
        run.commit_bytes[int(rec["step"])] = int(rec["bytes"])
        tl.add(ev.CHECKPOINT_COMMIT, t_s=when, step=rec["step"], bytes=rec["bytes"],
               duration_s=rec["duration_s"])


def _resumed(run: _Run, step: int, t: float) -> None:
    """The first step of a restarted incarnation (done at ``t``): the restart is over."""
    lost = 0
    if run.last_step_before_kill is not None:
        lost = max(run.last_step_before_kill - (step - 1), 0)
        run.lost_steps += lost
        run.last_step_before_kill = None
    parts = run.clock.fields(t) if run.clock is not None else {}
    if run.clock is not None:
        run.restart_parts.append({"incarnation": run.restarts, "restart_s": t - run.clock.killed_t,
                                  "lost_steps": lost, **parts})
    run.timeline.add(ev.RESTART_END, t_s=t, step=step - 1, lost_steps=lost, **parts)
    run.clock = None


def _should_fire(cur: _Incarnation, run: _Run, now: float) -> bool:
    spec = cur.spec
    if spec is None or run.result is not None:
        return False
    if spec.at_step is not None and cur.step is not None and cur.step >= spec.at_step:
        return True
    if spec.during_checkpoint and cur.writing is not None:
        return True
    return spec.at_s is not None and now - cur.inc.started >= spec.at_s


def _first_step(run: _Run, cur: _Incarnation, when: float) -> None:
    """An incarnation's first step: what its start lived (for a restart, the restart's
    CPU stretch; for the first incarnation, the run's start's, and when it was done)."""
    cur.sched_at_first_step = now = cur.sched_now()
    first_start = run.clock is None and run.start_s is None
    if first_start:
        run.start_s = when
    if now is None:
        return
    if run.clock is not None:
        run.clock.sched = now
    elif first_start:
        run.start_sched = now


def _book_training(run: _Run, cur: _Incarnation) -> None:
    """Add what the worker lived since its first step to the run's training."""
    first, now = cur.sched_at_first_step, cur.sched_now()
    if first is not None and now is not None:
        run.train_sched[0] += now[0] - first[0]
        run.train_sched[1] += now[1] - first[1]
        cur.sched_at_first_step = None


def _kill(run: _Run, cur: _Incarnation, spec: KillSpec) -> None:
    tl = run.timeline
    _book_training(run, cur)
    killed_t = time.perf_counter() - tl.t0        # when the signal went, not when reaped
    cur.inc.proc.send_signal(signal.SIGKILL)
    cur.inc.proc.wait()
    run.kills += 1
    if cur.writing is not None:
        run.aborts += 1
        tl.add(ev.CHECKPOINT_ABORT, t_s=killed_t, step=cur.writing)
    if cur.range_start is not None and cur.step is not None:
        tl.add(ev.STEPS, t_s=killed_t, start_step=cur.range_start, end_step=cur.step)
    tl.add(ev.FAILURE, t_s=killed_t, cause="sigkill", node=0, step=cur.step or 0,
           when=spec.describe(), at_step=spec.at_step, at_s=spec.at_s,
           during_checkpoint=spec.during_checkpoint)
    if run.clock is not None:
        # killed again before the last restart was over: that restart runs on from the
        # first kill (its time is restart time, not lost)
        run.kills_during_restart += 1
    else:
        run.clock = RestartClock(killed_t=killed_t)
    if cur.step is not None:
        run.last_step_before_kill = cur.step


def _probe(run: _Run, now: float) -> None:
    """Time the core probe once and book it to the restart under way, the first start
    or the training."""
    run.probed_t = now
    ms = core_probe_ms()
    if run.clock is not None:
        run.clock.probe.append(ms)
        return
    bucket = run.start_probe if run.start_s is None else run.train_probe
    bucket[0] += ms
    bucket[1] += 1


def _mean(bucket: list[float]) -> float | None:
    return round(bucket[0] / bucket[1], 4) if bucket[1] else None


def _watch(run: _Run, cur: _Incarnation, deadline: float) -> bool:
    """Follow one incarnation until it ends or is killed; True when killed."""
    while True:
        timeout = 0.05
        spec = cur.spec
        if spec is not None and spec.at_s is not None:
            timeout = max(min(timeout, cur.inc.started + spec.at_s - time.perf_counter()), 0.0)
        try:
            rec = cur.inc.lines.get(timeout=timeout)
        except queue.Empty:
            rec = "tick"
        now = time.perf_counter()
        if now > deadline:
            cur.inc.proc.kill()
            cur.inc.proc.wait()
            raise WorkerFailed("supervised run exceeded its time limit")
        if rec is None:
            return False
        if (tasks := runnable_besides_me()) is not None:
            if run.clock is not None:
                run.clock.runnable.append(tasks)
            else:
                run.train_runnable[0] += tasks
                run.train_runnable[1] += 1
        if now - run.probed_t >= PROBE_EVERY_S:
            _probe(run, now)
        if isinstance(rec, dict):
            _on_record(run, cur, rec)
        if cur.spec is not None and _should_fire(cur, run, now):
            _kill(run, cur, cur.spec)
            return True


def supervise(cfg: RunConfig, ckpt_dir: Path, plan: list[KillSpec], *,
              timeline_path: Path | None = None, max_kills: int = 50, verify: bool = False,
              timeout_s: float = 900.0) -> dict[str, Any]:
    """Run ``cfg`` to completion under the kill plan; returns the summary record (with
    the timeline's records and each restart's parts)."""
    cfg = cfg.validated()
    if cfg.checkpoint_every <= 0:
        raise InputError("checkpoint-every must be positive for a supervised run",
                         field="checkpoint-every")
    store = CheckpointStore(ckpt_dir, cfg.framework, cfg.model, keep=cfg.keep)
    store.check_usable()
    if timeline_path is not None:
        from testbed.io.write import check_writable_target
        check_writable_target(timeline_path, field="--timeline")
    run = _Run(Timeline(sink=Path(timeline_path) if timeline_path is not None else None))
    wall0 = run.timeline.t0
    deadline = time.perf_counter() + timeout_s
    incarnation = 0
    run.timeline.add(ev.JOB_START, incarnation=0, framework=cfg.framework, model=cfg.model,
                     steps=cfg.steps, checkpoint_every=cfg.checkpoint_every,
                     keep=cfg.keep, config=run_config_fields(cfg))
    while run.result is None:
        spec = plan[incarnation] if incarnation < len(plan) and run.kills < max_kills else None
        request = {"cfg": cfg.to_dict(), "ckpt_dir": str(ckpt_dir), "resume": True,
                   "pause_after_step": spec.at_step if spec is not None else None,
                   "write_delay_s": SLOW_WRITE_S if spec is not None and spec.during_checkpoint
                   else 0.0}
        cur = _Incarnation(_spawn(request), spec, resumed=incarnation == 0)
        try:
            killed = _watch(run, cur, deadline)
        except KeyboardInterrupt:
            _stop_on_interrupt(run, cur)
            raise
        if killed:
            if spec is not None and spec.damage:
                newest = store.committed()
                if newest:
                    run.damages.append(damage_checkpoint(newest[-1].path, spec.damage,
                                                         seed=run.kills))
            run.restarts += 1
            incarnation += 1
            run.timeline.add(ev.RESTART_BEGIN, incarnation=incarnation)
            cur.inc.stderr_path.unlink(missing_ok=True)
            continue
        _finish_incarnation(run, cur)
    return _summary(cfg, run, plan, wall0, verify=verify, timeline_path=timeline_path)


def _rounded(stretch: float | None) -> float | None:
    return round(stretch, 4) if stretch is not None else None


def _summary(cfg: RunConfig, run: _Run, plan: list[KillSpec], wall0: float, *, verify: bool,
             timeline_path: Path | None) -> dict[str, Any]:
    """The summary record of a finished supervised run (compared with an uninterrupted
    reference run when ``verify``)."""
    result = run.result
    assert result is not None           # supervise() loops until the run has a result
    run.timeline.add(ev.JOB_END, step=result["step"])
    end_t = run.timeline.records[-1]["t_s"]
    summary: dict[str, Any] = {
        "framework": cfg.framework, "model": cfg.model, "seed": cfg.seed, "steps": cfg.steps,
        "checkpoint_every": cfg.checkpoint_every, "kills": run.kills,
        "kills_during_restart": run.kills_during_restart, "restarts": run.restarts, "wall_time_s": time.perf_counter() - wall0,
        "lost_steps": run.lost_steps, "checkpoints_committed": run.commits,
        "checkpoint_aborts": run.aborts, "corruptions_detected": run.corruptions,
        "damaged": run.damages, "final_params_sha256": result["params_sha256"],
        "losses": result["losses"], "identical_to_uninterrupted": None, "env": result["env"],
        "config": run_config_fields(cfg), "keep": cfg.keep, "restart_parts": run.restart_parts,
        "train_runnable_tasks": (round(run.train_runnable[0] / run.train_runnable[1], 3)
                                 if run.train_runnable[1] else None),
        "start_s": run.start_s, "end_s": (max(end_t - run.last_step_t, 0.0)
                                          if run.last_step_t is not None else None),
        "start_on_cpu_s": (round(run.start_sched[0] / 1e9, 6)
                           if run.start_sched is not None else None),
        "start_cpu_stretch": _rounded(cpu_stretch(*run.start_sched)
                                      if run.start_sched is not None else None),
        "train_cpu_stretch": _rounded(cpu_stretch(*run.train_sched)),
        "start_core_probe_ms": _mean(run.start_probe),
        "train_core_probe_ms": _mean(run.train_probe),
        "kill_plan": [asdict(spec) for spec in plan[:run.kills]],
        "timeline_records": run.timeline.records,
    }
    if verify:
        reference = run_reference(cfg)
        summary["reference_params_sha256"] = reference["params_sha256"]
        summary["identical_to_uninterrupted"] = bool(
            reference["params_sha256"] == result["params_sha256"]
            and reference["losses"] == result["losses"])
    restores = sum(1 for r in run.timeline.records if r.get("event") == ev.LOAD)
    summary["checkpoint_restores"] = restores
    summary["warnings"] = []
    if run.kills and not restores:
        summary["warnings"].append(
            "nothing was restored: every kill came before the first committed checkpoint, "
            "so identical_to_uninterrupted does not test a restore (kill later or lower "
            "--checkpoint-every)")
    if timeline_path is not None:
        summary["timeline"] = str(timeline_path)
    summary["timeline_events"] = len(run.timeline.records)
    return summary


def _stop_on_interrupt(run: _Run, cur: _Incarnation) -> None:
    """Ctrl-C or SIGTERM of the supervisor: end the worker and keep the steps it did in
    the timeline (already on disk record by record), so the run can be resumed."""
    if cur.inc.proc.poll() is None:
        cur.inc.proc.kill()
        cur.inc.proc.wait()
    if cur.range_start is not None and cur.step is not None:
        run.timeline.add(ev.STEPS, start_step=cur.range_start, end_step=cur.step)
    cur.inc.stderr_path.unlink(missing_ok=True)


def _finish_incarnation(run: _Run, cur: _Incarnation) -> None:
    """The worker ended on its own: success (a result) or an error to report."""
    code = cur.inc.proc.wait()
    if code != 0 or run.result is None:
        message = _stderr_tail(cur.inc)
        cur.inc.stderr_path.unlink(missing_ok=True)
        if code == INPUT_ERROR_STATUS:
            raise InputError(message.removeprefix(ERROR_PREFIX))
        raise WorkerFailed(f"worker exited with status {code}: {message}")
    cur.inc.stderr_path.unlink(missing_ok=True)
    run.last_step_t = cur.last_step_t
    if cur.range_start is not None and cur.step is not None:
        run.timeline.add(ev.STEPS, t_s=cur.last_step_t, start_step=cur.range_start,
                         end_step=cur.step)


def default_timeline_path(ckpt_dir: Path) -> Path:
    return Path(ckpt_dir) / "timeline.jsonl"

