"""Record files as calibration input: read with their SHA-256, checked for one machine,
and the ParaDL/ABCI CSV turned into records.

:func:`load_records` reads every file once through :mod:`testbed.io.read` (bytes →
SHA-256 → lines → validated records), so the hash in the fitted profile is the hash
of exactly what was fitted. :func:`check_machine` refuses records of several machines,
or of another machine than the profile's, unless forced. Every record read or imported
is checked for physically plausible values (:mod:`testbed.calibration.plausible`).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from testbed.calibration.plausible import check_record
from testbed.errors import InputError, ScenarioError
from testbed.io.read import decode_utf8, parse_json, read_bytes
from testbed.io.schema import Line, read_csv_models
from testbed.measurements import (
    Environment,
    InputShape,
    PositiveFloat,
    Processes,
    Record,
    Samples,
    StepsOrZero,
    TrainSummary,
    make_record,
    parse_record,
)
from testbed.systems.calibrated import InputFile, Machine

#: Columns of the ParaDL/ABCI calibration CSV (``../shared/data/abci-paradl``).
PARADL_COLUMNS = ("model", "strategy", "gpus", "gpus_per_group", "samples_per_gpu",
                  "global_batch", "input_sample_shape", "s_per_iter_median")
#: The ABCI compute node of the ParaDL runs (ABCI 1.0 "Compute Node (V)": two Xeon
#: Gold 6148, 20 cores each, four V100-SXM2 16 GB; abci.ai system overview).
ABCI_ENV = {"host": "abci", "os": "Linux", "python": "unknown",
            "cpu_model": "Intel Xeon Gold 6148", "cpu_count": 40,
            "gpu_model": "Tesla V100-SXM2-16GB", "framework": "chainer",
            "framework_version": "unknown"}
_LOG_TIME = re.compile(r"(\d{4})-(\d{2})-(\d{2})-(\d{2})-(\d{2})-(\d{2})\.log$")


@dataclass(frozen=True)
class RecordFile:
    """One input file: its path, SHA-256 and validated records with their lines."""

    path: str
    sha256: str
    records: tuple[tuple[int, Record], ...]

    def input_file(self) -> InputFile:
        return InputFile(path=self.path, sha256=self.sha256, records=len(self.records))


@dataclass(frozen=True)
class RecordSet:
    """Every record of the input files, in file and line order."""

    files: tuple[RecordFile, ...]

    @property
    def records(self) -> list[Record]:
        return [r for f in self.files for _, r in f.records]

    def located(self) -> list[tuple[str, int, Record]]:
        """``(file, line, record)`` for error messages and worst-case reports."""
        return [(f.path, line, r) for f in self.files for line, r in f.records]

    def of_kind(self, *kinds: str) -> list[Record]:
        return [r for r in self.records if r.kind in kinds]

    @property
    def fitted_at(self) -> str | None:
        """The newest ``measured_at`` (ISO 8601 strings of one format sort by time)."""
        stamps = [r.measured_at for r in self.records if r.measured_at]
        return max(stamps) if stamps else None


def read_record_file(path: str | Path) -> RecordFile:
    """Read and validate one JSONL record file (errors name the file and line)."""
    source = str(path)
    data = read_bytes(path, source=source)
    text = decode_utf8(data, source=source)
    records = []
    for number, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            value = parse_json(line, source=source, line=number)
            record = parse_record(value, source=source, line=number)
            check_record(record, source, number)
            records.append((number, record))
    if not records:
        raise ScenarioError("no records", source=source)
    return RecordFile(path=source, sha256=hashlib.sha256(data).hexdigest(),
                      records=tuple(records))


def load_records(paths: Sequence[str | Path]) -> RecordSet:
    """Read every record file (see :func:`read_record_file`)."""
    if not paths:
        raise InputError("give at least one record file (.jsonl)")
    return RecordSet(tuple(read_record_file(p) for p in paths))


def machine_of(env: Environment) -> Machine:
    return Machine(host=env.host, cpu_model=env.cpu_model, gpu_model=env.gpu_model)


def _norm(text: str) -> str:
    return "".join(ch for ch in text.lower() if ch.isalnum())


def device_matches(profile_gpu_model: str, machine: Machine) -> bool:
    """Whether a profile's device names the records' device: the GPU model for GPU
    records (``V100-SXM2-16GB`` in ``Tesla V100-SXM2-16GB``), for CPU records a
    CPU profile (its device named after the CPU, or a generic ``…cpu…`` one)."""
    device = _norm(profile_gpu_model)
    if machine.gpu_model.lower() != "none":
        gpu = _norm(machine.gpu_model)
        return bool(device) and (device in gpu or gpu in device)
    return device == _norm(machine.cpu_model) or "cpu" in device


def check_machine(records: RecordSet, profile_gpu_model: str, fitted: Machine | None, *,
                  force: bool = False) -> Machine:
    """The one machine of ``records``; refuses (unless ``force``) records of several
    machines, of another machine than the one the profile was fitted on
    (``fitted``), or of a device the profile does not describe."""
    located = records.located()
    first_path, first_line, first = located[0]
    machine = machine_of(first.env)
    if force:
        return machine
    for path, line, rec in located[1:]:
        other = machine_of(rec.env)
        if other != machine:
            raise ScenarioError(f"record from another machine ({rec.env.machine}) than "
                                f"{first_path}:{first_line} ({first.env.machine}); "
                                "calibrate one machine at a time, or --force",
                                source=path, line=line, field="env")
    if fitted is not None and fitted != machine:
        raise ScenarioError(f"records from {first.env.machine}, but the profile was fitted "
                            f"on {fitted.host} | {fitted.cpu_model} | {fitted.gpu_model} "
                            "(--force to fit anyway)", source=first_path, line=first_line,
                            field="env")
    if fitted is None and not device_matches(profile_gpu_model, machine):
        raise ScenarioError(f"records from {first.env.machine}, but the profile describes "
                            f"device {profile_gpu_model!r} (--force to fit anyway)",
                            source=first_path, line=first_line, field="env")
    return machine


# --------------------------------------------------------------------------- ParaDL CSV

def _log_time(source: str) -> str | None:
    """The run time in a ParaDL log name (``…/2020-01-21-20-20-54.log``), as written."""
    m = _LOG_TIME.search(source)
    if not m:
        return None
    y, mo, d, h, mi, s = m.groups()
    return f"{y}-{mo}-{d}T{h}:{mi}:{s}Z"


#: The CSV column behind each record field (errors name the column the user wrote).
PARADL_FIELDS = {"metrics.step_s": "s_per_iter_median", "metrics.step_mean_s": "s_per_iter_mean",
                 "config.processes": "gpus", "config.batch_size": "samples_per_gpu",
                 "config.global_batch": "global_batch", "config.group_size": "gpus_per_group",
                 "config.input_shape": "input_sample_shape", "config.model": "model",
                 "config.strategy": "strategy", "metrics.steps": "n", "measured_at": "source",
                 "env.world_size": "gpus", "source": "source"}


def _column(field: str | None) -> str | None:
    return PARADL_FIELDS.get(field or "", field)


class ParadlRow(BaseModel):
    """One row of the ParaDL/ABCI calibration CSV, every cell a bounded type (the
    ranges of :mod:`testbed.measurements`): errors name the line and the column."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    model: Line = Field(min_length=1)
    strategy: Line = Field(min_length=1)
    gpus: Processes
    gpus_per_group: Processes
    samples_per_gpu: Samples
    global_batch: Samples
    input_sample_shape: InputShape
    s_per_iter_median: PositiveFloat
    s_per_iter_mean: PositiveFloat | None = None
    n: StepsOrZero | None = None
    source: Line | None = None
    basis: Line | None = None
    run_status: Line | None = None


def paradl_record(row: ParadlRow, source: str, line: int) -> TrainSummary:
    """One ABCI run (a validated row of the ParaDL CSV) as a ``train_summary`` record."""
    fields: dict[str, Any] = {
        "env": {**ABCI_ENV, "world_size": row.gpus},
        "measured_at": _log_time(row.source or ""),
        "source": row.source or f"{source}:{line}",
        "note": "; ".join(v for v in (row.basis, row.run_status) if v),
        "config": {
            "framework": "chainer", "model": row.model.strip(),
            "input_shape": row.input_sample_shape.strip(), "precision": "fp32",
            "batch_size": row.samples_per_gpu, "processes": row.gpus,
            "strategy": row.strategy.strip(), "group_size": row.gpus_per_group,
            "global_batch": row.global_batch, "backend": "nccl", "device": "gpu"},
        "metrics": {"steps": max(row.n or 1, 1), "step_s": row.s_per_iter_median},
    }
    if row.s_per_iter_mean is not None:
        fields["metrics"]["step_mean_s"] = row.s_per_iter_mean
    try:
        record = make_record("train_summary", **fields)
    except InputError as exc:
        raise ScenarioError(exc.message, source=source, line=line,
                            field=_column(exc.field)) from None
    assert isinstance(record, TrainSummary)     # what kind train_summary validates to
    return record


def import_paradl(path: str | Path) -> list[TrainSummary]:
    """Every row of a ParaDL/ABCI calibration CSV as a record (errors: file, line, column)."""
    source = str(path)
    rows = read_csv_models(path, ParadlRow, source=source, required=PARADL_COLUMNS)
    if not rows:
        raise ScenarioError("no measurements", source=source)
    out = []
    for line, row in rows:
        record = paradl_record(row, source, line)
        try:
            check_record(record, source, line)
        except ScenarioError as exc:
            raise ScenarioError(exc.message, source=source, line=line,
                                field=_column(exc.field)) from None
        out.append(record)
    return out
