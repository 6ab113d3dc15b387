"""The calibration set, part by part, resumable: ``python -m real_runs.slurm_calibration``
(the ``calibration-set`` step of the sbatch calibration job).

It measures the same design as ``testbed calibrate-local`` (:mod:`real_runs.calibration_set`,
the same harness runs and the same ``fit.jsonl`` / ``holdout.jsonl`` / ``MANIFEST.json``),
but commits part by part, for a job that a time limit may stop:

* every part (the step times, each collective, checkpoint and supervised part) appends
  its records to ``fit.jsonl`` and ``holdout.jsonl`` as soon as it is measured, then a
  ``part_commit`` JSON line to ``parts.log`` — what :mod:`real_runs.requeue` waits for
  after Slurm's time-limit warning;
* a rerun in the same folder skips the committed parts and measures the rest (records
  a stopped part had not committed are dropped first, so none is counted twice);
* a folder that holds another design is refused.

The manifest is written when every part is in.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

from real_runs.calibration_set import (
    FIT_FILE,
    HOLDOUT_FILE,
    MANIFEST_FILE,
    Collected,
    run_checkpoints,
    run_collectives,
    run_steps,
    run_supervised,
)
from testbed.calibration.design import CheckpointPart, CollectivePart, Design, SupervisedPart
from testbed.errors import InputError, TestbedError

PARTS_FILE = "parts.log"
COMMIT_EVENT = "part_commit"

Part = tuple[str, Callable[[Collected], None]]


def design_parts(design: Design, progress: Callable[[str], None]) -> list[Part]:
    """The design's parts in measuring order, each with a name and what measures it."""
    parts: list[Part] = [("steps", partial(_run_steps, design, progress))]
    parts += [(f"collectives-{c.backend}-{i + 1}", partial(_run_collectives, c, progress))
              for i, c in enumerate(design.collectives)]
    parts += [(f"checkpoints-{c.framework}-{i + 1}", partial(_run_checkpoints, c, progress))
              for i, c in enumerate(design.checkpoints)]
    parts += [(f"supervised-{i + 1}", partial(_run_supervised, s, i, progress))
              for i, s in enumerate(design.supervised)]
    return parts


def _run_steps(design: Design, progress: Callable[[str], None], out: Collected) -> None:
    run_steps(design.steps, design, out, progress)


def _run_collectives(part: CollectivePart, progress: Callable[[str], None],
                     out: Collected) -> None:
    run_collectives(part, out, progress)


def _run_checkpoints(part: CheckpointPart, progress: Callable[[str], None],
                     out: Collected) -> None:
    run_checkpoints(part, out, progress)


def _run_supervised(part: SupervisedPart, index: int, progress: Callable[[str], None],
                    out: Collected) -> None:
    run_supervised(part, index, out, progress)


def _fingerprint(design: Design) -> str:
    return hashlib.sha256(json.dumps(design.to_dict(), sort_keys=True).encode()).hexdigest()


def _lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines(keepends=True) if path.exists() else []


def committed_parts(folder: Path, design: Design) -> list[dict]:
    """The parts already committed in ``folder`` (refusing another design's folder)."""
    path = folder / PARTS_FILE
    entries = [json.loads(line) for line in _lines(path) if line.strip()]
    head = next((e for e in entries if e.get("event") == "design"), None)
    if head is not None and head.get("sha256") != _fingerprint(design):
        raise InputError(f"{folder} holds the calibration of design {head.get('design')!r} "
                         f"(another design than {design.name!r}): give the job another "
                         "--name", source=str(path))
    return [e for e in entries if e.get("event") == COMMIT_EVENT]


def _trim(path: Path, keep: int) -> None:
    """Keep the first ``keep`` records of ``path`` (drop those of an uncommitted part)."""
    lines = [line for line in _lines(path) if line.strip()]
    if len(lines) > keep:
        from testbed.io.write import write_text
        write_text(path, "".join(lines[:keep]))


def _append_line(path: Path, entry: dict) -> None:
    with open(path, "a", encoding="utf-8") as stream:
        stream.write(json.dumps(entry, sort_keys=True) + "\n")
        stream.flush()
        os.fsync(stream.fileno())


def measure(design: Design, folder: Path, progress: Callable[[str], None]) -> dict:
    """Measure the parts of ``design`` not yet committed in ``folder``; the manifest."""
    from real_runs.env import capture_environment
    from real_runs.records import utc_now
    from testbed.io.write import write_json
    from testbed.measurements import write_records
    folder.mkdir(parents=True, exist_ok=True)
    done = committed_parts(folder, design)
    fit_path, holdout_path = folder / FIT_FILE, folder / HOLDOUT_FILE
    _trim(fit_path, sum(e["fit"] for e in done))
    _trim(holdout_path, sum(e["holdout"] for e in done))
    if not (folder / PARTS_FILE).exists():
        _append_line(folder / PARTS_FILE, {"event": "design", "design": design.name,
                                           "sha256": _fingerprint(design), "started": utc_now()})
    names = {e["part"] for e in done}
    for name, measure_part in design_parts(design, progress):
        if name in names:
            progress(f"{name}: committed earlier, skipped")
            continue
        out, t0 = Collected(), time.perf_counter()
        measure_part(out)
        write_records(fit_path, out.fit, append=True)
        write_records(holdout_path, out.holdout, append=True)
        entry = {"event": COMMIT_EVENT, "part": name, "fit": len(out.fit),
                 "holdout": len(out.holdout), "wall_s": round(time.perf_counter() - t0, 3),
                 "at": utc_now()}
        _append_line(folder / PARTS_FILE, entry)
        done.append(entry)
        progress(f"{name}: {len(out.fit)} fit + {len(out.holdout)} held-out record(s) "
                 "committed")
    manifest = {"design": design.to_dict(), "finished": utc_now(),
                "parts": [{"part": e["part"], "wall_s": e["wall_s"]} for e in done],
                "machine": capture_environment("none").to_dict(),
                "files": [_entry(fit_path), _entry(holdout_path)]}
    write_json(folder / MANIFEST_FILE, manifest)
    return manifest


def _entry(path: Path) -> dict:
    data = path.read_bytes() if path.exists() else b""
    return {"file": path.name, "records": sum(1 for line in data.splitlines() if line.strip()),
            "sha256": hashlib.sha256(data).hexdigest()}


def main(argv: list[str] | None = None) -> int:
    from testbed.calibration.design import DESIGNS
    parser = argparse.ArgumentParser(prog="real_runs.slurm_calibration")
    parser.add_argument("--design", choices=sorted(DESIGNS), default="quick")
    parser.add_argument("--out", required=True, help="folder for records and manifest")
    args = parser.parse_args(argv)
    try:
        manifest = measure(DESIGNS[args.design](), Path(args.out),
                           lambda m: print(m, file=sys.stderr, flush=True))
    except InputError as exc:
        print(f"testbed: error: {exc.format()}", file=sys.stderr)
        return 2
    except TestbedError as exc:
        print(f"testbed: failed: {exc}", file=sys.stderr)
        return 1
    print(json.dumps({"files": manifest["files"], "parts": manifest["parts"]}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
