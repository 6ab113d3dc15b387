"""Measurement records written by the real-run harnesses and read by calibration.

Every record carries the :class:`Environment` it was measured in (host, CPU and GPU
model, framework and its version, world size), so calibration can tell machines and
software stacks apart. Records are stored one JSON object per line (JSONL) with
canonical encoding (sorted keys), so equal records give equal bytes.

This module is pure: it holds the schema and the file format only. Capturing the
environment of the running process (which needs ``platform`` and the frameworks)
lives in ``real_runs.env``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from testbed.canonical import dumps
from testbed.errors import ScenarioError

#: The kinds of measurement the harnesses produce.
MEASUREMENT_KINDS = (
    "train_step",        # one training step: forward_s, backward_s, update_s, step_s, loss
    "train_summary",     # a whole run: mean step times, peak memory, per-layer times
    "checkpoint_format",  # save_s, load_s, ckpt_bytes, predicted_state_bytes for one format
    "allreduce",         # collective micro-benchmark: message_bytes, time_s
    "allgather",
    "supervised_run",    # fault-injection run: kills, restarts, lost_steps, wall_time_s
)


@dataclass(frozen=True)
class Environment:
    """Where a measurement was taken: enough to tell two machines apart."""

    host: str
    os: str
    python: str
    cpu_model: str
    cpu_count: int
    gpu_model: str               # "none" on CPU-only machines
    framework: str               # "torch", "tensorflow", "chainer", "mpi4py", or "none"
    framework_version: str
    world_size: int = 1
    versions: Mapping[str, str] = field(default_factory=dict)  # other relevant packages

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["versions"] = dict(sorted(self.versions.items()))
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, source: str | None = None) -> Environment:
        required = ("host", "os", "python", "cpu_model", "cpu_count", "gpu_model",
                    "framework", "framework_version")
        missing = [key for key in required if key not in data]
        if missing:
            raise ScenarioError(f"environment lacks {', '.join(missing)}", source=source,
                                field="env")
        return cls(host=str(data["host"]), os=str(data["os"]), python=str(data["python"]),
                   cpu_model=str(data["cpu_model"]), cpu_count=int(data["cpu_count"]),
                   gpu_model=str(data["gpu_model"]), framework=str(data["framework"]),
                   framework_version=str(data["framework_version"]),
                   world_size=int(data.get("world_size", 1)),
                   versions={str(k): str(v) for k, v in dict(data.get("versions", {})).items()})


@dataclass(frozen=True)
class Measurement:
    """One measured quantity set: ``metrics`` hold numbers with units in their names
    (``step_s``, ``ckpt_bytes``), ``params`` the configuration that produced them."""

    kind: str
    env: Environment
    params: Mapping[str, Any] = field(default_factory=dict)
    metrics: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.kind not in MEASUREMENT_KINDS:
            raise ValueError(f"unknown measurement kind {self.kind!r}")

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "env": self.env.to_dict(), "params": dict(self.params),
                "metrics": dict(self.metrics)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, source: str | None = None) -> Measurement:
        if "kind" not in data or data["kind"] not in MEASUREMENT_KINDS:
            raise ScenarioError(f"unknown measurement kind {data.get('kind')!r}", source=source,
                                field="kind")
        if "env" not in data:
            raise ScenarioError("record has no environment", source=source, field="env")
        return cls(kind=data["kind"], env=Environment.from_dict(data["env"], source=source),
                   params=dict(data.get("params", {})), metrics=dict(data.get("metrics", {})))


def encode_measurement(record: Measurement) -> str:
    """One canonical JSON line (no newline) for a record."""
    return dumps(record.to_dict())


def write_measurements(records: Iterable[Measurement], path: str | Path, *,
                       append: bool = True) -> int:
    """Append (or write) records as JSONL; returns how many were written."""
    count = 0
    with open(path, "a" if append else "w", encoding="utf-8") as stream:
        for record in records:
            stream.write(encode_measurement(record) + "\n")
            count += 1
    return count


def read_measurements(path: str | Path) -> list[Measurement]:
    """Read a JSONL file of records; a malformed line is a ScenarioError naming the line."""
    records = []
    with open(path, encoding="utf-8") as stream:
        for number, line in enumerate(stream, start=1):
            if not line.strip():
                continue
            try:
                data = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ScenarioError(f"not JSON: {exc.msg}", source=str(path), line=number) from None
            records.append(Measurement.from_dict(data, source=f"{path}:{number}"))
    return records
