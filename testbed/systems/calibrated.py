"""The fitted section of a calibrated profile: ``calibration.records_fit``.

What ``testbed calibrate RECORDS... --base PROFILE`` learned from the records, with
its provenance — the input files and their SHA-256, the machine they were measured
on, the residuals of every fit and when the newest record was measured (the fit
time comes from the records, never from the clock, so calibrating twice from the
same records gives the same bytes).

Sections (units in every name):

* ``compute``: per framework and precision, the per-model step-time lines
  ``step_s = fixed_s + s_per_sample · batch`` and the cross-model law that predicts
  models without their own measurement (:mod:`testbed.calibration.compute`);
* ``network``: α–β per tier, backend and collective (:mod:`testbed.calibration.network`);
* ``storage``: per framework and checkpoint format, per-checkpoint latency and
  write/read bandwidth (:mod:`testbed.calibration.storage`);
* ``restart``: per framework, process start, framework import and model build,
  first-step warm-up (:mod:`testbed.calibration.restart`).

This module imports only :mod:`testbed.io.schema`, so :mod:`testbed.systems.profile` can import
it to accept the section as a typed field of ``Calibration``.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from testbed.io.schema import Strict

NonNeg = Annotated[float, Field(ge=0)]
Positive = Annotated[float, Field(gt=0)]


class InputFile(Strict):
    """One record file behind the fit."""

    path: str
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    records: int = Field(ge=0)


class Residuals(Strict):
    """How well a fit reproduces the records it was fitted on (ParaDL's accuracy:
    mean of min(pred, meas)/max(pred, meas); MAPE in percent)."""

    n: int = Field(ge=0)
    accuracy: NonNeg
    mape_pct: NonNeg
    worst_accuracy: NonNeg


class StepLine(Strict):
    """Step time of one model on one process: ``fixed_s + s_per_sample · batch``."""

    model: str
    fixed_s: NonNeg = Field(description="per-step cost independent of the batch")
    s_per_sample: NonNeg
    batches: tuple[int, ...] = Field(description="per-process batches measured")
    residuals: Residuals


class ComputeLaw(Strict):
    """Step time of any model from its layers (see :mod:`testbed.calibration.compute`):
    a fixed cost per layer of each kind and per parameter, and per-sample costs per
    multiply-accumulate of convolutions and of fully connected layers, per convolution
    patch element and per activation element (the memory-bound elementwise work; 0 in
    profiles fitted before it existed)."""

    per_layer_s: dict[str, NonNeg]
    per_parameter_s: NonNeg
    conv_mac_s: NonNeg
    fc_mac_s: NonNeg
    conv_patch_s: NonNeg
    activation_s: NonNeg = Field(default=0.0,
                                 description="per activation element a layer writes")
    residuals: Residuals


class ComputeFit(Strict):
    """Compute of one framework in one precision on this machine."""

    framework: str
    precision: str
    device: str = "cpu"
    quantity: str = Field(description="step_cpu_s (CPU devices) or step_s (wall)")
    models: dict[str, StepLine] = Field(default_factory=dict)
    law: ComputeLaw | None = None


class AlphaBeta(Strict):
    """``t = a + m·b`` of one collective, and the α–β of the algorithm behind it."""

    op: str
    backend: str
    processes: int = Field(ge=2)
    nodes: int = Field(default=1, ge=1)
    tier: str
    algorithm: str = "ring"
    latency_us: NonNeg = Field(description="α per algorithm step")
    bandwidth_GBps: Positive = Field(description="1/β, 10^9 B/s")
    message_bytes: tuple[int, int] = Field(description="smallest and largest message fitted")
    residuals: Residuals


class StorageFit(Strict):
    """Checkpoint save/load of one format: ``latency_s + bytes / bandwidth``."""

    framework: str
    format: str
    files: int = Field(ge=1, description="files a checkpoint of this format writes")
    save_latency_s: NonNeg
    write_GBps: Positive
    load_latency_s: NonNeg | None = None
    read_GBps: Positive | None = None
    overhead_bytes: NonNeg = Field(default=0.0, description="bytes on disk beyond the payload")
    bytes_per_state_byte: NonNeg = Field(default=1.0,
                                         description="bytes on disk per byte of training state")
    bytes_range: tuple[int, int]
    residuals: Residuals

    @property
    def per_file_ms(self) -> float:
        return self.save_latency_s / self.files * 1e3


class RestartFit(Strict):
    """A restart of one framework: spawn → first step of the new process."""

    framework: str
    process_start_s: NonNeg = Field(description="interpreter start to the worker's code")
    setup_s: NonNeg = Field(description="framework import and model build")
    import_s: NonNeg | None = Field(default=None, description="of which framework import")
    first_step_s: NonNeg = Field(description="first step after the load (warm-up)")
    other_s: NonNeg = Field(description="supervisor detection and spawn, unexplained rest")
    runnable_tasks: NonNeg | None = Field(
        default=None, description="median runnable tasks besides the supervisor during the "
                                  "fitted restarts (None: not read)")
    cpu_stretch: NonNeg | None = Field(
        default=None, description="median CPU stretch ((on-CPU + waiting) / on-CPU) of the "
                                  "fitted restarts' workers (None: not read)")
    on_cpu_s: NonNeg | None = Field(
        default=None, description="median time the fitted restarts' workers spent on a core "
                                  "(the part a load stretches; the rest waits on I/O, the "
                                  "supervisor)")
    core_probe_ms: NonNeg | None = Field(
        default=None, description="median core probe (ms, real_runs.loadprobe) of the "
                                  "fitted restarts: how slow a core was; on_cpu_s is "
                                  "their time on a core at this probe")
    rest_s: NonNeg | None = Field(
        default=None, description="median of what a fitted restart took besides its "
                                  "worker's time on a core and waiting for one (restart − "
                                  "load − on-CPU × stretch: the supervisor's detection, "
                                  "I/O); None: not measured")
    contention_per_stretch: float | None = Field(
        default=None, ge=0, le=2, description="relative growth of the on-core time (at "
                                              "one core probe) per unit of CPU stretch "
                                              "across the fitted restarts: what sharing "
                                              "the caches and memory with the co-runners "
                                              "costs (Theil–Sen; None: the fitted "
                                              "stretches span too little to tell)")
    start_on_cpu_s: NonNeg | None = Field(
        default=None, description="median time the first workers spent on a core")
    start_rest_s: NonNeg | None = Field(
        default=None, description="median of a first start besides its worker's on-core "
                                  "time and waiting")
    start_core_probe_ms: NonNeg | None = Field(
        default=None, description="median core probe of those first starts "
                                  "(start_on_cpu_s is at this probe)")
    start_s: NonNeg | None = Field(
        default=None, description="median first start of the fitted supervised runs: the "
                                  "run's start to its first worker's first step")
    start_cpu_stretch: NonNeg | None = Field(
        default=None, description="median CPU stretch of those first starts")
    end_s: NonNeg | None = Field(
        default=None, description="median end of the fitted supervised runs: the last "
                                  "step to the run's end (result, environment, exit)")
    end_cpu_stretch: NonNeg | None = Field(
        default=None, description="median training CPU stretch of those runs (the end's "
                                  "work is the worker's, at the training's load)")
    end_core_probe_ms: NonNeg | None = Field(
        default=None, description="median training core probe of those runs")
    runs: int = Field(default=0, ge=0, description="supervised runs behind start_s and end_s")
    points: int = Field(ge=0)
    residuals: Residuals

    def time_s(self, load_s: float = 0.0) -> float:
        """Kill to the first step of the new process, with a checkpoint load of ``load_s``."""
        return self.other_s + self.process_start_s + self.setup_s + load_s + self.first_step_s


class DataParallelFit(Strict):
    """Data-parallel ranks sharing one host's CPU cores (:mod:`testbed.calibration.
    dataparallel`): how long a rank woken inside a collective waits for a core when the
    runnable tasks exceed the cores, fitted on the fit set's data-parallel runs."""

    backend: str
    device: str = "cpu"
    cores: int = Field(ge=1, description="CPU cores the ranks shared when measured")
    wait_s: NonNeg = Field(
        description="κ: seconds a woken rank waits for a core (per expected wait)")
    processes: tuple[int, ...] = Field(description="process counts of the runs fitted")
    points: int = Field(ge=1)
    residuals: Residuals


class Machine(Strict):
    """The machine the records were measured on."""

    host: str
    cpu_model: str
    gpu_model: str


#: Frameworks in the order a profile's default is chosen among equally measured ones.
FRAMEWORK_PREFERENCE = ("torch", "tensorflow", "chainer")
#: The checkpoint format a prediction uses when neither the request nor the profile names
#: one: the harness's own atomic store (state + manifest, fsynced, renamed into place) —
#: what the supervised runs write, and the closest to a production checkpoint.
DEFAULT_CHECKPOINT_FORMAT = "harness"


def collective_backend(library: str) -> str:
    """The records' backend name of a profile's collective library: ``nccl-2.18`` →
    ``nccl``, ``rccl-…`` → ``nccl`` (RCCL implements NCCL's API and PyTorch names its
    backend ``nccl`` on ROCm too), ``gloo`` and ``mpi`` as they are."""
    name = library.split("-")[0]
    return "nccl" if name == "rccl" else name


class RecordsFit(Strict):
    """``calibration.records_fit`` of a calibrated profile (see the module doc).

    ``framework`` and ``checkpoint_format`` are the defaults of predictions that name
    none (the oracle's ``Request.framework`` and ``Request.checkpoint_format``): the
    fit writes the framework with the most single-process step measurements and the
    harness's format; edit them to make another the default. The lookups below are
    what the checkpoint cost and the restart default read (the oracle's compute and
    network lookups are in :mod:`testbed.oracle.fitted`).
    """

    method: str = "testbed.calibration.fit"
    schema_version: int = 1
    base: str = Field(description="the base profile's name")
    framework: str | None = Field(default=None,
                                  description="framework of predictions that name none")
    checkpoint_format: str | None = Field(
        default=None, description="checkpoint format of predictions that name none")
    machine: Machine | None = None
    fitted_at: str | None = Field(default=None, description="newest record's measured_at")
    inputs: tuple[InputFile, ...] = ()
    compute: tuple[ComputeFit, ...] = ()
    network: tuple[AlphaBeta, ...] = ()
    storage: tuple[StorageFit, ...] = ()
    restart: tuple[RestartFit, ...] = ()
    data_parallel: tuple[DataParallelFit, ...] = ()
    paradl: Residuals | None = Field(default=None,
                                     description="the ABCI/ParaDL fit, when records had one")

    # -- lookups -------------------------------------------------------------------
    def default_framework(self) -> str | None:
        """The framework of a prediction that names none: ``framework``, else the first
        measured one in :data:`FRAMEWORK_PREFERENCE` order, else any measured one."""
        if self.framework:
            return self.framework
        seen = [c.framework for c in self.compute] + [s.framework for s in self.storage] + [
            r.framework for r in self.restart]
        for name in FRAMEWORK_PREFERENCE:
            if name in seen:
                return name
        return min(seen, default=None)

    def storage_for(self, framework: str | None = None, fmt: str | None = None
                    ) -> StorageFit | None:
        """The storage fit of ``framework`` (default :meth:`default_framework`) and
        checkpoint format ``fmt`` (default ``checkpoint_format``, else the harness's own,
        else the framework's first fitted format); None when nothing matches."""
        framework = framework or self.default_framework()
        own = [s for s in self.storage if s.framework == framework]
        if fmt is not None:
            return next((s for s in own if s.format == fmt), None)
        for want in (self.checkpoint_format, DEFAULT_CHECKPOINT_FORMAT):
            hit = next((s for s in own if s.format == want), None)
            if hit is not None:
                return hit
        return own[0] if own else None

    def restart_for(self, framework: str | None = None) -> RestartFit | None:
        framework = framework or self.default_framework()
        return next((r for r in self.restart if r.framework == framework), None)
