"""Compute fit: step time per model and precision as a function of the batch, and a
cross-model law from the layers.

**Per model** (framework, precision, device): ``step_s = fixed_s + s_per_sample·b``
over the per-process batches ``b`` measured (relative least squares, both ≥ 0). The
fixed part is what a step costs whatever its batch — launching or dispatching every
layer's forward and backward operations, and the optimizer step over the parameters;
the slope is the work per sample. It is the oracle's curve ``s·(b + b½)`` with
``b½ = fixed_s / s_per_sample``.

**Across models** (the law, for a model without its own line): the fixed part is a
cost per layer of each kind (convolution, fully connected, batch norm, the rest) and
per parameter (the optimizer streams them); the per-sample part is a cost per
multiply-accumulate of convolutions and of fully connected layers — matrix products
of different shapes reach different rates — per element of the convolutions' input
patches (``|y|·k² + |x|``, the lowering to a matrix product and the memory traffic
around it) and per activation element any layer writes (the memory-bound elementwise
work — bias, ReLU, dropout, normalisation, their backward — that MACs do not count).
All nine coefficients are non-negative and fitted at once over every measured (model,
batch). This is a per-kind roofline in its simplest form: the layer counts, MACs,
patch and activation sizes come from the layer IR the oracle uses, and the oracle
evaluates the law (:mod:`testbed.oracle.fitted`) with the same features.

**What is measured** on a CPU device is the process CPU time of a step
(``step_cpu_s``): on a shared machine the wall time also holds the time slices other
users take, which belongs to the machine's load, not to the model. Elsewhere (GPUs,
data-parallel runs that wait for peers) the wall time.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import numpy as np

from testbed.calibration.metrics import relative_nnls, residuals, sig
from testbed.measurements import TrainConfig, TrainSummary
from testbed.model.ir import Model
from testbed.oracle import Request
from testbed.oracle.fitted import LAW_LAYER_KINDS, features, law_time_s
from testbed.systems.calibrated import ComputeFit, ComputeLaw, StepLine
from testbed.systems.profile import SystemProfile

__all__ = ["LAW_LAYER_KINDS", "MIN_BATCHES", "ComputePoint", "cpu_timed", "features", "fit_compute", "fitted_basis", "law_time_s", "measured_step_s", "model_ir",
           "predict_compute_s", "train_request"]

#: Fewest distinct batches that separate the fixed cost from the per-sample cost.
MIN_BATCHES = 2


def model_ir(cfg: TrainConfig) -> Model:
    """The layer IR of a measured configuration: a harness model with its options, or
    a zoo model at the measured input shape."""
    from testbed.model.zoo.harness import DEFAULTS, HARNESS_NAMES, harness_model
    if cfg.model in HARNESS_NAMES or cfg.model in DEFAULTS:
        opts = cfg.model_options
        return harness_model(cfg.model, opts.get("width"), opts.get("depth"), cfg.shape)
    from testbed.model.registry import get_model
    return get_model(cfg.model, cfg.shape)


def train_request(cfg: TrainConfig, system: SystemProfile) -> Request:
    """The oracle request of a harness training run: its model (with its options and
    input shape), framework and precision, ``batch_size`` samples per process, one
    process serial, several data parallel."""
    return Request(model=model_ir(cfg), system=system,
                   strategy="serial" if cfg.processes == 1 else "data", gpus=cfg.processes,
                   global_batch=cfg.batch_size * cfg.processes, precision=cfg.precision,
                   framework=cfg.framework)


def fitted_basis(basis: str) -> bool:
    """Whether an estimate's compute rests on a measured step or a fitted law (its
    ``calibration`` line), not on FLOPs over a nominal rate."""
    return "compute measured" in basis or "compute law" in basis


def cpu_timed(cfg: TrainConfig) -> bool:
    """Whether the fit prices a step of ``cfg`` at its process CPU time (one process on
    CPU cores), so that its wall time on a loaded machine is that stretched by the load."""
    return cfg.device == "cpu" and cfg.processes == 1


def measured_step_s(record: TrainSummary) -> tuple[float, str]:
    """The step time the fit uses and its name (see the module doc)."""
    cfg, m = record.config, record.metrics
    if cpu_timed(cfg) and m.step_cpu_s is not None:
        return m.step_cpu_s, "step_cpu_s"
    return m.step_s, "step_s"


@dataclass(frozen=True)
class ComputePoint:
    """One measured (model, batch) of a compute group."""

    model: Model
    batch: int
    step_s: float


def _line(points: list[ComputePoint]) -> StepLine | None:
    batches = sorted({p.batch for p in points})
    if len(batches) < MIN_BATCHES:
        return None
    b = np.array([p.batch for p in points], float)
    t = np.array([p.step_s for p in points], float)
    fixed, slope = relative_nnls(np.stack([np.ones_like(b), b], axis=1), t)
    pred = fixed + slope * b
    return StepLine(model=points[0].model.name, fixed_s=sig(fixed), s_per_sample=sig(slope),
                    batches=tuple(batches), residuals=residuals(pred, t))


def _law(points: list[ComputePoint]) -> ComputeLaw | None:
    if len({p.model.name for p in points}) < 2:
        return None
    design = np.array([features(p.model).row(p.batch) for p in points])
    t = np.array([p.step_s for p in points])
    x = relative_nnls(design, t)
    law = ComputeLaw(per_layer_s={k: sig(v) for k, v in zip(LAW_LAYER_KINDS, x[:4], strict=True)},
                     per_parameter_s=sig(x[4]), conv_mac_s=sig(x[5]), fc_mac_s=sig(x[6]),
                     conv_patch_s=sig(x[7]), activation_s=sig(x[8]),
                     residuals=residuals([0.0] * len(t), t))
    pred = [law_time_s(law, p.model, p.batch) for p in points]
    return law.model_copy(update={"residuals": residuals(pred, t)})


def fit_compute(records: list[TrainSummary]) -> tuple[ComputeFit, ...]:
    """Per (framework, precision, device): per-model lines and the law (module doc).
    Only single-process runs enter (data-parallel runs add communication)."""
    groups: dict[tuple[str, str, str, str], list[ComputePoint]] = defaultdict(list)
    for rec in records:
        cfg = rec.config
        if cfg.processes != 1:
            continue
        value, quantity = measured_step_s(rec)
        groups[(cfg.framework, cfg.precision, cfg.device, quantity)].append(
            ComputePoint(model_ir(cfg), cfg.batch_size, value))
    fits = []
    for (framework, precision, device, quantity), points in sorted(groups.items()):
        by_model: dict[str, list[ComputePoint]] = defaultdict(list)
        for p in points:
            by_model[p.model.name].append(p)
        lines = {name: line for name, pts in sorted(by_model.items())
                 if (line := _line(pts)) is not None}
        fits.append(ComputeFit(framework=framework, precision=precision, device=device,
                               quantity=quantity, models=lines, law=_law(points)))
    return tuple(fits)


def predict_compute_s(fit: ComputeFit, model: Model, batch: float) -> tuple[float, str] | None:
    """Step compute of ``model`` at per-process ``batch`` by one fit alone, and what it
    rests on (the model's own line, else the law), or None when the fit has neither —
    the fit's own view; predictions go through the oracle (:func:`train_request`)."""
    line = fit.models.get(model.name)
    if line is not None:
        return line.fixed_s + line.s_per_sample * batch, f"{model.name} line"
    if fit.law is not None:
        return law_time_s(fit.law, model, batch), "law"
    return None
