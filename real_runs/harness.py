"""The framework-independent training harness: configuration, data, loop, checkpoints.

A :class:`Backend` (PyTorch, TensorFlow/Keras or Chainer) builds the model and runs
one step; the :class:`Trainer` owns everything else — the generated data set, the
shuffling data iterator, the framework-independent RNG states (Python ``random`` and
NumPy's global generator, which frameworks such as Chainer use for dropout), the loss
history, and writing/restoring complete checkpoints through the
:class:`~real_runs.ckpt_store.CheckpointStore`.

A checkpoint holds: the back end's files (model, optimizer with its learning-rate
schedule, framework RNG state, Keras seed-generator states) plus ``state.json`` with
the step, the loss history, the Python and NumPy RNG states and the data-iterator
position. Nothing in it is executable: JSON, ``.npz`` and ``torch.save`` state dicts
loaded with ``weights_only=True``.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import random
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from testbed.errors import InputError, UnknownNameError
from testbed.io.read import parse_json, read_text
from testbed.streams import generator, seed_sequence
from testbed.units import did_you_mean

#: Resident memory of a process that has imported the framework (ru_maxrss after the
#: import, measured on the project's 2-core machine: torch 2.13 CPU 224 MiB, TensorFlow
#: 2.21 579 MiB, Chainer 7.8.1 89 MiB).
FRAMEWORK_BYTES = {"torch": 224 * 2**20, "tensorflow": 579 * 2**20, "chainer": 89 * 2**20}
#: Bytes per parameter while training in fp32: weights, gradients, two optimizer moments.
TRAINING_BYTES_PER_PARAM = 16
#: Bytes per activation element: the fp32 value saved for backward and its gradient.
ACTIVATION_BYTES = 8

#: Back-end modules by framework name.
FRAMEWORKS = {"torch": "real_runs.backends.torch_backend",
              "tensorflow": "real_runs.backends.tf_backend",
              "chainer": "real_runs.backends.chainer_backend"}
FRAMEWORK_ALIASES = {"pytorch": "torch", "tf": "tensorflow", "keras": "tensorflow"}

#: Models every back end builds, from the layer IR of :mod:`testbed.model.zoo.harness`
#: (``resnet`` is the zoo's ``resnetmini``, ``resnet18`` its ``resnet18cifar``).
MODELS = ("mlp", "cnn", "resnet", "resnet18")
#: Training precisions the back ends run (fp32 everywhere; see each back end for the rest).
PRECISIONS = ("fp32", "fp64", "bf16")
#: Devices a run may train on (GPUs through PyTorch only).
DEVICES = ("cpu", "cuda")

#: Seeds are passed to every framework, and the narrowest takes 32 bits (NumPy legacy).
MAX_SEED = 2**32

#: Kinds of state a restore may deliberately omit, to show which state matters.
OMITTABLE = ("rng", "optimizer", "data")

IMAGE_SHAPE = (1, 8, 8)   # default channels, height, width of the generated images
CLASSES = 10
SAMPLES = 256             # generated samples (more when one step needs more)


def canonical_framework(name: str) -> str:
    key = FRAMEWORK_ALIASES.get(name.lower(), name.lower())
    if key not in FRAMEWORKS:
        raise UnknownNameError(f"unknown framework {name!r}{did_you_mean(key, FRAMEWORKS)}",
                               field="framework")
    return key


def check_model(name: str) -> str:
    if name not in MODELS:
        raise UnknownNameError(f"unknown model {name!r}{did_you_mean(name, MODELS)}",
                               field="model")
    return name


@dataclass(frozen=True)
class RunConfig:
    """Everything that determines a training run (and so its result, bit for bit)."""

    framework: str
    model: str = "mlp"
    seed: int = 0
    steps: int = 10
    batch_size: int = 16
    lr: float = 0.05
    momentum: float = 0.9
    lr_gamma: float = 0.8      # step decay of the learning rate ...
    lr_every: int = 4          # ... every this many steps (a real schedule object per framework)
    dropout: float = 0.25
    width: int | None = None   # hidden width / channels (None: the model's default)
    checkpoint_every: int = 0  # 0: no periodic checkpoints
    keep: int = 3
    depth: int | None = None   # layers / stages / blocks (None: the model's default)
    input_shape: tuple[int, ...] | None = None   # C x H x W (None: the model's default)
    precision: str = "fp32"    # one of PRECISIONS (checked in validated(): requests are JSON)
    device: str = "cpu"        # "cuda": PyTorch on the first visible GPU

    def validated(self) -> RunConfig:
        from testbed.model.zoo.harness import resolve_options
        cfg = replace(self, framework=canonical_framework(self.framework))
        check_model(cfg.model)
        if isinstance(cfg.seed, bool) or not 0 <= cfg.seed < MAX_SEED:
            raise InputError(f"seed must be an integer in 0…{MAX_SEED - 1}, got {cfg.seed}",
                             field="seed")
        for name in ("steps", "batch_size", "lr_every", "keep"):
            if getattr(cfg, name) <= 0:
                raise InputError(f"{name} must be positive, got {getattr(cfg, name)}",
                                 field=name.replace("_", "-"))
        opts = resolve_options(cfg.model, cfg.width, cfg.depth, cfg.input_shape)
        cfg = replace(cfg, width=opts.width, depth=opts.depth, input_shape=opts.input_shape)
        if cfg.checkpoint_every < 0:
            raise InputError("checkpoint-every must be >= 0", field="checkpoint-every")
        if not 0.0 <= cfg.dropout < 1.0:
            raise InputError("dropout must be in [0, 1)", field="dropout")
        if cfg.precision not in PRECISIONS:
            raise UnknownNameError(f"unknown precision {cfg.precision!r}"
                                   f"{did_you_mean(cfg.precision, PRECISIONS)}; "
                                   f"known: {', '.join(PRECISIONS)}", field="precision")
        if cfg.device not in DEVICES:
            raise UnknownNameError(f"unknown device {cfg.device!r}; known: {', '.join(DEVICES)}",
                                   field="device")
        if cfg.device == "cuda" and cfg.framework != "torch":
            raise InputError("GPU runs of the harness are PyTorch runs (--framework torch)",
                             field="device")
        return cfg

    def check_fits(self, processes: int = 1) -> None:
        """Refuse, before any process starts, a run this machine cannot hold in memory:
        ``processes`` × (the framework's own footprint + weights, gradients and optimizer
        state + activations and their gradients for one batch), against the memory the
        kernel says is available. A GPU run keeps the model on the device: only the
        framework counts on the host."""
        from real_runs.env import available_memory_bytes
        from testbed.units import format_bytes
        m = self.ir()
        model = 0 if self.device == "cuda" else (
            m.parameters * TRAINING_BYTES_PER_PARAM
            + m.activation_elements_per_sample * self.batch_size * ACTIVATION_BYTES)
        need = processes * (FRAMEWORK_BYTES[canonical_framework(self.framework)] + model)
        have = available_memory_bytes()
        if have is not None and need > have:
            raise InputError(
                f"this run needs about {format_bytes(need)} of memory ({processes} "
                f"process(es) x (framework + {m.parameters:,} parameters + activations of "
                f"{self.batch_size} samples)); {format_bytes(have)} is available: a smaller "
                f"--width, --depth, --input-shape, --batch-size or --processes",
                field="model")

    def ir(self):
        """The layer IR of this run's model (what every back end builds)."""
        from testbed.model.zoo.harness import harness_model
        return harness_model(self.model, self.width, self.depth, self.input_shape)

    @property
    def shape(self) -> tuple[int, ...]:
        """Per-sample input shape (the model's default when not set)."""
        from testbed.model.zoo.harness import resolve_options
        return resolve_options(self.model, self.width, self.depth, self.input_shape).input_shape

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        if data["input_shape"] is not None:
            data["input_shape"] = list(data["input_shape"])
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunConfig:
        data = dict(data)
        if data.get("input_shape") is not None:
            data["input_shape"] = tuple(int(d) for d in data["input_shape"])
        return cls(**data)


@dataclass(frozen=True)
class StepResult:
    loss: float
    forward_s: float
    backward_s: float
    update_s: float


class Backend(Protocol):
    """What a framework back end provides to the trainer."""

    framework: str

    def build(self, cfg: RunConfig) -> None:
        """Seed the framework, build model, optimizer and learning-rate schedule."""

    def step(self, x: np.ndarray, y: np.ndarray) -> StepResult:
        """One training step on a batch (NCHW float32 images, int64 labels)."""

    def save(self, directory: Path) -> None:
        """Write model, optimizer, schedule and framework RNG state into ``directory``."""

    def load(self, directory: Path, omit: frozenset[str]) -> None:
        """Restore what :meth:`save` wrote, except the kinds named in ``omit``."""

    def parameters(self) -> list[tuple[str, np.ndarray]]:
        """Model parameters in a fixed order, as NumPy arrays."""

    def layer_times(self) -> dict[str, float]:
        """Forward seconds per layer accumulated so far (empty where not measurable)."""

    def peak_memory_bytes(self) -> int:
        """Peak memory of the process (device memory on GPUs)."""

    def parameter_count(self) -> int:
        """Trainable parameters of the model."""


def make_backend(framework: str) -> Backend:
    module = importlib.import_module(FRAMEWORKS[canonical_framework(framework)])
    return module.make()


#: The top-level module each framework's import cost is measured on.
FRAMEWORK_MODULES = {"torch": "torch", "tensorflow": "tensorflow", "chainer": "chainer"}


def import_framework(framework: str) -> float:
    """Import the framework's top-level module; the seconds it took (0 if loaded)."""
    import time as _time
    t0 = _time.perf_counter()
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        importlib.import_module(FRAMEWORK_MODULES[canonical_framework(framework)])
    return _time.perf_counter() - t0


# -- data --------------------------------------------------------------------------------

def streams(seed: int) -> dict[str, np.random.SeedSequence]:
    """The named seed sequences of a training run (the registry's ``run.*`` purposes)."""
    names = ("data", "shuffle", "init", "python", "numpy_global", "framework")
    return {name: seed_sequence(seed, f"run.{name}") for name in names}


def make_dataset(seed: int, samples: int = SAMPLES,
                 shape: tuple[int, ...] = IMAGE_SHAPE) -> tuple[np.ndarray, np.ndarray]:
    """A generated image-classification set: Gaussian images labelled by a random teacher."""
    rng = generator(seed, "run.data")
    x = rng.standard_normal((samples, *shape), dtype=np.float32)
    teacher = rng.standard_normal((int(np.prod(shape)), CLASSES)).astype(np.float32)
    y = np.argmax(x.reshape(samples, -1) @ teacher, axis=1).astype(np.int64)
    return x, y


def dataset_samples(batch_size: int, world: int = 1) -> int:
    """Samples generated for a run: :data:`SAMPLES`, or one global batch if larger."""
    return max(SAMPLES, batch_size * world)


class DataIterator:
    """Shuffled mini-batches, epoch after epoch; its state is its position and RNG."""

    def __init__(self, samples: int, batch_size: int, seed_seq: np.random.SeedSequence) -> None:
        self.samples = samples
        self.batch_size = batch_size
        self.rng = np.random.Generator(np.random.PCG64(seed_seq))
        self.epoch = 0
        self.position = 0
        self.order = self.rng.permutation(samples)

    def next_indices(self) -> np.ndarray:
        if self.position + self.batch_size > self.samples:
            self.epoch += 1
            self.position = 0
            self.order = self.rng.permutation(self.samples)
        idx = self.order[self.position:self.position + self.batch_size]
        self.position += self.batch_size
        return idx

    def state(self) -> dict[str, Any]:
        return {"epoch": self.epoch, "position": self.position,
                "order": [int(i) for i in self.order], "bit_generator": self.rng.bit_generator.state}

    def restore(self, state: dict[str, Any]) -> None:
        self.epoch = int(state["epoch"])
        self.position = int(state["position"])
        self.order = np.asarray(state["order"], dtype=np.int64)
        self.rng.bit_generator.state = state["bit_generator"]


def seed_process_globals(seed: int) -> None:
    """Set Python's and NumPy's process-global generators from the run seed.

    The testbed itself never uses global RNGs; frameworks do (Chainer draws dropout
    masks from NumPy's global generator), so a real run must control and checkpoint
    them. Seeded from named SeedSequence streams, without ``np.random.seed``.
    """
    named = streams(seed)
    random.setstate(random.Random(int(named["python"].generate_state(1)[0])).getstate())
    local = np.random.RandomState(np.random.MT19937(named["numpy_global"]))
    np.random.set_state(local.get_state())


def framework_seed(seed: int) -> int:
    """A 31-bit seed for a framework's own generator, derived from the run seed."""
    return int(streams(seed)["framework"].generate_state(1)[0] & 0x7FFFFFFF)


def numpy_global_state() -> dict[str, Any]:
    name, keys, pos, has_gauss, gauss = np.random.get_state()
    return {"name": name, "keys": [int(k) for k in keys], "pos": int(pos),
            "has_gauss": int(has_gauss), "gauss": float(gauss)}


def restore_numpy_global(state: dict[str, Any]) -> None:
    np.random.set_state((state["name"], np.asarray(state["keys"], dtype=np.uint32), state["pos"],
                         state["has_gauss"], state["gauss"]))


def python_state() -> list[Any]:
    version, internal, gauss = random.getstate()
    return [version, list(internal), gauss]


def restore_python(state: list[Any]) -> None:
    random.setstate((state[0], tuple(state[1]), state[2]))


def params_sha256(params: list[tuple[str, np.ndarray]]) -> str:
    """Digest of parameter names, dtypes, shapes and bytes, in the back end's order."""
    digest = hashlib.sha256()
    for name, array in params:
        arr = np.ascontiguousarray(array)
        digest.update(f"{name}|{arr.dtype.str}|{arr.shape}\n".encode())
        digest.update(arr.tobytes())
    return digest.hexdigest()


# -- trainer -----------------------------------------------------------------------------

Emit = Callable[[dict[str, Any]], None]


def _refusal(exc: BaseException, limit: int = 160) -> str:
    """Why a loader refused a file, in a few words."""
    text = (str(exc).strip().splitlines() or [""])[0]
    if type(exc).__name__ == "UnpicklingError" or "allow_pickle" in text or "pickle" in text:
        return "it holds pickled Python objects, which could run code when loaded"
    text = text if len(text) <= limit else text[:limit] + "…"
    return f"{type(exc).__name__}: {text}"


@dataclass
class Trainer:
    """Runs one training job of a back end: steps, checkpoints, restore."""

    cfg: RunConfig
    backend: Backend
    emit: Emit = field(default=lambda record: None)
    step: int = 0
    losses: list[float] = field(default_factory=list)
    timings: list[StepResult] = field(default_factory=list)

    def __post_init__(self) -> None:
        seed_process_globals(self.cfg.seed)
        self.backend.build(self.cfg)
        self.x, self.y = make_dataset(self.cfg.seed, dataset_samples(self.cfg.batch_size),
                                      self.cfg.shape)
        self.iterator = DataIterator(len(self.x), self.cfg.batch_size,
                                     streams(self.cfg.seed)["shuffle"])

    def train_until(self, end_step: int, store: Any = None) -> None:
        """Train up to ``end_step``, checkpointing every ``checkpoint_every`` steps."""
        every = self.cfg.checkpoint_every
        while self.step < end_step:
            idx = self.iterator.next_indices()
            result = self.backend.step(self.x[idx], self.y[idx])
            self.step += 1
            self.losses.append(float(result.loss))
            self.timings.append(result)
            self.emit({"event": "step", "step": self.step, "loss": float(result.loss)})
            if store is not None and every and self.step % every == 0 and self.step < self.cfg.steps:
                self.checkpoint(store)

    def checkpoint(self, store: Any) -> Any:
        started = time.perf_counter()
        self.emit({"event": "checkpoint_begin", "step": self.step})
        tmp = store.begin(self.step)
        try:
            self.backend.save(tmp)
            state = {"step": self.step, "losses": self.losses, "python_random": python_state(),
                     "numpy_global": numpy_global_state(), "data": self.iterator.state(),
                     "config": self.cfg.to_dict()}
            with open(tmp / "state.json", "w", encoding="utf-8") as stream:
                json.dump(state, stream)
            entry = store.commit(tmp, self.step, meta={"seed": self.cfg.seed})
        except OSError as exc:
            # a full disk, a quota, a read-only file system: the half-written checkpoint
            # goes, the committed ones stay, and the run stops with one line
            import shutil

            from testbed.io.write import os_reason
            shutil.rmtree(tmp, ignore_errors=True)
            raise InputError(f"cannot write the checkpoint of step {self.step}: "
                             f"{os_reason(exc)}; the earlier checkpoints are intact",
                             source=str(store.root)) from None
        self.emit({"event": "checkpoint_commit", "step": self.step,
                   "bytes": store.bytes_on_disk(entry),
                   "duration_s": time.perf_counter() - started})
        return entry

    def restore(self, directory: Path, omit: frozenset[str] = frozenset()) -> None:
        """Restore a checkpoint written by :meth:`checkpoint` (minus ``omit``).

        Every loader refuses what could run code (``torch.load(weights_only=True)``, NumPy
        archives without pickles); a file it refuses — tampered with, or not ours — is an
        :class:`~testbed.errors.InputError` naming the checkpoint, and nothing is run."""
        state = parse_json(read_text(directory / "state.json"),
                           source=str(directory / "state.json"))
        if not isinstance(state, dict) or not isinstance(state.get("config"), dict):
            raise InputError("not a harness checkpoint (no config)",
                             source=str(directory / "state.json"))
        try:
            theirs = RunConfig.from_dict(state["config"])
        except (TypeError, ValueError) as exc:
            raise InputError(f"not a harness checkpoint: {exc}",
                             source=str(directory / "state.json")) from None
        mine = self.cfg
        # A checkpoint is only valid for the same training problem; steps and checkpoint
        # cadence may differ between incarnations.
        same = replace(theirs, steps=mine.steps, checkpoint_every=mine.checkpoint_every,
                       keep=mine.keep)
        if same != mine:
            diff = sorted(k for k, v in same.to_dict().items() if mine.to_dict()[k] != v)
            raise InputError(f"checkpoint was written by a different run configuration "
                             f"({', '.join(diff)} differ)", source=str(directory))
        try:
            self.backend.load(directory, omit)
        except Exception as exc:   # noqa: BLE001 - any loader refusal or damage is one line
            raise InputError(f"refused to load this checkpoint: {_refusal(exc)}; it may "
                             "have been tampered with, and nothing in it was run",
                             source=str(directory)) from None
        self.step = int(state["step"])
        self.losses = [float(v) for v in state["losses"]]
        if "rng" not in omit:
            restore_python(state["python_random"])
            restore_numpy_global(state["numpy_global"])
        if "data" not in omit:
            self.iterator.restore(state["data"])
        else:
            # Without the iterator position the run restarts its data stream from scratch.
            self.iterator = DataIterator(len(self.x), self.cfg.batch_size,
                                         streams(self.cfg.seed)["shuffle"])

    def result(self) -> dict[str, Any]:
        params = self.backend.parameters()
        return {"step": self.step, "losses": self.losses, "params_sha256": params_sha256(params),
                "parameters": int(sum(a.size for _, a in params))}
