"""What a profile calibrated from measurement records gives the oracle.

A calibrated profile carries ``calibration.records_fit``
(:class:`testbed.systems.calibrated.RecordsFit`). The oracle reads two parts of it
here (the checkpoint cost reads the storage part, the restart default the restart
part):

* **compute** — per framework and precision, the step-time line of each measured
  model, ``t(b) = fixed_s + s_per_sample · b``, and the cross-model law for every
  other model (:func:`records_step`, :func:`law_step`): a fixed cost per layer of
  each kind (convolution, fully connected, batch norm, the rest) and per parameter,
  plus per-sample costs per multiply-accumulate of convolutions and of fully connected
  layers, per element of the convolutions' input patches (``|y|·k² + |x|``) and per
  activation element every layer writes (the memory-bound elementwise work: bias, ReLU,
  dropout, normalisation and their backward, which no MAC count holds — what makes an
  MLP at a large batch slower than its MACs say). The layer counts, MACs, patch and
  activation sizes come from the same layer IR as everything else;
* **network** — the α–β that the micro-benchmarks of the profile's collective backend
  measured on each tier (:func:`fitted_links`), which replace the tier's nominal
  latency and bandwidth in the collectives that run on it.

Both fixed parts are *added* to the per-sample work (what a step costs whatever its
batch: launching and dispatching every layer, the optimizer step), never a floor.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from testbed.model.ir import Model
from testbed.oracle.collectives import FittedLink
from testbed.systems.calibrated import ComputeFit, ComputeLaw, RecordsFit, StepLine
from testbed.systems.profile import SystemProfile

#: Layer kinds with their own fixed cost in the law; the rest share one.
LAW_LAYER_KINDS = ("conv", "fc", "bn", "other")
#: Records' collective names → the oracle's.
RECORD_OPS = {"allreduce": "allreduce", "allgather": "allgather",
              "reduce_scatter": "reducescatter", "broadcast": "broadcast"}


@dataclass(frozen=True)
class LayerFeatures:
    """What the law reads from a model's IR."""

    layers: dict[str, int]
    parameters: int
    conv_macs: int
    fc_macs: int
    conv_patch: int
    activations: int

    def row(self, batch: float) -> list[float]:
        """The law's design row at ``batch`` samples (fixed columns, then per-sample:
        convolution MACs, fully connected MACs, patch elements, activation elements)."""
        return ([float(self.layers[k]) for k in LAW_LAYER_KINDS] + [float(self.parameters)]
                + [batch * self.conv_macs, batch * self.fc_macs, batch * self.conv_patch,
                   batch * self.activations])


def features(model: Model) -> LayerFeatures:
    """Layer counts by kind, parameters, MACs, convolution patch elements and the
    activation elements of one sample (every layer's output)."""
    layers = dict.fromkeys(LAW_LAYER_KINDS, 0)
    conv_macs = fc_macs = patch = activations = 0
    for layer in model.layers:
        activations += layer.y_elems
        kind = layer.kind if layer.kind in LAW_LAYER_KINDS else "other"
        if layer.kind == "deconv":
            kind = "conv"
        layers[kind] += 1
        if kind == "conv":
            conv_macs += layer.forward_macs
            area = int(np.prod(layer.kernel)) if layer.kernel else 1
            patch += layer.y_elems * area + layer.x_elems
        elif kind == "fc":
            fc_macs += layer.forward_macs
    return LayerFeatures(layers, model.parameters, conv_macs, fc_macs, patch, activations)


def law_coefficients(law: ComputeLaw) -> list[float]:
    """The law's coefficients in the order of :meth:`LayerFeatures.row`."""
    return [law.per_layer_s.get(k, 0.0) for k in LAW_LAYER_KINDS] + [
        law.per_parameter_s, law.conv_mac_s, law.fc_mac_s, law.conv_patch_s, law.activation_s]


def law_time_s(law: ComputeLaw, model: Model, batch: float) -> float:
    """Step time of ``model`` at ``batch`` samples by the law."""
    return float(np.dot(features(model).row(batch), law_coefficients(law)))


@dataclass(frozen=True)
class StepFit:
    """One model's fitted step: ``fixed_s + s_per_sample · b`` at the fit's precision."""

    fixed_s: float
    s_per_sample: float
    precision: str
    source: str


def law_step(law: ComputeLaw, model: Model) -> tuple[float, float]:
    """(fixed seconds, seconds per sample) of ``model`` by the law."""
    f, coef = features(model), law_coefficients(law)
    fixed = float(np.dot(f.row(0.0), coef))
    return fixed, float(np.dot(f.row(1.0), coef)) - fixed


def compute_fit(fit: RecordsFit, framework: str, precision: str, device: str | None = None,
                fallback_precision: str | None = None) -> ComputeFit | None:
    """The compute fit of ``framework`` in ``precision`` (else in ``fallback_precision``,
    else in any precision measured), preferring ``device`` (``gpu`` or ``cpu``)."""
    fits = [c for c in fit.compute if c.framework == framework]
    if device is not None:
        fits = sorted(fits, key=lambda c: c.device != device)
    for want in (precision, fallback_precision):
        hit = next((c for c in fits if c.precision == want), None)
        if hit is not None:
            return hit
    return fits[0] if fits else None


def records_step(system: SystemProfile, model: Model, framework: str | None, precision: str,
                 *, law: bool) -> StepFit | None:
    """The measured line of ``model`` (``law=False``) or the law's step for it
    (``law=True``) from the profile's compute fit of ``framework`` in ``precision`` (else
    the profile's training precision, else any measured one); None when there is none."""
    fit = system.records_fit
    if fit is None or framework is None:
        return None
    cfit = compute_fit(fit, framework, precision, system.device_kind,
                       system.gpu.training_precision)
    if cfit is None:
        return None
    where = f"{cfit.framework} {cfit.precision} {cfit.device}"
    if not law:
        line: StepLine | None = cfit.models.get(model.name)
        if line is None:
            return None
        return StepFit(line.fixed_s, line.s_per_sample, cfit.precision,
                       f"compute measured ({model.name}, {where} line: fixed + per sample)")
    if cfit.law is None:
        return None
    fixed, per_sample = law_step(cfit.law, model)
    return StepFit(fixed, per_sample, cfit.precision,
                   f"compute law ({where}: per layer kind, parameter, MAC, patch and activation)")


def fitted_links(system: SystemProfile) -> tuple[FittedLink, ...]:
    """The α–β the records measured for the profile's collective backend, one per
    (operation, tier, process count), smallest process count first."""
    fit, backend = system.records_fit, system.collective_backend
    if fit is None:
        return ()
    out = [FittedLink(op=RECORD_OPS.get(ab.op, ab.op), tier=ab.tier, processes=ab.processes,
                      alpha_s=ab.latency_us * 1e-6, bandwidth_Bps=ab.bandwidth_GBps * 1e9,
                      backend=ab.backend)
           for ab in fit.network if ab.backend == backend]
    return tuple(sorted(out, key=lambda f: (f.op, f.tier, f.processes)))
