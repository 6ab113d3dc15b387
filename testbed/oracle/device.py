"""What the oracle reads off a system profile: rates, curves, stacks, measurements.

A profile (:mod:`testbed.systems.profile`, :mod:`testbed.systems.software`) is data:
datasheet peaks, efficiency tables, curves per model family, software stacks, measured
models. Which entry applies to a prediction — a model family's curve or the default
one, tf32 on a GPU without a tf32 figure, the stack a request names by a framework
alias, a model's own measurement — is a rule of the cost model, so it lives here, in
the oracle, and the profile classes stay plain records of what was measured or
published. :func:`testbed.oracle.context.build_context` resolves each of them once per
prediction.
"""

from __future__ import annotations

from testbed.errors import UnknownNameError
from testbed.systems.profile import (
    CurvePoint,
    GpuSpec,
    ModelCalibration,
    SystemProfile,
)
from testbed.systems.software import SoftwareSpec, SoftwareStack
from testbed.units import did_you_mean

#: Efficiency of FLOP-based estimates on a GPU whose profile gives none.
DEFAULT_EFFICIENCY = 0.4
#: Where a precision without its own GEMM efficiency entry takes it from.
GEMM_FALLBACK = {"bf16": "fp16", "fp16": "bf16", "tf32": "fp32", "fp8": "fp16",
                 "fp64": "fp32"}


def flat_efficiency(gpu: GpuSpec, precision: str) -> float:
    """The profile's flat achieved/peak figure of ``precision`` (ParaDL's rules, and
    the curve of a family without one)."""
    table = gpu.compute_efficiency
    return table.get(precision, table.get("default", DEFAULT_EFFICIENCY))


def curve(gpu: GpuSpec, precision: str, family: str = "default") -> CurvePoint:
    """The efficiency curve of ``precision`` for a model family: the family's own,
    else the profile's default family, else the flat ``compute_efficiency``."""
    for key in (family, "default"):
        table = gpu.compute_curves.get(key, {})
        if precision in table:
            return table[precision]
        if precision == "tf32" and "fp32" in table and "tf32" not in gpu.peak_TFLOPS:
            return table["fp32"]
    return CurvePoint(efficiency=min(1.0, flat_efficiency(gpu, precision)))


def flop_rate(gpu: GpuSpec, precision: str, efficiency: float) -> float:
    """Achieved FLOP/s at ``precision``: the datasheet peak × ``efficiency``."""
    return gpu.peak_flops(precision) * efficiency


def sustained_flops(gpu: GpuSpec, precision: str, family: str = "default") -> float:
    """Achieved FLOP/s at large batch: peak × the curve's efficiency."""
    return flop_rate(gpu, precision, curve(gpu, precision, family).efficiency)


def gemm_share(gpu: GpuSpec, precision: str) -> float:
    """Achieved share of the peak of large GEMM-like kernels at ``precision`` (tf32
    falls back to fp32's entry, bf16 and fp16 share one entry when only one is given,
    fp8 takes the half-precision one)."""
    table = gpu.gemm_efficiency
    for key in (precision, GEMM_FALLBACK.get(precision)):
        if key is not None and key in table:
            return table[key]
    known = ", ".join(sorted(table))
    raise UnknownNameError(f"GPU {gpu.model} has no gemm_efficiency for precision "
                           f"{precision!r}; known: {known}", field="precision")


def model_calibration(system: SystemProfile, model_name: str) -> ModelCalibration | None:
    """The profile's measurement of ``model_name`` (None: not measured)."""
    cal = system.calibration
    return cal.models.get(model_name) if cal is not None else None


def stack_names(spec: SoftwareSpec) -> list[str]:
    """Stack keys and framework aliases a request may name."""
    out = list(spec.stacks)
    for stack in spec.stacks.values():
        out += [a for a in stack.frameworks if a not in out]
    return out


def software_stack(system: SystemProfile, name: str | None = None) -> SoftwareStack:
    """The stack a prediction runs on: ``name`` (a stack key or a framework alias) or
    the ``software`` section's default. A profile without the section stands for its
    ``gpu.launch_us_per_layer`` and ``overlap_allreduce`` (no stack can be named then;
    such profiles keep the FLOP-based compute, see :mod:`testbed.oracle.compute`)."""
    spec = system.software
    if spec is None:
        if name is not None:
            raise UnknownNameError(f"system {system.name} has no software section; "
                                   f"software {name!r} cannot be chosen", field="software")
        return SoftwareStack(description="profile without a software section",
                             launch_us=system.gpu.launch_us_per_layer, kernel_gap_us=0.0,
                             gradient_allreduce=("buckets" if system.overlap_allreduce
                                                 else "after-backward"),
                             name="profile")
    key = spec.default if name is None else name
    if key in spec.stacks:
        return spec.stacks[key]
    for stack in spec.stacks.values():
        if key in stack.frameworks:
            return stack
    known = stack_names(spec)
    raise UnknownNameError(f"unknown software stack {name!r}{did_you_mean(key, known)}; "
                           f"known: {', '.join(known)}", field="software")
