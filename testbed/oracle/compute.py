"""Compute time of the local work: a curve over the per-GPU batch with a per-step floor.

One GPU's step on ``b`` samples takes

    t(b) = max(s · (b + b½), t_launch) + t_optimizer

or, for a model whose step was measured over several batches (a records fit, or a
``calibration.models`` entry with ``fixed_s``),

    t(b) = t_fixed + s · b

with the measured fixed part (launching every layer, the optimizer step) added — it
takes the place of the fill, the launch floor and the modelled optimizer step.

* ``s`` — seconds per sample at large batch: measured for this model (calibration,
  scaled to this input size by FLOPs and to other precisions by the profile's ratio of
  sustained rates), else profiled in the model file, else training FLOPs over the
  sustained rate ``peak × efficiency`` of the precision and model family;
* ``b½`` — the half-batch of the profile's efficiency curve: below it kernels do not fill
  the GPU, so the achieved rate is ``efficiency · b/(b + b½)`` (small batches cost
  what they cost);
* ``t_launch`` — the CPU time to launch every layer's kernels, a floor under the step;
* ``t_optimizer`` — the optimizer step streaming the training state through HBM.

Where ``s`` comes from, in order (the estimate's ``calibration`` line says which):

1. the measured line of this model in the profile's records fit for the request's
   framework (default: the profile's) — :mod:`testbed.oracle.fitted`;
2. the model's ``calibration.models`` entry (ABCI/ParaDL: one batch, spread over the
   curve; with ``fixed_s``: the line), when it was measured with that framework or its
   framework is not recorded — after the law of step 3 when it was measured with the
   framework but in another precision (the law in the right precision knows better);
3. the records fit's cross-model law for the framework (per layer kind, parameter,
   MAC and patch element);
4. a per-sample time profiled in the model file;
5. training FLOPs over the sustained rate ``peak × efficiency``.

A measurement in another precision scales its per-sample part by the profile's ratio
of sustained rates (the fixed part stays). ParaDL's rules keep its linear ``b × s``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from testbed.oracle.conventions import Conventions
from testbed.oracle.fitted import StepFit, records_step
from testbed.oracle.profile import ModelStats
from testbed.oracle.request import Request
from testbed.oracle.state import dtype_bytes, state_per_parameter
from testbed.systems.profile import GpuSpec, ModelCalibration

#: Training FLOPs per forward FLOP: forward plus a backward of twice the forward
#: (input and weight gradients), the usual 1:2 forward:backward ratio.
FORWARD_PARTS = 1
BACKWARD_PARTS = 2
TRAINING_FLOPS_PER_FORWARD = float(FORWARD_PARTS + BACKWARD_PARTS)
#: The optimizer reads and writes every state byte once and reads the gradient.
OPTIMIZER_PASSES = 2
#: Model families of the efficiency tables, by name prefix (else ``default``).
FAMILY_PREFIXES = (("resnet", "resnet"), ("vgg", "vgg"), ("alexnet", "alexnet"),
                   ("cosmoflow", "conv3d"), ("unet", "conv3d"))


def model_family(name: str) -> str:
    """The efficiency-table family of a model name (``resnet50`` → ``resnet``)."""
    key = name.lower()
    for prefix, family in FAMILY_PREFIXES:
        if key.startswith(prefix):
            return family
    return "default"


@dataclass(frozen=True)
class ComputeRate:
    """How long one GPU takes for its share of a step (see the module doc)."""

    s_per_sample: float
    source: str
    half_batch: float = 0.0
    launch_s: float = 0.0
    optimizer_s: float = 0.0
    linear: bool = True
    #: measured per-step cost of the layers (added; see the module doc)
    fixed_s: float = 0.0

    def time_s(self, samples: float, work_fraction: float = 1.0,
               layer_fraction: float = 1.0) -> float:
        """Forward+backward seconds for one GPU to run ``work_fraction`` of the model's
        work on ``samples`` samples, with ``layer_fraction`` of its layers (a pipeline
        stage runs only its own)."""
        fixed = self.fixed_s * layer_fraction
        if self.linear:
            return samples * self.s_per_sample * work_fraction + fixed
        gpu = self.s_per_sample * (samples * work_fraction + self.half_batch * layer_fraction)
        return max(gpu, self.launch_s * layer_fraction) + fixed

    def variable_s(self, samples: float, work_fraction: float = 1.0) -> float:
        """The part of :meth:`time_s` proportional to the samples (no fill, no floor)."""
        return samples * self.s_per_sample * work_fraction

    def update_s(self, param_fraction: float = 1.0) -> float:
        """The optimizer step for ``param_fraction`` of the parameters (once per step)."""
        return self.optimizer_s * param_fraction


def _overheads(gpu: GpuSpec, stats: ModelStats, req: Request, precision: str) -> tuple[float, float]:
    """(kernel-launch floor, optimizer step) seconds for the whole model."""
    launch = len(stats.share_testbed) * gpu.launch_us_per_layer * 1e-6
    optimizer = 0.0
    if gpu.memory_bandwidth_GBps:
        state = state_per_parameter(req.optimizer, precision)
        traffic = OPTIMIZER_PASSES * state.total + dtype_bytes(precision)
        optimizer = stats.parameters * traffic / (gpu.memory_bandwidth_GBps * 1e9)
    return launch, optimizer


def _measured(cal: ModelCalibration, stats: ModelStats, gpu: GpuSpec, family: str,
              precision: str, launch: float, optimizer: float) -> float:
    """Large-batch seconds per sample from a measurement at ``cal.batch`` samples per
    GPU, scaled by FLOPs to this input and by sustained rates to ``precision``."""
    ref_flops = cal.forward_flops or stats.forward_flops
    s = cal.s_per_sample * stats.forward_flops / ref_flops
    if cal.batch:
        # the measured step is GPU-bound (it is far above the launch floor at the
        # batches people measure): strip the optimizer, spread over b + b½
        half = gpu.curve(cal.precision, family).half_batch
        s = max(s * cal.batch - optimizer, launch) / (cal.batch + half)
    if precision != cal.precision:
        s *= gpu.sustained_flops(cal.precision, family) / gpu.sustained_flops(precision, family)
    return s


def _precision_factor(gpu: GpuSpec, family: str, measured: str, precision: str) -> float:
    """Per-sample time at ``precision`` over that at ``measured`` (sustained rates)."""
    if precision == measured:
        return 1.0
    return gpu.sustained_flops(measured, family) / gpu.sustained_flops(precision, family)


def _step_rate(step: StepFit, gpu: GpuSpec, family: str, precision: str,
               linear: bool) -> ComputeRate:
    """The rate of a fitted step: its fixed part added, its slope scaled to ``precision``."""
    scaled = "" if precision == step.precision else f", scaled to {precision}"
    s = step.s_per_sample * _precision_factor(gpu, family, step.precision, precision)
    return ComputeRate(s, step.source + scaled, fixed_s=step.fixed_s, linear=linear)


def _matches(cal: ModelCalibration, framework: str | None) -> bool:
    return framework is None or cal.framework is None or cal.framework == framework


def _calibrated(model_cal: ModelCalibration, stats: ModelStats, gpu: GpuSpec, name: str,
                family: str, precision: str, curve: ComputeRate) -> ComputeRate:
    """The rate of a ``calibration.models`` entry (module doc, step 2); ``curve`` holds
    the fill, launch floor and optimizer step of the profile's curve."""
    scaled = "" if precision == model_cal.precision else f", scaled to {precision}"
    flops = stats.forward_flops / (model_cal.forward_flops or stats.forward_flops)
    if model_cal.fixed_s is not None:
        s = (model_cal.s_per_sample * flops
             * _precision_factor(gpu, family, model_cal.precision, precision))
        return ComputeRate(s, f"compute measured ({name}: fixed + per sample{scaled})",
                           fixed_s=model_cal.fixed_s, linear=curve.linear)
    s = (model_cal.s_per_sample * stats.forward_flops
         / (model_cal.forward_flops or stats.forward_flops))
    if not curve.linear:
        s = _measured(model_cal, stats, gpu, family, precision, curve.launch_s,
                      curve.optimizer_s)
    return replace(curve, s_per_sample=s, source=f"compute measured ({name}{scaled})")


def compute_rate(req: Request, rules: Conventions, stats: ModelStats,
                 model_cal: ModelCalibration | None, precision: str) -> ComputeRate:
    """The :class:`ComputeRate` of this request (see the module doc for the order)."""
    model, system = req.model, req.system
    gpu = system.gpu
    family = model_family(model.name)
    linear = not rules.batch_curve
    launch, optimizer = _overheads(gpu, stats, req, precision) if not linear else (0.0, 0.0)
    half = gpu.curve(precision, family).half_batch if not linear else 0.0
    curve = ComputeRate(0.0, "", half_batch=half, launch_s=launch, optimizer_s=optimizer,
                        linear=linear)
    records = system.records_fit if rules.use_calibration else None
    framework = req.framework or (records.default_framework() if records else None)
    line = records_step(system, model, framework, precision, law=False) if records else None
    if line is not None:
        return _step_rate(line, gpu, family, precision, linear)
    own = model_cal if model_cal is not None and _matches(model_cal, framework) else None
    if own is not None and (own.framework is None or own.precision == precision):
        return _calibrated(own, stats, gpu, model.name, family, precision, curve)
    law = records_step(system, model, framework, precision, law=True) if records else None
    if law is not None:
        return _step_rate(law, gpu, family, precision, linear)
    if own is not None:
        return _calibrated(own, stats, gpu, model.name, family, precision, curve)
    if model.profiled_s_per_sample:
        return replace(curve, s_per_sample=model.profiled_s_per_sample,
                       source="compute profiled (model file)")
    fitted = system.calibration.compute_efficiency if (
        system.calibration and rules.use_calibration) else {}
    if precision in fitted:
        eff = fitted[precision]
        source = f"compute from FLOPs at fitted efficiency {eff:.2f}"
    elif not linear:
        eff = gpu.curve(precision, family).efficiency
        source = f"compute from FLOPs at {precision} efficiency {eff:.2f} ({family})"
    else:
        eff = gpu.efficiency(precision)    # ParaDL's rules: the profile's flat figure
        source = f"compute from FLOPs at nominal efficiency {eff:.2f}"
    flops = stats.forward_flops * TRAINING_FLOPS_PER_FORWARD
    return replace(curve, s_per_sample=flops / (gpu.peak_flops(precision) * eff), source=source)
