"""The precision study: train one network on inputs stored at each precision.

The claim under test (issue 13): input data can be stored at low precision early in a
workflow — on disk, staged, sent to the device — with an insignificant loss of
accuracy. For every precision the training and test *inputs* are stored at that
precision and read back (:func:`testbed.precision.apply_precision`; a k-bit scale is
fitted on the training inputs and reused, with clipping, for the test inputs), then
standardised with the stored training inputs' mean and spread and fed to the same
float32 network (:mod:`real_runs.precision.nets`). Targets are never altered.

Each seed fixes the initial weights, the batch order and any stochastic rounding, and
is shared by all precisions, so the change from fp64 is a paired comparison. Results
are accuracy (classifications, counts) and mean absolute error (counts, regressions), mean
and sample standard deviation over seeds, and the no-skill forecast of the data set.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace

import numpy as np

from real_runs.precision.data import StudyData
from real_runs.precision.nets import (
    Framework,
    NetSpec,
    batch_order,
    initial_weights,
    stream,
    train_predict,
)
from testbed.errors import InputError
from testbed.precision import (
    Precision,
    TransformReport,
    apply_precision,
    fit_scale,
    parse_precision,
)
from testbed.precision.quantize import Rounding


#: Network and training per data set: the best validation accuracy within
#: ``precision_tune.MAX_STEPS`` optimiser steps, on a validation split cut from the
#: training rows (``python -m real_runs.precision.tune NAME``), never the test split.
@dataclass(frozen=True)
class Training:
    """Hidden widths and training of a study's network."""

    hidden: tuple[int, ...]
    epochs: int
    batch_size: int
    learning_rate: float


NETS = {
    "hurricanes": Training(hidden=(16,), epochs=80, batch_size=32, learning_rate=3e-3),
    "digits": Training(hidden=(64, 64), epochs=40, batch_size=32, learning_rate=3e-3),
    # tune breast-cancer: 98.35% on the validation rows (5 seeds), the best of the grid
    "breast-cancer": Training(hidden=(16,), epochs=40, batch_size=32, learning_rate=1e-3),
}
#: Any other CSV: the digits network, trained for about :data:`CSV_STEPS` steps
#: (:data:`CSV_EPOCHS` bounds the epochs; ``epochs`` here is replaced).
CSV_NET = Training(hidden=(64, 64), epochs=0, batch_size=32, learning_rate=1e-3)
CSV_STEPS, CSV_EPOCHS = 2000, (10, 200)
#: Smallest spread used to standardise a feature (a constant feature is left at zero).
MIN_SPREAD = 1e-12
BASELINE = "fp64"


@dataclass(frozen=True)
class Score:
    """Accuracy (fraction; classification, count), MAE (target units; count, regression)
    and R² (regression) of one forecast."""

    accuracy: float | None
    mae: float | None
    r2: float | None = None


@dataclass(frozen=True)
class PrecisionResult:
    """One precision over all seeds; ``*_change`` compare with the fp64 baseline
    (accuracy in percentage points, MAE in target units), and
    ``accuracy_change_std_pp`` is the spread over seeds of the paired per-seed change
    (same seed, same initial weights and batches), usually far below ``accuracy_std``."""

    precision: str
    kind: str
    bits_per_value: float
    bytes_per_value: float
    max_abs_error: float
    max_rel_error: float
    accuracy_mean: float | None
    accuracy_std: float | None
    accuracy_change_pp: float | None
    accuracy_change_std_pp: float | None
    mae_mean: float | None
    mae_std: float | None
    mae_change: float | None
    r2_mean: float | None
    per_seed: tuple[Score, ...]

    def to_dict(self) -> dict:
        out = asdict(self)
        out["per_seed"] = [asdict(s) for s in self.per_seed]
        return out


@dataclass(frozen=True)
class StudyResult:
    """The whole study: one :class:`PrecisionResult` per precision (the baseline
    first), the no-skill forecast (``climatology``) and what was run."""

    dataset: str
    task: str
    target: str
    framework: str
    seeds: tuple[int, ...]
    rounding: str
    per_feature_scale: bool
    split: str
    train_rows: int
    test_rows: int
    features: tuple[str, ...]
    classes: int
    net: dict
    climatology_name: str
    climatology: Score
    results: tuple[PrecisionResult, ...]

    @property
    def baseline(self) -> PrecisionResult:
        return self.results[0]

    def to_dict(self) -> dict:
        return {
            "dataset": self.dataset, "task": self.task, "target": self.target,
            "framework": self.framework, "seeds": list(self.seeds),
            "rounding": self.rounding, "per_feature_scale": self.per_feature_scale,
            "split": self.split, "train_rows": self.train_rows, "test_rows": self.test_rows,
            "features": list(self.features), "classes": self.classes, "net": self.net,
            "baseline": self.baseline.to_dict(),
            "climatology": {"name": self.climatology_name, **asdict(self.climatology)},
            "precisions": [r.to_dict() for r in self.results],
        }


def net_spec(data: StudyData) -> NetSpec:
    """The network of a data set (:data:`NETS`, else :data:`CSV_NET`)."""
    params = NETS.get(data.name)
    if params is None:
        batches = -(-len(data.y_train) // CSV_NET.batch_size)
        epochs = int(np.clip(-(-CSV_STEPS // batches), *CSV_EPOCHS))
        params = replace(CSV_NET, epochs=epochs)
    classify = data.task == "classification"
    return NetSpec(inputs=len(data.features), hidden=params.hidden,
                   outputs=data.classes if classify else 1,
                   task="classification" if classify else "regression", epochs=params.epochs,
                   batch_size=params.batch_size, learning_rate=params.learning_rate)


def score(data: StudyData, predicted_values: np.ndarray) -> Score:
    """Accuracy (classification, count), MAE (count, regression) and R² (regression) of
    predicted target values; a count forecast is first rounded to a whole count ≥ 0."""
    truth = data.y_test
    if data.task == "count":
        predicted_values = np.maximum(np.rint(predicted_values), 0.0)
    err = np.abs(predicted_values - truth)
    if data.task == "classification":
        return Score(accuracy=float(np.mean(predicted_values == truth)), mae=None)
    if data.task == "count":
        return Score(accuracy=float(np.mean(predicted_values == truth)), mae=float(err.mean()))
    total = float(np.sum((truth - truth.mean()) ** 2))
    r2 = 1.0 - float(np.sum((predicted_values - truth) ** 2)) / total if total > 0 else None
    return Score(accuracy=None, mae=float(err.mean()), r2=r2)


def store_inputs(data: StudyData, precision: Precision, *, rounding: Rounding,
                 per_feature: bool, seed: int):
    """Training and test inputs stored at ``precision`` and read back (float64), and the
    report on the training inputs; a value that overflowed is an error naming its
    feature."""
    scale = (fit_scale(data.x_train, precision.bits, per_feature=per_feature)
             if precision.kind == "int" else None)
    train, report = apply_precision(precision, data.x_train, scale=scale, rounding=rounding,
                                    seed=stream(seed, "rounding_train"))
    test, _ = apply_precision(precision, data.x_test, scale=scale, rounding=rounding,
                              seed=stream(seed, "rounding_test"))
    for stored in (train, test):
        bad = ~np.isfinite(stored)
        if bad.any():
            column = int(np.argwhere(bad)[0][1])
            largest = max(np.max(np.abs(data.x_train[:, column])),
                          np.max(np.abs(data.x_test[:, column])))
            raise InputError(f"values up to {largest:.6g} "
                             f"overflow {precision.name}; scale this input or choose a wider "
                             "precision", source=data.name, field=data.features[column])
    return train, test, report


def standardise(train: np.ndarray, test: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The network's first step, in float32: centre and scale by the stored training
    inputs' mean and standard deviation."""
    train32, test32 = train.astype(np.float32), test.astype(np.float32)
    mean = train32.mean(axis=0, dtype=np.float32)
    spread = train32.std(axis=0, dtype=np.float32)
    spread = np.where(spread > MIN_SPREAD, spread, np.float32(1.0)).astype(np.float32)
    return (train32 - mean) / spread, (test32 - mean) / spread


def _targets(data: StudyData) -> tuple[np.ndarray, float, float]:
    """What the network is trained on: class indices, or standardised target values
    (and the centre and spread that undo the standardisation)."""
    if data.task == "classification":
        return data.y_train.astype(np.int64), 0.0, 1.0
    centre, spread = float(data.y_train.mean()), float(data.y_train.std()) or 1.0
    return ((data.y_train - centre) / spread).astype(np.float32).reshape(-1, 1), centre, spread


def forecast(data: StudyData, outputs: np.ndarray, centre: float, spread: float) -> np.ndarray:
    """Target values from the network's outputs: the class of the largest logit, or the
    regression value (a count rounded to a whole count ≥ 0)."""
    if data.task == "classification":
        return np.asarray(data.class_values)[np.argmax(outputs, axis=1)]
    values = outputs.reshape(-1).astype(np.float64) * spread + centre
    return np.maximum(np.rint(values), 0.0) if data.task == "count" else values


def predict(data: StudyData, spec: NetSpec, x_train: np.ndarray, x_test: np.ndarray, *,
            seed: int, framework: Framework, curve: list | None = None) -> np.ndarray:
    """Train one network on stored, standardised inputs; its forecast of the test set.
    With ``curve``, every epoch's (mean training loss, forecast) is appended to it."""
    y, centre, spread = _targets(data)
    points: list | None = [] if curve is not None else None
    out = train_predict(framework, spec, initial_weights(spec, seed), x_train, y, x_test,
                        batch_order(len(y), spec, seed), seed, curve=points)
    if curve is not None and points is not None:
        curve += [(loss, forecast(data, o, centre, spread)) for loss, o in points]
    return forecast(data, out, centre, spread)


def train_and_score(data: StudyData, spec: NetSpec, x_train: np.ndarray, x_test: np.ndarray,
                    *, seed: int, framework: Framework) -> Score:
    """Train one network on stored, standardised inputs and score it on the test set."""
    return score(data, predict(data, spec, x_train, x_test, seed=seed, framework=framework))


def _mean_std(values: Sequence[float | None]) -> tuple[float | None, float | None]:
    if not values or values[0] is None:
        return None, None
    arr = np.asarray(values, dtype=np.float64)
    return float(arr.mean()), float(arr.std(ddof=1)) if len(arr) > 1 else 0.0


def summarise(precision: Precision, report, scores: Sequence[Score],
              baseline: PrecisionResult | None) -> PrecisionResult:
    """Mean and spread over seeds, and the change from the baseline."""
    acc, acc_sd = _mean_std([s.accuracy for s in scores])
    mae, mae_sd = _mean_std([s.mae for s in scores])
    r2, _ = _mean_std([s.r2 for s in scores])
    base_scores = baseline.per_seed if baseline else scores
    acc_change = acc_change_sd = mae_change = None
    if acc is not None:
        acc_change, acc_change_sd = _mean_std(
            [100.0 * (s.accuracy - b.accuracy) for s, b in zip(scores, base_scores, strict=True)
             if s.accuracy is not None and b.accuracy is not None])   # all set for a classifier
    if mae is not None:
        mae_change, _ = _mean_std([s.mae - b.mae for s, b in zip(scores, base_scores,
                                                                 strict=True)
                                   if s.mae is not None and b.mae is not None])
    return PrecisionResult(
        precision=precision.name, kind=precision.kind,
        bits_per_value=precision.bits_per_value, bytes_per_value=precision.bytes_per_value,
        max_abs_error=report.max_abs_error, max_rel_error=report.max_rel_error,
        accuracy_mean=acc, accuracy_std=acc_sd, accuracy_change_pp=acc_change,
        accuracy_change_std_pp=acc_change_sd,
        mae_mean=mae, mae_std=mae_sd, mae_change=mae_change, r2_mean=r2,
        per_seed=tuple(scores))


@dataclass(frozen=True)
class PairedRuns:
    """Every (precision, seed) network of a study, trained on the same seeds and scored
    on the same test items: ``forecasts[p, s, item]`` (target values), and with curves
    ``curve_forecasts[p, s, epoch, item]`` and ``train_loss[p, s, epoch]``. Precision 0
    is the fp64 baseline."""

    precisions: tuple[Precision, ...]
    seeds: tuple[int, ...]
    reports: tuple[TransformReport, ...]
    forecasts: np.ndarray
    train_loss: np.ndarray | None = None
    curve_forecasts: np.ndarray | None = None


def run_paired(data: StudyData, precisions: Sequence[Precision], seeds: Sequence[int], *,
               framework: Framework = "torch", rounding: Rounding = "nearest",
               per_feature: bool = True, curves: bool = False,
               progress: Callable[[str, int], None] | None = None) -> PairedRuns:
    """Every precision (fp64 first, added if missing) × every seed; see the module doc.

    ``progress(precision_name, seed)`` is called after each training, for a bar.
    """
    if not seeds:
        raise InputError("needs at least one seed", field="--seeds")
    spec = net_spec(data)
    ordered = [parse_precision(BASELINE)] + [p for p in precisions if p.name != BASELINE]
    # Store every precision once before any training, so that an overflow fails fast.
    stored = {p.name: store_inputs(data, p, rounding=rounding, per_feature=per_feature,
                                   seed=seeds[0]) for p in ordered}
    forecasts, losses, curve_forecasts = [], [], []
    for precision in ordered:
        train, test, _ = stored[precision.name]
        for seed in seeds:
            if seed != seeds[0] and precision.kind == "int" and rounding == "stochastic":
                train, test, _ = store_inputs(data, precision, rounding=rounding,
                                              per_feature=per_feature, seed=seed)
            x_train, x_test = standardise(train, test)
            curve: list | None = [] if curves else None
            forecasts.append(predict(data, spec, x_train, x_test, seed=seed,
                                     framework=framework, curve=curve))
            if curve is not None:
                losses.append([loss for loss, _ in curve])
                curve_forecasts.append(np.stack([f for _, f in curve]))
            if progress:
                progress(precision.name, seed)
    shape = (len(ordered), len(seeds))
    return PairedRuns(
        precisions=tuple(ordered), seeds=tuple(int(s) for s in seeds),
        reports=tuple(stored[p.name][2] for p in ordered),
        forecasts=np.stack(forecasts).reshape(*shape, -1),
        train_loss=np.asarray(losses).reshape(*shape, -1) if curves else None,
        curve_forecasts=(np.stack(curve_forecasts).reshape(*shape, *curve_forecasts[0].shape)
                         if curves else None))


def run_study(data: StudyData, precisions: Sequence[Precision], seeds: Sequence[int], *,
              framework: Framework = "torch", rounding: Rounding = "nearest",
              per_feature: bool = True,
              progress: Callable[[str, int], None] | None = None) -> StudyResult:
    """Every precision (fp64 first, added if missing) × every seed: mean and spread over
    seeds per precision (see the module doc; ``testbed study precision`` adds baselines,
    intervals and paired tests on the same runs)."""
    runs = run_paired(data, precisions, seeds, framework=framework, rounding=rounding,
                      per_feature=per_feature, progress=progress)
    spec = net_spec(data)
    results: list[PrecisionResult] = []
    for i, precision in enumerate(runs.precisions):
        scores = [score(data, f) for f in runs.forecasts[i]]
        results.append(summarise(precision, runs.reports[i], scores,
                                 results[0] if results else None))
    return StudyResult(
        dataset=data.name, task=data.task, target=data.target, framework=framework,
        seeds=tuple(int(s) for s in seeds), rounding=rounding, per_feature_scale=per_feature,
        split=data.split, train_rows=len(data.y_train), test_rows=len(data.y_test),
        features=data.features, classes=data.classes, net=asdict(spec),
        climatology_name=data.no_skill.name, climatology=score(data, data.no_skill.predictions),
        results=tuple(results))
