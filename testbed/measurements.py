"""Measurement records: the one versioned format of everything the testbed measures.

Every record is one JSON object per line (JSONL, canonical encoding: sorted keys, so
equal records give equal bytes) with

* ``schema_version`` (:data:`SCHEMA_VERSION`; another version is refused, never guessed),
* ``kind`` (:data:`RECORD_KINDS`) and the kind's fields (below),
* ``env``: the :class:`Environment` it was measured in (host, OS, Python, CPU and GPU
  model, framework and version, world size, other package versions), so calibration
  can tell machines and software stacks apart,
* ``measured_at``: when (ISO 8601, UTC, e.g. ``2020-01-21T20:20:54Z``; null when the
  source does not say), and ``source``: where it came from (a run log, a command).

Kinds and what they carry (units in every name):

=================  ==========================================================================
``train_step``     one training step of a configuration: ``step_s`` and its split
``train_summary``  a run of steps: the median steady ``step_s``, its split, peak memory
``layer_times``    forward seconds per layer and step (PyTorch hooks)
``collective``     a collective micro-benchmark point: op, backend, processes, message bytes
``checkpoint``     save/load seconds and bytes of one checkpoint format and model size
``restart``        one restart of a supervised run: process start, set-up, load, first step
``supervised_run`` a fault-injection run: its kills, wall time, lost steps and timeline
=================  ==========================================================================

Reading goes through :func:`testbed.io.read.read_jsonl` and every line is validated with
pydantic (:class:`testbed.io.schema.Strict`): an unknown version or kind, a missing field,
an unknown key or a non-finite number is one :class:`~testbed.errors.ScenarioError`
naming the file, the line and the key. Writing goes through :mod:`testbed.io.write`.
This module is pure: capturing the running process's environment lives in
``real_runs.env``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal, cast

from pydantic import Field, TypeAdapter, ValidationError, model_validator

from testbed.errors import ScenarioError
from testbed.io.canonical import dumps
from testbed.io.read import read_jsonl, read_text
from testbed.io.schema import Strict, error_from
from testbed.io.write import write_text

#: The record format this testbed reads and writes.
SCHEMA_VERSION = 1
#: The kinds of record (see the module docstring).
RECORD_KINDS = ("train_step", "train_summary", "layer_times", "collective", "checkpoint",
                "restart", "supervised_run")
#: Collective operations the micro-benchmarks time.
COLLECTIVE_OPS = ("allreduce", "allgather", "broadcast", "reduce_scatter")

PositiveFloat = Annotated[float, Field(gt=0)]
NonNegFloat = Annotated[float, Field(ge=0)]
PositiveInt = Annotated[int, Field(gt=0)]
NonNegInt = Annotated[int, Field(ge=0)]
Timestamp = Annotated[str, Field(pattern=r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$")]


class Environment(Strict):
    """Where a measurement was taken: enough to tell two machines apart."""

    host: str = Field(min_length=1)
    os: str
    python: str
    cpu_model: str
    cpu_count: PositiveInt
    gpu_model: str = Field(description='"none" on CPU-only machines')
    framework: str = Field(description='"torch", "tensorflow", "chainer", "mpi4py" or "none"')
    framework_version: str
    world_size: PositiveInt = 1
    versions: dict[str, str] = Field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        data = self.model_dump(mode="json")
        data["versions"] = dict(sorted(self.versions.items()))
        return data

    @property
    def machine(self) -> str:
        """What identifies the machine (not the software): host, CPU and GPU model."""
        return f"{self.host} | {self.cpu_model} | {self.gpu_model}"


class TrainConfig(Strict):
    """The configuration a training measurement ran: what, how and in what precision.

    ``batch_size`` is per process (per GPU); ``global_batch`` defaults to
    ``batch_size × processes``. ``model_options`` are the harness model's size options
    (``width``, ``depth``) and ``input_shape`` is per sample (``CxHxW``).
    """

    framework: str
    model: str = Field(min_length=1)
    model_options: dict[str, int] = Field(default_factory=dict)
    input_shape: str = Field(pattern=r"^\d+(x\d+)+$")
    precision: str = "fp32"
    batch_size: PositiveInt
    processes: PositiveInt = 1
    strategy: str = "data"
    group_size: PositiveInt | None = None
    global_batch: PositiveInt | None = None
    backend: str = Field(default="none", description="collective backend: none, gloo, nccl, mpi")
    device: str = "cpu"

    @property
    def effective_global_batch(self) -> int:
        return self.global_batch or self.batch_size * self.processes

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(int(d) for d in self.input_shape.split("x"))


class _Record(Strict):
    schema_version: int
    env: Environment
    measured_at: Timestamp | None = None
    source: str = ""
    note: str = ""
    run_id: str = Field(default="", description="links the records of one run")


class StepMetrics(Strict):
    step_s: PositiveFloat
    forward_s: NonNegFloat | None = None
    backward_s: NonNegFloat | None = None
    update_s: NonNegFloat | None = None
    allreduce_s: NonNegFloat | None = None
    loss: float | None = None


class TrainStep(_Record):
    kind: Literal["train_step"]
    config: TrainConfig
    step: PositiveInt
    metrics: StepMetrics


class SummaryMetrics(Strict):
    steps: PositiveInt = Field(description="steps (or repetitions) behind the figures")
    step_s: PositiveFloat = Field(description="median steady-state step time")
    step_mean_s: PositiveFloat | None = None
    step_min_s: PositiveFloat | None = None
    step_cpu_s: PositiveFloat | None = Field(
        default=None, description="median process CPU time per step (CPU devices): the "
                                  "compute, without the time other users of the machine take")
    first_step_s: PositiveFloat | None = None
    forward_s: NonNegFloat | None = None
    backward_s: NonNegFloat | None = None
    update_s: NonNegFloat | None = None
    allreduce_s: NonNegFloat | None = None
    peak_memory_bytes: NonNegInt | None = None
    parameters: NonNegInt | None = None
    final_loss: float | None = None


class TrainSummary(_Record):
    kind: Literal["train_summary"]
    config: TrainConfig
    metrics: SummaryMetrics


class LayerMetrics(Strict):
    steps: PositiveInt
    layer_s: dict[str, NonNegFloat] = Field(description="forward seconds per layer and step")


class LayerTimes(_Record):
    kind: Literal["layer_times"]
    config: TrainConfig
    metrics: LayerMetrics


class CollectiveMetrics(Strict):
    message_bytes: PositiveInt = Field(description="bytes per rank")
    time_s: PositiveFloat = Field(description="median over repetitions of the slowest rank")
    min_time_s: PositiveFloat | None = None
    repeats: PositiveInt = 1


class Collective(_Record):
    kind: Literal["collective"]
    op: Literal["allreduce", "allgather", "broadcast", "reduce_scatter"]
    backend: str = Field(min_length=1, description="gloo, mpi, nccl")
    processes: Annotated[int, Field(ge=2)]
    nodes: PositiveInt = 1
    dtype: str = "fp32"
    metrics: CollectiveMetrics


class CheckpointMetrics(Strict):
    ckpt_bytes: NonNegInt = Field(description="bytes on disk")
    files: PositiveInt = 1
    state_bytes: NonNegInt = Field(description="the format-free payload (oracle state_bytes)")
    save_s: PositiveFloat = Field(description="median over repetitions")
    load_s: PositiveFloat | None = None
    save_min_s: PositiveFloat | None = Field(default=None, description="fastest repetition")
    load_min_s: PositiveFloat | None = None
    repeats: PositiveInt = 1


class Checkpoint(_Record):
    kind: Literal["checkpoint"]
    framework: str
    format: str = Field(min_length=1)
    model: str
    model_options: dict[str, int] = Field(default_factory=dict)
    parameters: NonNegInt
    includes_optimizer: bool = True
    compressed: bool = False
    metrics: CheckpointMetrics


class RestartMetrics(Strict):
    restart_s: PositiveFloat = Field(description="kill to the first step of the new process")
    process_start_s: NonNegFloat = Field(description="spawn to the worker's first code")
    setup_s: NonNegFloat = Field(description="framework import and model build")
    import_s: NonNegFloat | None = Field(default=None, description="of which framework import")
    load_s: NonNegFloat = Field(description="checkpoint load (0: nothing to load)")
    first_step_s: NonNegFloat = Field(description="load done to the first step done")
    ckpt_bytes: NonNegInt = 0


class Restart(_Record):
    kind: Literal["restart"]
    framework: str
    model: str
    incarnation: PositiveInt
    metrics: RestartMetrics


class Kill(Strict):
    """One injected fault as it was planned (see ``real_runs.faults.KillSpec``)."""

    at_step: PositiveInt | None = None
    at_s: NonNegFloat | None = None
    during_checkpoint: bool = False
    damage: Literal["truncate", "bitflip"] | None = None

    @model_validator(mode="after")
    def _one_trigger(self) -> Kill:
        triggers = (self.at_step is not None, self.at_s is not None, self.during_checkpoint)
        if sum(triggers) != 1:
            raise ValueError("a kill has exactly one of at_step, at_s, during_checkpoint")
        return self


class RunMetrics(Strict):
    wall_time_s: PositiveFloat
    kills: NonNegInt
    restarts: NonNegInt
    lost_steps: NonNegInt
    checkpoints_committed: NonNegInt
    checkpoint_aborts: NonNegInt = 0


class SupervisedRun(_Record):
    kind: Literal["supervised_run"]
    config: TrainConfig
    steps: PositiveInt
    checkpoint_every: PositiveInt
    kills: list[Kill] = Field(default_factory=list)
    metrics: RunMetrics
    timeline: list[dict[str, Any]] = Field(default_factory=list,
                                           description="events (testbed.events vocabulary)")


Record = TrainStep | TrainSummary | LayerTimes | Collective | Checkpoint | Restart | SupervisedRun
_BY_KIND: dict[str, type[Strict]] = {
    "train_step": TrainStep, "train_summary": TrainSummary, "layer_times": LayerTimes,
    "collective": Collective, "checkpoint": Checkpoint, "restart": Restart,
    "supervised_run": SupervisedRun,
}
_ADAPTERS = {kind: TypeAdapter(model) for kind, model in _BY_KIND.items()}


def record_dict(record: Record) -> dict[str, Any]:
    """The plain data of a record (what one JSONL line holds)."""
    return record.model_dump(mode="json", exclude_none=True)


def encode_record(record: Record) -> str:
    """One canonical JSON line (no newline) for a record."""
    return dumps(record_dict(record))


def _non_finite(value: Any, path: str = "") -> str | None:
    """The key path of the first non-finite number inside free-form data (a JSON
    number such as ``1e999`` parses to infinity)."""
    if isinstance(value, float) and not math.isfinite(value):
        return path or "value"
    if isinstance(value, dict):
        for k, v in value.items():
            found = _non_finite(v, f"{path}.{k}" if path else str(k))
            if found:
                return found
    if isinstance(value, list):
        for i, v in enumerate(value):
            found = _non_finite(v, f"{path}[{i}]")
            if found:
                return found
    return None


def parse_record(data: Any, *, source: str, line: int | None = None) -> Record:
    """Validate one record's data (see the module docstring for what is refused)."""
    if not isinstance(data, dict):
        raise ScenarioError("a record must be a JSON object", source=source, line=line)
    version = data.get("schema_version")
    if version is None:
        raise ScenarioError("record has no schema_version", source=source, line=line,
                            field="schema_version")
    if version != SCHEMA_VERSION or isinstance(version, bool):
        raise ScenarioError(f"unknown schema version {version!r} (this testbed reads "
                            f"version {SCHEMA_VERSION})", source=source, line=line,
                            field="schema_version")
    kind = data.get("kind")
    if kind not in _BY_KIND:
        raise ScenarioError(f"unknown record kind {kind!r}; known: {', '.join(RECORD_KINDS)}",
                            source=source, line=line, field="kind")
    bad = _non_finite(data)
    if bad:
        raise ScenarioError("must be a finite number (not inf or nan)", source=source,
                            line=line, field=bad)
    try:
        # the adapter of ``kind`` returns an instance of _BY_KIND[kind], a Record member
        return cast(Record, _ADAPTERS[kind].validate_python(data))
    except ValidationError as exc:
        err = error_from(exc, _BY_KIND[kind], source=source)
        raise ScenarioError(err.message, source=source, line=line, field=err.field) from None


def read_records(path: str | Path) -> list[tuple[int, Record]]:
    """``(line, record)`` for every record of a JSONL file, each one validated."""
    source = str(path)
    return [(line, parse_record(value, source=source, line=line))
            for line, value in read_jsonl(path, source=source)]


def records_text(records: Iterable[Record]) -> str:
    """JSONL text of records (canonical lines, each ending in a newline)."""
    return "".join(encode_record(r) + "\n" for r in records)


def write_records(path: str | Path, records: Sequence[Record], *, append: bool = False,
                  field: str | None = None) -> int:
    """Write records as JSONL atomically (``append``: after the file's existing lines,
    which are kept as they are); returns how many were written."""
    before = ""
    if append and Path(path).exists():
        before = read_text(path, field=field)
        if before and not before.endswith("\n"):
            before += "\n"
    write_text(path, before + records_text(records), field=field)
    return len(records)


def make_record(kind: str, **fields: Any) -> Record:
    """Build a record of ``kind`` from plain fields (validated like a file's line)."""
    data = {"schema_version": SCHEMA_VERSION, "kind": kind, **fields}
    return parse_record(_plain(data), source=f"<{kind} record>")


def _plain(value: Any) -> Any:
    """Frozen models and tuples as plain JSON-like data."""
    if isinstance(value, Strict):
        return value.model_dump(mode="json")
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value
