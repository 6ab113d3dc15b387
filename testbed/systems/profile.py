"""System profiles: the *on what* of a prediction (GPU, node, network tiers, storage).

Profiles are YAML files shipped in ``testbed/data/systems/`` (or any path) with units in every key name
(``bandwidth_GBps`` = 10⁹ bytes/s, ``latency_us``, ``memory_GiB``, ``peak_TFLOPS``).
A profile may also hold a ``calibration`` section — measured compute times and fitted
efficiencies — written by ``testbed calibrate``; the oracle prefers measured values
over FLOP-based estimates when present. A profile calibrated from measurement records
also carries ``calibration.records_fit`` (:class:`testbed.systems.calibrated.RecordsFit`:
per-framework step-time lines and laws, α–β per backend and tier, checkpoint storage
per format, restart costs), which the oracle, the checkpoint cost and the restart
default read.

The classes here are data: which curve, stack or measurement applies to a prediction
is the oracle's rule (:mod:`testbed.oracle.device`).

Network tiers are listed innermost first; a collective among ``p`` GPUs placed on
consecutive GPUs (whole nodes first) runs on the smallest tier whose ``span_gpus``
covers it.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, model_validator

from testbed.errors import ScenarioError, UnknownNameError
from testbed.io.packaged import named_file, names
from testbed.io.read import load_yaml
from testbed.io.schema import Strict as _Strict
from testbed.io.schema import validate
from testbed.systems.calibrated import RecordsFit, collective_backend
from testbed.systems.software import SoftwareSpec
from testbed.systems.sources import Source
from testbed.units import did_you_mean

#: Physical bounds of a profile's numbers (beyond them a value is a typo): a device with
#: more than 64 TiB of memory or more than 100 PFLOPS of dense peak does not exist, no
#: link moves more than 100 TB/s, no latency that matters exceeds a second, no machine
#: has ten million GPUs.
MAX_DEVICE_MEMORY_GIB = 65536.0
MAX_PEAK_TFLOPS = 1e5
MAX_GBPS = 1e5
MAX_LATENCY_US = 1e6
MAX_GPUS = 10_000_000
MAX_MS = 1e6
MAX_CORES = 100_000
#: Largest streaming multiprocessor count a GPU profile may give.
MAX_SMS = 10_000

Fraction = Annotated[float, Field(gt=0, le=1)]

class CurvePoint(_Strict):
    """Achieved compute rate of one precision on one model family, as a curve over the
    per-GPU batch: ``efficiency`` of the peak at large batch, reached half-way at
    ``half_batch`` samples per GPU (kernels too small to fill the GPU below it)."""

    efficiency: float = Field(gt=0, le=1, description="achieved / peak at large per-GPU batch")
    half_batch: float = Field(default=0.0, ge=0,
                              description="per-GPU samples at which half of it is reached")


class GpuSpec(_Strict):
    """One accelerator: peak throughput by precision, achieved compute as data, memory.

    The per-layer compute model (:mod:`testbed.oracle.kernels`) reads ``sm_count``,
    ``gemm_efficiency`` and the achieved memory bandwidth; a profile without them falls
    back to FLOPs at ``compute_curves``/``compute_efficiency``."""

    model: str
    memory_GiB: float = Field(gt=0, le=MAX_DEVICE_MEMORY_GIB)
    memory_bytes_override: int | None = Field(default=None, gt=0,
                                              description="exact usable bytes (ParaDL: 16e9)")
    peak_TFLOPS: dict[str, Annotated[float, Field(gt=0, le=MAX_PEAK_TFLOPS)]]
    compute_efficiency: dict[str, Annotated[float, Field(gt=0, le=1)]] = Field(
        default_factory=lambda: {"default": 0.4},
        description="achieved / peak FLOP rate for FLOP-based compute estimates")
    reserved_GiB: float = Field(default=0.0, ge=0,
                                description="memory taken by the runtime (CUDA context, allocator)")
    training_precision: str = Field(default="fp32",
                                    description="the precision people train in on this GPU")
    compute_curves: dict[str, dict[str, CurvePoint]] = Field(
        default_factory=dict,
        description="model family (or 'default') -> precision -> efficiency curve")
    launch_us_per_layer: float = Field(
        default=0.0, ge=0, le=MAX_LATENCY_US,
        description="profiles without a software section: CPU time to launch one layer's "
                    "kernels for one training step (µs), a floor under the step")
    memory_bandwidth_GBps: float | None = Field(
        default=None, gt=0, le=MAX_GBPS,
        description="HBM bandwidth: memory-bound kernels and the optimizer stream through it")
    memory_efficiency: float = Field(
        default=0.9, gt=0, le=1,
        description="achieved / nominal HBM bandwidth of streaming kernels (STREAM-like)")
    sm_count: int | None = Field(
        default=None, gt=0, le=MAX_SMS,
        description="streaming multiprocessors: GEMM tiles run in waves over them")
    gemm_efficiency: dict[str, Fraction] = Field(
        default_factory=dict,
        description="precision -> achieved / peak of large GEMM-like kernels (convolutions "
                    "as implicit GEMM, fully connected layers)")
    host_link_GBps: float | None = Field(
        default=None, gt=0, le=MAX_GBPS,
        description="device-to-host copy bandwidth (PCIe/C2C), 10^9 B/s")
    compute_capability: float | None = Field(
        default=None, ge=1.0, le=20.0,
        description="CUDA compute capability (7.0 V100, 8.0 A100, 9.0 H100): the "
                    "collective library's per-generation constants")

    @property
    def memory_bytes(self) -> int:
        return self.memory_bytes_override or int(self.memory_GiB * 2**30)

    def peak_flops(self, precision: str) -> float:
        """The datasheet's dense peak of ``precision`` in FLOP/s (tf32 reads fp32's
        figure where the datasheet lists none); efficiencies and curves are applied by
        the oracle (:mod:`testbed.oracle.device`)."""
        if precision in self.peak_TFLOPS:
            return self.peak_TFLOPS[precision] * 1e12
        if precision == "tf32" and "fp32" in self.peak_TFLOPS:
            return self.peak_TFLOPS["fp32"] * 1e12
        raise UnknownNameError(f"GPU {self.model} has no peak for precision {precision!r}; "
                               f"known: {', '.join(sorted(self.peak_TFLOPS))}",
                               field="precision")

    @property
    def per_layer(self) -> bool:
        """Whether the profile has what the per-layer compute model needs."""
        return bool(self.sm_count and self.memory_bandwidth_GBps and self.gemm_efficiency)

    @property
    def achieved_memory_Bps(self) -> float:  # noqa: N802 - unit suffix
        """Bytes per second a streaming kernel reaches (nominal × memory_efficiency)."""
        return (self.memory_bandwidth_GBps or 0.0) * 1e9 * self.memory_efficiency


class NodeSpec(_Strict):
    gpus_per_node: int = Field(gt=0, le=1024)
    cpu_cores: int = Field(default=1, gt=0, le=MAX_CORES,
                           description="physical CPU cores the node's data loaders share")
    memory_GiB: float = Field(default=0, ge=0, le=MAX_DEVICE_MEMORY_GIB * 1024)
    cpu_vendor: Literal["intel", "amd", "other"] = Field(
        default="intel", description="the CPU's vendor: NCCL's network post overhead")


class Tier(_Strict):
    """One level of the network: who it connects and how fast."""

    name: str
    span_gpus: int = Field(gt=0, le=MAX_GPUS,
                           description="largest number of consecutive GPUs this tier spans")
    latency_us: float = Field(ge=0, le=MAX_LATENCY_US, description="per message / per ring step")
    bandwidth_GBps: float = Field(gt=0, le=MAX_GBPS,
                                  description="per GPU link, one direction, 10^9 B/s")
    efficiency: float = Field(default=1.0, gt=0, le=1.5,
                              description="achieved / nominal bandwidth (calibrated)")
    oversubscription: float = Field(default=1.0, ge=1.0, le=1000.0,
                                    description="uplink taper: 3 means 1:3 towards this tier")

    @property
    def alpha_s(self) -> float:
        return self.latency_us * 1e-6

    @property
    def bandwidth_Bps(self) -> float:
        return self.bandwidth_GBps * 1e9 * self.efficiency


class HaloChannel(_Strict):
    """Path used for halo exchanges of spatial parallelism, when not the GPU network."""

    latency_us: float = Field(ge=0, le=MAX_LATENCY_US)
    bandwidth_GBps: float = Field(gt=0, le=MAX_GBPS)


#: Collective algorithms and the library version that introduced each (NCCL release
#: notes: double binary trees in 2.4, NVLink SHARP "NVLS" in 2.17).
ALGORITHM_SINCE = {"ring": (2, 0), "tree": (2, 4), "nvls": (2, 17)}
_LIBRARY = re.compile(r"^(nccl|rccl)-(\d+)\.(\d+)$|^(mpi|gloo)$")


class NetworkSpec(_Strict):
    """Network tiers innermost first, the NICs that leave a node, and the collective
    library that decides which algorithms run."""

    tiers: tuple[Tier, ...] = Field(min_length=1)
    halo: HaloChannel | None = None
    allreduce_algorithms: tuple[Literal["ring", "tree", "nvls"], ...] | None = Field(
        default=None, description="restrict the library's algorithms (default: all it has)")
    library: str = Field(default="nccl-2.18",
                         description="collective library and version, e.g. nccl-2.3, mpi")
    nics_per_node: int | None = Field(
        default=None, gt=0, le=1024,
        description="NICs (rails) per node; NCCL runs a ring per NIC")
    nic_GBps: float | None = Field(
        default=None, gt=0, le=MAX_GBPS,
        description="one NIC, one direction (default: the first tier beyond the node)")
    nvls: bool = Field(default=False, description="NVSwitch in-network reduction (NVLink SHARP)")
    nvls_efficiency: float = Field(
        default=0.61, gt=0, le=1,
        description="NVLS all-reduce algorithm bandwidth / NVLink line rate")
    ll128: bool = Field(default=True,
                        description="NCCL may run LL128 (NVLink inside nodes, NICs on the "
                                    "GPUs' PCIe switches)")

    @model_validator(mode="after")
    def _ordered(self) -> NetworkSpec:
        spans = [t.span_gpus for t in self.tiers]
        if spans != sorted(spans) or len(set(spans)) != len(spans):
            raise ValueError("tiers must be listed innermost first with growing span_gpus")
        if not _LIBRARY.match(self.library):
            raise ValueError(f"library {self.library!r}: expected nccl-MAJOR.MINOR, "
                             f"rccl-MAJOR.MINOR, mpi or gloo")
        return self

    def algorithms(self) -> tuple[str, ...]:
        """All-reduce algorithms the library offers here (rings only for MPI and gloo,
        and for NCCL before 2.4), narrowed by ``allreduce_algorithms``."""
        match = _LIBRARY.match(self.library)
        offered: tuple[str, ...] = ("ring",)
        if match and match.group(1):
            version = (int(match.group(2)), int(match.group(3)))
            offered = tuple(a for a, since in ALGORITHM_SINCE.items() if version >= since
                            and (a != "nvls" or self.nvls))
        if self.allreduce_algorithms is not None:
            offered = tuple(a for a in offered if a in self.allreduce_algorithms)
        return offered or ("ring",)

    @property
    def max_gpus(self) -> int:
        return self.tiers[-1].span_gpus

    def version(self) -> tuple[int, int] | None:
        """(major, minor) of an NCCL/RCCL library, None for MPI and gloo."""
        match = _LIBRARY.match(self.library)
        if match and match.group(1):
            return int(match.group(2)), int(match.group(3))
        return None


class StorageSpec(_Strict):
    """File systems a job reads its inputs from and writes checkpoints to, with the
    per-file and per-byte costs of a checkpoint (see :mod:`testbed.resilience.ckpt_cost`)."""

    pfs_read_bandwidth_GBps: float = Field(gt=0, le=MAX_GBPS)
    pfs_write_bandwidth_GBps: float = Field(gt=0, le=MAX_GBPS)
    pfs_per_node_GBps: float = Field(gt=0, le=MAX_GBPS, description="one node's share cap towards the PFS")
    node_local_read_bandwidth_GBps: float | None = Field(default=None, gt=0, le=MAX_GBPS)
    node_local_write_bandwidth_GBps: float | None = Field(default=None, gt=0, le=MAX_GBPS)
    node_local_capacity_GiB: float | None = Field(default=None, gt=0, le=1e9)
    pfs_job_share: float = Field(
        default=1.0, gt=0, le=1,
        description="fraction of the PFS aggregate one job gets on a shared machine")
    pfs_file_create_ms: float = Field(
        default=5.0, ge=0, le=MAX_MS, description="open/create of one file (metadata service)")
    fsync_ms: float = Field(default=10.0, ge=0, le=MAX_MS,
                            description="fixed cost of one fsync after the data is written")
    serialize_GBps: float = Field(
        default=1.0, gt=0, le=MAX_GBPS,
        description="framework serialisation throughput of one writer")
    burst_buffer_write_GBps: float | None = Field(
        default=None, gt=0, le=MAX_GBPS, description="burst-buffer aggregate write bandwidth")
    burst_buffer_read_GBps: float | None = Field(default=None, gt=0, le=MAX_GBPS)

    @property
    def pfs_read_bandwidth_Bps(self) -> float:
        return self.pfs_read_bandwidth_GBps * 1e9

    @property
    def pfs_write_bandwidth_Bps(self) -> float:
        return self.pfs_write_bandwidth_GBps * 1e9

    @property
    def pfs_per_node_Bps(self) -> float:
        return self.pfs_per_node_GBps * 1e9

    @property
    def node_local_read_bandwidth_Bps(self) -> float | None:
        v = self.node_local_read_bandwidth_GBps
        return v * 1e9 if v else None

    @property
    def node_local_write_bandwidth_Bps(self) -> float | None:
        v = self.node_local_write_bandwidth_GBps
        return v * 1e9 if v else None


class StrategyCalibration(_Strict):
    """Fitted corrections for one strategy's implementation on this system."""

    compute_scale: float = Field(default=1.0, gt=0,
                                 description="measured / ideal compute of the local work")
    overhead_s: float = Field(default=0.0, description="per-iteration residual (framework)")
    points: int = Field(default=0, ge=0, description="measurements behind the fit")


class ModelCalibration(_Strict):
    """Measured compute of one model. Without ``fixed_s``, ``s_per_sample`` is the step
    time over the batch at ``batch`` (ABCI/ParaDL: one measured batch), spread over the
    profile's compute curve. With ``fixed_s`` (fitted over several batches), a step of
    ``b`` samples takes ``fixed_s + s_per_sample · b``: the fixed part — launching every
    layer, the optimizer step — is added, not a floor."""

    s_per_sample: float = Field(gt=0, description="forward+backward seconds per sample, 1 GPU")
    fixed_s: float | None = Field(default=None, ge=0,
                                  description="per-step cost independent of the batch (s)")
    framework: str | None = Field(default=None,
                                  description="framework measured (None: not recorded)")
    input_shape: str | None = None
    forward_flops: float | None = Field(default=None, gt=0,
                                        description="per-sample forward FLOPs at input_shape; "
                                                    "other input sizes scale by FLOPs")
    batch: int | None = Field(default=None, gt=0,
                              description="per-GPU batch of the measurement (for the curve)")
    precision: str = Field(default="fp32", description="precision the model was measured in")
    network_efficiency: dict[str, float] = Field(default_factory=dict,
                                                 description="tier name -> efficiency")
    strategies: dict[str, StrategyCalibration] = Field(default_factory=dict)


class Calibration(_Strict):
    """Fitted values; the system-wide entries are what the fit learned across models and
    serve models and strategies that were not measured themselves."""

    source: str = ""
    method: str = ""
    compute_efficiency: dict[str, float] = Field(
        default_factory=dict, description="precision -> achieved/peak FLOP rate (median of models)")
    compute_scale: dict[str, Annotated[float, Field(gt=0, le=1000)]] = Field(
        default_factory=dict,
        description="precision -> measured / per-layer-modelled step time (median of models)")
    network_efficiency: dict[str, float] = Field(default_factory=dict,
                                                 description="tier -> median of the models' fits")
    strategies: dict[str, StrategyCalibration] = Field(
        default_factory=dict, description="strategy -> median factors over measured models")
    models: dict[str, ModelCalibration] = Field(default_factory=dict)
    accuracy: dict[str, float] = Field(default_factory=dict)
    records_fit: RecordsFit | None = None

    def to_data(self) -> dict:
        """Plain data as a profile writes it: unset optional values left out, so a
        calibration without the newer fields keeps its bytes."""
        return self.model_dump(mode="json", exclude_none=True)


class ParaDLRules(_Strict):
    """ParaDL's conventions (compatibility mode), e.g. epoch size."""

    dataset_samples: int = 1280000
    bytes_per_value: int = 4


class SystemProfile(_Strict):
    name: str
    description: str = ""
    gpu: GpuSpec
    node: NodeSpec
    network: NetworkSpec
    storage: StorageSpec
    overlap_allreduce: bool = Field(default=False,
                                    description="framework overlaps gradient all-reduce with "
                                                "backward (profiles without a software section)")
    software: SoftwareSpec | None = Field(
        default=None, description="software stacks (launch, fusion, loader, gradient buckets)")
    sources: dict[str, Source] = Field(
        default_factory=dict, description="dotted path -> what the number rests on")
    calibration: Calibration | None = None
    paradl: ParaDLRules | None = None
    source: str = Field(default="", exclude=True)

    @property
    def max_gpus(self) -> int:
        return self.network.max_gpus

    @property
    def records_fit(self) -> RecordsFit | None:
        """The fitted section of a profile calibrated from records (else None)."""
        return self.calibration.records_fit if self.calibration is not None else None

    @property
    def device_kind(self) -> str:
        """``cpu`` when the profile's device is a CPU (its name says so), else ``gpu``:
        which compute fits of the records describe it."""
        return "cpu" if "cpu" in self.gpu.model.lower() else "gpu"

    @property
    def collective_backend(self) -> str:
        """The records' backend name of this profile's collective library."""
        return collective_backend(self.network.library)


def default_restart_s(profile: SystemProfile, framework: str | None = None) -> float | None:
    """Seconds from a failure to the first step of the restarted process, without the
    checkpoint load (the checkpoint's read cost adds that), from a calibrated profile's
    restart fit: supervisor detection and spawn, interpreter start, framework import and
    model build, first-step warm-up. ``framework`` defaults to the profile's default;
    None when the profile has no restart fit — the scenario's value (or 0) stands."""
    fit = profile.records_fit
    rf = fit.restart_for(framework) if fit is not None else None
    return None if rf is None else rf.time_s(0.0)


def list_systems() -> list[str]:
    """Names of the shipped profiles (package data, ``testbed/data/systems``)."""
    return names("systems")


#: Parsed profiles by (path, modification time, size): a rewritten file is read again.
_CACHE: dict[tuple[str, int, int], SystemProfile] = {}


def _load_path(path: str) -> SystemProfile:
    try:
        st = os.stat(path)
        key = (path, st.st_mtime_ns, st.st_size)
    except OSError:
        key = None
    if key is not None and key in _CACHE:
        return _CACHE[key]
    doc = load_yaml(path)
    if isinstance(doc.data, dict) and "source" in doc.data:
        raise ScenarioError("unknown key 'source'", source=path, field="source",
                            line=doc.lines.get("source"))
    data = {**doc.data, "source": path} if isinstance(doc.data, dict) else doc.data
    profile = validate(SystemProfile, data, source=path, lines=doc.lines,
                       what="system profile")
    if key is not None:
        if len(_CACHE) > 64:
            _CACHE.clear()
        _CACHE[key] = profile
    return profile


def profile_path(name_or_path: str | Path) -> Path:
    """The file of a profile given by name (shipped) or by path."""
    text = str(name_or_path)
    if text.endswith((".yaml", ".yml")) or "/" in text:
        return Path(text).absolute()     # not resolve(): errors name the path as given
    path = named_file("systems", text)
    if path is None:
        raise UnknownNameError(f"unknown system {text!r}{did_you_mean(text, list_systems())}; "
                               f"known: {', '.join(list_systems())}", field="system")
    return path


def load_system(name_or_path: str | Path | SystemProfile) -> SystemProfile:
    """Load a profile by name (``abci-v100``) or by path to a YAML file."""
    if isinstance(name_or_path, SystemProfile):
        return name_or_path
    path = profile_path(name_or_path)
    return _load_path(str(path))
