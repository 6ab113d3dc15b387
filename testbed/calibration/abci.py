"""The ABCI/ParaDL fit: a profile's ``calibration`` from measured seconds per iteration.

The measurements are ParaDL's runs on ABCI (``../shared/data/abci-paradl``), read as
measurement records (:func:`testbed.calibration.records.import_paradl`, or
``testbed records import-paradl``) and turned into :class:`Measurement` rows by
:func:`testbed.calibration.paradl.measurement_of`; ``testbed calibrate CSV`` and
``testbed calibrate RECORDS --base`` both run this one fit.

What is fitted, and why this way (few points, and predictions must extrapolate from
≤16 GPUs to 1,024):

1. **Compute**: seconds per sample of each model, from its 1-GPU data-parallel run
   (framework overhead and data loading included). Other input sizes scale by FLOPs.
2. **Network efficiency** per tier (achieved / nominal bandwidth), per model, from the
   data-parallel runs: 2–4 GPUs fix the NVLink tier, 8–16 GPUs the InfiniBand tier;
   the outer InfiniBand tiers (rack, spine) share the leaf's efficiency — same links —
   and keep their nominal latency and oversubscription, which is what makes
   communication grow beyond the calibrated range.
3. **Implementation factors** per model and model-parallel strategy (ds, df,
   spatial, …): ``T = k·compute + communication + overhead`` is linear in ``k`` and
   ``overhead``; both are fitted by relative least squares, ``overhead ≥ 0``, and only
   ``k`` when all runs share one batch size.

A model without a 1-GPU data-parallel run cannot be fitted, nor one whose fit is not
finite: :func:`fit` leaves it out and :func:`dropped_models` says why. Nothing is
fitted to runs beyond the data; :func:`holdout` reports how well a fit on ≤8-GPU runs
predicts the 16-GPU runs, a check of the extrapolation itself.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.optimize import minimize_scalar

from testbed.calibration.metrics import accuracy
from testbed.oracle import Request, estimate, resolve_model
from testbed.oracle.compute import TRAINING_FLOPS_PER_FORWARD
from testbed.systems.profile import (
    Calibration,
    ModelCalibration,
    StrategyCalibration,
    SystemProfile,
)
from testbed.units import parse_shape

#: The ABCI/ParaDL runs trained in fp32 (ChainerMN, January 2020).
MEASURED_PRECISION = "fp32"
#: Why a measured model is not in the fit.
NO_SINGLE_RUN = "no 1-GPU data-parallel run to fit its compute from"
NOT_FINITE = "its fit is not finite"


@dataclass(frozen=True)
class Measurement:
    """One measured configuration (seconds per training iteration)."""

    model: str
    strategy: str
    gpus: int
    group_size: int
    global_batch: int
    input_shape: tuple[int, ...]
    s_per_iter: float
    source: str = ""


def request_for(m: Measurement, system: SystemProfile) -> Request:
    """The oracle request that describes a measured run."""
    strategy, gpus, group = m.strategy, m.gpus, None
    if strategy in ("ds", "df"):
        group = m.group_size
    return Request(model=resolve_model(m.model, m.input_shape), system=system,
                   strategy=strategy, gpus=gpus, global_batch=m.global_batch, group_size=group)


def _with(system: SystemProfile, calibration: Calibration | None) -> SystemProfile:
    return system.model_copy(update={"calibration": calibration})


def _tier_names(system: SystemProfile) -> list[str]:
    return [t.name for t in system.network.tiers]


def _by_model(measurements: list[Measurement]) -> dict[str, list[Measurement]]:
    by_model: dict[str, list[Measurement]] = {}
    for m in measurements:
        by_model.setdefault(m.model, []).append(m)
    return by_model


def _single_runs(rows: list[Measurement]) -> list[Measurement]:
    return [m for m in rows if m.strategy == "data" and m.gpus == 1]


def _finite(value) -> bool:
    if isinstance(value, dict):
        return all(_finite(v) for v in value.values())
    return not isinstance(value, float) or math.isfinite(value)


def _fit_model(name: str, rows: list[Measurement], system: SystemProfile
               ) -> ModelCalibration | None:
    """One model's compute, network efficiencies and strategy factors (module doc);
    None when it has no 1-GPU data-parallel run or its fit is not finite."""
    single = _single_runs(rows)
    if not single:
        return None
    tiers, gpn = _tier_names(system), system.node.gpus_per_node
    try:
        ref = min(single, key=lambda m: m.s_per_iter / m.global_batch)
        model = resolve_model(name, ref.input_shape)
        mc = ModelCalibration(s_per_sample=ref.s_per_iter / ref.global_batch,
                              batch=ref.global_batch, precision=MEASURED_PRECISION,
                              input_shape="x".join(map(str, ref.input_shape)),
                              forward_flops=float(model.forward_flops))
        data_rows = [m for m in rows if m.strategy == "data" and m.gpus > 1]
        eff = {t: 1.0 for t in tiers}
        # inner tier from runs inside a node, outer tiers (same links) from the rest
        for group, names in (([m for m in data_rows if m.gpus <= gpn], tiers[:1]),
                             ([m for m in data_rows if m.gpus > gpn], tiers[1:])):
            if not group or not names:
                continue
            value = _fit_efficiency(group, system, name, mc, eff, names)
            eff.update({t: value for t in names})
        mc = mc.model_copy(update={"network_efficiency": eff})
        strategies: dict[str, StrategyCalibration] = {}
        for strategy in sorted({m.strategy for m in rows} - {"data"}):
            srows = [m for m in rows if m.strategy == strategy]
            strategies[strategy] = _fit_strategy(srows, system, name, mc)
        mc = mc.model_copy(update={"strategies": strategies})
    except (ValueError, ArithmeticError):     # a fit that is not finite (pydantic refuses)
        return None
    return mc if _finite(mc.model_dump()) else None


def fit(measurements: list[Measurement], system: SystemProfile, source: str = "") -> Calibration:
    """Fit compute, network efficiencies and implementation factors (see module doc)."""
    models: dict[str, ModelCalibration] = {}
    for name, rows in sorted(_by_model(measurements).items()):
        mc = _fit_model(name, rows, system)
        if mc is not None:
            models[name] = mc
    per_layer = system.gpu.per_layer
    return Calibration(source=source, method="testbed.calibration.abci_csv.fit",
                       compute_efficiency=({} if per_layer
                                           else _median_compute_efficiency(models, system)),
                       compute_scale=_median_compute_scale(models, system) if per_layer else {},
                       network_efficiency=_median_dict([m.network_efficiency
                                                        for m in models.values()]),
                       strategies=_median_strategies(models), models=models)


def dropped_models(measurements: list[Measurement], calibration: Calibration) -> dict[str, str]:
    """Measured models the fit left out, with why (in name order)."""
    out = {}
    for name, rows in sorted(_by_model(measurements).items()):
        if name not in calibration.models:
            out[name] = NOT_FINITE if _single_runs(rows) else NO_SINGLE_RUN
    return out


def _median_compute_efficiency(models: dict[str, ModelCalibration],
                               system: SystemProfile) -> dict[str, float]:
    """Achieved / peak fp32 FLOP rate at large batch of the measured models (training
    FLOPs over the per-sample time the compute curve infers from each measurement),
    median: what a model without its own measurement can expect here."""
    peak = system.gpu.peak_flops(MEASURED_PRECISION)
    rates = []
    for name, mc in sorted(models.items()):
        if not mc.forward_flops:
            continue
        shape = parse_shape(mc.input_shape) if mc.input_shape else None
        est = estimate(Request(model=resolve_model(name, shape),
                               system=_with(system, Calibration(models={name: mc})),
                               strategy="serial", gpus=1, global_batch=mc.batch or 1,
                               precision=MEASURED_PRECISION))
        s_inf = est.compute_model["s_per_sample"]
        rates.append(TRAINING_FLOPS_PER_FORWARD * mc.forward_flops / s_inf / peak)
    return {MEASURED_PRECISION: round(float(np.median(rates)), 4)} if rates else {}


def _median_compute_scale(models: dict[str, ModelCalibration],
                          system: SystemProfile) -> dict[str, float]:
    """Measured / per-layer-modelled step time of the measured models at their
    measured batch, median: how much slower (or faster) the measured framework runs a
    model than the per-layer model of this GPU says, for models without their own
    measurement (:mod:`testbed.oracle.compute`)."""
    ratios = []
    bare = _with(system, None)
    for name, mc in sorted(models.items()):
        if not mc.batch:
            continue
        shape = parse_shape(mc.input_shape) if mc.input_shape else None
        est = estimate(Request(model=resolve_model(name, shape), system=bare,
                               strategy="serial", gpus=1, global_batch=mc.batch,
                               precision=MEASURED_PRECISION))
        if est.compute_s:
            ratios.append(mc.s_per_sample * mc.batch / est.compute_s)
    return {MEASURED_PRECISION: round(float(np.median(ratios)), 4)} if ratios else {}


def _median_dict(tables: list[dict[str, float]]) -> dict[str, float]:
    keys = sorted({k for t in tables for k in t})
    return {k: round(float(np.median([t[k] for t in tables if k in t])), 4) for k in keys}


def _median_strategies(models: dict[str, ModelCalibration]) -> dict[str, StrategyCalibration]:
    """Per strategy, the median factors over the models measured with it: the
    implementation's cost for a model that was not measured with that strategy."""
    out: dict[str, StrategyCalibration] = {}
    names = sorted({s for m in models.values() for s in m.strategies})
    for name in names:
        fits = [m.strategies[name] for m in models.values() if name in m.strategies]
        out[name] = StrategyCalibration(
            compute_scale=round(float(np.median([f.compute_scale for f in fits])), 5),
            overhead_s=round(float(np.median([f.overhead_s for f in fits])), 6),
            points=sum(f.points for f in fits))
    return out


def _predict_with(system: SystemProfile, name: str, mc: ModelCalibration,
                  m: Measurement) -> float:
    cal = Calibration(models={name: mc})
    est = estimate(request_for(m, _with(system, cal)))
    return est.time_per_iteration_s if est.time_per_iteration_s is not None else math.inf


def _fit_efficiency(rows, system, name, mc, eff, names) -> float:
    """One efficiency for ``names`` tiers minimising squared relative error."""

    def loss(e: float) -> float:
        trial = mc.model_copy(update={"network_efficiency": {**eff, **{t: e for t in names}}})
        return sum(((_predict_with(system, name, trial, m) - m.s_per_iter) / m.s_per_iter) ** 2
                   for m in rows)

    res = minimize_scalar(loss, bounds=(0.02, 1.0), method="bounded",
                          options={"xatol": 1e-4})
    return round(float(res.x), 4)


def _fit_strategy(rows, system, name, mc) -> StrategyCalibration:
    """Fit ``T = k·C + R + o`` (C: ideal compute that grows with the samples, R:
    modelled communication and I/O; ``o`` takes the fixed per-step part)."""
    base = mc.model_copy(update={"strategies": {}})
    cs, rs, ts = [], [], []
    for m in rows:
        cal = Calibration(models={name: base})
        est = estimate(request_for(m, _with(system, cal)))
        if est.time_per_iteration_s is None or est.compute_s is None:
            continue
        fixed = est.compute_model.get("fixed_s", 0.0)
        cs.append(est.compute_s - fixed)      # the work that grows with the samples
        rs.append(est.time_per_iteration_s - est.compute_s)
        ts.append(m.s_per_iter)
    if not cs:
        return StrategyCalibration()
    c, r, t = map(np.asarray, (cs, rs, ts))
    w = 1.0 / t
    y = (t - r) * w
    k, o = None, 0.0
    if len(set(np.round(c, 12))) >= 2:
        a = np.stack([c * w, w], axis=1)
        (k, o), *_ = np.linalg.lstsq(a, y, rcond=None)
    if k is None or o < 0 or k <= 0:
        o = 0.0
        k = float((c * w * y).sum() / (c * w * c * w).sum())
    return StrategyCalibration(compute_scale=round(max(float(k), 1e-3), 5),
                               overhead_s=round(float(o), 6), points=len(cs))


def evaluate(measurements: list[Measurement], system: SystemProfile) -> list[dict]:
    """Predicted vs measured for every row with the profile's calibration."""
    out = []
    for m in measurements:
        est = estimate(request_for(m, system))
        pred = est.time_per_iteration_s
        out.append({"model": m.model, "strategy": m.strategy, "gpus": m.gpus,
                    "global_batch": m.global_batch, "measured_s": m.s_per_iter,
                    "predicted_s": pred, "feasible": est.feasible,
                    "accuracy": accuracy(pred, m.s_per_iter) if pred else 0.0})
    return out


def holdout(measurements: list[Measurement], system: SystemProfile, max_fit_gpus: int = 8) -> dict:
    """Fit on runs with ≤ ``max_fit_gpus`` GPUs, score the larger ones (extrapolation)."""
    train = [m for m in measurements if m.gpus <= max_fit_gpus]
    test = [m for m in measurements if m.gpus > max_fit_gpus]
    cal = fit(train, system)
    rows = evaluate(test, _with(system, cal))
    scored = [r for r in rows if r["model"] in cal.models]
    mean = float(np.mean([r["accuracy"] for r in scored])) if scored else float("nan")
    return {"mean_accuracy": mean, "rows": scored}


