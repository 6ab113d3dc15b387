"""One framework's checkpoint formats, timed phase by phase against ``dd``.

For every model and format (:func:`real_runs.formats.format_table`, plus the harness's
own format for the harness models), ``repeats`` times:

1. **save** — the format's save into a fresh directory of the atomic
   :class:`~real_runs.ckpt_store.CheckpointStore` (``begin``): serialisation and the
   copy into the page cache (frameworks do not fsync);
2. **commit** — the store's ``commit``: fsync of every file, SHA-256 of every file, the
   manifest, the atomic rename (the harness format commits inside its save);
3. **checksum** — SHA-256 of the committed files again, alone, so ``commit − checksum``
   is what making the bytes durable costs;
4. **load** — the format's load from the committed directory (page cache warm);
5. **dd** of the same number of bytes: into the page cache (twice, the faster kept: the
   first write after a large checkpoint also pays for reclaiming page cache), with
   ``conv=fsync``, and read back (:mod:`real_runs.ckpt_study.dd`).

Medians over the repetitions and the fastest one. Run as ``python -m
real_runs.ckpt_study.bench --framework F --models resnet50,mlp --dir D``; one JSON
line per (model, format).
"""

from __future__ import annotations

import argparse
import hashlib
import shutil
import statistics
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

from real_runs.ckpt_store import CheckpointStore
from real_runs.ckpt_study.dd import dd_read_s, dd_write_s
from real_runs.ckpt_study.subjects import Subject, build_subject, check_study_model
from real_runs.env import write_json_lines
from real_runs.formats import FORMATS, HARNESS_FORMAT, format_table
from real_runs.harness import canonical_framework
from testbed.errors import UnknownNameError
from testbed.oracle.state import state_bytes

Format = tuple[Callable[[Path], Any], Callable[[Path], Any], bool, bool]


def study_formats(framework: str) -> tuple[str, ...]:
    """Formats the study measures for ``framework`` (the harness format: harness models)."""
    return (*FORMATS[canonical_framework(framework)], HARNESS_FORMAT)


def _formats_of(subject: Subject) -> dict[str, Format]:
    backend = _Holder(subject)
    table = format_table(backend)
    if subject.trainer is not None:
        from real_runs.formats import harness_format
        table[HARNESS_FORMAT] = harness_format(subject.trainer)
    return table


class _Holder:
    """What :func:`real_runs.formats.format_table` reads of a back end."""

    def __init__(self, subject: Subject) -> None:
        self.framework = subject.framework
        self.model = subject.model
        self.optimizer = subject.optimizer
        self.loss_fn = subject.loss_fn


def _sha256_s(directory: Path) -> float:
    started = time.perf_counter()
    for path in sorted(directory.rglob("*")):
        if path.is_file():
            digest = hashlib.sha256()
            with open(path, "rb") as stream:
                while block := stream.read(1 << 20):
                    digest.update(block)
    return time.perf_counter() - started


def _one_repeat(subject: Subject, name: str, fmt: Format, root: Path, i: int) -> dict[str, Any]:
    """One save, commit, checksum, load and the three dd runs (module doc)."""
    save, load, _, _ = fmt
    store = CheckpointStore(root / name.replace("/", "_"), subject.framework, subject.name,
                            keep=1_000_000)
    harness = name == HARNESS_FORMAT
    t0 = time.perf_counter()
    if harness:
        save(store.root)          # the trainer begins and commits through the store itself
        save_s, commit_s = time.perf_counter() - t0, None
        entry = store.committed()[-1]
    else:
        tmp = store.begin(i + 1)
        save(tmp)
        save_s = time.perf_counter() - t0
        t1 = time.perf_counter()
        entry = store.commit(tmp, i + 1)
        commit_s = time.perf_counter() - t1
    payload = [p for p in entry.path.rglob("*") if p.is_file() and p.name != "MANIFEST.json"]
    nbytes = sum(p.stat().st_size for p in payload)
    files = len(payload)
    sha_s = _sha256_s(entry.path)
    t0 = time.perf_counter()
    load(store.root if harness else entry.path)
    load_s = time.perf_counter() - t0
    target = root / f"dd-{i}.bin"
    # the first write after a checkpoint of this size pays for reclaiming page cache;
    # the second, into the pages the first freed, is what the page cache can take
    dd_first = dd_write_s(target, nbytes, fsync=False)
    target.unlink()
    dd_cached = min(dd_first, dd_write_s(target, nbytes, fsync=False))
    dd_read = dd_read_s(target)
    target.unlink()
    dd_fsync = dd_write_s(target, nbytes, fsync=True)
    target.unlink()
    shutil.rmtree(store.root, ignore_errors=True)
    return {"ckpt_bytes": nbytes, "files": files, "save_s": save_s, "commit_s": commit_s,
            "sha256_s": sha_s, "load_s": load_s, "dd_write_s": dd_cached,
            "dd_fsync_s": dd_fsync, "dd_read_s": dd_read}


def _median(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def measure(subject: Subject, formats: list[str] | None, repeats: int, root: Path
            ) -> list[dict[str, Any]]:
    """Every chosen format of ``subject`` (all by default), ``repeats`` times."""
    table = _formats_of(subject)
    chosen = [f for f in (formats or list(table)) if f in table]
    rows = []
    for name in chosen:
        runs = [_one_repeat(subject, name, table[name], root, i) for i in range(repeats)]
        _, _, with_optimizer, compressed = table[name]
        row: dict[str, Any] = {
            "framework": subject.framework, "model": subject.name,
            "parameters": subject.parameters, "tensors": subject.tensors,
            "state_bytes": state_bytes(subject.parameters, "momentum", "fp32"),
            "format": name, "includes_optimizer": with_optimizer, "compressed": compressed,
            "repeats": repeats, "ckpt_bytes": runs[-1]["ckpt_bytes"], "files": runs[-1]["files"],
            "commit_in_save": name == HARNESS_FORMAT}
        for key in ("save_s", "commit_s", "sha256_s", "load_s", "dd_write_s", "dd_fsync_s",
                    "dd_read_s"):
            row[key] = _median([r[key] for r in runs])
        row["save_min_s"] = min(r["save_s"] for r in runs)
        row["load_min_s"] = min(r["load_s"] for r in runs)
        rows.append(row)
    return rows


def check_formats(framework: str, formats: list[str] | None) -> None:
    known = study_formats(framework)
    unknown = [f for f in formats or () if f not in known]
    if unknown:
        raise UnknownNameError(f"unknown format(s) {', '.join(unknown)} for {framework}; "
                               f"known: {', '.join(known)}", field="--formats")


def bench(framework: str, models: list[str], formats: list[str] | None, repeats: int,
          directory: Path, seed: int = 0):
    """Rows of every model (module doc), yielded as each model is done."""
    framework = canonical_framework(framework)
    check_formats(framework, formats)
    for name in models:
        check_study_model(name)
    directory.mkdir(parents=True, exist_ok=True)
    for name in models:
        subject = build_subject(framework, name, seed)
        root = directory / f"{framework}-{name}"
        root.mkdir(parents=True, exist_ok=True)
        try:
            yield from measure(subject, formats, repeats, root)
        finally:
            shutil.rmtree(root, ignore_errors=True)
        del subject


def main(argv: list[str] | None = None) -> int:
    warnings.filterwarnings("ignore")
    parser = argparse.ArgumentParser(prog="real_runs.ckpt_study.bench")
    parser.add_argument("--framework", required=True)
    parser.add_argument("--models", default="resnet50", help="comma-separated models")
    parser.add_argument("--formats", default="", help="comma-separated formats (default all)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--dir", required=True, help="directory the checkpoints go to")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    formats = [f for f in args.formats.split(",") if f] or None
    models = [m for m in args.models.split(",") if m]
    return write_json_lines(lambda: bench(args.framework, models, formats, args.repeats,
                                          Path(args.dir), args.seed))


if __name__ == "__main__":
    sys.exit(main())
