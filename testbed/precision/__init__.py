"""Reduced-precision storage of input data: float formats, k-bit quantisation, mantissa
truncation, each with its bytes per value and the error it makes on the data.

Pure NumPy (core layer). See :mod:`testbed.precision.floats`,
:mod:`testbed.precision.quantize` and :mod:`testbed.precision.names` for the formats
and :class:`~testbed.precision.report.TransformReport` for what each transform reports.
"""

from testbed.precision.floats import (
    bfloat16_bits,
    from_bfloat16_bits,
    to_bfloat16,
    to_float16,
    to_float32,
    truncate_mantissa,
)
from testbed.precision.names import (
    DEFAULT_NAMES,
    Precision,
    apply_precision,
    parse_precision,
    parse_precisions,
)
from testbed.precision.quantize import QuantScale, dequantize, fit_scale, quantize, quantize_values
from testbed.precision.report import TransformReport, measure

__all__ = [
    "DEFAULT_NAMES", "Precision", "QuantScale", "TransformReport", "apply_precision",
    "bfloat16_bits", "dequantize", "fit_scale", "from_bfloat16_bits", "measure",
    "parse_precision", "parse_precisions", "quantize", "quantize_values", "to_bfloat16",
    "to_float16", "to_float32", "truncate_mantissa",
]
