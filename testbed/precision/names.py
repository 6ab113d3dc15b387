"""Named precisions, as the CLI and scenarios spell them, and one way to apply them.

=========  ===============================================  ===============
name       storage                                          bytes per value
=========  ===============================================  ===============
fp64       IEEE binary64 (the reference: no change)         8
fp32       IEEE binary32                                    4
fp16       IEEE binary16                                    2
bf16       bfloat16 (8-bit exponent, 7-bit mantissa)        2
intK       K-bit uniform quantisation, K = 2…16             K / 8 (packed)
mantM      float64 with M = 0…52 mantissa bits kept         (12 + M) / 8
=========  ===============================================  ===============
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Literal

import numpy as np

from testbed.errors import InputError, UnknownNameError
from testbed.precision.floats import (
    FLOAT64_MANTISSA_BITS,
    mantissa_bytes_per_value,
    to_bfloat16,
    to_float16,
    to_float32,
    truncate_mantissa,
)
from testbed.precision.quantize import (
    MAX_BITS,
    MIN_BITS,
    QuantScale,
    Rounding,
    check_bits,
    fit_scale,
    quantize_values,
)
from testbed.precision.report import TransformReport, measure

Kind = Literal["float", "int", "mant"]

#: The floating-point formats by name: bits per value.
FLOAT_BITS = {"fp64": 64, "fp32": 32, "fp16": 16, "bf16": 16}
_FLOAT_ROUND = {"fp64": lambda x: np.array(x, dtype=np.float64), "fp32": to_float32,
                "fp16": to_float16, "bf16": to_bfloat16}
_PATTERN = re.compile(r"^(int|mant)(\d+)$")
#: The names users most often want, in the order a table shows them.
DEFAULT_NAMES = ("fp64", "fp32", "fp16", "bf16", "int8", "int4")


@dataclass(frozen=True)
class Precision:
    """One storage precision: ``kind`` float, int (k-bit quantisation) or mant
    (mantissa truncation); ``bits`` is k for int, the kept mantissa bits for mant and the
    format's width for float."""

    name: str
    kind: Kind
    bits: int

    @property
    def bytes_per_value(self) -> float:
        if self.kind == "mant":
            return mantissa_bytes_per_value(self.bits)
        return self.bits / 8

    @property
    def bits_per_value(self) -> float:
        return self.bytes_per_value * 8

    def to_dict(self) -> dict:
        return {**asdict(self), "bytes_per_value": self.bytes_per_value}


def parse_precision(name: str, *, field: str | None = "precision") -> Precision:
    """The :class:`Precision` called ``name`` (fp64, fp32, fp16, bf16, intK, mantM)."""
    key = str(name).strip().lower()
    if key in FLOAT_BITS:
        return Precision(name=key, kind="float", bits=FLOAT_BITS[key])
    match = _PATTERN.match(key)
    if match is None:
        raise UnknownNameError(f"unknown precision {name!r}; choose fp64, fp32, fp16, bf16, "
                               f"int{MIN_BITS}…int{MAX_BITS} or mant0…mant"
                               f"{FLOAT64_MANTISSA_BITS}", field=field)
    kind, bits = match.group(1), int(match.group(2))
    if kind == "int":
        check_bits(bits, field=field)
        return Precision(name=f"int{bits}", kind="int", bits=bits)
    if bits > FLOAT64_MANTISSA_BITS:
        raise InputError(f"mantissa bits must be in 0…{FLOAT64_MANTISSA_BITS}, got {bits}",
                         field=field)
    return Precision(name=f"mant{bits}", kind="mant", bits=bits)


def parse_precisions(text: str, *, field: str = "--precisions") -> tuple[Precision, ...]:
    """A comma-separated list of names; ``intA..intB`` stands for every k from A to B."""
    out: list[Precision] = []
    for item in (part.strip() for part in str(text).split(",")):
        if not item:
            raise InputError("empty precision name in the list", field=field)
        if ".." in item:
            first, _, last = item.partition("..")
            a, b = parse_precision(first, field=field), parse_precision(last, field=field)
            if a.kind != "int" or b.kind != "int" or a.bits > b.bits:
                raise InputError(f"a range must read intA..intB with A ≤ B, got {item!r}",
                                 field=field)
            out += [Precision(name=f"int{k}", kind="int", bits=k)
                    for k in range(a.bits, b.bits + 1)]
        else:
            out.append(parse_precision(item, field=field))
    seen: dict[str, Precision] = {}
    for p in out:
        seen.setdefault(p.name, p)
    return tuple(seen.values())


def apply_precision(precision: Precision, x, *, scale: QuantScale | None = None,
                    per_feature: bool = True, rounding: Rounding = "nearest",
                    seed: np.random.SeedSequence | None = None
                    ) -> tuple[np.ndarray, TransformReport]:
    """``x`` stored at ``precision`` and read back as float64, with the error report.

    For intK the scale is ``scale`` when given (e.g. fitted on training data and reused
    for test data), else fitted to ``x``; ``rounding`` and ``seed`` apply to intK only.
    """
    data = np.asarray(x, dtype=np.float64)
    if precision.kind == "float":
        stored = _FLOAT_ROUND[precision.name](data)
    elif precision.kind == "mant":
        stored = truncate_mantissa(data, precision.bits)
    else:
        scale = scale or fit_scale(data, precision.bits, per_feature=per_feature)
        if scale.bits != precision.bits:
            raise ValueError(f"a {scale.bits}-bit scale given for {precision.name}")
        stored = quantize_values(data, precision.bits, rounding=rounding, seed=seed,
                                 scale=scale)
    return stored, measure(data, stored, precision=precision.name,
                           bytes_per_value=precision.bytes_per_value)
