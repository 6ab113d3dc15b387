"""Memory per GPU (one formula per rule set) and the input pipeline's exposed time."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from testbed.oracle.context import Context
from testbed.oracle.conventions import IMAGENET_EPOCH_SAMPLES
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

    read_s: float           # this node's samples from storage (PFS share or node-local)
    host_to_device_s: float  # one GPU's samples over its host link
    exposed_s: float        # what compute does not hide
    decode_s: float = 0.0   # one GPU's samples decoded and augmented by its CPU cores
    gpu_decode_s: float = 0.0  # decoding on the GPU itself (added to its compute)


def input_read_Bps(ctx: Context) -> tuple[str, float]:  # noqa: N802 - unit suffix
    """Where per-iteration reads come from and one node's bandwidth there: node-local
    storage when the dataset was staged there (it fits), else the node's share of the
    parallel file system — its link, or the job's share (``pfs_job_share``) of the
    aggregate split over the job's nodes, the same share staging gets."""
    storage = ctx.system.storage
    nodes = max(1, math.ceil(ctx.p / ctx.gpus_per_node))
    samples = ctx.req.epoch_samples or IMAGENET_EPOCH_SAMPLES
    dataset = samples * ctx.input_bytes_per_sample
    local = storage.node_local_read_bandwidth_Bps
    capacity = storage.node_local_capacity_GiB
    if local and capacity and dataset <= capacity * GIB:
        return "node-local", local
    share = storage.pfs_read_bandwidth_Bps * storage.pfs_job_share / nodes
    return "pfs", min(storage.pfs_per_node_Bps, share)


def _decode_s(ctx: Context, samples_per_gpu: float) -> tuple[float, float]:
    """(CPU seconds of wall time, GPU seconds) to decode and augment one GPU's samples
    of an iteration: on CPU, ``decode_core_ms`` per sample over the cores this GPU's
    loader gets (its workers, at most the node's cores shared by the GPUs in use); on
    the GPU, ``gpu_decode_us`` per sample of the GPU's own time."""
    stack = ctx.stack
    if stack.data_loader == "gpu":
        return 0.0, samples_per_gpu * stack.gpu_decode_us * 1e-6
    if stack.decode_core_ms <= 0:
        return 0.0, 0.0
    gpus_here = min(ctx.p, ctx.gpus_per_node)
    cores = ctx.system.node.cpu_cores / gpus_here
    if stack.loader_workers_per_gpu is not None:
        cores = min(cores, stack.loader_workers_per_gpu)
    return samples_per_gpu * stack.decode_core_ms * 1e-3 / cores, 0.0


def input_pipeline(ctx: Context, parts: Parts, compute_s: float) -> InputPipeline:
    """Each node reads its samples per iteration (:func:`input_read_Bps`), decodes and
    augments them (:func:`_decode_s`) and copies them to its GPUs; the CPU stages are
    prefetched under compute, so only the slowest stage's excess is exposed, while GPU
    decoding takes the GPU's own time."""
    nbytes = ctx.input_bytes_per_sample
    if not ctx.rules.input_io or nbytes <= 0:
        return InputPipeline(0.0, 0.0, 0.0)
    gpu = ctx.system.gpu
    per_node_bw = input_read_Bps(ctx)[1]
    read_s = parts.samples_per_node * nbytes / per_node_bw
    gpus_here = min(ctx.p, ctx.gpus_per_node)
    h2d_s = 0.0
    if gpu.host_link_GBps:
        h2d_s = parts.samples_per_node * nbytes / gpus_here / (gpu.host_link_GBps * 1e9)
    decode_s, gpu_decode_s = _decode_s(ctx, parts.samples_per_node / gpus_here)
    slowest = max(read_s, h2d_s, decode_s)
    return InputPipeline(read_s, h2d_s, max(0.0, slowest - compute_s - gpu_decode_s),
                         decode_s, gpu_decode_s)
