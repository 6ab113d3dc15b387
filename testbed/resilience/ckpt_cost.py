"""Checkpoint cost model: state bytes over the storage bandwidth the writers get.

Every node writes its shard of the training state at once. Together they get at most
``nodes × node_bw`` (each node's link or local disk) and at most the parallel file
system's aggregate bandwidth: once the writers could push more than the file system
takes, they contend for it and each gets ``pfs_bw / nodes``. Opening files costs
``metadata_s`` per writer, serialised on the metadata service. Node-local (or
in-memory) levels scale with the node count and see no contention.
"""

from __future__ import annotations

import math


def pfs_transfer_s(state_bytes: float, nodes: int, pfs_bw_Bps: float,
                   node_bw_Bps: float | None = None, metadata_s: float = 0.0) -> float:
    """Seconds for ``nodes`` writers (or readers) to move ``state_bytes`` through the PFS."""
    if state_bytes < 0 or nodes < 1 or not pfs_bw_Bps > 0:
        raise ValueError("need state_bytes >= 0, nodes >= 1, pfs_bw_Bps > 0")
    aggregate = pfs_bw_Bps
    if node_bw_Bps is not None and math.isfinite(node_bw_Bps):
        aggregate = min(aggregate, nodes * node_bw_Bps)
    return state_bytes / aggregate + metadata_s * nodes


def per_writer_bandwidth_Bps(nodes: int, pfs_bw_Bps: float, node_bw_Bps: float) -> float:
    """Bandwidth each writer actually gets: its own link, or its share of the PFS."""
    return min(node_bw_Bps, pfs_bw_Bps / nodes)


def node_local_transfer_s(state_bytes: float, nodes: int, local_bw_Bps: float) -> float:
    """Seconds to write the state to node-local storage, each node writing its shard."""
    if state_bytes < 0 or nodes < 1 or not local_bw_Bps > 0:
        raise ValueError("need state_bytes >= 0, nodes >= 1, local_bw_Bps > 0")
    return state_bytes / (nodes * local_bw_Bps)
