"""The oracle: time per iteration (compute, communication, I/O) and memory per GPU.

One function, :func:`estimate`, takes a :class:`~testbed.oracle.request.Request` —
*what* (a model), *how* (strategy, GPUs, batch, group size, precision, optimizer) and
*on what* (a system profile) — and returns an :class:`Estimate` with a per-phase
breakdown. Configurations that cannot run (out of memory, more GPUs than samples or
filters, …) come back with ``feasible=False`` and the reason, never as a number.

Two rule sets (:mod:`testbed.oracle.conventions`), chosen by ``mode``:

* ``testbed`` (default): corrected and calibrated — real networks with projection
  shortcuts, halo exchanges with channels and the full face, memory checked for every
  strategy; compute per layer from the IR on the request's software stack
  (:mod:`~testbed.oracle.kernels`); NCCL's algorithms and protocols chosen by size as
  its tuner does (:mod:`~testbed.oracle.nccl`); gradient buckets overlapped with
  backward layer by layer (:mod:`~testbed.oracle.overlap`), or after backward where the
  stack says so (across nodes for NVIDIA's MLPerf MXNet); the wait of a synchronous
  step for its slowest GPU (phase ``sync_wait``, :mod:`~testbed.oracle.sync`); the input
  pipeline's reads (with the job's share of the file system) and CPU decoding; measured
  compute and fitted efficiencies from the profile's ``calibration`` section.
* ``paradl``: ParaDL's formulas and network constants as published (HPDC'21), including
  its memory rule and ring-only collectives, to reproduce its outputs.

The pieces: :mod:`~testbed.oracle.context` (what a request derives once),
:mod:`~testbed.oracle.strategies` (one cost function per strategy),
:mod:`~testbed.oracle.resources` (memory and I/O); this module applies calibration and
overlap and assembles the :class:`Estimate`.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import numpy as np

from testbed.errors import Infeasible
from testbed.oracle.compute import BACKWARD_PARTS, FORWARD_PARTS
from testbed.oracle.context import DEFAULT_INPUT_FORMAT, Context, build_context
from testbed.oracle.conventions import IMAGENET_EPOCH_SAMPLES
from testbed.oracle.names import FAMILY, GROUPED, MODES, SCHEDULES, STRATEGIES
from testbed.oracle.overlap import MB, Buckets, bucketed
from testbed.oracle.request import Request, validate
from testbed.oracle.resources import input_pipeline, input_read_Bps, memory_bytes
from testbed.oracle.state import state_bytes
from testbed.oracle.strategies import Parts, assemble, gradient_value_bytes, state_layout
from testbed.oracle.sync import sync_wait_s
from testbed.oracle.traffic import Comm, Traffic
from testbed.resilience.ckpt_cost import checkpoint_cost
from testbed.units import format_bytes

__all__ = ["FAMILY", "MODES", "OVERLAP_TAIL", "SCHEDULES", "STRATEGIES", "Estimate",
           "Request", "estimate", "skipped"]

#: Share of a gradient all-reduce that stays exposed when it overlaps the backward pass
#: and cannot be cut into buckets (df's two all-reduces): the last bucket (PyTorch DDP's
#: default 25 MB of ResNet-50's ~100 MB, Li et al., "PyTorch Distributed", VLDB 2020)
#: can only start after backward ends. Bucketable all-reduces are simulated bucket by
#: bucket (:mod:`testbed.oracle.overlap`).
OVERLAP_TAIL = 0.05


@dataclass(frozen=True)
class Estimate:
    """A prediction for one configuration (times in seconds, sizes in bytes).

    Besides the iteration's phases and memory: ``precision`` (the training precision
    used, the system's usual one when the request left it open), the input side
    (``input_bytes_per_sample``, ``dataset_bytes``, ``staging_s`` to copy the dataset from
    the parallel file system once, per-iteration ``input_read_s`` and
    ``host_to_device_s``), ``compute_model`` (large-batch seconds per sample, half-batch,
    launch floor, optimizer step, a measured per-step cost, the fixed part of
    ``compute_s``) and ``checkpoint``
    (every term of :class:`testbed.resilience.ckpt_cost.CheckpointCost` for this state).
    """

    model: str
    system: str
    strategy: str
    gpus: int
    global_batch: int
    group_size: int | None
    mode: str
    feasible: bool
    reason: str | None
    time_per_iteration_s: float | None = None
    compute_s: float | None = None
    communication_s: float | None = None
    communication_total_s: float | None = None
    io_s: float | None = None
    overhead_s: float | None = None
    bubble_s: float | None = None
    memory_per_gpu_bytes: int | None = None
    memory_capacity_bytes: int | None = None
    memory_breakdown_bytes: dict = field(default_factory=dict)
    phases_s: dict = field(default_factory=dict)
    collectives: tuple = ()
    bottleneck: str | None = None
    samples_per_s: float | None = None
    iterations_per_epoch: int | None = None
    epoch_s: float | None = None
    compute_epoch_s: float | None = None
    communication_epoch_s: float | None = None
    parameters: int = 0
    state_bytes: int = 0
    calibration: str = ""
    precision: str | None = None
    input_precision: str | None = None
    input_bytes_per_sample: float | None = None
    dataset_bytes: float | None = None
    staging_s: float | None = None
    input_read_s: float | None = None
    host_to_device_s: float | None = None
    input_source: str | None = None
    decode_s: float | None = None
    samples_per_gpu: float | None = None
    compute_model: dict = field(default_factory=dict)
    checkpoint: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        out = asdict(self)
        out["collectives"] = [dict(c) for c in self.collectives]
        return out

    @property
    def iteration_s(self) -> float:
        """Seconds per iteration of an estimate with a time (:class:`Infeasible` if none)."""
        if self.time_per_iteration_s is None:
            raise Infeasible(self.reason or "infeasible")
        return self.time_per_iteration_s


@dataclass(frozen=True)
class _Times:
    """Seconds of one iteration after calibration and overlap."""

    compute_s: float
    overhead_s: float
    backward_s: float
    grad_exposed_s: float
    comm_total_s: float
    comm_exposed_s: float
    io_s: float
    total_s: float
    input_read_s: float
    host_to_device_s: float
    grad: Comm
    decode_s: float
    sync_wait_s: float = 0.0


def _overlaps(ctx: Context, parts: Parts) -> bool:
    """Whether the gradient all-reduce overlaps backward: the request's choice, else the
    stack's (buckets; its ``multi_node_allreduce`` once the gradient's ranks span
    nodes), else the profile's ``overlap_allreduce``."""
    if ctx.req.overlap is not None:
        return ctx.req.overlap
    if ctx.system.software is not None:
        mode = ctx.stack.gradient_allreduce
        ranks = max(parts.grad_ranks, 1)
        span = (ranks - 1) * max(parts.grad_stride, 1) + 1
        if ctx.stack.multi_node_allreduce is not None and span > ctx.gpus_per_node:
            mode = ctx.stack.multi_node_allreduce
        return mode == "buckets"
    return ctx.system.overlap_allreduce


def _backward(ctx: Context, parts: Parts, compute_s: float, scale: float
              ) -> tuple[np.ndarray, float]:
    """(per layer: seconds after backward starts at which its gradient is ready, the
    backward pass's seconds). With the per-layer model: each layer's backward on the
    GPU (scaled by the measurement and the strategy's fitted factor) or its issue by
    the host, whichever is later — both grow with the batch, so a larger batch never
    makes gradients ready sooner. Otherwise each layer's share of a backward of twice
    the forward."""
    # the layers' times at the work this GPU does: a spatial slice or a filter split of
    # every sample runs each layer as a proportionally smaller batch would
    steps = ctx.compute.steps(max(parts.activation_samples * parts.work_fraction, 1.0))
    if steps is not None and steps.backward_gpu_s.sum() > 0:
        layer_scale = ctx.compute.layers.scale if ctx.compute.layers is not None else 1.0
        done = steps.backward_done_s(layer_scale * scale)
        return done, min(float(done[0]), compute_s)
    backward_s = compute_s * BACKWARD_PARTS / (FORWARD_PARTS + BACKWARD_PARTS)
    return np.cumsum(ctx.share[::-1])[::-1] * backward_s, backward_s


def _gradient(ctx: Context, parts: Parts, backward_s: float,
              done: np.ndarray) -> tuple[Comm, float, Buckets | None]:
    """(gradient traffic, its exposed seconds, the buckets): buckets overlapped with
    backward layer by layer (:mod:`testbed.oracle.overlap`); one all-reduce after
    backward when the stack or the request does not overlap."""
    grad = parts.grad
    if grad.time_s <= 0 or not (_overlaps(ctx, parts) and ctx.rules.overlap):
        return grad, grad.time_s, None
    if parts.grad_ranks <= 1:
        return grad, max(grad.time_s - backward_s, OVERLAP_TAIL * grad.time_s), None
    layer_bytes = ctx.stats.params * gradient_value_bytes(ctx)
    cap = (ctx.req.bucket_MB or ctx.stack.bucket_MB) * MB
    first = min(ctx.stack.first_bucket_MB * MB, cap)
    n, stride, fabric = parts.grad_ranks, parts.grad_stride, ctx.fabric
    buckets = bucketed(layer_bytes, done, backward_s,
                       lambda nbytes: fabric.allreduce(nbytes, n, stride).time_s, cap, first)
    rec = grad.records[0] if grad.records else None
    record = Traffic("allreduce_gradients", buckets.total_s,
                     rec.algorithm if rec else "ring", rec.tier if rec else "",
                     len(buckets.times_s), rec.protocol if rec else "Simple")
    return Comm(buckets.total_s, (record,)), buckets.exposed_s, buckets


def _times(ctx: Context, parts: Parts) -> _Times:
    cal = ctx.strategy_cal
    compute_s, overhead_s = parts.compute_s, 0.0
    if cal is not None:
        # a fitted implementation: its factor scales the work that grows with the
        # samples, its fitted overhead replaces the modelled fixed part
        compute_s = (parts.compute_s - parts.compute_fixed_s) * cal.compute_scale
        overhead_s = cal.overhead_s
    done, backward_s = _backward(ctx, parts, compute_s,
                                 cal.compute_scale if cal is not None else 1.0)
    grad, grad_exposed, _ = _gradient(ctx, parts, backward_s, done)
    comm_exposed = grad_exposed + parts.other.time_s
    io = input_pipeline(ctx, parts, compute_s)
    compute_s += io.gpu_decode_s
    sync = (sync_wait_s(ctx.stack.step_jitter_us * 1e-6, ctx.p)
            if ctx.rules.sync_wait and ctx.system.software is not None else 0.0)
    total = compute_s + parts.bubble_s + comm_exposed + io.exposed_s + overhead_s + sync
    return _Times(compute_s, overhead_s, backward_s, grad_exposed,
                  grad.time_s + parts.other.time_s, comm_exposed, io.exposed_s, total,
                  io.read_s, io.host_to_device_s, grad, io.decode_s, sync)


def _epoch_samples(ctx: Context) -> int:
    req = ctx.req
    return req.epoch_samples or (req.system.paradl.dataset_samples
                                 if ctx.rules.profile_section and req.system.paradl
                                 else IMAGENET_EPOCH_SAMPLES)


def _epoch(ctx: Context, t: _Times) -> dict:
    req = ctx.req
    samples = _epoch_samples(ctx)
    iters = math.ceil(samples / req.global_batch)
    # ParaDL counts data-parallel compute as (D/p)·ΣC (fractional last iteration)
    compute_iters = (samples / req.global_batch if req.strategy in ctx.rules.fractional_epoch
                     else iters)
    return dict(iterations_per_epoch=iters, epoch_s=iters * t.total_s,
                compute_epoch_s=compute_iters * t.compute_s,
                communication_epoch_s=iters * t.comm_exposed_s)


def _inputs(ctx: Context, t: _Times, parts: Parts) -> dict:
    """The input side (issue 13): bytes per sample, the dataset, staging it from the
    parallel file system to the nodes once, and the per-iteration read and copy."""
    storage = ctx.system.storage
    nodes = max(1, math.ceil(ctx.p / ctx.gpus_per_node))
    dataset = _epoch_samples(ctx) * ctx.input_bytes_per_sample
    # the same job share of the file system as every per-iteration read from it
    stage_bw = nodes * min(storage.pfs_per_node_Bps,
                           storage.pfs_read_bandwidth_Bps * storage.pfs_job_share / nodes)
    return dict(input_precision=ctx.req.input_precision or DEFAULT_INPUT_FORMAT,
                input_bytes_per_sample=ctx.input_bytes_per_sample, dataset_bytes=dataset,
                staging_s=dataset / stage_bw, input_read_s=t.input_read_s,
                input_source=input_read_Bps(ctx)[0], decode_s=t.decode_s,
                host_to_device_s=t.host_to_device_s,
                samples_per_gpu=parts.activation_samples)


def _compute_model(ctx: Context, parts: Parts) -> dict:
    """What the compute rests on: the large-batch seconds per sample, the fill, launch
    floor and optimizer step of the curve (or of the per-layer model), a measured
    per-step cost, the fixed part of ``compute_s``, the software stack and whether the
    step is bound by the host's kernel launches."""
    rate = ctx.compute
    out = dict(s_per_sample=rate.s_per_sample, half_batch=rate.half_batch,
               launch_s=rate.launch_s, optimizer_s=rate.optimizer_s,
               step_fixed_s=rate.fixed_s, fixed_s=parts.compute_fixed_s,
               software=ctx.stack.name)
    steps = rate.steps(max(parts.activation_samples * parts.work_fraction, 1.0))
    if steps is not None:
        out.update(host_s=steps.host_s, gpu_s=steps.gpu_s, kernels=steps.kernels,
                   host_bound=steps.host_bound, scale=rate.layers.scale if rate.layers else 1.0)
    return out


def _checkpoint(ctx: Context) -> dict:
    """The checkpoint of this configuration's state (who writes, where, each term): the
    storage physics of the profile, or its fitted storage of the request's framework
    and checkpoint format when it was calibrated from records."""
    mp, replicas = state_layout(ctx)
    gpu = ctx.system.gpu
    records = ctx.system.records_fit if ctx.rules.use_calibration else None
    fitted = records.storage_for(ctx.req.framework, ctx.req.checkpoint_format) if records else None
    state = state_bytes(ctx.req.model.parameters, ctx.req.optimizer, ctx.precision)
    cost = checkpoint_cost(
        state, max(1, math.ceil(ctx.p / ctx.gpus_per_node)), replicas, ctx.system.storage,
        model_parallel=mp, gpus_per_node=ctx.gpus_per_node,
        writers=ctx.req.checkpoint_writers, tier=ctx.req.checkpoint_tier,
        host_link_Bps=gpu.host_link_GBps * 1e9 if gpu.host_link_GBps else None,
        fitted=fitted)
    return cost.to_dict()


def _memory_verdict(ctx: Context, mem_total: int) -> str | None:
    capacity = ctx.system.gpu.memory_bytes
    if mem_total > capacity and ctx.req.strategy not in ctx.rules.memory_unchecked:
        return (f"needs {format_bytes(mem_total)} per GPU > {format_bytes(capacity)} "
                f"on {ctx.system.gpu.model}")
    return None


def _base(req: Request) -> dict:
    precision = req.precision or req.system.gpu.training_precision
    return dict(model=req.model.name, system=req.system.name, strategy=req.strategy,
                gpus=req.gpus, global_batch=req.global_batch,
                group_size=req.group_size if req.strategy in GROUPED else None,
                mode=req.mode, parameters=req.model.parameters, precision=precision,
                state_bytes=state_bytes(req.model.parameters, req.optimizer, precision))


def skipped(req: Request, reason: str) -> Estimate:
    """An estimate that was not computed (a sweep's degenerate point), with why."""
    validate(req)
    return Estimate(**_base(req), feasible=False, reason=reason)


def estimate(req: Request) -> Estimate:
    """Predict one configuration; infeasible ones carry ``feasible=False`` and a reason."""
    validate(req)
    base = _base(req)
    if req.gpus > req.system.max_gpus:
        return Estimate(**base, feasible=False,
                        reason=f"{req.gpus} GPUs > {req.system.max_gpus} in system {req.system.name}")
    try:
        ctx = build_context(req)
        parts = assemble(ctx)
    except Infeasible as exc:
        return Estimate(**base, feasible=False, reason=exc.reason)
    t = _times(ctx, parts)
    mem = memory_bytes(ctx, parts)
    mem_total = int(round(sum(mem.values())))
    phases = {"forward": t.compute_s - t.backward_s,
              "backward": t.backward_s, "bubble": parts.bubble_s,
              "gradient_allreduce": t.grad_exposed_s, "model_parallel_comm": parts.other.time_s,
              "io": t.io_s, "overhead": t.overhead_s, "sync_wait": t.sync_wait_s}
    bottleneck = max(("compute", t.compute_s + parts.bubble_s),
                     ("communication", t.comm_exposed_s + t.sync_wait_s), ("io", t.io_s),
                     ("overhead", t.overhead_s), key=lambda kv: kv[1])[0]
    reason = _memory_verdict(ctx, mem_total)
    return Estimate(
        **base, feasible=reason is None, reason=reason,
        time_per_iteration_s=t.total_s, compute_s=t.compute_s,
        communication_s=t.comm_exposed_s, communication_total_s=t.comm_total_s, io_s=t.io_s,
        overhead_s=t.overhead_s, bubble_s=parts.bubble_s, memory_per_gpu_bytes=mem_total,
        memory_capacity_bytes=ctx.system.gpu.memory_bytes,
        memory_breakdown_bytes={k: int(round(v)) for k, v in mem.items()},
        phases_s=phases,
        collectives=tuple(r.to_dict() for r in parts.other.records + t.grad.records),
        bottleneck=bottleneck,
        samples_per_s=req.global_batch / t.total_s if t.total_s > 0 else None,
        **_epoch(ctx, t), **_inputs(ctx, t, parts),
        calibration=ctx.rules.basis or "; ".join(ctx.sources),
        compute_model=_compute_model(ctx, parts),
        checkpoint=_checkpoint(ctx) if ctx.rules.input_io else {},
    )
