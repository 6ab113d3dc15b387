"""Memory per GPU and the input pipeline's exposed I/O time."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from testbed.oracle.state import optimizer_slots

if TYPE_CHECKING:
    from testbed.oracle.estimate import _Context
    from testbed.oracle.strategies import Parts


def memory_bytes(ctx: _Context, parts: Parts) -> dict[str, float]:
    req = ctx.req
    st = ctx.stats
    d = ctx.delta
    if ctx.paradl:
        # ParaDL: 2·δ·Σ (B_local·(|x|+|y|) + |w|), ReLU and BN in place
        keep = ~st.inplace
        per = (parts.activation_samples * (st.x_elems + st.y_elems) + st.w_elems) * keep
        total = 2 * d * float(per.sum())
        if req.strategy in ("filter", "channel"):
            total /= ctx.p * ctx.p  # ParaDL divides by p twice (its known error)
        return {"paradl_total": total}
    slots = optimizer_slots(req.optimizer)
    master = 4 if d < 4 else 0
    act = parts.activation_samples * parts.activation_elems * d
    # transient gradient buffers of the widest layer during backward
    widest = float((st.x_elems + st.y_elems).max())
    local_samples = parts.activation_samples if req.strategy != "pipeline" else ctx.B / (
        req.micro_batches or min(ctx.B, 4 * ctx.p))
    return {
        "weights": parts.local_params * (d + master),
        "gradients": parts.local_params * d,
        "optimizer": parts.local_params * 4 * slots,
        "activations": act,
        "workspace": local_samples * widest * d + parts.extra_bytes,
        "reserved": ctx.system.gpu.reserved_GiB * 2**30,
    }


def exposed_io_s(ctx: _Context, parts: Parts, compute_s: float) -> float:
    """Input pipeline: each node reads its samples per iteration from the parallel
    file system, sharing its aggregate bandwidth; prefetching hides it under compute."""
    if ctx.paradl:
        return 0.0
    sample_bytes = ctx.req.sample_bytes
    if sample_bytes is None:
        sample_bytes = float(math.prod(ctx.model.input_shape))  # decoded uint8
    if sample_bytes <= 0:
        return 0.0
    storage = ctx.system.storage
    nodes = max(1, math.ceil(ctx.p / ctx.system.node.gpus_per_node))
    per_node_bw = min(storage.pfs_per_node_Bps, storage.pfs_read_bandwidth_Bps / nodes)
    read_s = parts.samples_per_node * sample_bytes / per_node_bw
    return max(0.0, read_s - compute_s)

