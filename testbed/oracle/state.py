"""Size of the training state that a checkpoint must hold.

A complete checkpoint stores the parameters plus the optimizer's per-parameter slots
(momentum buffer, Adam's first and second moments) at the parameter precision; the
framework's file format adds its own overhead on top (measured by the real-run
harnesses, see ``real_runs``).
"""

from __future__ import annotations

from testbed.errors import UnknownNameError
from testbed.units import did_you_mean

#: Per-parameter optimizer state tensors kept by each optimizer.
OPTIMIZER_SLOTS = {"sgd": 0, "momentum": 1, "nesterov": 1, "rmsprop": 1, "adagrad": 1,
                   "adam": 2, "adamw": 2}

#: Bytes per value for each training precision.
DTYPE_BYTES = {"fp64": 8, "fp32": 4, "tf32": 4, "fp16": 2, "bf16": 2, "fp8": 1}


def optimizer_slots(optimizer: str) -> int:
    """Number of per-parameter state tensors the optimizer keeps (SGD 0, momentum 1, Adam 2)."""
    key = optimizer.lower()
    if key not in OPTIMIZER_SLOTS:
        raise UnknownNameError(f"unknown optimizer {optimizer!r}{did_you_mean(key, OPTIMIZER_SLOTS)}",
                               field="optimizer")
    return OPTIMIZER_SLOTS[key]


def dtype_bytes(precision: str) -> int:
    """Bytes per value of a precision name (fp32 → 4)."""
    key = precision.lower()
    if key not in DTYPE_BYTES:
        raise UnknownNameError(f"unknown precision {precision!r}{did_you_mean(key, DTYPE_BYTES)}",
                               field="precision")
    return DTYPE_BYTES[key]


def state_bytes(parameters: int, optimizer: str = "momentum", precision: str = "fp32") -> int:
    """Bytes of parameters plus optimizer slots: ``parameters × bytes × (1 + slots)``.

    This is the format-free payload of a checkpoint; file formats add metadata on top.
    """
    if parameters < 0:
        raise ValueError("parameters must be >= 0")
    return parameters * dtype_bytes(precision) * (1 + optimizer_slots(optimizer))
