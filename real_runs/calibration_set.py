"""Measure a designed calibration set on this machine (``testbed calibrate-local``).

The design (:mod:`testbed.calibration.design`) says what to run; this module runs it
with the harnesses — step times in one child process per framework
(``real_runs.stepbench``), 2-process gloo data parallelism (``real_runs.profile``),
collectives (``real_runs.collbench`` for gloo, ``mpirun … real_runs.mpibench`` for
MPI when ``mpirun`` is here), checkpoint formats (``real_runs.formats``) and
supervised fault-injection runs (``real_runs.supervisor``) — and writes, into one
folder:

* ``fit.jsonl``: the records the profile is fitted on;
* ``holdout.jsonl``: the records of the configurations left out (to verify with);
* ``MANIFEST.json``: the design, the machine, each part's wall time and every file's
  SHA-256 and record count.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path

from real_runs.env import ChildFailed, capture_environment, child_env, python_cmd
from real_runs.method import Method
from real_runs.records import (
    checkpoint_records,
    collective_records,
    step_records,
    supervised_records,
    utc_now,
)
from testbed.calibration.design import (
    FIT_FILE,
    HOLDOUT_FILE,
    MANIFEST_FILE,
    CheckpointPart,
    CollectivePart,
    Design,
    StepPoint,
    SupervisedPart,
)
from testbed.io.write import write_json
from testbed.measurements import Environment, Record, write_records

__all__ = ["FIT_FILE", "HOLDOUT_FILE", "MANIFEST_FILE", "Collected", "design_method",
           "run_checkpoints", "run_collectives", "run_design", "run_steps", "run_supervised"]

Progress = Callable[[str], None]


@dataclass
class Collected:
    """Records measured so far, split into fitted and held-out, with part timings."""

    fit: list[Record] = field(default_factory=list)
    holdout: list[Record] = field(default_factory=list)
    parts: list[dict] = field(default_factory=list)

    def add(self, records: list[Record], holdout: bool) -> None:
        (self.holdout if holdout else self.fit).extend(records)


#: ``steps`` of a timed configuration: only a bound (the benchmark runs what it times).
OPEN_ENDED_STEPS = 10**6
#: Fewest timed steps per round of a data-parallel point (see :func:`run_steps`).
DP_TIMED_STEPS = 40


def _cfg(p: StepPoint) -> dict:
    cfg = {"framework": p.framework, "model": p.model, "width": p.width,
           "batch_size": p.batch, "precision": p.precision, "device": p.device,
           "steps": OPEN_ENDED_STEPS}
    if p.depth is not None:
        cfg["depth"] = p.depth
    return cfg


def design_method(design: Design) -> Method:
    """The one measurement method (:mod:`real_runs.method`) with the design's warm-up,
    rounds, steps per round and time budget — what ``real-run profile --warmup W
    --rounds R --steps S`` measures too."""
    return Method(warmup=design.warmup, rounds=design.rounds, steps=design.timed_steps,
                  budget_s=design.step_budget_s).checked()


def run_steps(points: tuple[StepPoint, ...], design: Design, out: Collected,
              progress: Progress) -> None:
    """Single-process points in one ``stepbench`` child per framework; data-parallel
    points as gloo profiles of their process count — both by the design's method."""
    method = design_method(design)
    single = [p for p in points if p.processes == 1]
    for framework in sorted({p.framework for p in single}):
        mine = [p for p in single if p.framework == framework]
        progress(f"step times: {framework}, {len(mine)} configurations")
        args = ["--configs", json.dumps([_cfg(p) for p in mine]),
                "--warmup", str(method.warmup), "--steps", str(method.steps),
                "--budget-s", str(method.budget_s), "--rounds", str(method.rounds)]
        proc = subprocess.run(python_cmd("real_runs.stepbench", *args), capture_output=True,
                              text=True, env=child_env(), timeout=1800)
        if proc.returncode != 0:
            tail = proc.stderr.strip().splitlines()
            raise ChildFailed(f"step benchmark failed: {tail[-1] if tail else proc.returncode}")
        results = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
        stamp = utc_now()
        for p, result in zip(mine, results, strict=True):
            out.add(step_records(result, measured_at=stamp), p.holdout)
    # ranks sharing the cores have heavy-tailed step times with two modes (the woken
    # rank gets a core at once, or after another task's time slice): the median of 24
    # steps of one configuration moved 3.5–5.2 ms between repeats, of 120 steps
    # 2.5–3.8 ms; the steps are cheap beside the processes' start, so take more
    dp_method = replace(method, steps=max(method.steps, DP_TIMED_STEPS))
    for p in (p for p in points if p.processes > 1):
        from real_runs.harness import RunConfig
        from real_runs.profile import profile_grid
        progress(f"data parallel: {p.model} w{p.width} b{p.batch} × {p.processes} "
                 f"({p.gradient_sync})")
        cfg = RunConfig(framework=p.framework, model=p.model, width=p.width, depth=p.depth,
                        batch_size=p.batch, precision=p.precision, steps=dp_method.steps)
        report = profile_grid([cfg], processes=p.processes, method=dp_method,
                              gradient_sync=p.gradient_sync)[0]
        out.add(step_records(report["result"], measured_at=utc_now(), source="real_runs.ddp",
                             processes=p.processes, backend="gloo",
                             gradient_sync=p.gradient_sync), p.holdout)


def run_collectives(part: CollectivePart, out: Collected, progress: Progress) -> None:
    sizes = tuple(sorted(set(part.fit_sizes) | set(part.holdout_sizes)))
    progress(f"collectives: {part.backend} × {part.processes}, {len(sizes)} sizes")
    env: Environment | dict
    if part.backend == "gloo":
        from real_runs.collbench import run_local
        rows = run_local(part.processes, sizes, part.repeats, rounds=part.rounds)
        env = capture_environment("torch", world_size=part.processes)
    else:
        if shutil.which("mpirun") is None:
            progress("collectives: no mpirun here, MPI skipped")
            return
        rows, env = _mpi_rows(part, sizes)
    held = set(part.holdout_sizes) - set(part.fit_sizes)
    stamp = utc_now()
    for row in rows:
        recs = collective_records([row], env, measured_at=stamp, source=f"{part.backend} bench")
        out.add(recs, row["message_bytes"] in held)


def _mpi_rows(part: CollectivePart, sizes: tuple[int, ...]) -> tuple[list[dict], dict]:
    cmd = ["mpirun", "-np", str(part.processes), "--oversubscribe",
           *python_cmd("real_runs.mpibench", "--sizes", ",".join(map(str, sizes)),
                       "--repeats", str(part.repeats))]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=child_env(), timeout=900)
    if proc.returncode != 0:
        tail = proc.stderr.strip().splitlines()
        raise ChildFailed(f"MPI benchmark failed: {tail[-1] if tail else proc.returncode}")
    report = json.loads(next(line for line in proc.stdout.splitlines() if line.startswith("{")))
    rows = [{**r, "backend": "mpi", "processes": r["world_size"]} for r in report["rows"]]
    return rows, report["env"]


def run_checkpoints(part: CheckpointPart, out: Collected, progress: Progress) -> None:
    from real_runs.formats import run_bench_subprocess
    widths = sorted(set(part.fit_widths) | set(part.holdout_widths))
    progress(f"checkpoints: {part.framework} {', '.join(part.formats)}, {len(widths)} sizes")
    reports = run_bench_subprocess(part.framework, part.model, widths, part.repeats,
                                   list(part.formats), timeout_s=1800)
    stamp = utc_now()
    for width, report in zip(widths, reports, strict=True):
        out.add(checkpoint_records(report, measured_at=stamp),
                width in part.holdout_widths and width not in part.fit_widths)


def run_supervised(part: SupervisedPart, index: int, out: Collected,
                   progress: Progress) -> None:
    from real_runs.faults import KillSpec
    from real_runs.harness import RunConfig
    from real_runs.supervisor import supervise
    progress(f"supervised run {index + 1}: {part.framework} {part.model}, "
             f"{len(part.kills)} kill(s)")
    cfg = RunConfig(framework=part.framework, model=part.model, width=part.width,
                    steps=part.steps, checkpoint_every=part.checkpoint_every,
                    device=part.device)
    plan = [KillSpec(**k) for k in part.kills]
    ckpt = Path(tempfile.mkdtemp(prefix="testbed-calib-ckpt-"))
    try:
        summary = supervise(cfg, ckpt, plan, max_kills=len(plan))
    finally:
        shutil.rmtree(ckpt, ignore_errors=True)
    run_id = f"run{index + 1}-{part.framework}-{part.model}-{len(plan)}k"
    out.add(supervised_records(summary, measured_at=utc_now(), run_id=run_id,
                               source="real_runs.supervisor"), part.holdout)


def _timed(out: Collected, name: str, fn: Callable[[], None]) -> None:
    t0 = time.perf_counter()
    fn()
    out.parts.append({"part": name, "wall_s": round(time.perf_counter() - t0, 3)})


def _file_entry(path: Path, records: int) -> dict:
    return {"file": path.name, "records": records,
            "sha256": hashlib.sha256(path.read_bytes()).hexdigest()}


def run_design(design: Design, folder: Path, progress: Progress = lambda _: None) -> dict:
    """Measure ``design``, write the records and the manifest into ``folder``; returns
    the manifest."""
    folder.mkdir(parents=True, exist_ok=True)
    out = Collected()
    started, t0 = utc_now(), time.perf_counter()
    _timed(out, "steps", partial(run_steps, design.steps, design, out, progress))
    for coll in design.collectives:
        _timed(out, f"collectives {coll.backend}", partial(run_collectives, coll, out, progress))
    for ck in design.checkpoints:
        _timed(out, f"checkpoints {ck.framework}", partial(run_checkpoints, ck, out, progress))
    for i, sup in enumerate(design.supervised):
        _timed(out, f"supervised {i + 1}", partial(run_supervised, sup, i, out, progress))
    fit_path, holdout_path = folder / FIT_FILE, folder / HOLDOUT_FILE
    write_records(fit_path, out.fit)
    write_records(holdout_path, out.holdout)
    manifest = {"design": design.to_dict(), "started": started, "finished": utc_now(),
                "wall_s": round(time.perf_counter() - t0, 3), "parts": out.parts,
                "machine": capture_environment("none").to_dict(),
                "files": [_file_entry(fit_path, len(out.fit)),
                          _file_entry(holdout_path, len(out.holdout))]}
    write_json(folder / MANIFEST_FILE, manifest)
    return manifest


def main(argv: list[str] | None = None) -> int:
    """``python -m real_runs.calibration_set --design quick|full|gpu --out DIR``."""
    import argparse
    import sys

    from testbed.calibration.design import DESIGNS
    from testbed.errors import InputError
    parser = argparse.ArgumentParser(prog="real_runs.calibration_set")
    parser.add_argument("--design", choices=sorted(DESIGNS), default="quick")
    parser.add_argument("--out", required=True, help="folder for records and manifest")
    args = parser.parse_args(argv)
    try:
        manifest = run_design(DESIGNS[args.design](), Path(args.out),
                              lambda m: print(m, file=sys.stderr, flush=True))
    except InputError as exc:
        print(f"testbed: error: {exc.format()}", file=sys.stderr)
        return 2
    print(json.dumps({"wall_s": manifest["wall_s"], "files": manifest["files"]}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
