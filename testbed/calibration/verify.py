"""Verification: every record predicted by a calibrated profile, scored per quantity.

Predictions come from :mod:`testbed.calibration.predict` — training steps and ParaDL
iterations through the oracle (:func:`testbed.oracle.estimate`), which reads the
profile's ``calibration`` and its fitted section.

Hold-out schemes (what is left out of the fit that predicts a record):

* ``none``: the profile as it is (in sample for the records it was fitted on; out of
  sample for records measured separately, e.g. ``calibrate-local``'s held-out set);
* ``loo``: each configuration left out in turn (a record; a supervised run together
  with its restarts), the profile refitted on the rest;
* ``by-batch``: each batch size (message size for collectives, checkpoint size for
  checkpoints) left out in turn;
* ``by-model``: each model (with its size options) left out in turn — its step time
  then comes from the cross-model law.

Per quantity: ParaDL's accuracy (mean of min/max), MAPE, Spearman's rank correlation
across configurations, the count and the worst cases.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import asdict, dataclass, field

import numpy as np

from testbed.calibration.compute import model_ir
from testbed.calibration.fit import refit
from testbed.calibration.metrics import accuracy, mape_pct, rank_correlation
from testbed.calibration.predict import Prediction, Simulate, predict_record
from testbed.calibration.records import RecordSet
from testbed.errors import InputError
from testbed.measurements import (
    Checkpoint,
    Collective,
    Record,
    Restart,
    SupervisedRun,
    TrainSummary,
)
from testbed.systems.calibrated import RecordsFit
from testbed.systems.profile import Calibration, SystemProfile

HOLDOUTS = ("none", "loo", "by-batch", "by-model")
#: Worst cases listed per quantity.
WORST = 3
#: What a prediction's basis says when it reaches beyond its fit
#: (:func:`testbed.calibration.predict.extrapolation_flags`).
FLAGGED = "; flagged: "


@dataclass(frozen=True)
class Row:
    """One scored prediction, with the record it came from."""

    quantity: str
    file: str
    line: int
    label: str
    measured: float
    predicted: float
    accuracy: float
    basis: str

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class QuantityScore:
    n: int
    accuracy: float
    mape_pct: float
    rank_correlation: float | None
    worst: tuple[Row, ...]
    flagged: int = 0

    def to_dict(self) -> dict:
        return {"n": self.n, "accuracy": self.accuracy, "mape": self.mape_pct,
                "rank_correlation": self.rank_correlation, "flagged": self.flagged,
                "worst": [r.to_dict() for r in self.worst]}


@dataclass(frozen=True)
class VerifyReport:
    profile: str
    holdout: str
    records: int
    not_covered: int
    quantities: dict[str, QuantityScore]
    rows: tuple[Row, ...] = field(default=())

    def to_dict(self) -> dict:
        return {"profile": self.profile, "holdout": self.holdout, "records": self.records,
                "predicted": len(self.rows), "not_covered": self.not_covered,
                "quantities": {k: v.to_dict() for k, v in sorted(self.quantities.items())},
                "rows": [r.to_dict() for r in self.rows]}


def group_key(rec: Record, scheme: str, index: int) -> str:
    """Records with equal keys are held out together (see the module doc)."""
    if isinstance(rec, (SupervisedRun, Restart)) and rec.run_id:
        return f"run:{rec.run_id}"
    if scheme == "loo":
        return f"record:{index}"
    if isinstance(rec, TrainSummary):
        if scheme == "by-batch":
            return f"batch:{rec.config.batch_size}"
        return f"model:{model_ir(rec.config).name}"
    if isinstance(rec, Collective):
        return f"bytes:{rec.metrics.message_bytes}"
    if isinstance(rec, Checkpoint):
        if scheme == "by-model":
            return f"model:{rec.model}:{sorted(rec.model_options.items())}"
        return f"bytes:{rec.metrics.ckpt_bytes}"
    return f"record:{index}"


def _predictions(records: RecordSet, system: SystemProfile, fit: RecordsFit | None,
                 holdout: str, simulate: Simulate | None
                 ) -> list[tuple[str, int, Prediction]]:
    located = records.located()
    if holdout == "none":
        return [(path, line, p) for path, line, rec in located
                for p in predict_record(rec, system, fit, simulate)]
    groups: dict[str, list[int]] = defaultdict(list)
    for i, (_, _, rec) in enumerate(located):
        groups[group_key(rec, holdout, i)].append(i)
    out = []
    for key in sorted(groups, key=lambda k: groups[k][0]):
        held = set(groups[key])
        rest = [rec for i, (_, _, rec) in enumerate(located) if i not in held]
        sys_g = refit(rest, system)
        for i in sorted(held):
            path, line, rec = located[i]
            out += [(path, line, p)
                    for p in predict_record(rec, sys_g, sys_g.records_fit, simulate)]
    return out


def score(rows: list[Row]) -> QuantityScore:
    acc = [r.accuracy for r in rows]
    worst = tuple(sorted(rows, key=lambda r: (r.accuracy, r.file, r.line))[:WORST])
    return QuantityScore(n=len(rows), accuracy=round(float(np.mean(acc)), 4),
                         mape_pct=round(mape_pct([r.predicted for r in rows],
                                                 [r.measured for r in rows]), 3),
                         rank_correlation=(None if (rho := rank_correlation(
                             [r.predicted for r in rows], [r.measured for r in rows])) is None
                             else round(rho, 4)),
                         worst=worst, flagged=sum(1 for r in rows if FLAGGED in r.basis))


def verify(records: RecordSet, system: SystemProfile, fit: RecordsFit | None, *,
           holdout: str = "none", simulate: Simulate | None = None,
           profile_name: str = "") -> VerifyReport:
    """Predict every record (see the module doc) and score each quantity."""
    if holdout not in HOLDOUTS:
        raise InputError(f"unknown hold-out {holdout!r}; choose from {', '.join(HOLDOUTS)}",
                         field="--holdout")
    if fit is not None and system.records_fit != fit:     # the oracle reads the profile's
        cal = system.calibration or Calibration()
        system = system.model_copy(update={"calibration": cal.model_copy(
            update={"records_fit": fit})})
    preds = _predictions(records, system, fit, holdout, simulate)
    rows = tuple(Row(quantity=p.quantity, file=path, line=line, label=p.label,
                     measured=p.measured, predicted=p.predicted,
                     accuracy=round(accuracy(p.predicted, p.measured), 4), basis=p.basis)
                 for path, line, p in preds)
    by_q: dict[str, list[Row]] = defaultdict(list)
    for r in rows:
        by_q[r.quantity].append(r)
    covered = {(r.file, r.line) for r in rows}
    total = len(records.records)
    return VerifyReport(profile=profile_name or system.name, holdout=holdout, records=total,
                        not_covered=total - len(covered),
                        quantities={q: score(rs) for q, rs in by_q.items()}, rows=rows)
