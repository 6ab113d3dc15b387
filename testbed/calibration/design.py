"""The designed calibration set: what ``testbed calibrate-local`` (and the sbatch
calibration job) measures, and which part of it is held out of the fit.

The design crosses models × batch sizes × 1–2 processes for step times, message sizes
for collectives, model sizes × formats for checkpoints, and kill plans for supervised
runs. Each part has configurations that calibrate and configurations that only check
(``holdout``): batch sizes between the fitted ones, whole models (their step time then
comes from the cross-model law), message sizes between the fitted ones, checkpoint
sizes between the fitted ones, and a supervised run with its own kill plan. The
design is data (frozen dataclasses); the harness runner (``real_runs.calibration_set``)
measures it. ``quick`` is the seconds-long subset CI runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass


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


@dataclass(frozen=True)
class CollectivePart:
    """Collective micro-benchmarks of one backend over message sizes."""

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
    rounds: int = 2

    def to_dict(self) -> dict:
        return asdict(self)


#: model → (fitted widths, held-out widths)
Widths = Mapping[str, tuple[tuple[int, ...], tuple[int, ...]]]


def _grid(framework: str, models: Widths,
          fit_batches: tuple[int, ...], holdout_batches: tuple[int, ...],
          precision: str = "fp32", device: str = "cpu") -> tuple[StepPoint, ...]:
    """Fitted widths at every batch (held out: the batches between); held-out widths
    (whole models) at every batch."""
    out = []
    for model, (fit_widths, holdout_widths) in models.items():
        for width in fit_widths:
            out += [StepPoint(framework, model, width, b, precision, device=device)
                    for b in fit_batches]
            out += [StepPoint(framework, model, width, b, precision, holdout=True,
                              device=device) for b in holdout_batches]
        for width in holdout_widths:
            out += [StepPoint(framework, model, width, b, precision, holdout=True,
                              device=device) for b in sorted(fit_batches + holdout_batches)]
    return tuple(out)


def _sizes(exponents: range, base: int = 4) -> tuple[int, ...]:
    return tuple(base * 2 ** k for k in exponents)


def quick_design() -> Design:
    """Seconds: PyTorch only, a few models and batches, one kill plan each way."""
    steps = _grid("torch", {"mlp": ((64, 256), (128,)), "cnn": ((16, 64), (32,))},
                  (4, 16, 64), (8, 32))
    return Design(
        name="quick", steps=steps,
        collectives=(CollectivePart("gloo", 2, _sizes(range(0, 21, 4)),
                                    _sizes(range(2, 21, 4)), 12),),
        checkpoints=(CheckpointPart("torch", "mlp", ("harness", "torch.save"),
                                    (32, 256, 1024), (512,), 3),),
        supervised=(SupervisedPart("torch", "mlp", 64, 16, 4,
                                   ({"at_step": 5}, {"at_step": 11})),
                    SupervisedPart("torch", "mlp", 64, 16, 4,
                                   ({"at_step": 7}, {"during_checkpoint": True}), holdout=True)),
        timed_steps=10, step_budget_s=0.25, rounds=2)


def full_design() -> Design:
    """Minutes: four model families, bf16, 2-process gloo runs, gloo and MPI
    collectives, PyTorch and Chainer checkpoints, three supervised runs."""
    models = {"mlp": ((64, 256, 1024), (512,)), "cnn": ((16, 64, 128), (32,)),
              "resnet": ((16, 32, 64), (24,)), "resnet18": ((8, 16), (12,))}
    steps = _grid("torch", models, (4, 16, 64), (8, 32))
    steps += _grid("torch", {"mlp": ((64, 256), ()), "cnn": ((32,), ())}, (4, 16, 64), (8, 32),
                   precision="bf16")
    steps += _grid("chainer", {"mlp": ((64,), ())}, (4, 16, 64), (8, 32))
    steps += tuple(StepPoint("torch", m, w, b, processes=2, holdout=b == 32)
                   for m, w in (("mlp", 256), ("cnn", 64)) for b in (16, 32, 64))
    return Design(
        name="full", steps=steps,
        collectives=(CollectivePart("gloo", 2, _sizes(range(0, 23, 2)),
                                    _sizes(range(1, 23, 2)), 20),
                     CollectivePart("mpi", 2, _sizes(range(0, 21, 2)),
                                    _sizes(range(1, 21, 2)), 30)),
        checkpoints=(CheckpointPart("torch", "mlp", ("harness", "torch.save",
                                                      "torch.distributed.checkpoint"),
                                    (32, 128, 512, 1024, 2048), (256, 1536), 5),
                     CheckpointPart("chainer", "mlp", ("harness", "save_npz"),
                                    (32, 256, 1024), (512,), 5)),
        supervised=(SupervisedPart("torch", "mlp", 64, 24, 4,
                                   ({"at_step": 6}, {"during_checkpoint": True})),
                    SupervisedPart("torch", "mlp", 64, 24, 4,
                                   ({"at_step": 10}, {"at_step": 18})),
                    SupervisedPart("torch", "mlp", 64, 24, 4,
                                   ({"at_step": 9}, {"during_checkpoint": True},
                                    {"at_step": 21}), holdout=True)),
        timed_steps=15, step_budget_s=0.6, rounds=3)


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
        supervised=tuple(SupervisedPart("torch", "resnet18", 32, 40, 5, kills,
                                        holdout=holdout, device="cuda")
                         for kills, holdout in (
                             (({"at_step": 7}, {"during_checkpoint": True}), False),
                             (({"at_step": 12}, {"at_step": 31}), False),
                             (({"at_step": 9}, {"during_checkpoint": True},
                               {"at_step": 33}), True))),
        timed_steps=20, step_budget_s=2.0, rounds=3)


DESIGNS = {"quick": quick_design, "full": full_design, "gpu": gpu_design}


def design(quick: bool) -> Design:
    return quick_design() if quick else full_design()
