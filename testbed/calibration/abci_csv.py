"""``testbed calibrate CSV --system PROFILE``: the ABCI/ParaDL fit from its CSV.

Input: a CSV of measured seconds per iteration (the ABCI/ParaDL format of
``../shared/data/abci-paradl/calibration.csv``: model, strategy, gpus, gpus_per_group,
samples_per_gpu, global_batch, input_sample_shape, s_per_iter_median, …).

There is one implementation of the fit, :mod:`testbed.calibration.abci` (what is
fitted and why is documented there); the CSV is one importer of it: its rows become
measurement records (:func:`testbed.calibration.records.import_paradl`, which refuses
garbage — non-finite or implausible values — naming the file and line), and
:func:`calibrate` is :func:`testbed.calibration.paradl.paradl_calibration` of those
records, exactly what ``testbed calibrate RECORDS --base PROFILE`` runs.

:func:`write_calibration` replaces the generated block at the end of the profile
(after :data:`MARKER`), keeping the hand-written part; models the profile's previous
calibration held and this fit did not refit are kept (:func:`merged`), and
:func:`model_report` says which models were fitted, dropped (and why) and kept.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from testbed.calibration.abci import (
    MEASURED_PRECISION,
    Measurement,
    evaluate,
    fit,
    holdout,
    request_for,
)
from testbed.calibration.fit import ModelReport, merge_models
from testbed.calibration.metrics import accuracy
from testbed.calibration.paradl import measurement_of, paradl_calibration, paradl_model_report
from testbed.calibration.records import PARADL_COLUMNS, import_paradl
from testbed.errors import ScenarioError
from testbed.io.read import read_text
from testbed.io.write import write_text
from testbed.systems.profile import Calibration, SystemProfile

__all__ = ["MARKER", "MEASURED_PRECISION", "REQUIRED", "Measurement", "accuracy",
           "calibrate", "evaluate", "fit", "holdout", "merged", "model_report",
           "read_measurements", "request_for", "write_calibration"]

MARKER = "# --- calibration: written by `testbed calibrate`; edit the data, not this block ---"
REQUIRED = PARADL_COLUMNS


def read_measurements(path: str | Path) -> list[Measurement]:
    """The CSV's rows as the fit's measurements (read as records: errors name the file,
    line and column; implausible values are refused)."""
    return [measurement_of(r) for r in import_paradl(path)]


def calibrate(csv_path: str | Path, system: SystemProfile) -> tuple[Calibration, list[dict], dict]:
    """Fit from a CSV; return the calibration, in-sample rows and the holdout check."""
    return paradl_calibration(import_paradl(csv_path), system, str(csv_path))


def merged(calibration: Calibration, system: SystemProfile) -> tuple[Calibration, tuple[str, ...]]:
    """``calibration`` with the models of the profile's current calibration that it did
    not refit kept, and their names."""
    return merge_models(calibration, system.calibration)


def model_report(records: list, calibration: Calibration,
                 kept: tuple[str, ...] = ()) -> ModelReport:
    """Which of the imported CSV's models the fit calibrated, which it dropped and why,
    and which the profile's previous calibration kept."""
    fitted, dropped = paradl_model_report(records, calibration)
    return ModelReport(fitted=fitted, dropped=dropped, kept_from_base=kept)


def write_calibration(profile_path: str | Path, calibration: Calibration) -> None:
    """Replace the calibration block at the end of a profile YAML, atomically; the
    hand-written part above the marker (with its comments) is kept as it is."""
    path = Path(profile_path)
    text = read_text(path)
    head = text.split(MARKER)[0].rstrip("\n")
    data = yaml.safe_load(head) or {}
    if "calibration" in data:
        raise ScenarioError("calibration must only appear in the generated block",
                            source=str(path), field="calibration")
    block = yaml.safe_dump({"calibration": calibration.to_data()},
                           sort_keys=False, default_flow_style=False, width=100)
    write_text(path, f"{head}\n{MARKER}\n{block}")
