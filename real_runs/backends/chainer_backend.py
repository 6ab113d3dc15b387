"""Chainer back end: define-by-run models, MomentumSGD with a step learning-rate schedule.

Chainer draws initial weights and CPU dropout masks from NumPy's global generator, whose
state the trainer checkpoints. The model and the optimizer (with its update count
``t``, which drives the schedule, and momentum slots) are saved with ``save_npz``.
"""

from __future__ import annotations

import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from real_runs.backends.common import peak_rss_bytes
from real_runs.harness import RunConfig, StepResult

MODEL_FILE = "chainer_model.npz"
OPTIMIZER_FILE = "chainer_optimizer.npz"


def import_chainer() -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import chainer
    chainer.config.cudnn_deterministic = True
    chainer.config.use_cudnn = "never"
    chainer.config.train = True
    return chainer


def build_model(name: str, width: int | None = None, dropout: float = 0.25, *,
                depth: int | None = None, input_shape: tuple[int, ...] | None = None):
    """Harness model ``name`` as a Chainer chain built from its layer IR."""
    from testbed.model.zoo.harness import harness_model
    return build_from_ir(harness_model(name, width, depth, input_shape), dropout)


def _link(links, layer):
    """The Chainer link of one IR layer with weights (None for functions)."""
    if layer.kind == "conv":
        return links.Convolution2D(layer.x[0], layer.y[0], tuple(layer.kernel),
                                   stride=tuple(layer.stride), pad=tuple(layer.padding),
                                   nobias=layer.extra_params == 0, groups=layer.groups)
    if layer.kind == "bn":
        return links.BatchNormalization(layer.x[0])
    if layer.kind == "fc":
        return links.Linear(int(np.prod(layer.x)), layer.y[0], nobias=layer.extra_params == 0)
    return None


def build_from_ir(model_ir, dropout: float):
    """A ``chainer.Chain`` that runs the IR's layers in order along its edges; links
    are created in layer order (initial weights come from NumPy's global generator)."""
    chainer = import_chainer()
    functions, links = chainer.functions, chainer.links

    class IRChain(chainer.Chain):  # type: ignore[name-defined]  # base from the lazily imported framework
        def __init__(self) -> None:
            super().__init__()
            self.plan = []
            with self.init_scope():
                for layer in model_ir.layers:
                    key = layer.name.replace(".", "_")
                    link = _link(links, layer)
                    if link is not None:
                        setattr(self, key, link)
                    self.plan.append((layer, key))

        def _apply(self, layer, key, h):
            kind = layer.kind
            if kind in ("conv", "bn", "fc"):
                return getattr(self, key)(h)
            if kind == "relu":
                return functions.relu(h)
            if kind == "dropout":
                return functions.dropout(h, dropout)
            if kind == "maxpool":
                return functions.max_pooling_2d(h, tuple(layer.kernel), stride=tuple(layer.stride),
                                                pad=tuple(layer.padding), cover_all=False)
            if kind == "avgpool" and all(d == 1 for d in layer.y[1:]):
                return functions.average(h, axis=(2, 3), keepdims=True)
            raise ValueError(f"the Chainer harness cannot build IR layer {layer.name} ({kind})")

        def forward(self, x):
            outputs = {}
            h = x
            for layer, key in self.plan:
                if layer.kind == "add":
                    h = outputs[layer.inputs[0]] + outputs[layer.inputs[1]]
                else:
                    h = self._apply(layer, key, outputs[layer.inputs[0]] if layer.inputs else h)
                outputs[layer.name] = h
            return h

    return IRChain()


def model_arrays(model) -> dict[str, np.ndarray]:
    """Every parameter and persistent value (batch-norm statistics) by path."""
    chainer = import_chainer()
    target: dict[str, np.ndarray] = {}
    chainer.serializers.DictionarySerializer(target).save(model)
    return {k: np.asarray(v) for k, v in target.items()
            if isinstance(v, np.ndarray) and v.dtype.kind == "f"}


def load_npz_safely(chainer, path: Path, target) -> None:
    """``chainer.serializers.load_npz`` without pickles: Chainer's own loader opens the
    archive with ``allow_pickle=True``, so a crafted ``.npz`` would run code on load. Here
    NumPy opens it with pickles refused (an object array raises) and Chainer's
    deserializer only copies the arrays into ``target``."""
    with np.load(str(path), allow_pickle=False) as npz:
        chainer.serializers.NpzDeserializer(npz).load(target)


class ChainerBackend:
    framework = "chainer"

    def build(self, cfg: RunConfig) -> None:
        chainer = import_chainer()
        self.chainer = chainer
        self.cfg = cfg
        if cfg.precision == "bf16":
            from testbed.errors import InputError
            raise InputError("Chainer has no bfloat16; use fp32 or fp64", field="precision")
        self.dtype = np.float64 if cfg.precision == "fp64" else np.float32
        with chainer.using_config("dtype", self.dtype):
            self.model = build_model(cfg.model, cfg.width, cfg.dropout, depth=cfg.depth,
                                     input_shape=cfg.input_shape)
        self.optimizer = chainer.optimizers.MomentumSGD(lr=cfg.lr, momentum=cfg.momentum)
        self.optimizer.setup(self.model)

    def _scheduled_lr(self) -> float:
        cfg = self.cfg
        return cfg.lr * cfg.lr_gamma ** (self.optimizer.t // cfg.lr_every)

    def step(self, x: np.ndarray, y: np.ndarray) -> StepResult:
        functions = self.chainer.functions
        self.optimizer.lr = self._scheduled_lr()
        t0 = time.perf_counter()
        loss = functions.softmax_cross_entropy(self.model(x.astype(self.dtype, copy=False)),
                                               y.astype(np.int32))
        t1 = time.perf_counter()
        self.model.cleargrads()
        loss.backward()
        t2 = time.perf_counter()
        self.optimizer.update()
        t3 = time.perf_counter()
        return StepResult(float(loss.array), t1 - t0, t2 - t1, t3 - t2)

    def save(self, directory: Path) -> None:
        serializers = self.chainer.serializers
        serializers.save_npz(str(directory / MODEL_FILE), self.model, compression=False)
        serializers.save_npz(str(directory / OPTIMIZER_FILE), self.optimizer, compression=False)

    def load(self, directory: Path, omit: frozenset[str]) -> None:
        load_npz_safely(self.chainer, directory / MODEL_FILE, self.model)
        if "optimizer" not in omit:
            load_npz_safely(self.chainer, directory / OPTIMIZER_FILE, self.optimizer)

    def parameters(self) -> list[tuple[str, np.ndarray]]:
        return sorted(model_arrays(self.model).items())

    def parameter_count(self) -> int:
        return int(sum(p.size for p in self.model.params()))

    def layer_times(self) -> dict[str, float]:
        return {}

    def peak_memory_bytes(self) -> int:
        return peak_rss_bytes()


def make() -> ChainerBackend:
    return ChainerBackend()
