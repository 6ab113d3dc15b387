"""Bytes per value of each precision, and the size of the training state.

A complete checkpoint stores what training needs to resume exactly: the weights at
their training precision, the fp32 master copy that mixed precision keeps beside
half-precision weights, and the optimizer's per-parameter slots (momentum buffer,
Adam's first and second moments), which frameworks keep in fp32 whatever the compute
precision (Micikevicius et al., "Mixed Precision Training", ICLR 2018, §3.1; PyTorch
AMP and Apex O1/O2 keep fp32 weights and fp32 optimizer state). The same numbers
size the memory breakdown of :mod:`testbed.oracle.resources`, so memory and
checkpoint never disagree. The framework's file format adds its own overhead on top
(measured by the real-run harnesses, see ``real_runs``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Annotated, Literal, get_args

from testbed.errors import UnknownNameError
from testbed.io.schema import one_of
from testbed.units import did_you_mean

#: Per-parameter optimizer state tensors kept by each optimizer.
OPTIMIZER_SLOTS = {"sgd": 0, "momentum": 1, "nesterov": 1, "rmsprop": 1, "adagrad": 1,
                   "adam": 2, "adamw": 2}

#: Training precisions (names in any letter case are accepted, as lower case).
TrainingPrecision = Literal["fp64", "fp32", "tf32", "fp16", "bf16", "fp8"]
PRECISIONS: tuple[str, ...] = get_args(TrainingPrecision)
#: A training precision in an input schema (any case; refused with a did-you-mean).
PrecisionName = Annotated[TrainingPrecision, one_of(PRECISIONS, "precision", fold_case=True,
                                                    choose=f"known: {', '.join(PRECISIONS)}")]
#: Bytes per value for each training precision.
DTYPE_BYTES: dict[str, int] = {"fp64": 8, "fp32": 4, "tf32": 4, "fp16": 2, "bf16": 2, "fp8": 1}
#: Bytes of an fp32 value: master weights and optimizer moments under mixed precision.
FP32_BYTES = 4
#: Input storage formats beyond the training precisions: decoded 8-bit images
#: (``uint8``) and k-bit quantised values (``int2`` … ``int16``, k/8 bytes each).
INPUT_FORMATS = {"uint8": 1.0}
_INT_K = re.compile(r"^u?int(\d+)$")
#: k-bit quantisation the input transforms support (issue 13: k = 2 … 16).
INT_BITS_RANGE = (2, 16)


def optimizer_slots(optimizer: str) -> int:
    """Number of per-parameter state tensors the optimizer keeps (SGD 0, momentum 1, Adam 2)."""
    key = optimizer.lower()
    if key not in OPTIMIZER_SLOTS:
        raise UnknownNameError(f"unknown optimizer {optimizer!r}{did_you_mean(key, OPTIMIZER_SLOTS)}",
                               field="optimizer")
    return OPTIMIZER_SLOTS[key]


def dtype_bytes(precision: str, field: str = "precision") -> int:
    """Bytes per value of a training precision name (fp32 → 4)."""
    key = precision.lower()
    if key not in DTYPE_BYTES:
        raise UnknownNameError(f"unknown precision {precision!r}{did_you_mean(key, DTYPE_BYTES)}; "
                               f"known: {', '.join(DTYPE_BYTES)}", field=field)
    return DTYPE_BYTES[key]


def input_bytes_per_value(precision: str, field: str = "input_precision") -> float:
    """Bytes per stored input value: a float format (fp32 → 4, fp16 → 2), ``uint8``
    (decoded images, 1) or k-bit integers ``intK`` (k/8 bytes, k = 2 … 16)."""
    key = precision.lower()
    if key in DTYPE_BYTES:
        return float(DTYPE_BYTES[key])
    if key in INPUT_FORMATS:
        return INPUT_FORMATS[key]
    match = _INT_K.match(key)
    if match and INT_BITS_RANGE[0] <= int(match.group(1)) <= INT_BITS_RANGE[1]:
        return int(match.group(1)) / 8
    known = [*DTYPE_BYTES, *INPUT_FORMATS, "int2 … int16"]
    raise UnknownNameError(f"unknown input precision {precision!r}"
                           f"{did_you_mean(key, [*DTYPE_BYTES, *INPUT_FORMATS, 'int8'])}; "
                           f"known: {', '.join(known)}", field=field)


@dataclass(frozen=True)
class StateBytes:
    """Per-parameter training state by component (bytes per parameter)."""

    weights: int            # at the training precision
    master: int             # fp32 copy kept beside half-precision weights
    optimizer: int          # moments, one per optimizer slot, at least fp32

    @property
    def total(self) -> int:
        return self.weights + self.master + self.optimizer


def state_per_parameter(optimizer: str = "momentum", precision: str = "fp32") -> StateBytes:
    """Bytes per parameter of the training state: weights at ``precision``, an fp32
    master copy when the weights are narrower than fp32, and optimizer slots in fp32
    (fp64 training keeps them in fp64)."""
    weights = dtype_bytes(precision)
    master = FP32_BYTES if weights < FP32_BYTES else 0
    return StateBytes(weights=weights, master=master,
                      optimizer=max(weights, FP32_BYTES) * optimizer_slots(optimizer))


def state_bytes(parameters: int, optimizer: str = "momentum", precision: str = "fp32") -> int:
    """Bytes of the training state of ``parameters`` parameters (see the module doc).

    fp32 with momentum: 8 bytes per parameter; bf16 with Adam: 2 + 4 + 8 = 14. This is
    the format-free payload of a checkpoint; file formats add metadata on top.
    """
    if parameters < 0:
        raise ValueError("parameters must be >= 0")
    return parameters * state_per_parameter(optimizer, precision).total
