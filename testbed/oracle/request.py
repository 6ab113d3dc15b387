"""What one prediction is asked: the :class:`Request` and the names it may use.

A request holds the three separate inputs of a prediction — *what* (a model), *how*
(strategy, GPUs, batch, group size, precision, optimizer, pipeline schedule) and *on
what* (a system profile) — and :func:`validate` checks it before any work is done.
"""

from __future__ import annotations

from dataclasses import dataclass

from testbed.errors import InputError, UnknownNameError
from testbed.model.ir import Model
from testbed.oracle.device import software_stack
from testbed.oracle.names import (
    DEFAULT_SCHEDULE,
    MODES,
    SCHEDULES,
    STRATEGIES,
)
from testbed.oracle.state import dtype_bytes, input_bytes_per_value, optimizer_slots
from testbed.resilience.ckpt_cost import TIERS, WRITERS
from testbed.systems.profile import SystemProfile
from testbed.systems.software import MAX_BUCKET_MB
from testbed.units import did_you_mean


@dataclass(frozen=True)
class Request:
    """Everything one prediction depends on.

    ``precision`` is the training (compute) precision; ``None`` takes the system's
    usual training precision (``gpu.training_precision``). ``input_precision`` is how
    the input samples are stored and moved (dataset, staging, host-to-device, input
    layer); ``None`` keeps decoded 8-bit images as they are read. ``checkpoint_writers``
    and ``checkpoint_tier`` say who writes a checkpoint and where
    (:func:`testbed.resilience.ckpt_cost.checkpoint_cost`).

    On a profile calibrated from records, ``framework`` picks the framework whose
    fitted compute and checkpoint storage apply and ``checkpoint_format`` the fitted
    format of a checkpoint (``None``: the profile's defaults,
    ``calibration.records_fit.framework`` and ``.checkpoint_format``); elsewhere they
    change nothing.

    ``software`` names the software stack of the profile's ``software`` section (a key
    or a framework alias: ``pytorch``, ``cuda-graphs``, ``mxnet``, …; ``None``: the
    section's default) and ``bucket_MB`` overrides its gradient bucket size (PyTorch
    DDP's ``bucket_cap_mb``, default 25).
    """

    model: Model
    system: SystemProfile
    strategy: str
    gpus: int
    global_batch: int
    group_size: int | None = None
    precision: str | None = "fp32"
    optimizer: str = "momentum"
    micro_batches: int | None = None
    schedule: str = DEFAULT_SCHEDULE
    overlap: bool | None = None
    mode: str = "testbed"
    mask: tuple[bool, ...] | None = None
    sample_bytes: float | None = None
    epoch_samples: int | None = None
    inplace: bool = True
    input_precision: str | None = None
    checkpoint_writers: str = "single"
    checkpoint_tier: str = "pfs"
    framework: str | None = None
    checkpoint_format: str | None = None
    software: str | None = None
    bucket_MB: float | None = None


def _known(value: str, known: tuple[str, ...], what: str, field: str) -> None:
    if value not in known:
        raise UnknownNameError(f"unknown {what} {value!r}{did_you_mean(value, known)}; "
                               f"known: {', '.join(known)}", field=field)


def _positive(value: int | None, what: str, field: str) -> None:
    if value is not None and (isinstance(value, bool) or value <= 0):
        raise InputError(f"{what} must be a positive integer, got {value}", field=field)


def validate(req: Request) -> None:
    """Reject names and numbers that no configuration could use (typed errors)."""
    _known(req.strategy, STRATEGIES, "strategy", "strategy")
    _known(req.mode, MODES, "mode", "mode")
    _known(req.schedule, SCHEDULES, "pipeline schedule", "schedule")
    _positive(req.gpus, "GPU count", "gpus")
    _positive(req.global_batch, "global batch", "global_batch")
    _positive(req.group_size, "group size", "group_size")
    _positive(req.micro_batches, "micro-batches", "micro_batches")
    if req.mask is not None and len(req.mask) != len(req.model.layers):
        raise InputError(f"layer mask has {len(req.mask)} entries for "
                         f"{len(req.model.layers)} layers", field="mask")
    if req.sample_bytes is not None and not req.sample_bytes >= 0:
        raise InputError(f"sample bytes must be >= 0, got {req.sample_bytes}",
                         field="sample_bytes")
    if req.precision is not None:
        dtype_bytes(req.precision)
    if req.input_precision is not None:
        input_bytes_per_value(req.input_precision)
    optimizer_slots(req.optimizer)
    _known(req.checkpoint_writers, WRITERS, "checkpoint writers", "checkpoint_writers")
    _known(req.checkpoint_tier, TIERS, "checkpoint tier", "checkpoint_tier")
    if req.bucket_MB is not None and not (isinstance(req.bucket_MB, int | float)
                                          and not isinstance(req.bucket_MB, bool)
                                          and 0 < req.bucket_MB <= MAX_BUCKET_MB):
        raise InputError(f"gradient bucket size must be in (0, {MAX_BUCKET_MB:g}] MB, "
                         f"got {req.bucket_MB}", field="bucket_MB")
    software_stack(req.system, req.software)      # an unknown stack name is refused
