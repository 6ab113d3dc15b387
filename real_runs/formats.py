"""Checkpoint formats benchmark: save time, load time and bytes on disk per format.

Formats measured:

* PyTorch: ``torch.save`` of model + optimizer state dicts (loaded with
  ``weights_only=True``); ``torch.distributed.checkpoint`` (DCP) of the same.
* TensorFlow/Keras: ``tf.train.Checkpoint`` (model + optimizer), Keras
  ``.weights.h5``, ``.keras`` (architecture, weights, optimizer) and a SavedModel
  (``model.export``, with the traced graph). Measured: for a compiled Keras 3 model,
  ``.weights.h5`` and the exported SavedModel also carry the optimizer's slots (their
  size grows twice as fast as the weights with momentum SGD).
* Chainer: ``save_npz`` uncompressed and compressed, ``save_hdf5`` (gzip level 4 by
  default, so compressed too); model + optimizer.

Each row says whether the optimizer state is included; its predicted payload is
``testbed.oracle.state.state_bytes(parameters, "momentum" or "sgd", "fp32")`` and the
overhead is what the format adds on top. Run as ``python -m real_runs.formats``.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

from real_runs.env import capture_environment, run_json_child, write_json_lines
from real_runs.harness import RunConfig, Trainer, make_backend
from testbed.oracle.state import state_bytes

FORMATS = {
    "torch": ("torch.save", "torch.distributed.checkpoint"),
    "tensorflow": ("tf.train.Checkpoint", "keras.weights.h5", "keras.keras", "SavedModel"),
    "chainer": ("save_npz", "save_npz.compressed", "save_hdf5"),
}


def disk_bytes(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def file_count(path: Path) -> int:
    return sum(1 for p in path.rglob("*") if p.is_file())


#: The harness's own checkpoint: the back end's files, state.json and the manifest,
#: written through the atomic store (fsync, rename) — what supervised runs write.
HARNESS_FORMAT = "harness"


def harness_format(trainer) -> tuple[Callable, Callable, bool, bool]:
    from real_runs.ckpt_store import CheckpointStore
    cfg = trainer.cfg

    def save(d: Path):
        trainer.checkpoint(CheckpointStore(d, cfg.framework, cfg.model, keep=1))

    def load(d: Path):
        entry = CheckpointStore(d, cfg.framework, cfg.model, keep=1).latest_valid()
        if entry is None:
            raise RuntimeError(f"no intact harness checkpoint in {d}")
        trainer.restore(entry.path)

    return save, load, True, False


def _torch_formats(backend) -> dict[str, tuple[Callable, Callable, bool, bool]]:
    import torch
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

    model, optimizer = backend.model, backend.optimizer

    def save_pt(d: Path):
        torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict()}, d / "ckpt.pt")

    def load_pt(d: Path):
        payload = torch.load(d / "ckpt.pt", weights_only=True)
        model.load_state_dict(payload["model"])
        optimizer.load_state_dict(payload["optimizer"])

    def save_dcp(d: Path):
        msd, osd = get_state_dict(model, optimizer)
        dcp.save({"model": msd, "optimizer": osd}, checkpoint_id=str(d / "dcp"))

    def load_dcp(d: Path):
        msd, osd = get_state_dict(model, optimizer)
        state = {"model": msd, "optimizer": osd}
        dcp.load(state, checkpoint_id=str(d / "dcp"))
        set_state_dict(model, optimizer, model_state_dict=state["model"],
                       optim_state_dict=state["optimizer"])

    return {"torch.save": (save_pt, load_pt, True, False),
            "torch.distributed.checkpoint": (save_dcp, load_dcp, True, False)}


def _tf_formats(backend) -> dict[str, tuple[Callable, Callable, bool, bool]]:
    import keras
    import tensorflow as tf

    model, optimizer = backend.model, backend.optimizer
    model.compile(optimizer=optimizer, loss=backend.loss_fn)

    def save_ckpt(d: Path):
        tf.train.Checkpoint(model=model, optimizer=optimizer).write(str(d / "tfckpt"))

    def load_ckpt(d: Path):
        tf.train.Checkpoint(model=model, optimizer=optimizer).read(str(d / "tfckpt")).assert_consumed()

    def save_h5(d: Path):
        model.save_weights(str(d / "model.weights.h5"))

    def load_h5(d: Path):
        model.load_weights(str(d / "model.weights.h5"))

    def save_keras(d: Path):
        model.save(str(d / "model.keras"))

    def load_keras(d: Path):
        keras.models.load_model(str(d / "model.keras"), safe_mode=True)

    def save_sm(d: Path):
        model.export(str(d / "savedmodel"), verbose=False)

    def load_sm(d: Path):
        tf.saved_model.load(str(d / "savedmodel"))

    return {"tf.train.Checkpoint": (save_ckpt, load_ckpt, True, False),
            "keras.weights.h5": (save_h5, load_h5, True, False),
            "keras.keras": (save_keras, load_keras, True, False),
            "SavedModel": (save_sm, load_sm, True, False)}


def _chainer_formats(backend) -> dict[str, tuple[Callable, Callable, bool, bool]]:
    from real_runs.backends.chainer_backend import import_chainer, load_npz_safely
    chainer = import_chainer()
    serializers = chainer.serializers
    model, optimizer = backend.model, backend.optimizer

    def npz(compression: bool):
        def save(d: Path):
            serializers.save_npz(str(d / "model.npz"), model, compression=compression)
            serializers.save_npz(str(d / "optimizer.npz"), optimizer, compression=compression)

        def load(d: Path):
            load_npz_safely(chainer, d / "model.npz", model)
            load_npz_safely(chainer, d / "optimizer.npz", optimizer)
        return save, load

    def save_h5(d: Path):
        serializers.save_hdf5(str(d / "model.h5"), model)
        serializers.save_hdf5(str(d / "optimizer.h5"), optimizer)

    def load_h5(d: Path):
        serializers.load_hdf5(str(d / "model.h5"), model)
        serializers.load_hdf5(str(d / "optimizer.h5"), optimizer)

    return {"save_npz": (*npz(False), True, False),
            "save_npz.compressed": (*npz(True), True, True),
            "save_hdf5": (save_h5, load_h5, True, True)}


def format_table(backend) -> dict[str, tuple[Callable, Callable, bool, bool]]:
    """``(save(dir), load(dir), includes_optimizer, compressed)`` of every format of the
    back end's framework, for its model and optimizer (what :func:`bench` and the
    checkpoint study time)."""
    return {"torch": _torch_formats, "tensorflow": _tf_formats,
            "chainer": _chainer_formats}[backend.framework](backend)


def bench(framework: str, model: str, width: int, repeats: int,
          formats: list[str] | None = None, depth: int | None = None) -> dict[str, Any]:
    """Measure every format (median of ``repeats`` save and load times)."""
    cfg = RunConfig(framework=framework, model=model, width=width, depth=depth,
                    steps=1).validated()
    trainer = Trainer(cfg, make_backend(cfg.framework))
    trainer.train_until(1)  # creates the optimizer's momentum slots
    backend = trainer.backend
    table = format_table(backend)
    table[HARNESS_FORMAT] = harness_format(trainer)
    chosen = formats or list(table)
    unknown = [f for f in chosen if f not in table]
    if unknown:
        from testbed.errors import UnknownNameError
        raise UnknownNameError(f"unknown format(s) {unknown} for {cfg.framework}; "
                               f"choose from {list(table)}", field="--formats")
    parameters = backend.parameter_count()
    rows = []
    root = Path(tempfile.mkdtemp(prefix="ckpt-bench-"))
    try:
        for name in chosen:
            save, load, with_optimizer, compressed = table[name]
            save_times, load_times, size, files = [], [], 0, 1
            for i in range(repeats):
                d = root / f"{name}-{i}"
                d.mkdir()
                t0 = time.perf_counter()
                save(d)
                save_times.append(time.perf_counter() - t0)
                size, files = disk_bytes(d), file_count(d)
                t0 = time.perf_counter()
                load(d)
                load_times.append(time.perf_counter() - t0)
                shutil.rmtree(d)
            predicted = state_bytes(parameters, "momentum" if with_optimizer else "sgd", "fp32")
            rows.append({"format": name, "includes_optimizer": with_optimizer,
                         "compressed": compressed, "files": files,
                         "ckpt_bytes": size, "predicted_bytes": predicted,
                         "overhead_bytes": size - predicted,
                         "overhead_ratio": (size - predicted) / predicted,
                         "save_s": statistics.median(save_times),
                         "load_s": statistics.median(load_times),
                         "save_min_s": min(save_times), "load_min_s": min(load_times)})
    finally:
        shutil.rmtree(root, ignore_errors=True)
    from real_runs.method import load_1m, method_fields
    return {"framework": cfg.framework, "model": model, "width": cfg.width,
            "depth": cfg.depth, "repeats": repeats,
            "method": method_fields(warmup=0, rounds=1, samples_per_round=repeats,
                                    statistic="median", load=load_1m()),
            "parameters": parameters, "predicted_state_bytes": state_bytes(parameters, "momentum"),
            "formats": rows, "env": capture_environment(cfg.framework).to_dict()}


def run_bench_subprocess(framework: str, model: str, widths: int | list[int], repeats: int,
                         formats: list[str] | None = None, timeout_s: float = 300):
    """Run :func:`bench` in a single-threaded child process and return its report
    (a list of reports, one per width, when ``widths`` is a list)."""
    many = isinstance(widths, list)
    width_list = widths if isinstance(widths, list) else [widths]
    args = ["--framework", framework, "--model", model,
            "--widths", ",".join(str(w) for w in width_list), "--repeats", str(repeats)]
    if formats:
        args += ["--formats", ",".join(formats)]
    reports = run_json_child("real_runs.formats", args, timeout_s=timeout_s,
                             what="checkpoint bench")
    return reports if many else reports[0]


def main(argv: list[str] | None = None) -> int:
    warnings.filterwarnings("ignore")
    parser = argparse.ArgumentParser(prog="real_runs.formats")
    parser.add_argument("--framework", required=True)
    parser.add_argument("--model", default="mlp")
    parser.add_argument("--widths", default="64", help="comma-separated model widths")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--formats", default="")
    parser.add_argument("--depth", type=int, default=None)
    args = parser.parse_args(argv)
    formats = [f for f in args.formats.split(",") if f] or None
    return write_json_lines(lambda: (bench(args.framework, args.model, int(w), args.repeats,
                                           formats, args.depth)
                                     for w in args.widths.split(",") if w))


if __name__ == "__main__":
    sys.exit(main())
