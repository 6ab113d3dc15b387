"""The checkpoint beyond this machine: the oracle's storage physics for a cluster.

For a data-parallel job of ResNet-50 on a system profile (default ``abci-v100``) at
each GPU count, :func:`testbed.oracle.estimate` returns the checkpoint's terms
(:func:`testbed.resilience.ckpt_cost.checkpoint_cost`: device-to-host copy,
serialisation, transfer through the tier, file creates, fsync) for a single writer
(``torch.save`` on rank 0, Chainer's and TensorFlow's chief) and for a sharded save
(``dp-shard``: each replica writes 1/N, as ``torch.distributed.checkpoint``). The
profile's ``storage.serialize_GBps`` is the per-writer serialisation rate; the study
also runs the oracle with each framework's rate measured here (bytes over its fastest
save into the page cache), so the projection carries this machine's serialisation
into a cluster's storage. A prediction, not a measurement: the claims rest on what was
measured; this shows where the measured bottleneck goes at scale.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from testbed.app.study.ckpt_results import OracleRow

#: Samples per GPU of the projected data-parallel job (ResNet-50's usual 32).
BATCH_PER_GPU = 32
WRITERS = ("single", "dp-shard")
_TERMS = ("device_to_host_s", "serialize_s", "transfer_s", "metadata_s", "fsync_s")


def gpu_counts(max_gpus: int, requested: Sequence[int] | None = None) -> list[int]:
    """The GPU counts to project: ``requested`` (those the system has), else powers of
    four from 1 to the system's size."""
    if requested:
        return sorted({g for g in requested if 1 <= g <= max_gpus})
    counts, g = [], 1
    while g <= max_gpus:
        counts.append(g)
        g *= 4
    return counts


def project(system_name: str, gpus: Sequence[int] | None, interval_s: float,
            measured_GBps: dict[str, float]) -> tuple[OracleRow, ...]:  # noqa: N803
    """Rows for every GPU count × writers × serialisation source (module doc)."""
    from testbed.model.registry import get_model
    from testbed.oracle import Request, estimate
    from testbed.systems.profile import load_system

    system = load_system(system_name)
    model = get_model("resnet50")
    sources = {"profile": system.storage.serialize_GBps, **measured_GBps}
    rows = []
    for source, rate in sources.items():
        storage = system.storage.model_copy(update={"serialize_GBps": rate})
        sys_copy = system.model_copy(update={"storage": storage})
        for writers in WRITERS:
            for g in gpu_counts(system.max_gpus, gpus):
                est = estimate(Request(model=model, system=sys_copy, strategy="data", gpus=g,
                                       global_batch=BATCH_PER_GPU * g, optimizer="momentum",
                                       checkpoint_writers=writers))
                if not est.checkpoint:
                    continue
                rows.append(_row(system.name, g, writers, source, rate, est, interval_s,
                                 system.node.gpus_per_node))
    return tuple(rows)


def _row(system: str, gpus: int, writers: str, source: str, rate: float, est,
         interval_s: float, gpus_per_node: int) -> OracleRow:
    c = est.checkpoint
    bottleneck = max(_TERMS, key=lambda k: c[k])
    return OracleRow(
        system=system, model="resnet50", gpus=gpus, nodes=math.ceil(gpus / gpus_per_node),
        writers=writers, serialise_source=source, serialize_GBps=rate,
        state_bytes=int(c["state_bytes"]), writer_count=int(c["writers"]),
        write_s=c["write_s"], read_s=c["read_s"], device_to_host_s=c["device_to_host_s"],
        serialize_s=c["serialize_s"], transfer_s=c["transfer_s"], metadata_s=c["metadata_s"],
        fsync_s=c["fsync_s"], bottleneck=bottleneck,
        iteration_s=est.time_per_iteration_s, interval_s=interval_s,
        overhead_share=c["write_s"] / (interval_s + c["write_s"]))
