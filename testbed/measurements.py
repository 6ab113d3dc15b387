"""Measurement records: the one versioned format of everything the testbed measures.

Every record is one JSON object per line (JSONL, canonical encoding: sorted keys, so
equal records give equal bytes) with

* ``schema_version`` (:data:`SCHEMA_VERSION`; another version is refused, never guessed),
* ``kind`` (:data:`RECORD_KINDS`) and the kind's fields (below),
* ``env``: the :class:`Environment` it was measured in (host, OS, Python, CPU and GPU
  model, framework and version, world size, other package versions), so calibration
  can tell machines and software stacks apart,
* ``measured_at``: when (ISO 8601, UTC, e.g. ``2020-01-21T20:20:54Z``; null when the
  source does not say), and ``source``: where it came from (a run log, a command),
* ``method``: how it was measured (:class:`Method`: warm-up, rounds, samples per round,
  statistic, clock, threads, CPU affinity, the machine's load) — the one method every
  harness shares (``real_runs.method``), so two figures of the same configuration
  measured by different commands agree.

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
naming the file, the line and the key. Every field is a bounded type: the physical
range of each kind of measured quantity (:data:`MIN_DURATION_S` … :data:`MAX_DURATION_S`
for a time, :data:`MAX_PROCESSES`, :data:`MAX_BYTES`, :data:`MAX_SAMPLES`,
:data:`MAX_STEPS`) is defined here, once, and refused as an *implausible measurement*
by the schema itself (:mod:`testbed.calibration.plausible` and the real-run options use
the same ranges); names are one line of text, ``measured_at`` a real date, shapes
positive dimensions of bounded size, model options within the harness's limits.
A supervised run's timeline is validated event by event (:class:`TimelineEvent`). Writing goes through :mod:`testbed.io.write`.
This module is pure: capturing the running process's environment lives in
``real_runs.env``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal, cast

from pydantic import (
    BeforeValidator,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationError,
    model_validator,
)

from testbed import events as ev
from testbed.errors import ScenarioError
from testbed.io.canonical import dumps
from testbed.io.read import read_jsonl, read_text
from testbed.io.schema import (
    Line,
    Strict,
    Timestamp,
    error_from,
    number_value,
    shape_in,
    whole_value,
)
from testbed.io.write import write_text
from testbed.model.zoo.harness import MAX_DEPTH as MAX_MODEL_DEPTH
from testbed.model.zoo.harness import MAX_WIDTH as MAX_MODEL_WIDTH

#: The record format this testbed reads and writes.
SCHEMA_VERSION = 1
#: The kinds of record (see the module docstring).
RECORD_KINDS = ("train_step", "train_summary", "layer_times", "collective", "checkpoint",
                "restart", "supervised_run")
#: Collective operations the micro-benchmarks time.
COLLECTIVE_OPS = ("allreduce", "allgather", "broadcast", "reduce_scatter")

# --------------------------------------------------------------- physical ranges
# What no real measurement can give (the bounds are generous: they reject only values
# no real measurement could give). The record schema refuses them; so do the real-run
# options that would produce them (``testbed real-run train --steps``).

#: Shortest plausible measured duration: 100 ns, the resolution of the monotonic
#: clocks the harnesses read (``time.perf_counter`` on Linux: ~100 ns per call); the
#: fastest real measurement, a shared-memory all-reduce of 8 bytes, takes ~2 µs.
MIN_DURATION_S = 1e-7
#: Longest plausible measured duration: 10⁷ s (116 days), twice the 54-day Llama 3
#: 405B pre-training run (Dubey et al., "The Llama 3 Herd of Models", 2024).
MAX_DURATION_S = 1e7
#: Most processes (GPUs, ranks, nodes) of one measured run: 10⁶, ten times the largest
#: GPU clusters built (about 100,000 H100 GPUs, 2024).
MAX_PROCESSES = 10**6
#: Largest plausible byte count (a checkpoint, a message): 10¹⁵ B, a petabyte — 200
#: times the ~5 TB training state of a 405B-parameter model with Adam.
MAX_BYTES = 10**15
#: Largest plausible batch (samples per step, per process or global): 10⁸.
MAX_SAMPLES = 10**8
#: Largest plausible step count of one run: 10⁹.
MAX_STEPS = 10**9
#: Largest dimension of a per-sample input shape: 2²⁰ (a 1-megapixel side, or a
#: million-token sequence).
MAX_SHAPE_DIM = 2**20
#: Most checkpoint segments the simulator may walk to replay one supervised run
#: (``steps / checkpoint_every`` per incarnation): its engines walk the run's two-level
#: plan segment by segment after each failure, about 1.5 µs a segment here, so 2·10⁶
#: is a few seconds (``testbed simulate --replay-run``, ``testbed verify``).
MAX_REPLAY_SEGMENTS = 2_000_000


def implausible_time(value: float) -> str | None:
    """Why a measured time is implausible (None when it is fine; 0 is "none")."""
    if value > 0 and not MIN_DURATION_S <= value <= MAX_DURATION_S:
        return (f"implausible measurement: {value:g} s is outside the physical range of a "
                f"measured time [{MIN_DURATION_S:g} s, {MAX_DURATION_S:g} s]")
    return None


def _time(value: Any, positive: bool) -> float:
    seconds = number_value(value, 0.0, math.inf, "s", lo_open=positive)
    why = implausible_time(seconds)
    if why:
        raise ValueError(why)
    return seconds


def _count(value: Any, lo: int, limit: int, what: str) -> int:
    n = whole_value(value, lo, None)
    if n > limit:
        shown = f"{n:,}" if n < 10**30 else f"{n:.3g}"
        raise ValueError(f"implausible measurement: {shown} {what} is more than any measured "
                         f"run ({limit:g})")
    return n


def _counted(lo: int, limit: int, what: str) -> BeforeValidator:
    return BeforeValidator(lambda v: _count(v, lo, limit, what))


#: A measured time > 0 in seconds, within the physical range.
PositiveFloat = Annotated[float, BeforeValidator(lambda v: _time(v, True))]
#: A measured time >= 0 in seconds (0: none), within the physical range.
NonNegFloat = Annotated[float, BeforeValidator(lambda v: _time(v, False))]
#: Counts of processes, samples, steps and bytes, within their physical ranges.
Processes = Annotated[int, _counted(1, MAX_PROCESSES, "processes")]
Samples = Annotated[int, _counted(1, MAX_SAMPLES, "samples")]
Steps = Annotated[int, _counted(1, MAX_STEPS, "steps")]
StepsOrZero = Annotated[int, _counted(0, MAX_STEPS, "steps")]
Bytes = Annotated[int, _counted(0, MAX_BYTES, "bytes")]
PositiveBytes = Annotated[int, _counted(1, MAX_BYTES, "bytes")]
#: Repetitions of a micro-benchmark and files of a checkpoint (at most one per step).
PositiveInt = Annotated[int, _counted(1, MAX_STEPS, "repetitions")]
NonNegInt = Annotated[int, _counted(0, MAX_STEPS, "events")]
#: A count of tasks competing for the cores (a load average, a mean of running counts).
RunnableTasks = Annotated[float, BeforeValidator(
    lambda v: number_value(v, 0.0, float(MAX_PROCESSES), "runnable tasks"))] | None
#: How much longer CPU-bound work took than alone on a core (real_runs.loadprobe: a
#: worker's on-CPU plus run-queue time over its on-CPU time; 1 on an idle machine).
CpuStretch = Annotated[float, BeforeValidator(
    lambda v: number_value(v, 1.0, float(MAX_PROCESSES), "CPU stretch"))] | None
#: The supervisor's core probe: the CPU time of a fixed slice of work (real_runs.
#: loadprobe, ~2 ms on an idle core of the reference machine), at most a minute.
MAX_CORE_PROBE_MS = 60_000.0
CoreProbeMs = Annotated[float, BeforeValidator(
    lambda v: number_value(v, 0.0, MAX_CORE_PROBE_MS, "ms", lo_open=True))] | None
#: A per-sample input shape ``CxHxW`` (positive dimensions of at most MAX_SHAPE_DIM).
InputShape = Annotated[str, shape_in(MAX_SHAPE_DIM)]
#: The harness model options a record may carry, with the harness's own limits.
MODEL_OPTION_LIMITS = {"width": MAX_MODEL_WIDTH, "depth": MAX_MODEL_DEPTH}


def _model_options(value: Any) -> dict[str, int]:
    if not isinstance(value, dict):
        raise ValueError("must be a mapping such as {width: 64, depth: 2}")
    out = {}
    for key, v in value.items():
        if key not in MODEL_OPTION_LIMITS:
            raise ValueError(f"[{key}] unknown model option {key!r}; known: "
                             f"{', '.join(MODEL_OPTION_LIMITS)}")
        try:
            out[key] = whole_value(v, 1, MODEL_OPTION_LIMITS[key])
        except ValueError as exc:
            raise ValueError(f"[{key}] {exc}") from None
    return out


ModelOptions = Annotated[dict[str, int], BeforeValidator(_model_options)]


#: How a figure's samples are summarised: ``median of round medians`` (step times: the
#: median step of each round, then the median over rounds), ``median`` (one series of
#: repetitions), ``single`` (one event, e.g. one restart).
STATISTICS = ("median of round medians", "median", "single")
#: The clock a figure was read from: ``wall`` (``time.monotonic``: what a run takes, the
#: time other users of the machine take included) or ``cpu`` (the process's CPU time).
CLOCKS = ("wall", "cpu")
#: Most warm-up steps, rounds and repetitions a method may record.
MAX_METHOD_COUNT = 10**6


class Method(Strict):
    """How a measurement was taken — the one measurement method every harness shares
    (``real_runs.method``): warm-up steps or repetitions left out, rounds (whole sweeps
    over every configuration, so a burst of load spoils one round, not every sample),
    samples per round, the statistic and the clock, and where the process ran (its
    CPU affinity and library threads, and the machine's load when it started)."""

    warmup: Annotated[int, _counted(0, MAX_METHOD_COUNT, "warm-up steps")] = 0
    rounds: Annotated[int, _counted(1, MAX_METHOD_COUNT, "rounds")] = 1
    samples_per_round: Annotated[int, _counted(1, MAX_METHOD_COUNT, "samples")] = 1
    statistic: Literal["median of round medians", "median", "single"] = "median"
    clock: Literal["wall", "cpu"] = "wall"
    threads: Processes = 1
    affinity: Line = Field(default="", description='CPUs the process may run on, e.g. "0-1"')
    load_1m: RunnableTasks = None


class Environment(Strict):
    """Where a measurement was taken: enough to tell two machines apart.

    ``versions`` holds library and tool versions (``torch``, ``openmpi``, ``nccl``…);
    ``settings`` the communication settings in force (every ``NCCL_*``, ``UCX_*``,
    ``OMPI_MCA_*``… variable, by name), which change collective performance as much as
    a version does."""

    host: Line = Field(min_length=1)
    os: Line
    python: Line
    cpu_model: Line
    cpu_count: Processes
    gpu_model: Line = Field(description='"none" on CPU-only machines')
    framework: Line = Field(description='"torch", "tensorflow", "chainer", "mpi4py" or "none"')
    framework_version: Line
    world_size: Processes = 1
    versions: dict[Line, Line] = Field(default_factory=dict)
    settings: dict[Line, Line] = Field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        data = self.model_dump(mode="json")
        data["versions"] = dict(sorted(self.versions.items()))
        data["settings"] = dict(sorted(self.settings.items()))
        if not data["settings"]:
            del data["settings"]
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

    framework: Line
    model: Line = Field(min_length=1)
    model_options: ModelOptions = Field(default_factory=dict)
    input_shape: InputShape
    precision: Line = "fp32"
    batch_size: Samples
    processes: Processes = 1
    strategy: Line = "data"
    group_size: Processes | None = None
    global_batch: Samples | None = None
    backend: Line = Field(default="none", description="collective backend: none, gloo, nccl, mpi")
    device: Line = "cpu"
    gradient_sync: Literal["after_backward", "buckets"] | None = Field(
        default=None, description="data parallel: one all-reduce of all gradients after "
                                  "backward, or DDP buckets overlapped with backward")

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
    source: Line = ""
    note: Line = ""
    run_id: Line = Field(default="", description="links the records of one run")
    method: Method | None = Field(default=None, description="how it was measured")


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
    step: Steps
    metrics: StepMetrics


class SummaryMetrics(Strict):
    steps: Steps = Field(description="steps (or repetitions) behind the figures")
    step_s: PositiveFloat = Field(description="median steady-state step time")
    step_mean_s: PositiveFloat | None = None
    step_min_s: PositiveFloat | None = None
    step_cpu_s: PositiveFloat | None = Field(
        default=None, description="median process CPU time per step (CPU devices): the "
                                  "compute, without the time other users of the machine take")
    step_round_lo_s: PositiveFloat | None = Field(
        default=None, description="fastest round's median step (with step_round_hi_s: the "
                                  "spread over rounds)")
    step_round_hi_s: PositiveFloat | None = None
    step_jitter_s: NonNegFloat | None = Field(
        default=None, description="robust standard deviation of one step (1.4826 × MAD)")
    first_step_s: PositiveFloat | None = None
    forward_s: NonNegFloat | None = None
    backward_s: NonNegFloat | None = None
    update_s: NonNegFloat | None = None
    allreduce_s: NonNegFloat | None = None
    peak_memory_bytes: Bytes | None = None
    parameters: Bytes | None = None
    final_loss: float | None = None


class TrainSummary(_Record):
    kind: Literal["train_summary"]
    config: TrainConfig
    metrics: SummaryMetrics


class LayerMetrics(Strict):
    steps: Steps
    layer_s: dict[Line, NonNegFloat] = Field(description="forward seconds per layer and step")


class LayerTimes(_Record):
    kind: Literal["layer_times"]
    config: TrainConfig
    metrics: LayerMetrics


class CollectiveMetrics(Strict):
    message_bytes: PositiveBytes = Field(description="bytes per rank")
    time_s: PositiveFloat = Field(description="median over repetitions of the slowest rank")
    min_time_s: PositiveFloat | None = None
    repeats: PositiveInt = 1


class Collective(_Record):
    kind: Literal["collective"]
    op: Literal["allreduce", "allgather", "broadcast", "reduce_scatter"]
    backend: Line = Field(min_length=1, description="gloo, mpi, nccl")
    processes: Annotated[int, BeforeValidator(lambda v: _count(v, 2, MAX_PROCESSES,
                                                               "processes"))]
    nodes: Processes = 1
    dtype: Line = "fp32"
    metrics: CollectiveMetrics


class CheckpointMetrics(Strict):
    ckpt_bytes: Bytes = Field(description="bytes on disk")
    files: PositiveInt = 1
    state_bytes: Bytes = Field(description="the format-free payload (oracle state_bytes)")
    save_s: PositiveFloat = Field(description="median over repetitions")
    load_s: PositiveFloat | None = None
    save_min_s: PositiveFloat | None = Field(default=None, description="fastest repetition")
    load_min_s: PositiveFloat | None = None
    repeats: PositiveInt = 1


class Checkpoint(_Record):
    kind: Literal["checkpoint"]
    framework: Line
    format: Line = Field(min_length=1)
    model: Line
    model_options: ModelOptions = Field(default_factory=dict)
    parameters: Bytes
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
    ckpt_bytes: Bytes = 0
    resume_s: NonNegFloat | None = Field(
        default=None, description="kill to training resumed (the checkpoint loaded): "
                                  "restart_s without the first step")
    fallbacks: NonNegInt = Field(default=0, description="damaged checkpoints skipped")
    runnable_tasks: RunnableTasks = Field(
        default=None, description="mean runnable tasks besides the supervisor while the "
                                  "restart was under way (real_runs.loadprobe)")
    cpu_stretch: CpuStretch = Field(
        default=None, description="the new worker's (on-CPU + waiting) / on-CPU time from "
                                  "its spawn to its first step (real_runs.loadprobe)")
    on_cpu_s: NonNegFloat | None = Field(
        default=None, description="the new worker's time on a core from its spawn to its "
                                  "first step (the part of the restart the load stretches)")
    core_probe_ms: CoreProbeMs = Field(
        default=None, description="mean CPU time of the supervisor's core probe while the "
                                  "restart was under way (how slow a core was; "
                                  "real_runs.loadprobe)")


class Restart(_Record):
    kind: Literal["restart"]
    framework: Line
    model: Line
    incarnation: Steps
    metrics: RestartMetrics


class Kill(Strict):
    """One injected fault as it was planned (see ``real_runs.faults.KillSpec``)."""

    at_step: Steps | None = None
    at_s: PositiveFloat | None = None
    during_checkpoint: bool = False
    damage: Literal["truncate", "bitflip"] | None = None

    @model_validator(mode="after")
    def _one_trigger(self) -> Kill:
        triggers = (self.at_step is not None, self.at_s is not None, self.during_checkpoint)
        if sum(triggers) != 1:
            given = [k for k, on in zip(KILL_TRIGGERS, triggers, strict=True) if on]
            raise ValueError(f"[{given[1] if len(given) > 1 else 'at_step'}] a kill needs "
                             "exactly one trigger: at_step, at_s or during_checkpoint: true "
                             f"({'none' if not given else ' and '.join(given)} given)")
        return self


#: The ways a kill is triggered (exactly one per kill).
KILL_TRIGGERS = ("at_step", "at_s", "during_checkpoint")
Kills = Annotated[int, _counted(0, MAX_PROCESSES, "kills")]


class RunMetrics(Strict):
    wall_time_s: PositiveFloat
    kills: Kills
    restarts: Kills
    lost_steps: StepsOrZero
    checkpoints_committed: StepsOrZero
    checkpoint_aborts: StepsOrZero = 0
    kills_during_restart: Kills = Field(default=0, description="kills that landed while the "
                                                               "job was restarting")
    fallbacks: StepsOrZero = Field(default=0, description="damaged checkpoints a restart "
                                                          "skipped for an older one")
    restart_runnable_tasks: RunnableTasks = Field(
        default=None, description="mean runnable tasks besides the supervisor during the "
                                  "run's restarts (real_runs.loadprobe)")
    train_runnable_tasks: RunnableTasks = Field(
        default=None, description="mean runnable tasks besides the supervisor while the "
                                  "run trained, between its restarts (real_runs.loadprobe)")
    start_s: NonNegFloat | None = Field(
        default=None, description="the run's start to the first worker's first step done "
                                  "(interpreter start, framework import, model build)")
    end_s: NonNegFloat | None = Field(
        default=None, description="the last worker's last step done to the run's end (its "
                                  "result, the environment it records, its exit)")
    start_on_cpu_s: NonNegFloat | None = Field(
        default=None, description="the first worker's time on a core from its spawn to its "
                                  "first step")
    start_cpu_stretch: CpuStretch = Field(
        default=None, description="the first worker's CPU stretch from its spawn to its "
                                  "first step (real_runs.loadprobe)")
    restart_cpu_stretch: CpuStretch = Field(
        default=None, description="mean CPU stretch of the run's restarts")
    train_cpu_stretch: CpuStretch = Field(
        default=None, description="the workers' CPU stretch while training, first step to "
                                  "kill or result, over the incarnations")
    start_core_probe_ms: CoreProbeMs = Field(
        default=None, description="mean CPU time of the supervisor's core probe during the "
                                  "first start (real_runs.loadprobe)")
    restart_core_probe_ms: CoreProbeMs = Field(
        default=None, description="mean core probe of the run's restarts")
    train_core_probe_ms: CoreProbeMs = Field(
        default=None, description="mean core probe while the run trained")


class TimelineEvent(Strict):
    """One event of a supervised run's timeline (the :mod:`testbed.events` vocabulary):
    the time and kind always, the fields a replay reads bounded where present, and the
    fields of each kind that a replay needs required (``job_start``: steps,
    checkpoint_every and the configuration; ``failure``: exactly one kill trigger).
    Other fields (a cause, a reason, a restart's parts) are kept as they are."""

    model_config = ConfigDict(extra="allow", frozen=True, allow_inf_nan=False)

    t_s: NonNegFloat
    event: Annotated[str, BeforeValidator(lambda v: _event_kind(v))]
    steps: Steps | None = None
    checkpoint_every: Steps | None = None
    keep: Steps | None = None
    config: TrainConfig | None = None
    incarnation: StepsOrZero | None = None
    step: StepsOrZero | None = None
    start_step: StepsOrZero | None = None
    end_step: StepsOrZero | None = None
    lost_steps: StepsOrZero | None = None
    duration_s: NonNegFloat | None = None
    bytes: Bytes | None = None
    at_step: Steps | None = None
    at_s: PositiveFloat | None = None
    during_checkpoint: bool | None = None

    @model_validator(mode="after")
    def _kind_fields(self) -> TimelineEvent:
        if self.event == ev.JOB_START:
            for key in ("steps", "checkpoint_every", "config"):
                if getattr(self, key) is None:
                    raise ValueError(f"[{key}] job_start needs {key!r} (a timeline written "
                                     "by `testbed real-run train`)")
        if self.event == ev.FAILURE:
            triggers = (self.at_step is not None, self.at_s is not None,
                        bool(self.during_checkpoint))
            if sum(triggers) != 1:
                raise ValueError("[at_step] a failure (kill) needs exactly one trigger: "
                                 "at_step, at_s or during_checkpoint: true")
        return self

    @property
    def kill(self) -> Kill:
        """The kill a ``failure`` event records (its one trigger)."""
        return Kill(at_step=self.at_step, at_s=self.at_s,
                    during_checkpoint=bool(self.during_checkpoint))


def _event_kind(value: Any) -> str:
    if not isinstance(value, str) or value not in ev.EVENT_KINDS:
        shown = repr(value)[:40]
        raise ValueError(f"unknown event {shown}; a timeline holds events of "
                         "testbed.events (job_start, failure, job_end, …)")
    return value


class SupervisedRun(_Record):
    kind: Literal["supervised_run"]
    config: TrainConfig
    steps: Steps
    checkpoint_every: Steps
    start_step: StepsOrZero = Field(
        default=0, description="the step the run's first process resumed from (a checkpoint "
                               "of an earlier job, e.g. before a Slurm requeue); 0: from scratch")
    keep: Steps = Field(default=3, description="committed checkpoints kept (a damaged one "
                                               "falls back to the one before)")
    kills: list[Kill] = Field(default_factory=list)
    metrics: RunMetrics
    timeline: list[TimelineEvent] = Field(default_factory=list,
                                          description="events (testbed.events vocabulary)")

    @model_validator(mode="after")
    def _replayable(self) -> SupervisedRun:
        if self.start_step >= self.steps:
            raise ValueError(f"[start_step] a run resumed at step {self.start_step:,} of "
                             f"{self.steps:,} has nothing left to train")
        segments = -(-self.steps // self.checkpoint_every)
        if segments * (len(self.kills) + 1) > MAX_REPLAY_SEGMENTS:
            raise ValueError(f"[checkpoint_every] {self.steps:,} steps with a checkpoint every "
                             f"{self.checkpoint_every:,} and {len(self.kills)} kill(s) are "
                             f"more than {MAX_REPLAY_SEGMENTS:,} segments to replay")
        return self


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
        raise ScenarioError(f"unknown schema version {repr(version)[:40]} (this testbed reads "
                            f"version {SCHEMA_VERSION})", source=source, line=line,
                            field="schema_version")
    kind = data.get("kind")
    if not isinstance(kind, str) or kind not in _BY_KIND:
        raise ScenarioError(f"unknown record kind {repr(kind)[:40]}; known: "
                            f"{', '.join(RECORD_KINDS)}", source=source, line=line, field="kind")
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
