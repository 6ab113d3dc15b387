"""Memory per GPU (one formula per rule set) and the input pipeline's exposed time."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from testbed.oracle.context import Context
from testbed.oracle.state import state_per_parameter
from testbed.oracle.strategies import Parts

#: ParaDL stores values and their gradients: 2 tensors per element.
PARADL_VALUE_AND_GRADIENT = 2
GIB = 2**30


def _memory_paradl(ctx: Context, parts: Parts) -> dict[str, float]:
    """ParaDL: 2·δ·Σ (B_local·(|x|+|y|) + |w|), ReLU and BN in place; filter and channel
    divided by p twice (its known error, reproduced)."""
    st = ctx.stats
    keep = ~st.inplace
    per = (parts.activation_samples * (st.x_elems + st.y_elems) + st.w_elems) * keep
    total = PARADL_VALUE_AND_GRADIENT * ctx.delta * float(per.sum())
    if ctx.req.strategy in ("filter", "channel"):
        total /= ctx.p * ctx.p
    return {"paradl_total": total}


def _memory_testbed(ctx: Context, parts: Parts) -> dict[str, float]:
    """The training state exactly as a checkpoint holds it (weights at the training
    precision, the fp32 master copy below fp32, optimizer moments — see
    :func:`testbed.oracle.state.state_per_parameter`), gradients, the input batch at its
    storage precision, what autograd saves for backward, transient workspace and the
    runtime's reserve."""
    st, d = ctx.stats, ctx.delta
    state = state_per_parameter(ctx.req.optimizer, ctx.precision)
    act = parts.activation_samples * (parts.activation.elems * d + parts.activation.fixed_bytes)
    # transient gradient buffers of the widest layer during backward
    widest = float((st.x_elems + st.y_elems).max())
    return {
        "weights": parts.local_params * (state.weights + state.master),
        "gradients": parts.local_params * d,
        "optimizer": parts.local_params * state.optimizer,
        "inputs": parts.workspace_samples * ctx.input_bytes_per_sample,
        "activations": act,
        "workspace": parts.workspace_samples * widest * d + parts.extra_bytes,
        "reserved": ctx.system.gpu.reserved_GiB * GIB,
    }


MEMORY_RULES: dict[str, Callable[[Context, Parts], dict[str, float]]] = {
    "testbed": _memory_testbed, "paradl": _memory_paradl}


def memory_bytes(ctx: Context, parts: Parts) -> dict[str, float]:
    """Bytes per GPU by component, under the request's rules."""
    return MEMORY_RULES[ctx.rules.memory](ctx, parts)


@dataclass(frozen=True)
class InputPipeline:
    """Seconds per iteration to bring the inputs in, before prefetching hides them."""

    read_s: float           # this node's samples from the parallel file system
    host_to_device_s: float  # one GPU's samples over its host link
    exposed_s: float        # what compute does not hide


def input_pipeline(ctx: Context, parts: Parts, compute_s: float) -> InputPipeline:
    """Each node reads its samples per iteration from the parallel file system (its
    link, or its share of the aggregate) and copies them to its GPUs; both stages are
    prefetched under compute, so only the slower stage's excess is exposed."""
    nbytes = ctx.input_bytes_per_sample
    if not ctx.rules.input_io or nbytes <= 0:
        return InputPipeline(0.0, 0.0, 0.0)
    storage, gpu = ctx.system.storage, ctx.system.gpu
    nodes = max(1, math.ceil(ctx.p / ctx.gpus_per_node))
    per_node_bw = min(storage.pfs_per_node_Bps, storage.pfs_read_bandwidth_Bps / nodes)
    read_s = parts.samples_per_node * nbytes / per_node_bw
    h2d_s = 0.0
    if gpu.host_link_GBps:
        gpus_here = min(ctx.p, ctx.gpus_per_node)
        h2d_s = parts.samples_per_node * nbytes / gpus_here / (gpu.host_link_GBps * 1e9)
    return InputPipeline(read_s, h2d_s, max(0.0, max(read_s, h2d_s) - compute_s))
