"""Compute time of the local work: per layer from the IR, or a curve over the batch.

On a profile with the per-layer data (``gpu.sm_count``, ``gpu.gemm_efficiency``, HBM
bandwidth; issue 18) one GPU's step on ``b`` samples is what
:func:`testbed.oracle.kernels.step_times` gives for the request's software stack: every
layer's GEMMs and streams on their roofline with tile waves, the optimizer step, and
``max(GPU, host)`` for the launches. A measurement of the model (a ``calibration.models``
entry) scales it by measured / modelled at the measured batch, so the measurement
fixes the level and the layers give the shape over batch, input size and precision;
models without a measurement take the calibration's median ``compute_scale``.

Profiles without that data keep the earlier curve, where one GPU's step on ``b``
samples takes

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
   MAC, patch and activation element);
4. a per-sample time profiled in the model file;
5. training FLOPs over the sustained rate ``peak × efficiency``.

A measurement in another precision scales its per-sample part by the profile's ratio
of sustained rates (the fixed part stays). ParaDL's rules keep its linear ``b × s``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from testbed.model.ir import Model
from testbed.oracle.conventions import Conventions
from testbed.oracle.device import curve as efficiency_curve
from testbed.oracle.device import flat_efficiency, flop_rate, sustained_flops
from testbed.oracle.fitted import StepFit, records_step
from testbed.oracle.kernels import StepTimes, step_times
from testbed.oracle.profile import ModelStats
from testbed.oracle.request import Request
from testbed.oracle.state import dtype_bytes, state_per_parameter
from testbed.systems.profile import GpuSpec, ModelCalibration
from testbed.systems.software import SoftwareStack

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


#: Batch at which the per-layer model's per-sample time is read as "large batch"
#: (reported as ``s_per_sample``; the fixed part of a step is what is left).
LARGE_BATCH = 4096


@dataclass(frozen=True)
class LayerModel:
    """The per-layer compute of one model on one GPU and stack at one precision, scaled
    by ``scale`` (measured / modelled; 1 when nothing was measured)."""

    model: Model
    gpu: GpuSpec
    stack: SoftwareStack
    precision: str
    dtype_bytes: int
    scale: float = 1.0

    def steps(self, samples: float) -> StepTimes:
        return _steps(self.model, samples, self.gpu, self.stack, self.precision,
                      self.dtype_bytes)

    def pass_s(self, samples: float) -> float:
        """Scaled forward + backward seconds on ``samples`` samples (host-bound steps at
        the host's pace; the optimizer apart)."""
        t = self.steps(samples)
        fb = float(t.forward_gpu_s.sum() + t.backward_gpu_s.sum())
        host = t.host_s * fb / t.gpu_s if t.gpu_s > 0 else t.host_s
        return self.scale * max(fb, host)

    def optimizer_s(self) -> float:
        return self.scale * self.steps(1.0).optimizer_gpu_s


#: Per-layer step times by (model, GPU, stack ids, precision, bytes, samples); the
#: objects are kept beside the result so a recycled id never returns another's times.
_STEPS: dict[tuple, tuple[tuple, StepTimes]] = {}
_STEPS_LIMIT = 8192


def _steps(model: Model, samples: float, gpu: GpuSpec, stack: SoftwareStack,
           precision: str, nbytes: int) -> StepTimes:
    key = (id(model), id(gpu), id(stack), precision, nbytes, float(samples))
    hit = _STEPS.get(key)
    if hit is not None and hit[0][0] is model and hit[0][1] is gpu and hit[0][2] is stack:
        return hit[1]
    value = step_times(model, samples, gpu, stack, precision, nbytes)
    if len(_STEPS) > _STEPS_LIMIT:
        _STEPS.clear()
    _STEPS[key] = ((model, gpu, stack), value)
    return value


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
    #: the per-layer model, when the profile has what it needs
    layers: LayerModel | None = None

    def time_s(self, samples: float, work_fraction: float = 1.0,
               layer_fraction: float = 1.0) -> float:
        """Forward+backward seconds for one GPU to run ``work_fraction`` of the model's
        work on ``samples`` samples, with ``layer_fraction`` of its layers (a pipeline
        stage runs only its own). Per layer: the share of the layers at the batch that
        gives each of them its share of the work (a model-parallel split shrinks every
        split GEMM as a smaller batch would)."""
        fixed = self.fixed_s * layer_fraction
        if self.layers is not None:
            f = max(layer_fraction, 1e-12)
            return f * self.layers.pass_s(samples * work_fraction / f) + fixed
        if self.linear:
            return samples * self.s_per_sample * work_fraction + fixed
        gpu = self.s_per_sample * (samples * work_fraction + self.half_batch * layer_fraction)
        return max(gpu, self.launch_s * layer_fraction) + fixed

    def steps(self, samples: float) -> StepTimes | None:
        """The per-layer times of a step on ``samples`` samples (None: no layer model)."""
        return self.layers.steps(samples) if self.layers is not None else None

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
        half = efficiency_curve(gpu, cal.precision, family).half_batch
        s = max(s * cal.batch - optimizer, launch) / (cal.batch + half)
    return s * _precision_factor(gpu, family, cal.precision, precision)


def _precision_factor(gpu: GpuSpec, family: str, measured: str, precision: str) -> float:
    """Per-sample time at ``precision`` over that at ``measured`` (sustained rates)."""
    if precision == measured:
        return 1.0
    return sustained_flops(gpu, measured, family) / sustained_flops(gpu, precision, family)


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


def _layer_rate(layers: LayerModel, source: str) -> ComputeRate:
    """A per-layer :class:`ComputeRate`: ``s_per_sample`` is the large-batch per-sample
    time, the optimizer step apart."""
    s = layers.pass_s(LARGE_BATCH) / LARGE_BATCH
    return ComputeRate(s, source, optimizer_s=layers.optimizer_s(), linear=False,
                       layers=layers)


#: Per-layer rates by (model, system, stack ids, precision, rules); the objects are
#: kept beside the rate so a recycled id never returns another's.
_RATES: dict[tuple, tuple[tuple, ComputeRate]] = {}
#: Models at a measurement's input shape, by (name, shape).
_REF_MODELS: dict[tuple, Model] = {}


def _ref_model(model: Model, shape: tuple[int, ...]) -> Model:
    if shape == model.input_shape:
        return model
    key = (model.name, shape)
    if key not in _REF_MODELS:
        from testbed.model.registry import get_model
        if len(_REF_MODELS) > 256:
            _REF_MODELS.clear()
        _REF_MODELS[key] = get_model(model.name, shape)
    return _REF_MODELS[key]


def _per_layer(req: Request, rules: Conventions, model_cal: ModelCalibration | None,
               precision: str, stack: SoftwareStack) -> ComputeRate:
    """The per-layer rate of this request (cached per model, system, stack and
    precision): see :func:`_per_layer_rate`."""
    key = (id(req.model), id(req.system), id(stack), precision, rules.name,
           id(model_cal))
    hit = _RATES.get(key)
    objs = (req.model, req.system, stack, model_cal)
    if hit is not None and all(a is b for a, b in zip(hit[0], objs, strict=True)):
        return hit[1]
    rate = _per_layer_rate(req, rules, model_cal, precision, stack)
    if len(_RATES) > 4096:
        _RATES.clear()
    _RATES[key] = (objs, rate)
    return rate


def _per_layer_rate(req: Request, rules: Conventions, model_cal: ModelCalibration | None,
                    precision: str, stack: SoftwareStack) -> ComputeRate:
    """The per-layer rate of this request: scaled to the model's measurement when the
    profile's calibration has one, else by the calibration's median scale."""
    system, model = req.system, req.model
    layers = LayerModel(model, system.gpu, stack, precision, dtype_bytes(precision))
    source = layers.steps(1.0).source
    cal = system.calibration if rules.use_calibration else None
    if model_cal is not None and model_cal.batch:
        from testbed.units import parse_shape
        ref_model = model
        if model_cal.input_shape:
            ref_model = _ref_model(model, tuple(parse_shape(model_cal.input_shape)))
        ref = LayerModel(ref_model, system.gpu, stack, model_cal.precision,
                         dtype_bytes(model_cal.precision))
        modelled = ref.pass_s(model_cal.batch) + ref.optimizer_s()
        scale = model_cal.s_per_sample * model_cal.batch / modelled
        scaled = "" if precision == model_cal.precision else f", scaled to {precision}"
        return _layer_rate(LayerModel(model, system.gpu, stack, precision,
                                      dtype_bytes(precision), scale),
                           f"compute measured ({model.name}{scaled}) × {source}")
    if cal is not None and cal.compute_scale:
        scale = cal.compute_scale.get(precision) or next(iter(cal.compute_scale.values()))
        return _layer_rate(LayerModel(model, system.gpu, stack, precision,
                                      dtype_bytes(precision), scale),
                           f"{source} × fitted scale {scale:.3g}")
    return _layer_rate(layers, source)


def compute_rate(req: Request, rules: Conventions, stats: ModelStats,
                 model_cal: ModelCalibration | None, precision: str,
                 stack: SoftwareStack | None = None) -> ComputeRate:
    """The :class:`ComputeRate` of this request (see the module doc for the order)."""
    model, system = req.model, req.system
    gpu = system.gpu
    family = model_family(model.name)
    linear = not rules.batch_curve
    launch, optimizer = _overheads(gpu, stats, req, precision) if not linear else (0.0, 0.0)
    half = efficiency_curve(gpu, precision, family).half_batch if not linear else 0.0
    curve = ComputeRate(0.0, "", half_batch=half, launch_s=launch, optimizer_s=optimizer,
                        linear=linear)
    records = system.records_fit if rules.use_calibration else None
    framework = req.framework or (records.default_framework() if records else None)
    line = records_step(system, model, framework, precision, law=False) if records else None
    if line is not None:
        return _step_rate(line, gpu, family, precision, linear)
    own = model_cal if model_cal is not None and _matches(model_cal, framework) else None
    per_layer = not linear and gpu.per_layer and not model.profiled_s_per_sample
    if stack is not None and per_layer and (own is None or (own.fixed_s is None and own.batch)):
        return _per_layer(req, rules, own, precision, stack)
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
        eff = efficiency_curve(gpu, precision, family).efficiency
        source = f"compute from FLOPs at {precision} efficiency {eff:.2f} ({family})"
    else:
        eff = flat_efficiency(gpu, precision)    # ParaDL's rules: the profile's flat figure
        source = f"compute from FLOPs at nominal efficiency {eff:.2f}"
    flops = stats.forward_flops * TRAINING_FLOPS_PER_FORWARD
    return replace(curve, s_per_sample=flops / flop_rate(gpu, precision, eff), source=source)
