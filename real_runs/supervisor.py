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
import queue
import signal
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from real_runs.env import child_env, python_cmd
from real_runs.faults import KillSpec, damage_checkpoint
from real_runs.harness import RunConfig
from real_runs.store import CheckpointStore
from testbed import events as ev
from testbed.errors import InputError

#: How long the worker pauses inside a checkpoint write when a kill is planned there.
SLOW_WRITE_S = 5.0


class WorkerFailed(RuntimeError):
    """The worker exited on its own with an error (not killed by us)."""


@dataclass
class Timeline:
    """Timeline records (t_s since the supervisor started) in the shared vocabulary."""

    t0: float = field(default_factory=time.perf_counter)
    records: list[dict[str, Any]] = field(default_factory=list)

    def add(self, event: str, **fields: Any) -> None:
        if event not in ev.EVENT_KINDS:
            raise ValueError(event)
        self.records.append({"t_s": time.perf_counter() - self.t0, "event": event, **fields})

    def write(self, path: Path) -> None:
        with open(path, "w", encoding="utf-8") as stream:
            ev.write_events(self.records, stream)


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


def _spawn(request: dict[str, Any], extra_env: dict[str, str] | None = None) -> Incarnation:
    err = tempfile.NamedTemporaryFile(prefix="worker-", suffix=".err", delete=False)
    proc = subprocess.Popen(python_cmd("real_runs.worker", "--request", json.dumps(request)),
                            stdout=subprocess.PIPE, stderr=err, text=True,
                            env=child_env(extra_env))
    err.close()
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=_reader, args=(proc.stdout, lines), daemon=True).start()
    return Incarnation(proc, lines, time.perf_counter(), Path(err.name))


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


def supervise(cfg: RunConfig, ckpt_dir: Path, plan: list[KillSpec], *,
              timeline_path: Path | None = None, max_kills: int = 50, verify: bool = False,
              timeout_s: float = 900.0) -> dict[str, Any]:
    """Run ``cfg`` to completion under the kill plan; returns the summary record."""
    cfg = cfg.validated()
    if cfg.checkpoint_every <= 0:
        raise InputError("checkpoint-every must be positive for a supervised run",
                         field="checkpoint-every")
    store = CheckpointStore(ckpt_dir, cfg.framework, cfg.model, keep=cfg.keep)
    store.check_usable()
    timeline = Timeline()
    wall0 = time.perf_counter()
    deadline = wall0 + timeout_s
    kills = restarts = lost_steps = aborts = commits = 0
    corruptions: list[dict[str, Any]] = []
    damages: list[str] = []
    result = None
    incarnation = 0
    last_step_before_kill: int | None = None
    timeline.add(ev.JOB_START, incarnation=0, framework=cfg.framework, model=cfg.model,
                 steps=cfg.steps)
    while result is None:
        spec = plan[incarnation] if incarnation < len(plan) and kills < max_kills else None
        request = {"cfg": cfg.to_dict(), "ckpt_dir": str(ckpt_dir), "resume": True,
                   "pause_after_step": spec.at_step if spec is not None else None,
                   "write_delay_s": SLOW_WRITE_S if spec is not None and spec.during_checkpoint
                   else 0.0}
        inc = _spawn(request)
        range_start: int | None = None
        step = None
        writing: int | None = None
        killed = False
        resumed = incarnation == 0
        while True:
            timeout = 0.05
            if spec is not None and spec.at_s is not None:
                timeout = max(min(timeout, inc.started + spec.at_s - time.perf_counter()), 0.0)
            try:
                rec = inc.lines.get(timeout=timeout)
            except queue.Empty:
                rec = "tick"
            now = time.perf_counter()
            if now > deadline:
                inc.proc.kill()
                inc.proc.wait()
                raise WorkerFailed("supervised run exceeded its time limit")
            if rec is None:
                break
            if isinstance(rec, dict):
                kind = rec.get("event")
                if rec.get("type") == "result":
                    result = rec
                elif kind == "corruption_detected":
                    corruptions.append({"step": rec["step"], "reason": rec["reason"]})
                    timeline.add(ev.CORRUPTION_DETECTED, step=rec["step"], reason=rec["reason"])
                elif kind == "load":
                    timeline.add(ev.LOAD, step=rec["step"], duration_s=rec["duration_s"])
                elif kind == "step":
                    step = rec["step"]
                    if not resumed:
                        resumed = True
                        if last_step_before_kill is not None:
                            lost_steps += max(last_step_before_kill - (step - 1), 0)
                            last_step_before_kill = None
                        timeline.add(ev.RESTART_END, step=step - 1)
                    if range_start is None:
                        range_start = step
                elif kind == "checkpoint_begin":
                    if range_start is not None:
                        timeline.add(ev.STEPS, start_step=range_start, end_step=rec["step"])
                        range_start = None
                    writing = rec["step"]
                    timeline.add(ev.CHECKPOINT_BEGIN, step=rec["step"])
                elif kind == "checkpoint_commit":
                    writing = None
                    commits += 1
                    timeline.add(ev.CHECKPOINT_COMMIT, step=rec["step"], bytes=rec["bytes"],
                                 duration_s=rec["duration_s"])
            fire = False
            if spec is not None and result is None:
                if spec.at_step is not None and step is not None and step >= spec.at_step:
                    fire = True
                elif spec.during_checkpoint and writing is not None:
                    fire = True
                elif spec.at_s is not None and now - inc.started >= spec.at_s:
                    fire = True
            if fire:
                inc.proc.send_signal(signal.SIGKILL)
                inc.proc.wait()
                killed = True
                kills += 1
                if writing is not None:
                    aborts += 1
                    timeline.add(ev.CHECKPOINT_ABORT, step=writing)
                if range_start is not None and step is not None:
                    timeline.add(ev.STEPS, start_step=range_start, end_step=step)
                timeline.add(ev.FAILURE, cause="sigkill", node=0, step=step or 0,
                             when=spec.describe())
                last_step_before_kill = step if step is not None else last_step_before_kill
                break
        if killed:
            if spec is not None and spec.damage:
                newest = store.committed()
                if newest:
                    damages.append(damage_checkpoint(newest[-1].path, spec.damage, seed=kills))
            restarts += 1
            incarnation += 1
            timeline.add(ev.RESTART_BEGIN, incarnation=incarnation)
            inc.stderr_path.unlink(missing_ok=True)
            continue
        code = inc.proc.wait()
        if code != 0 or result is None:
            message = _stderr_tail(inc)
            inc.stderr_path.unlink(missing_ok=True)
            if code == 2:
                raise InputError(message.removeprefix("testbed: error: "))
            raise WorkerFailed(f"worker exited with status {code}: {message}")
        inc.stderr_path.unlink(missing_ok=True)
        if range_start is not None and step is not None:
            timeline.add(ev.STEPS, start_step=range_start, end_step=step)
    timeline.add(ev.JOB_END, step=result["step"])
    wall_time_s = time.perf_counter() - wall0
    summary: dict[str, Any] = {
        "framework": cfg.framework, "model": cfg.model, "seed": cfg.seed, "steps": cfg.steps,
        "checkpoint_every": cfg.checkpoint_every, "kills": kills, "restarts": restarts,
        "wall_time_s": wall_time_s, "lost_steps": lost_steps,
        "checkpoints_committed": commits, "checkpoint_aborts": aborts,
        "corruptions_detected": corruptions, "damaged": damages,
        "final_params_sha256": result["params_sha256"], "losses": result["losses"],
        "identical_to_uninterrupted": None, "env": result["env"],
    }
    if verify:
        reference = run_reference(cfg)
        summary["reference_params_sha256"] = reference["params_sha256"]
        summary["identical_to_uninterrupted"] = bool(
            reference["params_sha256"] == result["params_sha256"]
            and reference["losses"] == result["losses"])
    if timeline_path is not None:
        timeline.write(timeline_path)
        summary["timeline"] = str(timeline_path)
    summary["timeline_events"] = len(timeline.records)
    return summary


def default_timeline_path(ckpt_dir: Path) -> Path:
    return Path(ckpt_dir) / "timeline.jsonl"

