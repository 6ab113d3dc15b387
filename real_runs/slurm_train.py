"""A supervised fault-injection training run that survives Slurm requeues:
``python -m real_runs.slurm_train`` (the ``train`` step of ``testbed real-run slurm``).

Everything lives in one results folder, named by the user (not by a job id), so a
requeued or resubmitted job continues the same run:

* ``ckpt/``: the checkpoints; every incarnation resumes from the newest intact one
  (the worker's own resume: partial writes removed, damaged checkpoints skipped);
* ``timeline.jsonl``: the supervisor's timeline, appended record by record (fsynced)
  by every incarnation — each one starts with its own ``job_start``;
* ``measurements.jsonl``: the records, appended when they are measured;
* ``summary.json``: the summary of the incarnation that finished the run.

The kill plan (``--kill-trace``) is one plan for the whole run: kills that fired in
earlier incarnations (the ``failure`` events of the timeline) are not fired again, the
next incarnation starts with the next kill.

SIGTERM (what :mod:`real_runs.requeue` sends when Slurm warns of the time limit, and
what Slurm sends at the limit) stops the run the way Ctrl-C does: the supervisor kills
its worker and closes the timeline; this runner then appends the ``restart`` records
of the restarts this incarnation measured (from its part of the timeline), so a
time limit loses none of them, and exits 130.

What the records say, and what they cannot say yet: ``restart`` records are complete
measurements whatever happens to the job; they are numbered on across incarnations
and carry the run's name as ``run_id``. The ``supervised_run`` record is written when
one incarnation ran the whole run (steps 1…N). A run that resumed from an earlier
incarnation's checkpoint gets none: the record format has no first step, so a
replay would price N steps for a run that trained N − k here (its timeline keeps every
incarnation; see the README's Slurm section).
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

from testbed import events as ev
from testbed.errors import InputError, TestbedError

CKPT_FOLDER = "ckpt"
TIMELINE_FILE = "timeline.jsonl"
RECORDS_FILE = "measurements.jsonl"
SUMMARY_FILE = "summary.json"
#: The run's configuration and kill plan, written by its first incarnation: a later one
#: with another configuration is refused (its checkpoints would not fit).
RUN_FILE = "run.json"
#: Exit status of a run stopped by SIGTERM (as the CLI's Ctrl-C).
STOPPED_STATUS = 130
SOURCE = "real_runs.slurm_train"


def read_timeline(path: Path) -> list[dict[str, Any]]:
    """The timeline's events (a last line cut by a power loss is left out)."""
    if not path.exists():
        return []
    out = []
    with open(path, encoding="utf-8", errors="replace") as stream:
        for line in stream:
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if isinstance(record, dict) and "event" in record:
                out.append(record)
    return out


def restart_parts(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The restarts of a timeline segment, with their measured parts: kill (``failure``)
    to the first step of the new process (``restart_end``)."""
    parts, kill_t = [], None
    for e in events:
        if e.get("event") == ev.FAILURE:
            kill_t = float(e["t_s"])
        elif e.get("event") == ev.RESTART_END and kill_t is not None:
            parts.append({"restart_s": float(e["t_s"]) - kill_t,
                          **{k: e.get(k, 0.0) for k in ("process_start_s", "setup_s", "import_s",
                                                        "load_s", "first_step_s")},
                          "ckpt_bytes": int(e.get("ckpt_bytes", 0))})
            kill_t = None
    return parts


def resumed_from(events: list[dict[str, Any]]) -> int:
    """The step an incarnation's first process loaded (0: it started from scratch)."""
    for e in events:
        if e.get("event") in (ev.FAILURE, ev.RESTART_BEGIN):
            break
        if e.get("event") == ev.LOAD:
            return int(e["step"])
    return 0


def restart_records(parts: list[dict[str, Any]], *, first: int, framework: str, model: str,
                    env: dict, run_id: str, measured_at: str) -> list:
    """``restart`` records of ``parts``, numbered from ``first``."""
    from testbed.measurements import make_record
    return [make_record("restart", env=env, measured_at=measured_at, source=SOURCE,
                        run_id=run_id, framework=framework, model=model,
                        incarnation=first + i, metrics=part)
            for i, part in enumerate(p for p in parts if p["restart_s"] > 0)]


class _Stop:
    """SIGTERM stops the run once, like Ctrl-C; a second SIGTERM (Slurm signals every
    process of the job, the wrapper passes its own on) must not cut the clean-up."""

    requested = False

    @classmethod
    def on_sigterm(cls, _signum, _frame) -> None:
        if not cls.requested:
            cls.requested = True
            raise KeyboardInterrupt


def _append(path: Path, records: list) -> int:
    from testbed.measurements import write_records
    return write_records(path, records, append=True, field="--results") if records else 0


def _config(args: argparse.Namespace):
    from real_runs.harness import RunConfig
    cfg = RunConfig(framework=args.framework, model=args.model, seed=args.seed,
                    steps=args.steps, checkpoint_every=args.checkpoint_every, keep=args.keep,
                    width=args.width, depth=args.depth, batch_size=args.batch_size,
                    device=args.device).validated()
    if cfg.checkpoint_every <= 0:
        raise InputError("a run that survives requeues needs checkpoints: give "
                         "--checkpoint-every >= 1", field="--checkpoint-every")
    cfg.check_fits()
    return cfg


def check_same_run(results: Path, identity: dict[str, Any]) -> None:
    """Write the run's identity on the first incarnation; refuse a different one later."""
    from testbed.io.read import parse_json, read_text
    from testbed.io.write import write_json
    path = results / RUN_FILE
    if not path.exists():
        write_json(path, identity, field="--results")
        return
    before = parse_json(read_text(path), source=str(path))
    if not isinstance(before, dict):
        raise InputError("not a run description", source=str(path))
    flat_before, flat_now = _flat(before), _flat(identity)
    for key in sorted(set(flat_before) | set(flat_now)):
        if flat_before.get(key) != flat_now.get(key):
            raise InputError(f"this results folder holds another run ({key} is "
                             f"{flat_before.get(key)!r} there, {flat_now.get(key)!r} now): "
                             "give the job another --name, or the same options",
                             source=str(path), field=key)


def _flat(data: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in data.items():
        if isinstance(value, dict):
            out.update(_flat(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def run(args: argparse.Namespace) -> int:
    """One incarnation of the run (see the module docstring); the exit status."""
    from real_runs.env import capture_environment
    from real_runs.faults import parse_kill_trace
    from real_runs.records import supervised_records, utc_now
    from real_runs.supervisor import supervise
    from testbed.io.write import write_json
    from testbed.measurements import Restart

    cfg = _config(args)
    results = Path(args.results)
    results.mkdir(parents=True, exist_ok=True)
    timeline, records = results / TIMELINE_FILE, results / RECORDS_FILE
    plan = parse_kill_trace(args.kill_trace) if args.kill_trace else []
    check_same_run(results, {"name": args.name, "config": cfg.to_dict(),
                             "kills": [asdict(k) for k in plan]})
    history = read_timeline(timeline)
    fired = sum(1 for e in history if e.get("event") == ev.FAILURE)
    earlier_restarts = sum(1 for e in history if e.get("event") == ev.RESTART_END)
    remaining = plan[fired:]
    print(f"train {args.name}: {'resuming' if history else 'starting'} {cfg.framework} "
          f"{cfg.model}, {cfg.steps} steps; {fired} of {len(plan)} kill(s) already fired",
          file=sys.stderr, flush=True)
    signal.signal(signal.SIGTERM, _Stop.on_sigterm)
    try:
        summary = supervise(cfg, results / CKPT_FOLDER, remaining, timeline_path=timeline,
                            max_kills=len(remaining), timeout_s=args.timeout_s)
    except (KeyboardInterrupt, TestbedError):
        # a worker that got Slurm's SIGTERM before the supervisor did fails on its own
        if not _Stop.requested:
            raise
        mine = read_timeline(timeline)[len(history):]
        env = capture_environment(cfg.framework).to_dict()
        kept = _append(records, restart_records(
            restart_parts(mine), first=earlier_restarts + 1, framework=cfg.framework,
            model=cfg.model, env=env, run_id=args.name, measured_at=utc_now()))
        last = max((int(e["step"]) for e in mine if e.get("event") == ev.CHECKPOINT_COMMIT),
                   default=None)
        print(f"train {args.name}: stopped; last checkpoint of this incarnation: "
              f"{last if last is not None else 'none'}; {kept} restart record(s) appended",
              file=sys.stderr, flush=True)
        return STOPPED_STATUS
    stamp = utc_now()
    resumed = resumed_from(read_timeline(timeline)[len(history):])
    produced = supervised_records(summary, measured_at=stamp, run_id=args.name, source=SOURCE)
    run_record, restarts = produced[0], produced[1:]
    renumbered = [r.model_copy(update={"incarnation": earlier_restarts + r.incarnation})
                  for r in restarts if isinstance(r, Restart)]
    written = _append(records, ([] if resumed else [run_record]) + renumbered)
    summary.pop("timeline_records", None)
    summary.update({"name": args.name, "resumed_from_step": resumed,
                    "records_appended": written})
    write_json(results / SUMMARY_FILE, summary, field="--results")
    print(f"train {args.name}: done, {summary['kills']} kill(s) and {summary['restarts']} "
          f"restart(s) in this incarnation, {written} record(s) appended"
          + (f"; resumed from step {resumed}, so no supervised_run record (the format has "
             "no first step)" if resumed else ""), file=sys.stderr, flush=True)
    return 0


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="real_runs.slurm_train",
                                description="A supervised training run that survives requeues.")
    p.add_argument("--results", required=True, help="the run's folder (named, resumable)")
    p.add_argument("--name", required=True, help="the run's name (records' run_id)")
    p.add_argument("--framework", required=True)
    p.add_argument("--model", default="mlp")
    p.add_argument("--steps", type=int, required=True)
    p.add_argument("--checkpoint-every", type=int, default=10)
    p.add_argument("--keep", type=int, default=3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--width", type=int, default=None)
    p.add_argument("--depth", type=int, default=None)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--device", default="cpu")
    p.add_argument("--kill-trace", default=None, help="JSONL kill plan for the whole run")
    p.add_argument("--timeout-s", type=float, default=86400.0,
                   help="longest one incarnation may run")
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return run(args)
    except InputError as exc:
        print(f"testbed: error: {exc.format()}", file=sys.stderr)
        return 2
    except TestbedError as exc:
        print(f"testbed: failed: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
