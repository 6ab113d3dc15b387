"""The designed calibration set: what ``testbed calibrate-local`` (and the sbatch
calibration job) measures, and which part of it is held out of the fit.

The design crosses, for each framework (PyTorch, TensorFlow/Keras, Chainer), models ×
widths × depths × batch sizes for step times; process counts for data parallelism;
message sizes × process counts for collectives; model sizes × formats for checkpoints;
and kill plans for supervised runs, whose restarts fit the restart cost. Each part has
configurations that calibrate and configurations that only check (``holdout``): batch
sizes between and beyond the fitted ones, whole models (other widths and depths, whose
step time then comes from the cross-model law), data-parallel runs at process counts
and batches of their own, message sizes between the fitted ones, checkpoint sizes
between the fitted ones. The design is data (frozen dataclasses); the harness runner
(``real_runs.calibration_set``) measures it by the one measurement method
(``real_runs.method``: ``warmup``, ``rounds``, ``timed_steps`` per round,
``step_budget_s`` per configuration and round).

Designs: ``smoke`` (seconds, PyTorch only: what the Slurm job tests run), ``quick``
(about two minutes: the three frameworks, what the suite runs), ``full`` (the README's
figures), ``gpu`` (one GPU of a cluster node, for the sbatch job).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass

#: The files a calibration folder holds (``calibrate-local``, the sbatch job).
FIT_FILE = "fit.jsonl"
HOLDOUT_FILE = "holdout.jsonl"
MANIFEST_FILE = "MANIFEST.json"
#: Fewest restarts a restart fit rests on (the median of five is robust to two bad
#: ones; the quick design measures five per framework).
MIN_RESTARTS = 5


@dataclass(frozen=True)
class StepPoint:
    """One step-time configuration."""

    framework: str
    model: str
    width: int
    batch: int
    precision: str = "fp32"
    processes: int = 1
    holdout: bool = False
    device: str = "cpu"
    depth: int | None = None
    gradient_sync: str = "after_backward"


@dataclass(frozen=True)
class CollectivePart:
    """Collective micro-benchmarks of one backend and process count over message sizes."""

    backend: str
    processes: int
    fit_sizes: tuple[int, ...]
    holdout_sizes: tuple[int, ...]
    repeats: int
    rounds: int = 2


@dataclass(frozen=True)
class CheckpointPart:
    """Checkpoint formats of one framework over model sizes (widths of ``model``)."""

    framework: str
    model: str
    formats: tuple[str, ...]
    fit_widths: tuple[int, ...]
    holdout_widths: tuple[int, ...]
    repeats: int


@dataclass(frozen=True)
class SupervisedPart:
    """One supervised fault-injection run (kills as ``real_runs.faults`` specs)."""

    framework: str
    model: str
    width: int
    steps: int
    checkpoint_every: int
    kills: tuple[dict, ...]
    holdout: bool = False
    device: str = "cpu"


@dataclass(frozen=True)
class Design:
    name: str
    steps: tuple[StepPoint, ...]
    collectives: tuple[CollectivePart, ...]
    checkpoints: tuple[CheckpointPart, ...]
    supervised: tuple[SupervisedPart, ...]
    timed_steps: int
    step_budget_s: float
    rounds: int = 3
    warmup: int = 3

    def to_dict(self) -> dict:
        return asdict(self)


#: model → (fitted widths, held-out widths)
Widths = Mapping[str, tuple[tuple[int, ...], tuple[int, ...]]]


def _grid(framework: str, models: Widths,
          fit_batches: tuple[int, ...], holdout_batches: tuple[int, ...],
          precision: str = "fp32", device: str = "cpu",
          depth: int | None = None) -> tuple[StepPoint, ...]:
    """Fitted widths at every batch (held out: the batches between); held-out widths
    (whole models) at every batch."""
    out = []
    for model, (fit_widths, holdout_widths) in models.items():
        for width in fit_widths:
            out += [StepPoint(framework, model, width, b, precision, device=device, depth=depth)
                    for b in fit_batches]
            out += [StepPoint(framework, model, width, b, precision, holdout=True,
                              device=device, depth=depth) for b in holdout_batches]
        for width in holdout_widths:
            out += [StepPoint(framework, model, width, b, precision, holdout=True,
                              device=device, depth=depth)
                    for b in sorted(fit_batches + holdout_batches)]
    return tuple(out)


def _held(framework: str, points: tuple[tuple[str, int, int | None, int], ...]
          ) -> tuple[StepPoint, ...]:
    """Held-out single configurations (model, width, depth, batch)."""
    return tuple(StepPoint(framework, m, w, b, holdout=True, depth=d) for m, w, d, b in points)


def _sizes(exponents: range, base: int = 4) -> tuple[int, ...]:
    return tuple(base * 2 ** k for k in exponents)


def _five_kills(framework: str, model: str, width: int) -> SupervisedPart:
    """A run with five kills (two of them during a checkpoint write, one checkpoint
    damaged): its five restarts fit the framework's restart cost."""
    return SupervisedPart(framework, model, width, 16, 4,
                          ({"at_step": 3}, {"at_step": 6}, {"during_checkpoint": True},
                           {"at_step": 10, "damage": "bitflip"}, {"at_step": 14}))


def _three_kills_held(framework: str, model: str, width: int) -> SupervisedPart:
    """A held-out run with a kill plan of its own: three kills, one during a checkpoint
    write, one that damages the newest checkpoint (the restart falls back to the one
    before) — the run ``simulate --replay-run`` and ``verify`` replay out of sample."""
    return SupervisedPart(framework, model, width, 16, 4,
                          ({"at_step": 5}, {"during_checkpoint": True},
                           {"at_step": 14, "damage": "truncate"}), holdout=True)


def _fit(framework: str, model: str, width: int, batches: tuple[int, ...],
         depth: int | None = None) -> tuple[StepPoint, ...]:
    return tuple(StepPoint(framework, model, width, b, depth=depth) for b in batches)


def _steps_of(framework: str) -> tuple[StepPoint, ...]:
    """The quick design's step points of one framework: the law's models — MLPs of three
    widths and two depths, CNNs of two widths, a ResNet of basic blocks — at batches from
    4 to 256, then held out: batches between the fitted ones, and whole models of other
    widths and depths (one beyond the fitted batches: its prediction says so)."""
    steps: tuple[StepPoint, ...] = ()
    for width in (32, 128, 512):
        steps += _fit(framework, "mlp", width, (4, 32, 256))
    steps += _fit(framework, "mlp", 128, (4, 256), depth=4)
    for width in (8, 32):
        steps += _fit(framework, "cnn", width, (4, 32, 128))
    steps += _fit(framework, "resnet", 16, (4, 64))
    return steps + _held(framework, (
        ("mlp", 128, None, 64), ("mlp", 512, None, 16), ("cnn", 32, None, 64),
        ("mlp", 256, None, 32), ("mlp", 64, 3, 96), ("cnn", 16, None, 48),
        ("mlp", 512, None, 512)))


def smoke_design() -> Design:
    """Seconds, PyTorch only (what the Slurm job tests run): two models, three batches,
    gloo collectives over two processes, one checkpoint format, no supervised run."""
    steps = _grid("torch", {"mlp": ((64, 256), (128,))}, (4, 16, 64), (32,))
    return Design(
        name="smoke", steps=steps,
        collectives=(CollectivePart("gloo", 2, _sizes(range(0, 21, 4)),
                                    _sizes(range(2, 21, 4)), 10),),
        checkpoints=(CheckpointPart("torch", "mlp", ("harness",), (32, 256, 1024), (512,), 3),),
        supervised=(), timed_steps=8, step_budget_s=0.2, rounds=2)


def quick_design() -> Design:
    """A few minutes on two busy cores: the three frameworks' step times, 2–4-process
    gloo collectives, data-parallel runs (two fitted, two held out), every framework's
    harness checkpoint,
    five restarts per framework and a held-out three-kill run of each."""
    steps = _steps_of("torch") + _steps_of("tensorflow") + _steps_of("chainer")
    # data parallelism: two runs fit the scheduling delay of ranks sharing the cores
    # (testbed.calibration.dataparallel), two others — another width, batch and model
    # at each process count — only check it
    steps += tuple(StepPoint("torch", m, w, b, processes=n, holdout=held)
                   for m, w, b, n, held in (("mlp", 64, 16, 2, False), ("cnn", 8, 8, 3, False),
                                            ("mlp", 128, 32, 2, True), ("cnn", 16, 16, 3, True)))
    return Design(
        name="quick", steps=steps,
        collectives=tuple(CollectivePart("gloo", n, _sizes(range(0, 21, 4)),
                                         _sizes(range(2, 21, 8)), 10)
                          for n in (2, 3, 4)),
        checkpoints=tuple(CheckpointPart(fw, "mlp", ("harness",), (32, 256, 1024), (512,), 5)
                          for fw in ("torch", "tensorflow", "chainer")),
        supervised=tuple(_five_kills(fw, "mlp", 64) for fw in ("torch", "tensorflow", "chainer"))
        + tuple(_three_kills_held(fw, "mlp", 64) for fw in ("torch", "tensorflow", "chainer")),
        timed_steps=8, step_budget_s=0.25, rounds=3)


def full_design() -> Design:
    """Minutes: four model families in PyTorch and bf16, the three frameworks, 2–4
    process gloo and MPI collectives, data parallelism after backward and in DDP
    buckets, every format of each framework, two supervised runs per framework."""
    models = {"mlp": ((32, 128, 512, 1024), (256,)), "cnn": ((8, 32, 64), (16,)),
              "resnet": ((16, 32), (24,)), "resnet18": ((8,), (12,))}
    steps = _grid("torch", models, (4, 16, 64, 256), (8, 32, 128))
    steps += _grid("torch", {"mlp": ((128,), ())}, (4, 64, 256), (16,), depth=4)
    steps += _grid("torch", {"mlp": ((64, 256), ()), "cnn": ((32,), ())}, (4, 16, 64),
                   (8, 32), precision="bf16")
    steps += _steps_of("tensorflow") + _steps_of("chainer")
    steps += tuple(StepPoint("torch", m, w, b, processes=n, gradient_sync=sync)
                   for m, w, b, n, sync in (("mlp", 64, 16, 2, "after_backward"),
                                            ("cnn", 8, 8, 3, "after_backward"),
                                            ("mlp", 128, 16, 4, "buckets")))
    steps += tuple(StepPoint("torch", m, w, b, processes=n, holdout=True, gradient_sync=sync)
                   for m, w, b, n, sync in (
                       ("mlp", 128, 32, 2, "after_backward"), ("mlp", 512, 16, 2, "after_backward"),
                       ("cnn", 16, 16, 3, "after_backward"), ("mlp", 256, 64, 4, "after_backward"),
                       ("cnn", 32, 32, 2, "buckets"), ("mlp", 256, 32, 3, "buckets")))
    return Design(
        name="full", steps=steps,
        collectives=tuple(CollectivePart("gloo", n, _sizes(range(0, 23, 2)),
                                         _sizes(range(1, 23, 4)), 20) for n in (2, 3, 4))
        + (CollectivePart("mpi", 2, _sizes(range(0, 21, 2)), _sizes(range(1, 21, 4)), 30),),
        checkpoints=(CheckpointPart("torch", "mlp", ("harness", "torch.save",
                                                      "torch.distributed.checkpoint"),
                                    (32, 128, 512, 1024, 2048), (256, 1536), 5),
                     CheckpointPart("tensorflow", "mlp", ("harness", "tf.train.Checkpoint"),
                                    (32, 256, 1024), (512,), 3),
                     CheckpointPart("chainer", "mlp", ("harness", "save_npz"),
                                    (32, 256, 1024), (512,), 5)),
        supervised=tuple(part for fw in ("torch", "tensorflow", "chainer") for part in (
            _five_kills(fw, "mlp", 64),
            SupervisedPart(fw, "cnn", 32, 24, 4, ({"at_step": 10}, {"during_checkpoint": True},
                                                  {"at_step": 18, "damage": "bitflip"},
                                                  {"at_step": 22}), holdout=True))),
        timed_steps=10, step_budget_s=0.5, rounds=3)


def gpu_design() -> Design:
    """One GPU of a cluster node (the sbatch calibration job): PyTorch on CUDA in fp32
    and bf16 at GPU-sized batches, checkpoints up to hundreds of MB, supervised runs.
    Collectives are measured by the job itself (torchrun/NCCL and mpirun over all GPUs)."""
    models = {"mlp": ((1024, 4096), (2048,)), "cnn": ((128, 512), (256,)),
              "resnet18": ((32, 64), (48,))}
    steps = _grid("torch", models, (32, 128, 512), (64, 256), device="cuda")
    steps += _grid("torch", models, (32, 128, 512), (64, 256), precision="bf16", device="cuda")
    return Design(
        name="gpu", steps=steps, collectives=(),
        checkpoints=(CheckpointPart("torch", "mlp", ("harness", "torch.save",
                                                      "torch.distributed.checkpoint"),
                                    (256, 1024, 4096, 8192), (2048,), 5),),
        supervised=(SupervisedPart("torch", "resnet18", 32, 60, 5,
                                   ({"at_step": 7}, {"during_checkpoint": True},
                                    {"at_step": 22, "damage": "bitflip"}, {"at_step": 31},
                                    {"at_step": 44}), device="cuda"),
                    SupervisedPart("torch", "resnet18", 32, 40, 5,
                                   ({"at_step": 9}, {"during_checkpoint": True},
                                    {"at_step": 33}), holdout=True, device="cuda")),
        timed_steps=20, step_budget_s=2.0, rounds=3)


DESIGNS = {"smoke": smoke_design, "quick": quick_design, "full": full_design,
           "gpu": gpu_design}


def design(quick: bool) -> Design:
    return quick_design() if quick else full_design()
