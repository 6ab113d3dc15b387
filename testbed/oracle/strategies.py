"""Per-strategy work, communication and what each GPU keeps, as a dispatch table.

:data:`STRATEGY_COST` maps each strategy name to one function that turns the request's
:class:`~testbed.oracle.context.Context` into :class:`Parts`: local compute, pipeline
bubble, gradient all-reduce and model-parallel communication, and the sizes the memory
model needs. Configurations that cannot run raise :class:`testbed.errors.Infeasible`
with the reason.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from testbed.errors import Infeasible
from testbed.oracle.context import Context
from testbed.oracle.modelparallel import (
    Activations,
    activations,
    check_split,
    filter_comm,
    gather_before_unsplit,
    halo_comm,
    split_mask,
)
from testbed.oracle.traffic import NO_COMM, Comm, collective

#: Pipeline micro-batches per stage when the request gives none: m = min(B, 4p), enough
#: to keep the 1F1B/GPipe bubble (p − 1)/(m + p − 1) under 20 % (Huang et al., GPipe,
#: NeurIPS 2019, §2.3: the bubble is negligible for m ≥ 4p).
MICRO_BATCHES_PER_STAGE = 4


@dataclass(frozen=True)
class Parts:
    """One strategy's share of an iteration on one GPU (seconds, elements, bytes)."""

    compute_s: float
    local_params: float
    activation_samples: float       # samples whose activations one GPU stores
    activation: Activations         # what one such sample keeps for backward
    samples_per_node: float         # samples one node reads per iteration
    workspace_samples: float        # samples in flight in one backward (transient buffers)
    compute_fixed_s: float = 0.0    # the part of compute_s that does not scale with samples
    bubble_s: float = 0.0
    grad: Comm = NO_COMM            # gradient all-reduce (overlappable with backward)
    other: Comm = NO_COMM           # model-parallel traffic (on the critical path)
    extra_bytes: float = 0.0        # communication / stash buffers
    grad_ranks: int = 0             # ranks (and their stride) of ``grad``, which gradient
    grad_stride: int = 1            # buckets can split (0: ``grad`` is not bucketable)
    work_fraction: float = 1.0      # share of each sample's work one GPU does (a spatial
                                    # slice, a filter or channel split)

    @property
    def collectives(self) -> tuple:
        return self.other.records + self.grad.records


def _compute(ctx: Context, samples: float, work_fraction: float = 1.0,
             param_fraction: float = 1.0) -> dict:
    """``compute_s`` (forward, backward, optimizer) and the part of it that does not
    grow with the samples (fill, launch floor, optimizer), as :class:`Parts` fields."""
    rate = ctx.compute
    total = rate.time_s(samples, work_fraction) + rate.update_s(param_fraction)
    variable = rate.variable_s(samples, work_fraction)
    return dict(compute_s=total, compute_fixed_s=total - variable, work_fraction=work_fraction)


def _fraction(part: float, whole: float) -> float:
    return part / whole if whole > 0 else 1.0


def local_batch(ctx: Context, samples: int, ranks: int) -> float:
    """Samples per data-parallel rank: ⌈B/ranks⌉, or B/ranks under fractional rules."""
    return samples / ranks if ctx.rules.fractional_batch else math.ceil(samples / ranks)


def gradient_value_bytes(ctx: Context) -> int:
    """Bytes per gradient value all-reduced: the training precision's, or fp32 where the
    stack keeps fp32 parameters (PyTorch AMP)."""
    if ctx.rules.name == "testbed" and ctx.stack.fp32_gradients:
        return max(ctx.delta, 4)
    return ctx.delta


def gradient_bytes(ctx: Context) -> float:
    elems = (ctx.stats.parameters if ctx.rules.gradient_elements == "parameters"
             else ctx.stats.w_elems.sum())
    return elems * gradient_value_bytes(ctx)


def _weights_allreduce(ctx: Context, nbytes: float, n: int, stride: int = 1) -> Comm:
    return collective("allreduce_gradients", ctx.fabric.allreduce(nbytes, n, stride))


def _serial(ctx: Context) -> Parts:
    if ctx.p != 1:
        raise Infeasible(f"serial runs on 1 GPU, not {ctx.p}")
    B = ctx.B
    return Parts(**_compute(ctx, B),
                 local_params=ctx.stats.parameters,
                 activation_samples=B, activation=activations(ctx),
                 samples_per_node=B, workspace_samples=B)


def _data(ctx: Context) -> Parts:
    p, B = ctx.p, ctx.B
    if p > B:
        raise Infeasible(f"data parallelism needs at least one sample per GPU: "
                         f"{p} GPUs > global batch {B}")
    b = local_batch(ctx, B, p)
    grad_bytes = gradient_bytes(ctx)
    return Parts(**_compute(ctx, b),
                 local_params=ctx.stats.parameters,
                 activation_samples=b, activation=activations(ctx),
                 samples_per_node=b * min(ctx.gpus_per_node, p), workspace_samples=b,
                 grad=_weights_allreduce(ctx, grad_bytes, p),
                 extra_bytes=grad_bytes,  # packed gradient buffer
                 grad_ranks=p)


def _split(ctx: Context, strategy: str, parts: int,
           nonempty: bool = False) -> tuple[np.ndarray, float]:
    """The split layers and their share of the compute, after the structural checks
    (``nonempty``: some layer must be splittable)."""
    split = split_mask(ctx, strategy)
    if nonempty and not split.any() and parts > 1:
        raise Infeasible(f"no layer of {ctx.req.model.name} can be split {parts} ways "
                         f"by {strategy}")
    check_split(ctx, strategy, split, parts)
    return split, float(ctx.share[split].sum())


def _filter_or_channel(ctx: Context) -> Parts:
    strategy, p, B, st = ctx.req.strategy, ctx.p, ctx.B, ctx.stats
    split, frac = _split(ctx, strategy, p, nonempty=True)
    split_params = float(st.params[split].sum())
    local = split_params / p + (st.parameters - split_params)
    return Parts(**_compute(ctx, B, frac / p + (1 - frac), _fraction(local, st.parameters)),
                 local_params=local,
                 activation_samples=B, activation=activations(ctx),
                 samples_per_node=B, workspace_samples=B,
                 other=filter_comm(ctx, split, B, p, channel=strategy == "channel"),
                 extra_bytes=B * float(st.y_elems.max()) * ctx.delta)


def _spatial(ctx: Context) -> Parts:
    p, B = ctx.p, ctx.B
    split, frac = _split(ctx, "spatial", p, nonempty=True)
    grad_bytes = gradient_bytes(ctx)
    return Parts(**_compute(ctx, B, frac / p + (1 - frac)),
                 local_params=ctx.stats.parameters, activation_samples=B,
                 activation=activations(ctx, split, p), samples_per_node=B,
                 workspace_samples=B,
                 other=halo_comm(ctx, split, B, p) + gather_before_unsplit(ctx, split, B, p),
                 grad=_weights_allreduce(ctx, grad_bytes, p), extra_bytes=grad_bytes,
                 grad_ranks=p)


def _groups(ctx: Context) -> tuple[int, int, float]:
    """(group size, groups, samples per group) of a hybrid strategy."""
    p, B, strategy = ctx.p, ctx.B, ctx.req.strategy
    g = ctx.req.group_size or ctx.gpus_per_node
    if g > p or p % g:
        raise Infeasible(f"{strategy} needs the GPU count ({p}) to be a multiple of the "
                         f"group size ({g})")
    groups = p // g
    if groups > B:
        raise Infeasible(f"{strategy}: {groups} groups > global batch {B}")
    return g, groups, local_batch(ctx, B, groups)


def _data_filter(ctx: Context) -> Parts:
    """Filter parallelism inside groups of g GPUs, data parallelism across groups: the
    split weights' gradients all-reduce among the groups' peers (stride g), the rest
    among all p GPUs."""
    st = ctx.stats
    g, groups, b = _groups(ctx)
    split, frac = _split(ctx, "filter", g)
    split_params = float(st.params[split].sum())
    shard, rest = split_params / g, st.parameters - split_params
    fab = ctx.fabric
    vb = gradient_value_bytes(ctx)
    grad = (collective("allreduce_gradients", fab.allreduce(shard * vb, groups, g))
            + collective("allreduce_gradients_replicated", fab.allreduce(rest * vb, ctx.p)))
    return Parts(**_compute(ctx, b, frac / g + (1 - frac), _fraction(shard + rest, st.parameters)),
                 local_params=shard + rest, activation_samples=b,
                 activation=activations(ctx),
                 samples_per_node=b * max(1, ctx.gpus_per_node // g), workspace_samples=b,
                 grad=grad, other=filter_comm(ctx, split, b, g),
                 extra_bytes=b * float(st.y_elems.max()) * ctx.delta)


def _data_spatial(ctx: Context) -> Parts:
    """Spatial parallelism inside groups of g GPUs, data parallelism across groups."""
    g, groups, b = _groups(ctx)
    split, frac = _split(ctx, "spatial", g)
    grad_bytes = gradient_bytes(ctx)
    return Parts(**_compute(ctx, b, frac / g + (1 - frac)),
                 local_params=ctx.stats.parameters, activation_samples=b,
                 activation=activations(ctx, split, g),
                 samples_per_node=b * max(1, ctx.gpus_per_node // g), workspace_samples=b,
                 other=halo_comm(ctx, split, b, g) + gather_before_unsplit(ctx, split, b, g),
                 grad=_weights_allreduce(ctx, grad_bytes, ctx.p), extra_bytes=grad_bytes,
                 grad_ranks=ctx.p)


def _stage_cuts(share: np.ndarray, stages: int) -> list[int]:
    """Contiguous partition of the layers into ``stages`` balanced by cumulative share
    (greedy on quantiles), as layer indices [0, c1, …, n]."""
    n_layers = len(share)
    cum = np.cumsum(share)
    cuts = [0]
    for k in range(1, stages):
        idx = int(np.searchsorted(cum, k / stages))
        idx = max(idx + 1, cuts[-1] + 1)
        idx = min(idx, n_layers - (stages - k))
        cuts.append(idx)
    cuts.append(n_layers)
    return cuts


def _pipeline(ctx: Context) -> Parts:
    """GPipe / 1F1B over ``p`` stages of consecutive layers balanced by compute.

    Time = (m + p − 1) micro-batch slots of the slowest stage; the (p − 1) extra slots
    are the bubble. 1F1B keeps at most p micro-batches of activations (the first stage),
    GPipe all m.
    """
    req, st = ctx.req, ctx.stats
    p, B = ctx.p, ctx.B
    n_layers = len(ctx.share)
    if p > n_layers:
        raise Infeasible(f"pipeline of {p} stages > {n_layers} layers")
    m = req.micro_batches or min(B, MICRO_BATCHES_PER_STAGE * p)
    if m > B:
        raise Infeasible(f"{m} micro-batches > global batch {B}")
    b_micro = B / m
    cuts = _stage_cuts(ctx.share, p)
    bounds = list(zip(cuts[:-1], cuts[1:], strict=True))
    stage_share = [float(ctx.share[a:b].sum()) for a, b in bounds]
    worst = int(np.argmax(stage_share))
    a, b = bounds[worst]
    t_stage = ctx.compute.time_s(b_micro, stage_share[worst], (b - a) / n_layers)
    boundary = max((st.y_elems[c - 1] for c in cuts[1:-1]), default=0.0)
    other = NO_COMM
    if p > 1:
        other = collective("p2p_activations", ctx.fabric.p2p(b_micro * boundary * ctx.delta),
                           2 * (m + p - 2))
    stashed = m if req.schedule == "gpipe" else min(m, p)
    local = max(float(st.params[a:b].sum()) for a, b in bounds)
    update = ctx.compute.update_s(_fraction(local, st.parameters))
    variable = m * ctx.compute.variable_s(b_micro, stage_share[worst])
    return Parts(compute_s=m * t_stage + update,
                 compute_fixed_s=m * t_stage + update - variable,
                 bubble_s=(p - 1) * t_stage, local_params=local,
                 activation_samples=stashed * b_micro,
                 activation=activations(ctx, layers=slice(cuts[0], cuts[1])),
                 samples_per_node=B / max(1, p // ctx.gpus_per_node) if p > 1 else B,
                 workspace_samples=b_micro, other=other)


#: One cost function per strategy name (see :data:`testbed.oracle.names.STRATEGIES`).
STRATEGY_COST: dict[str, Callable[[Context], Parts]] = {
    "serial": _serial, "data": _data, "filter": _filter_or_channel,
    "channel": _filter_or_channel, "spatial": _spatial, "df": _data_filter,
    "ds": _data_spatial, "pipeline": _pipeline,
}


def state_layout(ctx: Context) -> tuple[int, int]:
    """(distinct model-parallel shards of the training state, replicas of each): data,
    spatial and ds replicate the whole state on every GPU; filter, channel and pipeline
    split it over the GPUs; df splits it inside groups and replicates it across them."""
    strategy, p = ctx.req.strategy, ctx.p
    if strategy in ("filter", "channel", "pipeline"):
        return p, 1
    if strategy == "df":
        g = ctx.req.group_size or ctx.gpus_per_node
        return g, max(1, p // g)
    return 1, p


def assemble(ctx: Context) -> Parts:
    """The :class:`Parts` of the request's strategy (raises :class:`Infeasible`)."""
    return STRATEGY_COST[ctx.req.strategy](ctx)
