"""Chainer back end: define-by-run models, MomentumSGD with a step learning-rate schedule.

Chainer draws initial weights and CPU dropout masks from NumPy's global generator, whose
state the trainer checkpoints. The model and the optimizer (with its update count
``t``, which drives the schedule, and momentum slots) are saved with ``save_npz``.
"""

from __future__ import annotations

import time
import warnings
from pathlib import Path

import numpy as np

from real_runs.backends.common import peak_rss_bytes
from real_runs.harness import CLASSES, IMAGE_SHAPE, RunConfig, StepResult

MODEL_FILE = "chainer_model.npz"
OPTIMIZER_FILE = "chainer_optimizer.npz"


def import_chainer():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import chainer
    chainer.config.cudnn_deterministic = True
    chainer.config.use_cudnn = "never"
    chainer.config.train = True
    return chainer


def build_model(name: str, width: int, dropout: float):
    chainer = import_chainer()
    functions, links = chainer.functions, chainer.links
    channels, height, width_px = IMAGE_SHAPE

    if name == "mlp":
        class MLP(chainer.Chain):
            def __init__(self) -> None:
                super().__init__()
                with self.init_scope():
                    self.l1 = links.Linear(channels * height * width_px, width)
                    self.l2 = links.Linear(width, width)
                    self.l3 = links.Linear(width, CLASSES)

            def forward(self, x):
                h = functions.relu(self.l1(x))
                h = functions.dropout(h, dropout)
                return self.l3(functions.relu(self.l2(h)))
        return MLP()

    if name == "cnn":
        half = max(width // 2, 1)

        class CNN(chainer.Chain):
            def __init__(self) -> None:
                super().__init__()
                with self.init_scope():
                    self.c1 = links.Convolution2D(channels, half, 3, pad=1)
                    self.c2 = links.Convolution2D(half, width, 3, pad=1)
                    self.fc = links.Linear(width * (height // 4) * (width_px // 4), CLASSES)

            def forward(self, x):
                h = functions.max_pooling_2d(functions.relu(self.c1(x)), 2)
                h = functions.max_pooling_2d(functions.relu(self.c2(h)), 2)
                return self.fc(functions.dropout(h, dropout))
        return CNN()

    c = max(width // 2, 2)

    class Block(chainer.Chain):
        def __init__(self) -> None:
            super().__init__()
            with self.init_scope():
                self.conv1 = links.Convolution2D(c, c, 3, pad=1, nobias=True)
                self.bn1 = links.BatchNormalization(c)
                self.conv2 = links.Convolution2D(c, c, 3, pad=1, nobias=True)
                self.bn2 = links.BatchNormalization(c)

        def forward(self, x):
            h = functions.relu(self.bn1(self.conv1(x)))
            return functions.relu(self.bn2(self.conv2(h)) + x)

    class ResNet(chainer.Chain):
        def __init__(self) -> None:
            super().__init__()
            with self.init_scope():
                self.stem = links.Convolution2D(channels, c, 3, pad=1, nobias=True)
                self.bn = links.BatchNormalization(c)
                self.b1 = Block()
                self.b2 = Block()
                self.fc = links.Linear(c, CLASSES)

        def forward(self, x):
            h = functions.relu(self.bn(self.stem(x)))
            h = self.b2(self.b1(h))
            h = functions.average(h, axis=(2, 3))
            return self.fc(functions.dropout(h, dropout))
    return ResNet()


def model_arrays(model) -> dict[str, np.ndarray]:
    """Every parameter and persistent value (batch-norm statistics) by path."""
    chainer = import_chainer()
    target: dict[str, np.ndarray] = {}
    chainer.serializers.DictionarySerializer(target).save(model)
    return {k: np.asarray(v) for k, v in target.items()
            if isinstance(v, np.ndarray) and v.dtype.kind == "f"}


class ChainerBackend:
    framework = "chainer"

    def build(self, cfg: RunConfig) -> None:
        chainer = import_chainer()
        self.chainer = chainer
        self.cfg = cfg
        self.model = build_model(cfg.model, cfg.width, cfg.dropout)
        self.optimizer = chainer.optimizers.MomentumSGD(lr=cfg.lr, momentum=cfg.momentum)
        self.optimizer.setup(self.model)

    def _scheduled_lr(self) -> float:
        cfg = self.cfg
        return cfg.lr * cfg.lr_gamma ** (self.optimizer.t // cfg.lr_every)

    def step(self, x: np.ndarray, y: np.ndarray) -> StepResult:
        functions = self.chainer.functions
        self.optimizer.lr = self._scheduled_lr()
        t0 = time.perf_counter()
        loss = functions.softmax_cross_entropy(self.model(x), y.astype(np.int32))
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
        serializers = self.chainer.serializers
        serializers.load_npz(str(directory / MODEL_FILE), self.model)
        if "optimizer" not in omit:
            serializers.load_npz(str(directory / OPTIMIZER_FILE), self.optimizer)

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
