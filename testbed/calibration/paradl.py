"""The ABCI/ParaDL fit as one instance of calibration from records.

``testbed calibrate CSV --system abci-v100`` fits compute, network efficiencies and
strategy factors from ParaDL's measured seconds per iteration (:mod:`testbed.calibrate`).
The same runs imported as records (``testbed records import-paradl``) are
``train_summary`` records of multi-GPU strategies; :func:`paradl_calibration` turns
them back into :class:`testbed.calibrate.Measurement` rows, in file order, and runs the
same fit, so the two paths give the same :class:`~testbed.systems.Calibration` (the
``source`` names the records instead of the CSV).
"""

from __future__ import annotations

import numpy as np

from testbed.calibrate import Measurement, evaluate, fit, holdout
from testbed.measurements import Record, TrainSummary
from testbed.systems import Calibration, SystemProfile


def is_paradl_record(record: Record) -> bool:
    """A measured iteration of a (multi-)GPU strategy run, as ParaDL's runs are: what
    the ABCI fit takes (GPU device, a strategy, a global batch)."""
    return (isinstance(record, TrainSummary) and record.config.device == "gpu"
            and record.config.global_batch is not None)


def measurement_of(record: TrainSummary) -> Measurement:
    """The :mod:`testbed.calibrate` row of a record."""
    cfg = record.config
    return Measurement(model=cfg.model, strategy=cfg.strategy, gpus=cfg.processes,
                       group_size=cfg.group_size or 1,
                       global_batch=cfg.effective_global_batch, input_shape=cfg.shape,
                       s_per_iter=record.metrics.step_s, source=record.source)


def paradl_calibration(records: list[Record], system: SystemProfile, source: str
                       ) -> tuple[Calibration, list[dict], dict]:
    """``testbed.calibrate.calibrate`` from records: the calibration, the in-sample
    rows and the ≤8 → 16-GPU hold-out check."""
    measurements = [measurement_of(r) for r in records if is_paradl_record(r)]
    bare = system.model_copy(update={"calibration": None})
    cal = fit(measurements, bare, source=source)
    rows = evaluate(measurements, bare.model_copy(update={"calibration": cal}))
    scored = [r for r in rows if r["model"] in cal.models]
    held = holdout(measurements, bare)
    acc = {"in_sample_mean": round(float(np.mean([r["accuracy"] for r in scored])), 4),
           "holdout_16_from_le8_mean": round(held["mean_accuracy"], 4)}
    return cal.model_copy(update={"accuracy": acc}), rows, held
