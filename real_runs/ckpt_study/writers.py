"""1…N checkpoint writer processes saving at the same moment on this machine.

Each writer is its own process (``python -m real_runs.ckpt_study.writers``, the
framework imported, single-threaded) holding its share of a model's training state
(:mod:`real_runs.ckpt_study.payload`): ``sharded`` — writer i of N saves 1/N of the
tensors, as a sharded checkpoint (``torch.distributed.checkpoint``) does; ``all`` —
every writer saves the whole state, as every rank writing its own copy to node-local
storage does. The parent waits until every writer has built its tensors, then sends
``go`` to all; each saves with its framework's own call (``torch.save``,
``tf.train.Checkpoint.write``, Chainer ``save_npz``), fsyncs its files, and reports
``time.monotonic()`` (one clock for every process on Linux) at the start, when the
save returned and when the fsync did. The checkpoint takes from the first start to
the last end: ``wall_s`` into the page cache, ``durable_s`` on the device. The same
bytes through N concurrent ``dd … conv=fsync`` give the raw bound at each N.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
import warnings
from pathlib import Path
from typing import IO, Any

from real_runs.env import ChildFailed, child_env, python_cmd

MODES = ("sharded", "all")
#: Seconds a writer may take to import its framework and build its tensors.
READY_TIMEOUT_S = 300.0


# -- child ------------------------------------------------------------------------------

def _saver(framework: str, arrays: dict):
    """(save(path) -> files written) with the framework's own call."""
    if framework == "torch":
        import torch
        torch.set_num_threads(1)
        tensors = {k: torch.from_numpy(v) for k, v in arrays.items()}

        def save_torch(path: Path) -> list[Path]:
            torch.save(tensors, path / "state.pt")
            return [path / "state.pt"]
        return save_torch
    if framework == "tensorflow":
        import tensorflow as tf
        variables = [tf.Variable(v) for _, v in sorted(arrays.items())]
        ckpt = tf.train.Checkpoint(state=variables)

        def save_tf(path: Path) -> list[Path]:
            ckpt.write(str(path / "tfckpt"))
            return sorted(path.iterdir())
        return save_tf
    from real_runs.backends.chainer_backend import import_chainer
    chainer = import_chainer()
    link = chainer.Link()
    with link.init_scope():
        for i, (_, v) in enumerate(sorted(arrays.items())):
            setattr(link, f"p{i:04d}", chainer.Parameter(v))

    def save_chainer(path: Path) -> list[Path]:
        chainer.serializers.save_npz(str(path / "state.npz"), link, compression=False)
        return [path / "state.npz"]
    return save_chainer


def _fsync(paths: list[Path], directory: Path) -> None:
    for path in [*paths, directory]:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def child_main(argv: list[str] | None = None) -> int:
    warnings.filterwarnings("ignore")
    parser = argparse.ArgumentParser(prog="real_runs.ckpt_study.writers")
    parser.add_argument("--framework", required=True)
    parser.add_argument("--model", default="resnet50")
    parser.add_argument("--index", type=int, required=True)
    parser.add_argument("--writers", type=int, required=True)
    parser.add_argument("--mode", choices=MODES, required=True)
    parser.add_argument("--dir", required=True)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    from real_runs.ckpt_study.payload import payload, shard, state_shapes
    from real_runs.ckpt_study.subjects import model_ir
    shapes = state_shapes(model_ir(args.model))
    if args.mode == "sharded":
        shapes = shard(shapes, args.index, args.writers)
    arrays = payload(shapes, args.seed, args.index)
    save = _saver(args.framework, arrays)
    out = sys.stdout
    out.write(json.dumps({"ready": True, "bytes": int(sum(a.nbytes for a in arrays.values()))})
              + "\n")
    out.flush()
    for round_no, line in enumerate(sys.stdin):
        if line.strip() != "go":
            break
        target = Path(args.dir) / f"round-{round_no:03d}" / f"writer-{args.index:04d}"
        target.mkdir(parents=True, exist_ok=True)
        t0 = time.monotonic()
        files = save(target)
        t1 = time.monotonic()
        _fsync(files, target)
        t2 = time.monotonic()
        out.write(json.dumps({"t0": t0, "t1": t1, "t2": t2,
                              "disk_bytes": sum(p.stat().st_size for p in files)}) + "\n")
        out.flush()
    return 0


# -- parent -----------------------------------------------------------------------------

def _read(proc: subprocess.Popen, what: str) -> dict[str, Any]:
    stdout: IO[str] = proc.stdout   # type: ignore[assignment]  # opened with PIPE
    line = stdout.readline()
    if not line:
        code = proc.wait()
        raise ChildFailed(f"{what}: writer process {proc.pid} exited with status {code}")
    return json.loads(line)


def _start(framework: str, model: str, writers: int, mode: str, directory: Path, seed: int
           ) -> list[subprocess.Popen]:
    procs = []
    for i in range(writers):
        cmd = python_cmd("real_runs.ckpt_study.writers", "--framework", framework, "--model",
                         model, "--index", str(i), "--writers", str(writers), "--mode", mode,
                         "--dir", str(directory), "--seed", str(seed))
        procs.append(subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      stderr=subprocess.DEVNULL, text=True, env=child_env()))
    return procs


def _stop(procs: list[subprocess.Popen]) -> None:
    for proc in procs:
        if proc.poll() is None:
            try:
                proc.stdin.close()   # type: ignore[union-attr]  # opened with PIPE
                proc.wait(timeout=30)
            except (OSError, subprocess.TimeoutExpired):
                proc.kill()
                proc.wait()


def writers_round(framework: str, model: str, writers: int, mode: str, repeats: int,
                  directory: Path, seed: int = 0) -> dict[str, Any]:
    """``repeats`` simultaneous saves by ``writers`` processes (module doc)."""
    what = f"{writers} {framework} writer(s)"
    procs = _start(framework, model, writers, mode, directory, seed)
    try:
        ready = [_read(p, what) for p in procs]
        walls, durables, per_writer = [], [], []
        for _ in range(repeats):
            for p in procs:
                p.stdin.write("go\n")   # type: ignore[union-attr]  # opened with PIPE
                p.stdin.flush()         # type: ignore[union-attr]
            marks = [_read(p, what) for p in procs]
            start = min(m["t0"] for m in marks)
            walls.append(max(m["t1"] for m in marks) - start)
            durables.append(max(m["t2"] for m in marks) - start)
            per_writer += [m["t1"] - m["t0"] for m in marks]
            for child in sorted(directory.glob("round-*")):
                shutil.rmtree(child, ignore_errors=True)
    finally:
        _stop(procs)
        shutil.rmtree(directory, ignore_errors=True)
    total = sum(r["bytes"] for r in ready)
    return {"framework": framework, "model": model, "mode": mode, "writers": writers,
            "repeats": repeats, "bytes_total": total, "bytes_per_writer": total // writers,
            "wall_s": statistics.median(walls), "wall_min_s": min(walls),
            "durable_s": statistics.median(durables), "durable_min_s": min(durables),
            "durable_runs_s": durables,
            "writer_save_s": statistics.median(per_writer),
            "dd_durable_s": min(dd_concurrent_s(total, writers, directory)
                                for _ in range(repeats))}


def dd_concurrent_s(total_bytes: int, writers: int, directory: Path) -> float:
    """Seconds for ``writers`` concurrent ``dd … conv=fsync`` of ``total_bytes`` together
    (the study keeps the fastest of as many runs as the writers had)."""
    exe = shutil.which("dd")
    if exe is None:
        raise ChildFailed("dd (GNU coreutils) is not on PATH")
    directory.mkdir(parents=True, exist_ok=True)
    share = total_bytes // writers
    started = time.monotonic()
    procs = [subprocess.Popen([exe, "if=/dev/zero", f"of={directory / f'dd-{i}.bin'}", "bs=4M",
                               f"count={share}", "iflag=count_bytes", "conv=fsync"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
             for i in range(writers)]
    codes = [p.wait() for p in procs]
    elapsed = time.monotonic() - started
    shutil.rmtree(directory, ignore_errors=True)
    if any(codes):
        raise ChildFailed(f"concurrent dd failed (exit status {max(codes)})")
    return elapsed


if __name__ == "__main__":
    sys.exit(child_main())
