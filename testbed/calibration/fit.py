"""Calibration from records: records + a base profile → a calibrated profile.

:func:`fit_records` runs every fit the records allow —

* the ABCI/ParaDL fit of :mod:`testbed.calibrate` for multi-GPU strategy runs
  (:mod:`testbed.calibration.paradl`), which fills ``calibration`` exactly as
  ``testbed calibrate CSV`` does;
* compute (:mod:`~testbed.calibration.compute`), network
  (:mod:`~testbed.calibration.network`), storage (:mod:`~testbed.calibration.storage`)
  and restart (:mod:`~testbed.calibration.restart`) fits of the harness records, whose
  results go into ``calibration.records_fit`` and, where the profile schema has the
  field, into the profile itself (per-model compute in ``calibration.models``, α–β in
  the network tiers);

— and returns the new profile's data and text. Nothing here reads a clock or writes a
file: the fit time is the newest record's ``measured_at`` and the caller writes the
text (through :mod:`testbed.files`), so the same records give the same bytes.
"""

from __future__ import annotations

import copy
import statistics
from dataclasses import dataclass, field
from typing import Any

from testbed.calibration.compute import fit_compute, model_ir
from testbed.calibration.metrics import residuals, sig
from testbed.calibration.network import fit_network
from testbed.calibration.paradl import is_paradl_record, paradl_calibration
from testbed.calibration.profile import SECTION, CalibratedProfile, profile_yaml, validate_profile
from testbed.calibration.records import RecordSet, check_machine
from testbed.calibration.restart import fit_restart
from testbed.calibration.section import ComputeFit, RecordsFit
from testbed.calibration.storage import fit_storage
from testbed.measurements import Checkpoint, Collective, Restart, TrainSummary
from testbed.systems import Calibration, ModelCalibration, SystemProfile

METHOD = "testbed.calibration.fit"
#: Backends in the order a profile's tiers take their α–β when its library has none.
BACKEND_PREFERENCE = ("gloo", "mpi", "nccl")


@dataclass(frozen=True)
class Sections:
    """The fitted sections (what :class:`RecordsFit` holds besides provenance)."""

    compute: tuple = ()
    network: tuple = ()
    storage: tuple = ()
    restart: tuple = ()


@dataclass(frozen=True)
class FitResult:
    """A calibrated profile: its data, text, fitted section and the ABCI fit's rows."""

    data: dict[str, Any]
    text: str
    section: RecordsFit
    calibration: Calibration | None
    paradl_rows: list[dict] = field(default_factory=list)
    paradl_holdout: dict | None = None


def tier_spans(system: SystemProfile) -> list[tuple[str, int]]:
    return [(t.name, t.span_gpus) for t in system.network.tiers]


def harness_train(records: list) -> list[TrainSummary]:
    return [r for r in records if isinstance(r, TrainSummary) and not is_paradl_record(r)]


def fit_sections(records: list, system: SystemProfile) -> Sections:
    """Every harness fit over ``records`` (no provenance, no profile edits)."""
    return Sections(
        compute=fit_compute(harness_train(records)),
        network=fit_network([r for r in records if isinstance(r, Collective)],
                            tier_spans(system), system.node.gpus_per_node),
        storage=fit_storage([r for r in records if isinstance(r, Checkpoint)]),
        restart=fit_restart([r for r in records if isinstance(r, Restart)]))


def _model_calibrations(compute: tuple[ComputeFit, ...], records: list[TrainSummary]
                        ) -> dict[str, ModelCalibration]:
    """Per-model compute in the profile schema: seconds per sample at the median batch
    measured (what the oracle's curve scales from), precision and FLOPs."""
    irs = {}
    for rec in records:
        ir = model_ir(rec.config)
        irs.setdefault(ir.name, (ir, rec.config))
    out: dict[str, ModelCalibration] = {}
    for fit in compute:
        for name, line in sorted(fit.models.items()):
            if name in out or name not in irs:
                continue
            ir, cfg = irs[name]
            batch = int(statistics.median_low(line.batches))
            out[name] = ModelCalibration(
                s_per_sample=sig((line.fixed_s + line.s_per_sample * batch) / batch),
                input_shape=cfg.input_shape, forward_flops=float(ir.forward_flops),
                batch=batch, precision=fit.precision)
    return out


def _tier_backend(system: SystemProfile, available: set[str]) -> str | None:
    library = getattr(system.network, "library", "") or ""
    own = library.split("-")[0]
    if own in available:
        return own
    return next((b for b in BACKEND_PREFERENCE if b in available), None)


def _apply_network(data: dict[str, Any], system: SystemProfile, network: tuple) -> None:
    """Write the all-reduce α–β of the chosen backend into the profile's tiers."""
    allreduce = [ab for ab in network if ab.op == "allreduce"]
    backend = _tier_backend(system, {ab.backend for ab in allreduce})
    if backend is None:
        return
    by_tier = {}
    for ab in sorted(allreduce, key=lambda a: a.processes):
        if ab.backend == backend:
            by_tier.setdefault(ab.tier, ab)
    for tier in data["network"]["tiers"]:
        ab = by_tier.get(tier.get("name"))
        if ab is not None:
            tier.update(latency_us=ab.latency_us, bandwidth_GBps=ab.bandwidth_GBps,
                        efficiency=1.0)
    if "library" in type(system.network).model_fields and backend in ("gloo", "mpi"):
        data["network"]["library"] = backend


def _apply_machine(data: dict[str, Any], records: RecordSet) -> None:
    """A CPU device is the machine's CPU: its core count is what the records saw."""
    env = records.records[0].env
    if env.gpu_model.lower() == "none" and isinstance(data.get("node"), dict):
        data["node"]["cpu_cores"] = env.cpu_count


def _calibration(records: RecordSet, base: CalibratedProfile, sections: Sections
                 ) -> tuple[Calibration | None, list[dict], dict | None]:
    """The profile's ``calibration``: the ABCI fit for ParaDL records, else per-model
    compute of the harness records, else the base's."""
    all_records = records.records
    sources = ", ".join(f.path for f in records.files)
    if any(is_paradl_record(r) for r in all_records):
        cal, rows, held = paradl_calibration(all_records, base.system, sources)
        return cal, rows, held
    models = _model_calibrations(sections.compute, harness_train(all_records))
    if models:
        acc = {}
        lines = [line for f in sections.compute for line in f.models.values()]
        if lines:
            acc["compute_in_sample_mean"] = round(statistics.fmean(
                line.residuals.accuracy for line in lines), 4)
        return Calibration(source=sources, method=METHOD, models=models, accuracy=acc), [], None
    return base.system.calibration, [], None


def fit_records(records: RecordSet, base: CalibratedProfile, *, force: bool = False,
                name: str | None = None) -> FitResult:
    """Fit ``records`` over ``base`` (see the module doc); raises on another machine's
    records unless ``force``."""
    machine = check_machine(records, base.system.gpu.model,
                            base.fit.machine if base.fit else None, force=force)
    sections = fit_sections(records.records, base.system)
    cal, rows, held = _calibration(records, base, sections)
    paradl_res = None
    if rows:
        scored = [r for r in rows if cal is not None and r["model"] in cal.models]
        paradl_res = residuals([r["predicted_s"] or 0.0 for r in scored],
                               [r["measured_s"] for r in scored])
    section = RecordsFit(
        method=METHOD, base=base.system.name, machine=machine, fitted_at=records.fitted_at,
        inputs=tuple(f.input_file() for f in records.files), compute=sections.compute,
        network=sections.network, storage=sections.storage, restart=sections.restart,
        paradl=paradl_res)
    data = copy.deepcopy(base.data)
    if name:
        data["name"] = name
    _apply_machine(data, records)
    _apply_network(data, base.system, sections.network)
    block = cal.model_dump(mode="json") if cal is not None else {}
    block[SECTION] = section.model_dump(mode="json")
    data["calibration"] = block
    validate_profile(data, "<calibrated profile>")      # never write what will not load
    return FitResult(data=data, text=profile_yaml(data), section=section, calibration=cal,
                     paradl_rows=rows, paradl_holdout=held)
