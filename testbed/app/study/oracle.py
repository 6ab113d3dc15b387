"""The oracle study: how well the oracle predicts measured training, per strategy and model.

Any set of measurement records — ParaDL's ABCI runs (the CSV of
``../shared/data/abci-paradl`` or its records from ``testbed records import-paradl``) or
the testbed's own (``traces/measurements/<host>/fit.jsonl`` and ``holdout.jsonl``) —
is predicted with a calibrated profile (:func:`testbed.calibration.verify.verify`: the
oracle for training steps and ParaDL iterations, the fitted sections for the rest), and
every prediction is scored.

**Metric.** ParaDL's accuracy of one prediction, ``min(pred, meas) / max(pred, meas)``
(:func:`testbed.calibration.metrics.accuracy`; Kahira et al., "An Oracle for Guiding
Large-Scale Model/Hybrid Parallel Training of Convolutional Neural Networks", HPDC'21,
who report 86.74% on average for their oracle on ABCI), averaged over a set. Beside it
the study prints ``1 − |pred − meas| / meas`` averaged (the same number for an
under-prediction, lower for an over-prediction; it can go below 0) and the MAPE, so a
reader who reads the paper's accuracy the other way sees both.

**Fitted vs held out.** A row is *fitted* when its record is in the profile's fit set
(the file its ``calibration.source`` names, or the files of ``records_fit.inputs``,
matched by content, or by SHA-256 when the file is not at hand) and *held out*
otherwise. Because the shipped ABCI profile is fitted on every ABCI run, ``--holdout``
re-predicts fitted ParaDL rows from a refit of the ABCI fit
(:mod:`testbed.calibration.abci`) that has not seen them: ``by-gpus`` (default) fits the
runs with ≤ ``--max-fit-gpus`` GPUs and predicts the larger ones (extrapolation, what the
oracle is for), ``loo`` leaves each run out in turn, ``none`` keeps the profile as it is.
Fitted rows and held-out rows are never averaged together.

**Claim.** "The oracle predicts parallel CNN training within the study's 86.74% average
accuracy" — judged on the held-out training rows of runs on more than one GPU or
process (single-process steps are scored but are not parallel training): the
Student-t 95% interval of their
mean accuracy entirely ≥ 0.8674 → supported, entirely below → contradicted, else (or
fewer than :data:`MIN_ROWS` rows) undecided.
"""

from __future__ import annotations

import hashlib
import math
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np

from testbed.app.study.verdict import Verdict
from testbed.calibration.metrics import accuracy, rank_correlation
from testbed.errors import InputError
from testbed.measurements import Record, TrainSummary
from testbed.stats import mean_ci95

#: ParaDL's average accuracy on ABCI (Kahira et al., HPDC'21, abstract).
PAPER_ACCURACY = 0.8674
PAPER = "Kahira et al., HPDC'21"
HOLDOUTS = ("by-gpus", "loo", "none")
#: Fewest held-out rows the claim is judged on.
MIN_ROWS = 3
PARADL_QUANTITY = "paradl_iteration_s"
FITTED, HELD_OUT = "fitted", "held-out"
CLAIM = ("the oracle predicts parallel CNN training within the study's 86.74% average "
         f"accuracy ({PAPER})")


@dataclass(frozen=True)
class OracleOptions:
    """What the oracle study scores, and how."""

    records: tuple[str, ...]
    profile: str | None = None         # None: abci-v100 for ParaDL records
    holdout: str = "by-gpus"
    max_fit_gpus: int = 8
    target: float = PAPER_ACCURACY


@dataclass(frozen=True)
class OracleRow:
    """One scored prediction."""

    file: str
    line: int
    quantity: str
    label: str
    model: str
    strategy: str
    gpus: int
    measured_s: float
    predicted_s: float
    accuracy: float                    # min/max (ParaDL's)
    accuracy_rel: float                # 1 − |pred − meas| / meas
    split: str                         # fitted | held-out
    basis: str                         # what predicted it

    @property
    def training(self) -> bool:
        return self.quantity == PARADL_QUANTITY or self.quantity.endswith("_step_s")

    @property
    def parallel(self) -> bool:
        """A training step of more than one GPU or process (what the claim is about)."""
        return self.training and self.gpus > 1

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class OracleGroup:
    """The scores of one group of rows (a strategy, a model, a quantity, all)."""

    split: str
    by: str                            # all | strategy | model | model×strategy | quantity
    name: str
    n: int
    accuracy: float
    ci95_low: float
    ci95_high: float
    accuracy_rel: float
    mape_pct: float
    worst_accuracy: float
    rank_correlation: float | None

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class OracleStudy:
    """The oracle study's result: rows, groups, the claim and what it rests on."""

    mode: str                          # paradl | records | mixed
    profile: str
    holdout: str
    max_fit_gpus: int
    target: float
    records: int
    not_covered: int
    fit_set: str                       # what the profile was fitted on, in words
    rows: tuple[OracleRow, ...]
    groups: tuple[OracleGroup, ...]
    claims: tuple[Verdict, ...]
    notes: tuple[str, ...]

    def training_groups(self, split: str, by: str) -> list[OracleGroup]:
        return [g for g in self.groups if g.split == split and g.by == by]

    def to_dict(self) -> dict:
        return {"mode": self.mode, "profile": self.profile, "holdout": self.holdout,
                "max_fit_gpus": self.max_fit_gpus, "target_accuracy": self.target,
                "metric": "ParaDL accuracy: mean of min(pred, meas) / max(pred, meas)",
                "paper": PAPER, "records": self.records, "predicted": len(self.rows),
                "not_covered": self.not_covered, "fit_set": self.fit_set,
                "groups": [g.to_dict() for g in self.groups],
                "rows": [r.to_dict() for r in self.rows],
                "claims": [c.to_dict() for c in self.claims], "notes": list(self.notes)}


def validate(opts: OracleOptions) -> OracleOptions:
    """Refuse bad options with one line naming the option."""
    if not opts.records:
        raise InputError("give at least one record file (.jsonl) or ParaDL CSV (.csv)",
                         field="RECORDS")
    if opts.holdout not in HOLDOUTS:
        raise InputError(f"unknown hold-out {opts.holdout!r}; choose from "
                         f"{', '.join(HOLDOUTS)}", field="--holdout")
    if opts.max_fit_gpus < 1:
        raise InputError(f"must be ≥ 1, got {opts.max_fit_gpus}", field="--max-fit-gpus")
    if not 0 < opts.target <= 1:
        raise InputError(f"must be in (0, 1], got {opts.target}", field="--target")
    return opts


# ------------------------------------------------------------------------ inputs

@dataclass(frozen=True)
class _Input:
    path: str
    sha256: str
    records: tuple[tuple[int, Record], ...]


def _read_inputs(paths: Sequence[str]) -> list[_Input]:
    """Record files (.jsonl) and ParaDL CSVs (.csv), each with its lines and SHA-256."""
    from testbed.calibration.records import import_paradl, read_record_file
    from testbed.io.read import read_bytes
    out = []
    for p in paths:
        if str(p).lower().endswith(".csv"):
            data = read_bytes(p, source=str(p))
            recs = import_paradl(p)
            # one CSV line per record, after the header (what import_paradl reads)
            out.append(_Input(str(p), hashlib.sha256(data).hexdigest(),
                              tuple((i + 2, r) for i, r in enumerate(recs))))
        else:
            f = read_record_file(p)
            out.append(_Input(f.path, f.sha256, f.records))
    return out


def record_key(record: Record) -> str:
    """A record's content as canonical JSON (what the fit set is matched on)."""
    from testbed.io.canonical import dumps
    return dumps(record.model_dump(mode="json"))


def _candidates(path: str, profile_path: str) -> list[Path]:
    """Where a path a profile names may be: as given (from the working folder), next to
    the profile, and from the repository root (profiles name repo-relative paths)."""
    p = Path(path)
    if p.is_absolute():
        return [p]
    repo = Path(__file__).resolve().parents[3]
    return [p, Path(profile_path).parent / p, repo / p]


def fit_set(system, profile_path: str, inputs: Sequence[_Input]
            ) -> tuple[set[str], set[str], str, list[str]]:
    """(record keys of the profile's fit set, SHA-256 of fitted files, the fit set in
    words, notes): from ``records_fit.inputs`` (files by SHA-256 and content) and the
    ABCI ``calibration.source`` (a ParaDL CSV, by content)."""
    from testbed.calibration.records import import_paradl, read_record_file
    keys: set[str] = set()
    shas: set[str] = set()
    words: list[str] = []
    notes: list[str] = []
    cal = system.calibration
    fit = system.records_fit
    for f in (fit.inputs if fit is not None else ()):
        shas.add(f.sha256)
        words.append(f"{f.path} ({f.records} records)")
        for cand in _candidates(f.path, profile_path):
            if cand.is_file():
                keys |= {record_key(r) for _, r in read_record_file(cand).records}
                break
    if cal is not None and cal.source and fit is None:
        for src in (s.strip() for s in cal.source.split(",")):
            if not src.lower().endswith(".csv"):
                continue
            words.append(src)
            found = next((c for c in _candidates(src, profile_path) if c.is_file()), None)
            if found is not None:
                keys |= {record_key(r) for r in import_paradl(found)}
            else:
                notes.append(f"the profile's fit set {src} is not at hand: a ParaDL row "
                             "counts as fitted only when its file is that path")
                for inp in inputs:
                    if Path(inp.path).resolve() == (Path(profile_path).parent / src).resolve() \
                            or inp.path == src:
                        shas.add(inp.sha256)
    return keys, shas, "; ".join(words) or "nothing (an uncalibrated profile)", notes


# ------------------------------------------------------------------------ scoring

def _rel(pred: float, meas: float) -> float:
    return 1.0 - abs(pred - meas) / meas if meas > 0 and math.isfinite(pred) else 0.0


def _describe(record: Record) -> tuple[str, str, int]:
    """(model, strategy, GPUs or processes) of a record, for the grouping."""
    from testbed.calibration.paradl import is_paradl_record
    if isinstance(record, TrainSummary):
        cfg = record.config
        if is_paradl_record(record):
            return cfg.model, cfg.strategy, cfg.processes
        from testbed.calibration.compute import model_ir
        return (model_ir(cfg).name, cfg.strategy if cfg.processes > 1 else "serial",
                cfg.processes)
    return getattr(record, "model", "") or "", "", int(getattr(record, "processes", 1) or 1)


def _refit_predictions(records: Sequence[tuple[int, Record]], system, opts: OracleOptions
                       ) -> dict[int, tuple[float, str]]:
    """Held-out predictions of fitted ParaDL records from refits of the ABCI fit that
    did not see them: ``{index: (predicted_s, basis)}``."""
    from testbed.calibration.abci import evaluate, fit
    from testbed.calibration.paradl import measurement_of
    bare = system.model_copy(update={"calibration": None})
    ms = {i: measurement_of(r) for i, r in records if isinstance(r, TrainSummary)}
    out: dict[int, tuple[float, str]] = {}

    def predict(train: list, held: list[int], basis: str) -> None:
        cal = fit(train, bare)
        rows = evaluate([ms[i] for i in held], bare.model_copy(update={"calibration": cal}))
        for i, row in zip(held, rows, strict=True):
            if row["predicted_s"] is not None and ms[i].model in cal.models:
                out[i] = (float(row["predicted_s"]), basis)

    if opts.holdout == "by-gpus":
        train = [m for m in ms.values() if m.gpus <= opts.max_fit_gpus]
        held = [i for i, m in ms.items() if m.gpus > opts.max_fit_gpus]
        if train and held:
            predict(train, held, f"refit on the runs with ≤ {opts.max_fit_gpus} GPUs")
    elif opts.holdout == "loo":
        for i in ms:
            predict([m for j, m in ms.items() if j != i], [i], "refit without this run")
    return out


def score(rows: Sequence[OracleRow], split: str, by: str, name: str) -> OracleGroup:
    """One group's accuracy (mean, t interval), 1 − relative error, MAPE, worst, ρ."""
    acc = [r.accuracy for r in rows]
    ci = mean_ci95(acc, low=0.0, high=1.0)
    meas = [r.measured_s for r in rows]
    pred = [r.predicted_s for r in rows]
    mape = float(np.mean([abs(p - m) / m for p, m in zip(pred, meas, strict=True)]) * 100)
    rho = rank_correlation(pred, meas)
    return OracleGroup(split=split, by=by, name=name, n=len(rows), accuracy=round(ci.mean, 4),
                       ci95_low=round(ci.ci95_low, 4), ci95_high=round(ci.ci95_high, 4),
                       accuracy_rel=round(float(np.mean([r.accuracy_rel for r in rows])), 4),
                       mape_pct=round(mape, 2), worst_accuracy=round(min(acc), 4),
                       rank_correlation=None if rho is None else round(rho, 4))


def groups_of(rows: Sequence[OracleRow]) -> list[OracleGroup]:
    """Per split: all training rows, per strategy, per model, per model × strategy; and
    every other quantity (collectives, checkpoints, restarts, runs) on its own."""
    out = []
    for split in (FITTED, HELD_OUT):
        mine = [r for r in rows if r.split == split]
        train = [r for r in mine if r.training]
        if train:
            out.append(score(train, split, "all", "training (all)"))
        for by, key in (("strategy", lambda r: r.strategy), ("model", lambda r: r.model),
                        ("model×strategy", lambda r: f"{r.model} {r.strategy}")):
            buckets: dict[str, list[OracleRow]] = defaultdict(list)
            for r in train:
                buckets[key(r)].append(r)
            out += [score(buckets[k], split, by, k) for k in sorted(buckets)]
        other: dict[str, list[OracleRow]] = defaultdict(list)
        for r in mine:
            if not r.training:
                other[r.quantity].append(r)
        out += [score(other[k], split, "quantity", k) for k in sorted(other)]
    return out


def judge(rows: Sequence[OracleRow], target: float) -> Verdict:
    """The claim on the held-out rows of parallel training (see the module doc)."""
    held = [r for r in rows if r.split == HELD_OUT and r.parallel]
    serial = [r for r in rows if r.split == HELD_OUT and r.training and not r.parallel]
    rule = (f"on the held-out training rows of more than one GPU or process: Student-t 95% "
            f"interval of their mean accuracy (min/max) entirely ≥ {target:.4f} → "
            f"supported, entirely below → contradicted, else or with fewer than {MIN_ROWS} "
            "such rows → undecided")
    aside = ""
    if serial:
        s = score(serial, HELD_OUT, "all", "serial")
        aside = (f"; single-process held-out steps (not judged): {100 * s.accuracy:.2f}% "
                 f"over {s.n}")
    if len(held) < MIN_ROWS:
        return Verdict(CLAIM, "undecided", f"{len(held)} held-out parallel training row(s): "
                       f"too few to judge (fitted rows score the fit, not a prediction){aside}",
                       rule)
    g = score(held, HELD_OUT, "all", "training")
    low = min((x for x in groups_of(held) if x.by != "all"), key=lambda x: x.accuracy)
    evidence = (f"held-out accuracy {100 * g.accuracy:.2f}% [{100 * g.ci95_low:.2f}, "
                f"{100 * g.ci95_high:.2f}] over {g.n} parallel rows (1 − |error|: "
                f"{100 * g.accuracy_rel:.2f}%, MAPE {g.mape_pct:.1f}%); lowest group "
                f"{low.by} {low.name} {100 * low.accuracy:.2f}% (n={low.n}){aside}")
    if g.ci95_low >= target:
        verdict = "supported"
    elif g.ci95_high < target:
        verdict = "contradicted"
    else:
        verdict = "undecided"
    return Verdict(CLAIM, verdict, evidence, rule)  # type: ignore[arg-type]


def run_oracle_study(opts: OracleOptions, *, simulate: Callable | None = None) -> OracleStudy:
    """Predict and score every record (see the module doc)."""
    from testbed.calibration.paradl import is_paradl_record
    from testbed.calibration.profile import load_calibrated
    from testbed.calibration.records import RecordFile, RecordSet
    from testbed.calibration.verify import verify

    opts = validate(opts)
    inputs = _read_inputs(opts.records)
    every = [r for inp in inputs for _, r in inp.records]
    n_paradl = sum(1 for r in every if is_paradl_record(r))
    mode = "paradl" if n_paradl == len(every) else "records" if n_paradl == 0 else "mixed"
    profile = opts.profile
    if profile is None:
        if mode != "paradl":
            raise InputError("give the profile the records are predicted with (e.g. "
                             "traces/measurements/vm/profile.yaml)", field="--profile")
        profile = "abci-v100"
    try:
        prof = load_calibrated(profile)
    except InputError as exc:
        if exc.source or exc.line is not None:
            raise                           # an error inside the profile file names it
        raise InputError(exc.message, field="--profile") from None
    system = prof.system
    keys, shas, words, notes = fit_set(system, prof.path, inputs)
    record_set = RecordSet(tuple(RecordFile(i.path, i.sha256, i.records) for i in inputs))
    report = verify(record_set, system, prof.fit, holdout="none", simulate=simulate,
                    profile_name=system.name)
    located = {(i.path, line): (i.sha256, rec) for i in inputs for line, rec in i.records}
    position = {k: n for n, k in enumerate(located)}
    # the fitted ParaDL records, re-predicted by refits that never saw them
    indexed = [(position[k], rec) for k, (sha, rec) in located.items()
               if is_paradl_record(rec) and (sha in shas or record_key(rec) in keys)]
    refit = _refit_predictions(indexed, system, opts) if opts.holdout != "none" else {}
    rows = []
    for v in report.rows:
        sha, rec = located[(v.file, v.line)]
        model, strategy, gpus = _describe(rec)
        fitted = sha in shas or record_key(rec) in keys
        pred, basis = v.predicted, f"profile ({v.basis})"
        n = position[(v.file, v.line)]
        if fitted and n in refit:
            pred, basis = refit[n]
            fitted = False
        rows.append(OracleRow(file=v.file, line=v.line, quantity=v.quantity, label=v.label,
                              model=model, strategy=strategy, gpus=gpus,
                              measured_s=v.measured, predicted_s=pred,
                              accuracy=round(accuracy(pred, v.measured), 4),
                              accuracy_rel=round(_rel(pred, v.measured), 4),
                              split=FITTED if fitted else HELD_OUT, basis=basis))
    if not rows:
        raise InputError("the profile predicts none of these records (no fit covers them)",
                         source=", ".join(opts.records))
    if opts.holdout == "loo" and len(refit) < len(indexed):
        notes.append(f"hold-out loo: {len(indexed) - len(refit)} fitted run(s) cannot be "
                     "predicted without themselves (a model's only 1-GPU run fixes its "
                     "compute) and stay fitted")
    if opts.holdout != "none" and not refit and indexed:
        notes.append(f"hold-out {opts.holdout}: no fitted ParaDL run could be re-predicted "
                     "(no run beyond the fit range, or a model without its 1-GPU run)")
    uncal = sorted({r.model for r in rows if r.split == HELD_OUT and r.quantity ==
                    PARADL_QUANTITY and system.calibration is not None
                    and r.model not in system.calibration.models})
    if uncal:
        notes.append(f"models the profile never measured ({', '.join(uncal)}) are predicted "
                     "from the values learned across the measured ones")
    claims = (replace(judge(rows, opts.target), scope=f"{mode} mode, profile "
                      f"{system.name}, hold-out {opts.holdout}"),)
    return OracleStudy(mode=mode, profile=prof.path, holdout=opts.holdout,
                       max_fit_gpus=opts.max_fit_gpus, target=opts.target,
                       records=report.records, not_covered=report.not_covered,
                       fit_set=words, rows=tuple(rows), groups=tuple(groups_of(rows)),
                       claims=claims, notes=tuple(notes))
