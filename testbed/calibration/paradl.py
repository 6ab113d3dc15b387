"""The ABCI/ParaDL fit as one instance of calibration from records.

ParaDL's measured seconds per iteration on ABCI are ``train_summary`` records of
multi-GPU strategy runs — imported from the CSV (``testbed records import-paradl``, or
:func:`testbed.calibration.records.import_paradl` inside ``testbed calibrate CSV``).
:func:`paradl_calibration` turns them into :class:`~testbed.calibration.abci.Measurement`
rows, in file order, and runs the one ABCI fit (:mod:`testbed.calibration.abci`), so
``testbed calibrate CSV --system abci-v100`` and ``testbed calibrate RECORDS --base
abci-v100`` give the same :class:`~testbed.systems.profile.Calibration` (the ``source`` names
the CSV or the records).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeGuard

import numpy as np

from testbed.calibration.abci import Measurement, dropped_models, evaluate, fit, holdout
from testbed.errors import ScenarioError
from testbed.measurements import Record, TrainSummary
from testbed.systems.profile import Calibration, SystemProfile


def is_paradl_record(record: Record) -> TypeGuard[TrainSummary]:
    """A measured iteration of a (multi-)GPU strategy run, as ParaDL's runs are: what
    the ABCI fit takes (GPU device, a strategy, a global batch)."""
    return (isinstance(record, TrainSummary) and record.config.device == "gpu"
            and record.config.global_batch is not None)


def measurement_of(record: TrainSummary) -> Measurement:
    """The ABCI fit's row of a record."""
    cfg = record.config
    return Measurement(model=cfg.model, strategy=cfg.strategy, gpus=cfg.processes,
                       group_size=cfg.group_size or 1,
                       global_batch=cfg.effective_global_batch, input_shape=cfg.shape,
                       s_per_iter=record.metrics.step_s, source=record.source)


def measurements_of(records: Sequence[Record]) -> list[Measurement]:
    """The ABCI fit's rows of the ParaDL records among ``records``, in order."""
    return [measurement_of(r) for r in records if is_paradl_record(r)]


def paradl_calibration(records: Sequence[Record], system: SystemProfile, source: str
                       ) -> tuple[Calibration, list[dict], dict]:
    """The ABCI fit from records: the calibration (with its in-sample and ≤8 → 16-GPU
    hold-out accuracy), the in-sample rows and the hold-out check."""
    measurements = measurements_of(records)
    bare = system.model_copy(update={"calibration": None})
    cal = fit(measurements, bare, source=source)
    if not cal.models:
        why = "; ".join(f"{m}: {r}" for m, r in dropped_models(measurements, cal).items())
        raise ScenarioError(f"no model could be calibrated ({why or 'no measurements'})",
                            source=source.split(", ")[0] or None)
    rows = evaluate(measurements, bare.model_copy(update={"calibration": cal}))
    scored = [r for r in rows if r["model"] in cal.models]
    held = holdout(measurements, bare)
    acc = {"in_sample_mean": round(float(np.mean([r["accuracy"] for r in scored])), 4)}
    if held["rows"]:       # no runs beyond 8 GPUs: no extrapolation to score
        acc["holdout_16_from_le8_mean"] = round(held["mean_accuracy"], 4)
    return cal.model_copy(update={"accuracy": acc}), rows, held


def paradl_model_report(records: list[Record], calibration: Calibration
                        ) -> tuple[tuple[str, ...], dict[str, str]]:
    """(models the fit calibrated, models it left out with why) of ParaDL records."""
    measurements = measurements_of(records)
    names = sorted({m.model for m in measurements})
    return (tuple(n for n in names if n in calibration.models),
            dropped_models(measurements, calibration))
