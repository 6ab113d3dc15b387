"""One real HPO trial: a small CNN on scikit-learn's bundled digits, with checkpoints.

The data are ``sklearn.datasets.load_digits`` (1,797 8×8 grey images of 10 digits,
shipped inside scikit-learn — nothing is downloaded), scaled to [0, 1] and split
once, by a fixed permutation, into 1,437 training and 360 validation images. The
model is two 3×3 convolutions (``width`` and 2·``width`` channels, each followed by
ReLU and 2×2 max-pooling) and a linear layer to 10 classes. Hyperparameters from the
trial's configuration: ``optimizer`` (adam | sgd | rmsprop), ``lr``, ``batch_size``,
``width``, ``momentum``, ``weight_decay``; the reported value is the validation loss
(cross-entropy) after each epoch, with the accuracy beside it.

Deterministic for a seed: the initial weights come from ``torch.manual_seed(seed)``,
epoch ``e``'s batch order from ``SeedSequence(seed, spawn_key=(e,))``, and training
runs on one thread, so training from a checkpoint gives the same numbers as training
straight through. A checkpoint (after epoch ``e``: ``epoch-000e.pt`` in the trial's
folder) holds the model and optimizer state dicts and the epoch, written atomically
(:func:`testbed.io.write.atomic_write`) with ``torch.save`` and read back with
``torch.load(weights_only=True)``, which refuses anything that could run code.
PyTorch and scikit-learn are imported inside the functions.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from testbed.streams import generator

#: Validation share of the digits (a fixed split, the same for every trial).
VALIDATION_SHARE = 0.2
#: Seed of the fixed train/validation split.
SPLIT_SEED = 0
DEFAULTS = {"optimizer": "adam", "lr": 0.01, "batch_size": 64, "width": 8, "momentum": 0.9,
            "weight_decay": 0.0}


def load_data() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(train images, train labels, validation images, validation labels)."""
    from sklearn.datasets import load_digits
    digits = load_digits()
    x = (digits.images / 16.0).astype(np.float32)[:, None, :, :]
    y = digits.target.astype(np.int64)
    order = generator(SPLIT_SEED, "trial.split").permutation(len(y))
    n_val = int(round(len(y) * VALIDATION_SHARE))
    val, train = order[:n_val], order[n_val:]
    return x[train], y[train], x[val], y[val]


def _model(width: int):
    import torch.nn as nn
    return nn.Sequential(
        nn.Conv2d(1, width, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(width, 2 * width, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(2 * width * 2 * 2, 10))


def _optimizer(params, hp: dict[str, Any]):
    import torch.optim as optim
    name = str(hp["optimizer"]).lower()
    lr, wd = float(hp["lr"]), float(hp["weight_decay"])
    if name == "adam":
        return optim.Adam(params, lr=lr, weight_decay=wd)
    if name == "sgd":
        return optim.SGD(params, lr=lr, momentum=float(hp["momentum"]), weight_decay=wd)
    if name == "rmsprop":
        return optim.RMSprop(params, lr=lr, weight_decay=wd)
    raise ValueError(f"unknown optimizer {name!r} (adam, sgd, rmsprop)")


def warm_up() -> None:
    """Build a throw-away model and each optimizer once: their lazy imports (about a
    second for the first optimizer) are then paid by the worker, not by every trial."""
    model = _model(1)
    for name in ("adam", "sgd", "rmsprop"):
        _optimizer(model.parameters(), {**DEFAULTS, "optimizer": name})


def checkpoint_path(folder: str | Path, epoch: int) -> Path:
    return Path(folder) / f"epoch-{epoch:04d}.pt"


def latest_checkpoint(folder: str | Path, upto: int) -> int:
    """The newest checkpoint epoch in ``folder`` not after ``upto`` (0 if none)."""
    best = 0
    for p in Path(folder).glob("epoch-*.pt"):
        try:
            e = int(p.stem.split("-")[1])
        except (IndexError, ValueError):
            continue
        if best < e <= upto:
            best = e
    return best


def _save(folder: Path, epoch: int, model, opt) -> None:
    import torch

    from testbed.io.write import atomic_write
    folder.mkdir(parents=True, exist_ok=True)
    state = {"model": model.state_dict(), "optimizer": opt.state_dict(), "epoch": epoch}
    atomic_write(checkpoint_path(folder, epoch), lambda f: torch.save(state, f), binary=True)


def _load(folder: Path, epoch: int, model, opt) -> None:
    import torch
    state = torch.load(checkpoint_path(folder, epoch), weights_only=True)
    if int(state["epoch"]) != epoch:
        raise ValueError(f"checkpoint {epoch} holds epoch {state['epoch']}")
    model.load_state_dict(state["model"])
    opt.load_state_dict(state["optimizer"])


def _evaluate(model, x, y) -> tuple[float, float]:
    import torch
    import torch.nn.functional as F
    with torch.no_grad():
        out = model(x)
        return float(F.cross_entropy(out, y)), float((out.argmax(1) == y).float().mean())


def train(task: dict[str, Any], data, emit: Callable[[dict], None],
          pause: Callable[[], None] | None = None) -> None:
    """Train ``task['config']`` from epoch ``from_epoch`` to ``to_epoch``.

    ``emit`` gets, per epoch, an ``epoch`` record (``epoch``, ``value``, ``accuracy``,
    ``epoch_s``) as soon as the epoch is evaluated and, when the epoch is
    checkpointed, a ``ckpt`` record (``epoch``, ``ckpt_s``) once the checkpoint is on
    disk — so whoever keeps the records never has a checkpoint without its epoch's
    value. At ``kill_at_epoch`` ``pause()`` is called after the epoch's record and
    before its checkpoint: there the supervisor kills the process.
    """
    import torch
    import torch.nn.functional as F
    torch.set_num_threads(1)
    hp = {**DEFAULTS, **{k: v for k, v in task["config"].items() if k in DEFAULTS}}
    seed = int(task["seed"])
    torch.manual_seed(seed)
    model = _model(int(hp["width"]))
    opt = _optimizer(model.parameters(), hp)
    folder = Path(task["ckpt_dir"])
    a, b, top, every = task["from_epoch"], task["to_epoch"], task["max_epochs"], task["every"]
    if a > 0:
        _load(folder, a, model, opt)
    xtr, ytr, xva, yva = (torch.from_numpy(v) for v in data)
    batch = int(hp["batch_size"])
    emit({"kind": "ready"})
    for e in range(a + 1, b + 1):
        t0 = time.perf_counter()
        rng = generator(seed, "trial.epoch_order", e)
        order = torch.from_numpy(rng.permutation(len(ytr)))
        model.train()
        for i in range(0, len(order), batch):
            idx = order[i:i + batch]
            opt.zero_grad()
            F.cross_entropy(model(xtr[idx]), ytr[idx]).backward()
            opt.step()
        model.eval()
        loss, acc = _evaluate(model, xva, yva)
        emit({"kind": "epoch", "epoch": e, "value": loss, "accuracy": acc,
              "epoch_s": time.perf_counter() - t0})
        if task.get("kill_at_epoch") == e and pause is not None:
            pause()
        if e < top and ((every and e % every == 0) or e == b):
            t1 = time.perf_counter()
            _save(folder, e, model, opt)
            emit({"kind": "ckpt", "epoch": e, "ckpt_s": time.perf_counter() - t1})


def merge_records(records: list[dict]) -> list[dict]:
    """Per epoch, one record (``epoch``, ``value``, ``accuracy``, ``epoch_s``, ``ckpt_s``,
    ``ckpt``, ``t``) from the ``epoch`` and ``ckpt`` records of :func:`train`, in order."""
    out: list[dict] = []
    for rec in records:
        if rec.get("kind") == "epoch":
            out.append({**rec, "ckpt_s": 0.0, "ckpt": False})
        elif rec.get("kind") == "ckpt" and out and out[-1]["epoch"] == rec["epoch"]:
            out[-1].update(ckpt=True, ckpt_s=rec["ckpt_s"], t=rec.get("t", out[-1].get("t")))
    for rec in out:
        rec.pop("kind", None)
    return out
