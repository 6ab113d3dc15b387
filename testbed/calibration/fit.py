"""Calibration from records: records + a base profile → a calibrated profile.

:func:`fit_records` runs every fit the records allow —

* the ABCI/ParaDL fit of :mod:`testbed.calibration.abci_csv` for multi-GPU strategy runs
  (:mod:`testbed.calibration.paradl`), which fills ``calibration`` exactly as
  ``testbed calibrate CSV`` does;
* compute (:mod:`~testbed.calibration.compute`), network
  (:mod:`~testbed.calibration.network`), storage (:mod:`~testbed.calibration.storage`)
  and restart (:mod:`~testbed.calibration.restart`) fits of the harness records, and
  once those are in the profile, the scheduling delay of data-parallel ranks sharing
  the host's cores (:mod:`~testbed.calibration.dataparallel`), whose
  results go into ``calibration.records_fit`` — where the oracle reads them
  (:mod:`testbed.oracle.fitted`: step lines and the law, α–β of the profile's backend
  per tier; :mod:`testbed.resilience.ckpt_cost`: storage; ``testbed.systems.profile.
  default_restart_s``: restarts) — and the default framework's step lines also into
  ``calibration.models`` (``fixed_s + s_per_sample · b``);

— and returns the new profile's data and text, with which models it fitted, could not
fit, and kept from the base profile (a calibration never silently loses another
model's measurement). The base profile's network tiers stay its nominal physics: the
measured α–β live in the fitted section only. Nothing here reads a clock or writes a
file: the fit time is the newest record's ``measured_at`` and the caller writes the
text (through :mod:`testbed.io.write`), so the same records give the same bytes; a fit
that is not finite is refused before anything is written.
"""

from __future__ import annotations

import copy
import math
import statistics
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from testbed.calibration.compute import fit_compute, model_ir
from testbed.calibration.dataparallel import fit_data_parallel
from testbed.calibration.metrics import residuals
from testbed.calibration.network import fit_network
from testbed.calibration.paradl import is_paradl_record, paradl_calibration, paradl_model_report
from testbed.calibration.profile import SECTION, CalibratedProfile, profile_yaml, validate_profile
from testbed.calibration.records import RecordSet, check_machine
from testbed.calibration.restart import fit_restart
from testbed.calibration.storage import fit_storage
from testbed.errors import ScenarioError
from testbed.measurements import (
    Checkpoint,
    Collective,
    Restart,
    SupervisedRun,
    TrainConfig,
    TrainSummary,
)
from testbed.model.ir import Model
from testbed.systems.calibrated import (
    DEFAULT_CHECKPOINT_FORMAT,
    FRAMEWORK_PREFERENCE,
    ComputeFit,
    RecordsFit,
)
from testbed.systems.profile import Calibration, ModelCalibration, SystemProfile

METHOD = "testbed.calibration.fit"


@dataclass(frozen=True)
class Sections:
    """The fitted sections (what :class:`RecordsFit` holds besides provenance)."""

    compute: tuple = ()
    network: tuple = ()
    storage: tuple = ()
    restart: tuple = ()


@dataclass(frozen=True)
class ModelReport:
    """Which models a fit calibrated, which it could not (and why), and which the base
    profile's calibration contributed unchanged."""

    fitted: tuple[str, ...] = ()
    dropped: dict[str, str] = field(default_factory=dict)
    kept_from_base: tuple[str, ...] = ()

    def to_dict(self) -> dict:
        return {"fitted": list(self.fitted), "dropped": dict(self.dropped),
                "kept_from_base": list(self.kept_from_base)}

    def line(self) -> str:
        """One readable line (``fitted …; dropped …; kept …``)."""
        parts = [f"fitted {len(self.fitted)} model(s): {', '.join(self.fitted) or '-'}"]
        if self.dropped:
            parts.append("dropped: " + ", ".join(f"{m} ({why})" for m, why in
                                                 self.dropped.items()))
        if self.kept_from_base:
            parts.append("kept from the base profile: " + ", ".join(self.kept_from_base))
        return "; ".join(parts)


@dataclass(frozen=True)
class FitResult:
    """A calibrated profile: its data, text, fitted section and the ABCI fit's rows."""

    data: dict[str, Any]
    text: str
    section: RecordsFit
    calibration: Calibration | None
    paradl_rows: list[dict] = field(default_factory=list)
    paradl_holdout: dict | None = None
    models: ModelReport | None = None


def tier_spans(system: SystemProfile) -> list[tuple[str, int]]:
    return [(t.name, t.span_gpus) for t in system.network.tiers]


def harness_train(records: list) -> list[TrainSummary]:
    return [r for r in records if isinstance(r, TrainSummary) and not is_paradl_record(r)]


def fit_sections(records: list, system: SystemProfile) -> Sections:
    """Every harness fit over ``records`` (no provenance, no profile edits); the network
    fits are named after the tiers of ``system`` (the profile being calibrated)."""
    return Sections(
        compute=fit_compute(harness_train(records)),
        network=fit_network([r for r in records if isinstance(r, Collective)],
                            tier_spans(system), system.node.gpus_per_node),
        storage=fit_storage([r for r in records if isinstance(r, Checkpoint)]),
        restart=fit_restart([r for r in records if isinstance(r, Restart)],
                            [r for r in records if isinstance(r, SupervisedRun)]))


def default_framework(records: list[TrainSummary]) -> str | None:
    """The framework with the most single-process step measurements (ties: the order of
    :data:`~testbed.systems.calibrated.FRAMEWORK_PREFERENCE`, then the name)."""
    counts = Counter(r.config.framework for r in records if r.config.processes == 1)
    if not counts:
        return None
    rank = {name: i for i, name in enumerate(FRAMEWORK_PREFERENCE)}
    return min(counts, key=lambda f: (-counts[f], rank.get(f, len(rank)), f))


def _model_calibrations(compute: tuple[ComputeFit, ...], records: list[TrainSummary],
                        framework: str | None, precision: str) -> dict[str, ModelCalibration]:
    """Per-model compute of the default framework in the training precision, in the
    profile schema: the fitted line (``fixed_s + s_per_sample · b``), the median batch
    measured, precision and FLOPs (other frameworks' and precisions' lines stay in the
    fitted section, where the oracle finds them by the request's framework and
    precision)."""
    irs: dict[str, tuple[Model, TrainConfig]] = {}
    for rec in records:
        ir = model_ir(rec.config)
        irs.setdefault(ir.name, (ir, rec.config))
    own = sorted((f for f in compute if f.framework == framework and f.precision == precision),
                 key=lambda f: f.device)
    out: dict[str, ModelCalibration] = {}
    for fit in own:
        for name, line in sorted(fit.models.items()):
            if name in out or name not in irs or line.s_per_sample <= 0:
                continue
            ir, cfg = irs[name]
            out[name] = ModelCalibration(
                s_per_sample=line.s_per_sample, fixed_s=line.fixed_s, framework=framework,
                input_shape=cfg.input_shape, forward_flops=float(ir.forward_flops),
                batch=int(statistics.median_low(line.batches)), precision=fit.precision)
    return out


def default_format(storage: tuple, framework: str | None) -> str | None:
    """The checkpoint format of predictions that name none: the harness's own when the
    default framework has it fitted, else that framework's first fitted format."""
    own = [s.format for s in storage if s.framework == framework]
    if not own:
        return None
    return DEFAULT_CHECKPOINT_FORMAT if DEFAULT_CHECKPOINT_FORMAT in own else own[0]


def _apply_machine(data: dict[str, Any], records: RecordSet) -> None:
    """A CPU device is the machine's CPU: its core count is what the records saw."""
    env = records.records[0].env
    if env.gpu_model.lower() == "none" and isinstance(data.get("node"), dict):
        data["node"]["cpu_cores"] = env.cpu_count


def merge_models(new: Calibration, base: Calibration | None) -> tuple[Calibration, tuple[str, ...]]:
    """``new`` with every model of ``base`` it did not refit kept as it was (a calibration
    never silently loses another model's measurement), and the names kept."""
    if base is None:
        return new, ()
    kept = tuple(name for name in base.models if name not in new.models)
    if not kept:
        return new, ()
    models = {**new.models, **{name: base.models[name] for name in kept}}
    return new.model_copy(update={"models": models}), kept


def _harness_report(records: list[TrainSummary], sections: Sections
                    ) -> tuple[tuple[str, ...], dict]:
    """(models with a fitted step line, measured models without one and why)."""
    measured = sorted({model_ir(r.config).name for r in records})
    lines = {n for f in sections.compute for n in f.models}
    dropped = {name: "fewer than 2 batch sizes on one process: the law predicts it"
               for name in measured if name not in lines}
    return tuple(n for n in measured if n in lines), dropped


def _calibration(records: RecordSet, base: CalibratedProfile, sections: Sections,
                 framework: str | None) -> tuple[Calibration | None, list[dict], dict | None,
                                                 ModelReport]:
    """The profile's ``calibration``: the ABCI fit for ParaDL records, else per-model
    compute of the harness records, over the base's (whose other models are kept)."""
    all_records = records.records
    sources = ", ".join(f.path for f in records.files)
    base_cal = base.system.calibration
    if base_cal is not None and base_cal.records_fit is not None:
        base_cal = base_cal.model_copy(update={"records_fit": None})
    if any(is_paradl_record(r) for r in all_records):
        cal, rows, held = paradl_calibration(all_records, base.system, sources)
        fitted, dropped = paradl_model_report(all_records, cal)
        cal, kept = merge_models(cal, base_cal)
        return cal, rows, held, ModelReport(fitted, dropped, kept)
    train = harness_train(all_records)
    models = _model_calibrations(sections.compute, train, framework,
                                 base.system.gpu.training_precision)
    fitted, dropped = _harness_report(train, sections)
    if not models:
        return base_cal, [], None, ModelReport(fitted, dropped, tuple(
            base_cal.models) if base_cal else ())
    acc = {}
    lines = [line for f in sections.compute for line in f.models.values()]
    if lines:
        acc["compute_in_sample_mean"] = round(statistics.fmean(
            line.residuals.accuracy for line in lines), 4)
    new = (base_cal or Calibration()).model_copy(update={
        "source": sources, "method": METHOD, "models": models, "accuracy": acc})
    cal, kept = merge_models(new, base_cal)
    return cal, [], None, ModelReport(fitted, dropped, kept)


def fit_records(records: RecordSet, base: CalibratedProfile, *, force: bool = False,
                name: str | None = None) -> FitResult:
    """Fit ``records`` over ``base`` (see the module doc); raises on another machine's
    records unless ``force``, and on a fit that is not finite (nothing is written)."""
    machine = check_machine(records, base.system.gpu.model,
                            base.fit.machine if base.fit else None, force=force)
    sections = fitted_sections(records, base.system)
    framework = default_framework(harness_train(records.records))
    cal, rows, held, report = _calibration(records, base, sections, framework)
    paradl_res = None
    if rows:
        scored = [r for r in rows if cal is not None and r["model"] in cal.models]
        paradl_res = residuals([r["predicted_s"] or 0.0 for r in scored],
                               [r["measured_s"] for r in scored])
    section = RecordsFit(
        method=METHOD, base=base.system.name,
        framework=framework if sections.compute else None,
        checkpoint_format=default_format(sections.storage, framework or
                                         next((s.framework for s in sections.storage), None)),
        machine=machine, fitted_at=records.fitted_at,
        inputs=tuple(f.input_file() for f in records.files), compute=sections.compute,
        network=sections.network, storage=sections.storage, restart=sections.restart,
        paradl=paradl_res)
    data = copy.deepcopy(base.data)
    if name:
        data["name"] = name
    _apply_machine(data, records)
    block = cal.to_data() if cal is not None else {}
    block.pop(SECTION, None)
    block[SECTION] = section.model_dump(mode="json")
    data["calibration"] = block
    _check_finite(data, records)
    system, _ = validate_profile(data, "<calibrated profile>")  # never write what will not load
    dp = fit_data_parallel(harness_train(records.records), system)
    if dp:     # priced on the profile's own compute and network fits, so fitted after them
        section = section.model_copy(update={"data_parallel": dp})
        block[SECTION] = section.model_dump(mode="json")
        _check_finite(data, records)
        validate_profile(data, "<calibrated profile>")
    return FitResult(data=data, text=profile_yaml(data), section=section, calibration=cal,
                     paradl_rows=rows, paradl_holdout=held, models=report)


def fitted_sections(records: RecordSet, system: SystemProfile) -> Sections:
    """:func:`fit_sections` of a record set; a fit whose numbers are not finite is
    refused with the first input file named (it is never written)."""
    try:
        return fit_sections(records.records, system)
    except ValueError as exc:
        first = records.files[0].path if records.files else None
        raise ScenarioError(f"a fit is not finite ({str(exc).splitlines()[0]}); nothing "
                            "written — check the records for outliers", source=first) from None


def _check_finite(data: Any, records: RecordSet, path: str = "") -> None:
    """Refuse a profile holding a non-finite number (naming its key)."""
    if isinstance(data, dict):
        for key, value in data.items():
            _check_finite(value, records, f"{path}.{key}" if path else str(key))
    elif isinstance(data, (list, tuple)):
        for i, value in enumerate(data):
            _check_finite(value, records, f"{path}[{i}]")
    elif isinstance(data, float) and not math.isfinite(data):
        first = records.files[0].path if records.files else None
        raise ScenarioError(f"the fit gives {data} at {path}; nothing written — check the "
                            "records for outliers", source=first, field=path)


def refit(records: list, system: SystemProfile) -> SystemProfile:
    """``system`` refitted on ``records`` alone (verification's hold-outs): its records
    fit and the models it derived replaced by what ``records`` give — nothing learned
    from the left-out records remains."""
    cal = system.calibration
    if cal is None or cal.records_fit is None:
        base_cal = cal
        old = RecordsFit(base=system.name)
    else:
        old = cal.records_fit
        derived = {n for n, m in cal.models.items() if m.framework is not None}
        base_cal = cal.model_copy(update={"records_fit": None, "models": {
            n: m for n, m in cal.models.items() if n not in derived}})
    sections = fit_sections(records, system)
    train = harness_train(records)
    framework = old.framework or default_framework(train)
    fit = old.model_copy(update={"compute": sections.compute, "network": sections.network,
                                 "storage": sections.storage, "restart": sections.restart})
    if any(is_paradl_record(r) for r in records):
        base_cal, _, _ = paradl_calibration(records, system.model_copy(
            update={"calibration": None}), "holdout refit")
    models = _model_calibrations(sections.compute, train, framework,
                                 system.gpu.training_precision)
    base_cal = base_cal or Calibration()
    fit = fit.model_copy(update={"data_parallel": ()})
    new = base_cal.model_copy(update={"models": {**base_cal.models, **models},
                                      "records_fit": fit})
    out = system.model_copy(update={"calibration": new})
    dp = fit_data_parallel(train, out)
    if not dp:
        return out
    new = new.model_copy(update={"records_fit": fit.model_copy(update={"data_parallel": dp})})
    return system.model_copy(update={"calibration": new})
