"""Checkpoint cost as physics: who writes, and what each writer pays.

:func:`checkpoint_cost` returns a :class:`CheckpointCost` with every term:

* **who writes** — model-parallel shards are distinct, so each is always written; a
  state that data-parallel replicas hold in full is written by ``single`` (one writer
  per shard, as ``torch.save`` on rank 0), ``dp-shard`` (each replica writes 1/dp of
  it, as torch.distributed.checkpoint and DeepSpeed do) or ``all`` (every rank its own
  copy, what a node-local tier needs);
* **device-to-host copy** of each writer's bytes over its host link (PCIe/C2C);
* **serialisation** at the framework's throughput per writer;
* **transfer** through the tier: the parallel file system gives the job only its share
  of the aggregate and each node at most its link; node-local disks write in parallel
  per node; a burst buffer has its own aggregate;
* **per-file latency** (create/open on the metadata service) and **fsync**.

The phases run one after another per writer (a blocking save), writers in parallel,
so ``write_s`` is their sum; ``read_s`` is the restart's load: open, transfer from the
tier, deserialise and copy back to the device. Every parameter lives in the profile's
``storage`` section (and ``gpu.host_link_GBps``), so calibration can replace it.

**Calibrated from records** (``fitted``, a profile's
``calibration.records_fit.storage`` entry of one framework and checkpoint format):
the save of one writer was measured whole, so its fit replaces the physics terms it
already holds — ``metadata_s`` is the fitted per-checkpoint latency (file creates,
fsyncs, manifest and rename), ``serialize_s`` the writer's bytes on disk
(``overhead + ratio × state``) over the fitted write rate (serialisation and write
together), and ``device_to_host_s`` and ``fsync_s`` are 0 (inside those two). What
one writer could not measure stays physics: writers sharing the tier slow each other
by the tier's ratio of one writer's time alone to its time among them (``transfer_s``
is that excess: the writers of one node share its disk or link, the nodes share the
PFS aggregate). Loads likewise (fitted load latency and read rate; the save's
without a load fit).
``basis`` says which applied.

The simpler :func:`pfs_transfer_s` (state over the writers' aggregate bandwidth) is kept
for scenarios that give only bandwidths.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Literal, get_args

from testbed.errors import InputError

if TYPE_CHECKING:       # annotations only: a scenario's schema names tiers and writers
    # without building the system-profile models
    from testbed.systems.calibrated import StorageFit
    from testbed.systems.profile import StorageSpec

Writers = Literal["single", "dp-shard", "all"]
CkptTier = Literal["pfs", "node-local", "burst-buffer"]
WRITERS: tuple[str, ...] = get_args(Writers)
TIERS: tuple[str, ...] = get_args(CkptTier)
#: Creating a file on a node-local file system (ext4/xfs on NVMe): tens of µs.
LOCAL_FILE_CREATE_S = 1e-4
#: Host link when the profile gives none: PCIe 3.0 x16 (15.75 GB/s line rate, about
#: 12 GB/s achieved by pinned copies).
DEFAULT_HOST_LINK_BPS = 12e9


@dataclass(frozen=True)
class CheckpointCost:
    """One checkpoint's write (blocking) and read (restart) cost, term by term."""

    state_bytes: float
    tier: str
    writers: int
    writer_nodes: int
    bytes_per_writer: float
    device_to_host_s: float
    serialize_s: float
    transfer_s: float
    metadata_s: float
    fsync_s: float
    write_s: float
    read_transfer_s: float
    read_s: float
    write_bandwidth_Bps: float     # what the writers together get from the tier
    basis: str = "physics"         # or the fitted storage entry it rests on

    def to_dict(self) -> dict:
        return asdict(self)


def _writers(shards: int, dp_replicas: int, writers: str) -> tuple[int, float]:
    """(writer count, fraction of one shard each writes)."""
    if writers == "single":
        return shards, 1.0
    if writers == "dp-shard":
        return shards * dp_replicas, 1.0 / dp_replicas
    if writers == "all":
        return shards * dp_replicas, 1.0
    raise InputError(f"checkpoint writers must be one of {', '.join(WRITERS)}, not {writers!r}",
                     field="writers")


def _tier_Bps(storage: StorageSpec, tier: str, writer_nodes: int,  # noqa: N802
              write: bool) -> float:
    """Bandwidth the writing (reading) nodes get together from a tier."""
    if tier == "pfs":
        aggregate = (storage.pfs_write_bandwidth_Bps if write else
                     storage.pfs_read_bandwidth_Bps) * storage.pfs_job_share
        return min(writer_nodes * storage.pfs_per_node_Bps, aggregate)
    if tier == "node-local":
        per_node = (storage.node_local_write_bandwidth_Bps if write else
                    storage.node_local_read_bandwidth_Bps)
        if per_node is None:
            raise InputError("this system has no node-local storage", field="tier")
        return writer_nodes * per_node
    if tier == "burst-buffer":
        gbps = storage.burst_buffer_write_GBps if write else storage.burst_buffer_read_GBps
        if gbps is None:
            raise InputError("this system has no burst buffer", field="tier")
        return min(writer_nodes * storage.pfs_per_node_Bps, gbps * 1e9)
    raise InputError(f"checkpoint tier must be one of {', '.join(TIERS)}, not {tier!r}",
                     field="tier")


def checkpoint_cost(state_bytes: float, nodes: int, dp_replicas: int, storage: StorageSpec, *,
                    model_parallel: int = 1, gpus_per_node: int = 1,
                    writers: str = "single", tier: str = "pfs",
                    host_link_Bps: float | None = None,  # noqa: N803
                    fitted: StorageFit | None = None) -> CheckpointCost:
    """Cost of checkpointing ``state_bytes`` of training state held by a job of ``nodes``
    nodes: ``model_parallel`` distinct shards, each replicated over ``dp_replicas``
    data-parallel replicas (see the module doc for ``writers``, ``tier`` and ``fitted``)."""
    if state_bytes < 0 or nodes < 1 or dp_replicas < 1 or model_parallel < 1 or gpus_per_node < 1:
        raise ValueError("need state_bytes >= 0 and nodes, dp_replicas, model_parallel, "
                         "gpus_per_node >= 1")
    count, share = _writers(model_parallel, dp_replicas, writers)
    per_writer = state_bytes / model_parallel * share
    writer_nodes = min(nodes, count)
    per_node_writers = math.ceil(count / writer_nodes)
    total = count * per_writer
    bandwidth = _tier_Bps(storage, tier, writer_nodes, write=True)
    if tier == "node-local":
        transfer = per_node_writers * per_writer / (bandwidth / writer_nodes)
    else:
        transfer = total / bandwidth
    read_bw = _tier_Bps(storage, tier, writer_nodes, write=False)
    read_transfer = total / read_bw
    if fitted is not None:
        alone = (per_writer / _tier_Bps(storage, tier, 1, write=True),
                 per_writer / _tier_Bps(storage, tier, 1, write=False))
        sharing = (transfer / alone[0] if alone[0] > 0 else 1.0,
                   read_transfer / alone[1] if alone[1] > 0 else 1.0)
        return _fitted_cost(fitted, state_bytes, tier, count, writer_nodes, per_writer,
                            sharing, bandwidth)
    link = host_link_Bps or DEFAULT_HOST_LINK_BPS
    d2h = per_writer / link
    serialize = per_writer / (storage.serialize_GBps * 1e9)
    create = storage.pfs_file_create_ms * 1e-3 if tier != "node-local" else LOCAL_FILE_CREATE_S
    fsync = storage.fsync_ms * 1e-3
    return CheckpointCost(
        state_bytes=state_bytes, tier=tier, writers=count, writer_nodes=writer_nodes,
        bytes_per_writer=per_writer, device_to_host_s=d2h, serialize_s=serialize,
        transfer_s=transfer, metadata_s=create, fsync_s=fsync,
        write_s=d2h + serialize + transfer + create + fsync,
        read_transfer_s=read_transfer, read_s=create + read_transfer + serialize + d2h,
        write_bandwidth_Bps=bandwidth)


def _fitted_cost(fit: StorageFit, state_bytes: float, tier: str, count: int,
                 writer_nodes: int, per_writer: float, sharing: tuple[float, float],
                 bandwidth: float) -> CheckpointCost:
    """The cost from a fitted storage entry (module doc, "Calibrated from records");
    ``sharing`` is the tier's slowdown of one writer among all (write, read)."""
    disk = fit.overhead_bytes + fit.bytes_per_state_byte * per_writer
    own = disk / (fit.write_GBps * 1e9)
    if fit.load_latency_s is not None and fit.read_GBps is not None:
        read_own, read_latency = disk / (fit.read_GBps * 1e9), fit.load_latency_s
    else:
        read_own, read_latency = own, fit.save_latency_s
    extra = own * max(0.0, sharing[0] - 1.0)
    read_extra = read_own * max(0.0, sharing[1] - 1.0)
    return CheckpointCost(
        state_bytes=state_bytes, tier=tier, writers=count, writer_nodes=writer_nodes,
        bytes_per_writer=per_writer, device_to_host_s=0.0, serialize_s=own,
        transfer_s=extra, metadata_s=fit.save_latency_s, fsync_s=0.0,
        write_s=fit.save_latency_s + own + extra, read_transfer_s=read_extra,
        read_s=read_latency + read_own + read_extra, write_bandwidth_Bps=bandwidth,
        basis=f"fitted {fit.framework} {fit.format}: {fit.save_latency_s * 1e3:.3g} ms + "
              f"bytes at {fit.write_GBps:.3g} GB/s")


def pfs_transfer_s(state_bytes: float, nodes: int, pfs_bw_Bps: float,
                   node_bw_Bps: float | None = None, metadata_s: float = 0.0) -> float:
    """Seconds for ``nodes`` writers (or readers) to move ``state_bytes`` through the PFS:
    together they get at most ``nodes × node_bw`` and at most the aggregate; opening
    files costs ``metadata_s`` per writer, serialised on the metadata service."""
    if state_bytes < 0 or nodes < 1 or not pfs_bw_Bps > 0:
        raise ValueError("need state_bytes >= 0, nodes >= 1, pfs_bw_Bps > 0")
    aggregate = pfs_bw_Bps
    if node_bw_Bps is not None and math.isfinite(node_bw_Bps):
        aggregate = min(aggregate, nodes * node_bw_Bps)
    return state_bytes / aggregate + metadata_s * nodes


def node_local_transfer_s(state_bytes: float, nodes: int, local_bw_Bps: float) -> float:
    """Seconds to write the state to node-local storage, each node writing its shard."""
    if state_bytes < 0 or nodes < 1 or not local_bw_Bps > 0:
        raise ValueError("need state_bytes >= 0, nodes >= 1, local_bw_Bps > 0")
    return state_bytes / (nodes * local_bw_Bps)
