"""Per-strategy work, communication and structural limits of the oracle.

:func:`assemble` turns a request's context (see :mod:`testbed.oracle.estimate`) into
:class:`Parts`: local compute, pipeline bubble, gradient all-reduce and model-parallel
communication, and what memory the strategy keeps per GPU. Configurations that cannot
run raise :class:`Infeasible` with the reason.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from testbed.model.ir import Model

if TYPE_CHECKING:
    from testbed.oracle.estimate import _Context


class Infeasible(Exception):
    def __init__(self, reason: str) -> None:
        self.reason = reason



def _split_mask(ctx: _Context, strategy: str, parts: int) -> np.ndarray:
    """Which layers a model-parallel strategy splits ``parts`` ways."""
    st = ctx.stats
    if ctx.req.mask is not None:
        return np.array(ctx.req.mask, dtype=bool)
    if strategy in ("filter", "df"):
        return st.weighted.copy()
    if strategy == "channel":
        # the first layer's input is the image (3 channels): it runs whole, as in ParaDL
        mask = st.weighted.copy()
        mask[int(np.argmax(mask))] = False
        return mask
    if strategy in ("spatial", "ds"):
        return st.spatial.copy()
    return np.zeros(len(st.share), dtype=bool)


def _grid(parts: int, dims: int) -> tuple[int, ...]:
    """Near-balanced factorisation of ``parts`` over ``dims`` spatial dimensions."""
    if dims <= 1:
        return (parts,)
    factors = [1] * dims
    remaining = parts
    prime = 2
    primes = []
    while remaining > 1:
        while remaining % prime == 0:
            primes.append(prime)
            remaining //= prime
        prime += 1
    for f in sorted(primes, reverse=True):
        i = int(np.argmin(factors))
        factors[i] *= f
    return tuple(sorted(factors))


# -- per-strategy cost assembly ---------------------------------------------------------

def _weights_allreduce(ctx: _Context, nbytes: float, n: int, stride: int = 1) -> float:
    return ctx.record("allreduce_gradients", ctx.fabric.allreduce(nbytes, n, stride))


def _filter_comm(ctx: _Context, split: np.ndarray, samples: int, parts: int,
                 channel: bool = False) -> float:
    """Per split layer: filter = all-gather of the output (forward) + all-reduce of the
    input gradient (backward); channel = all-reduce of partial outputs + all-gather of the
    input gradient."""
    if parts <= 1:
        return 0.0
    st = ctx.stats
    fab = ctx.fabric
    y_bytes = samples * st.y_elems[split] * ctx.delta
    x_bytes = samples * st.x_elems[split] * ctx.delta
    if ctx.paradl:
        # ParaDL: all-gather + all-reduce of chunk B·|y|·δ/p each, 3(p-1) steps per layer
        link = fab.link_for(parts)
        total = 3 * (parts - 1) * (len(y_bytes) * link.alpha_s
                                   + float(y_bytes.sum()) / parts / link.bandwidth_Bps)
    elif channel:
        total = fab.allreduce_sum(y_bytes, parts) + fab.allgather_sum(x_bytes, parts)
    else:
        total = fab.allgather_sum(y_bytes, parts) + fab.allreduce_sum(x_bytes, parts)
    if total > 0:
        ctx.collectives.append({"phase": "channel_comm" if channel else "filter_comm",
                                "time_s": total, "algorithm": "per-layer",
                                "tier": fab.link_for(parts).name,
                                "count": int(split.sum())})
    return total


def _halo_comm(ctx: _Context, split: np.ndarray, samples: int, parts: int) -> float:
    """Halo exchange of every split layer with a kernel wider than 1, forward (input
    activations) and backward (their gradients), over a near-square grid of ``parts``;
    each exchange talks to two neighbours per split dimension."""
    if parts <= 1:
        return 0.0
    exchanges, bytes_per_sample = _halo_geometry(ctx.model, split.tobytes(), parts, ctx.paradl)
    if exchanges == 0:
        return 0.0
    link = ctx.fabric.halo or ctx.fabric.link_for(parts)
    # forward + backward, two neighbours each, one after another
    total = 2 * 2 * (exchanges * link.alpha_s
                     + samples * bytes_per_sample * ctx.delta / link.bandwidth_Bps)
    ctx.collectives.append({"phase": "halo_exchange", "time_s": total,
                            "algorithm": "send-recv", "tier": link.name,
                            "count": exchanges})
    return total


_GEOMETRY: dict = {}


def _halo_geometry(model: Model, split_key: bytes, parts: int, paradl: bool) -> tuple[int, float]:
    """(number of per-dimension exchanges, halo elements per sample per neighbour summed
    over them) for a spatial split — cached, it depends only on shapes."""
    key = (id(model), split_key, parts, paradl)
    hit = _GEOMETRY.get(key)
    if hit is not None and hit[0] is model:
        return hit[1]
    split = np.frombuffer(split_key, dtype=bool)
    exchanges, elems = 0, 0.0
    for i in np.flatnonzero(split):
        layer = model.layers[i]
        kernel = layer.kernel
        if not kernel or max(kernel) <= 1 or len(layer.x) < 2:
            continue
        spatial = layer.x[1:]
        grid = sorted(_grid(parts, len(spatial)), reverse=True)
        order = sorted(range(len(spatial)), key=lambda d: -spatial[d])
        factors = [1] * len(spatial)
        for dim, g in zip(order, grid, strict=False):
            factors[dim] = g
        local = [math.ceil(s / f) for s, f in zip(spatial, factors, strict=True)]
        for d, f in enumerate(factors):
            if f <= 1:
                continue
            halo = kernel[min(d, len(kernel) - 1)] // 2
            if paradl:
                # ParaDL's halo: width x halo rows only (no channels, no height)
                face = local[-1] if len(local) > 1 else 1
                elems += halo * face
            else:
                elems += layer.in_channels * halo * (math.prod(local) // local[d])
            exchanges += 1
    if len(_GEOMETRY) > 4096:
        _GEOMETRY.clear()
    _GEOMETRY[key] = (model, (exchanges, elems))
    return exchanges, elems


def _spatial_limit(ctx: _Context, split: np.ndarray, parts: int) -> str | None:
    """A spatial split needs at least one row per GPU in every split dimension."""
    key = (id(ctx.model), split.tobytes(), parts, "limit")
    hit = _GEOMETRY.get(key)
    if hit is not None and hit[0] is ctx.model:
        return hit[1]
    reason = _spatial_limit_uncached(ctx, split, parts)
    _GEOMETRY[key] = (ctx.model, reason)
    return reason


def _spatial_limit_uncached(ctx: _Context, split: np.ndarray, parts: int) -> str | None:
    for i in np.flatnonzero(split):
        layer = ctx.model.layers[i]
        spatial = layer.y[1:]
        if not spatial:
            continue
        grid = sorted(_grid(parts, len(spatial)), reverse=True)
        dims = sorted(spatial, reverse=True)
        for g, s in zip(grid, dims, strict=False):
            if g > s:
                return (f"spatial split into {parts} parts needs {g} rows but layer "
                        f"{layer.name} has {'x'.join(map(str, spatial))}")
    return None


@dataclass
class Parts:
    compute_s: float = 0.0
    forward_s: float = 0.0
    backward_s: float = 0.0
    bubble_s: float = 0.0
    grad_allreduce_s: float = 0.0
    other_comm_s: float = 0.0
    local_params: float = 0.0
    activation_samples: float = 0.0     # samples whose activations one GPU stores
    activation_elems: float = 0.0       # activation elements per such sample
    extra_bytes: float = 0.0            # comm / stash buffers
    samples_per_node: float = 0.0


def _activation_elems(ctx: _Context, split: np.ndarray | None = None, parts: int = 1,
                      layers: slice | None = None) -> float:
    """Stored activation elements per sample: every layer's output, with in-place
    ReLU/BN sharing their input's buffer, plus the network input."""
    st = ctx.stats
    y = st.y_elems.copy()
    keep = ~st.inplace if ctx.req.inplace else np.ones(len(y), dtype=bool)
    if split is not None and parts > 1:
        y = np.where(split, y / parts, y)
    if layers is not None:
        y, keep = y[layers], keep[layers]
    first = st.x_elems[layers.start if layers is not None and layers.start else 0]
    return float((y * keep).sum() + first)


def assemble(ctx: _Context) -> Parts:
    req = ctx.req
    st = ctx.stats
    p, B, t = ctx.p, ctx.B, ctx.t_sample
    strat = req.strategy
    parts = Parts()
    param_bytes = st.parameters * ctx.delta if not ctx.paradl else st.w_elems.sum() * ctx.delta
    gpn = ctx.system.node.gpus_per_node

    if strat == "serial":
        if p != 1:
            raise Infeasible(f"serial runs on 1 GPU, not {p}")
        parts.compute_s = B * t
        parts.local_params = st.parameters
        parts.activation_samples = B
        parts.activation_elems = _activation_elems(ctx)
        parts.samples_per_node = B
    elif strat == "data":
        if p > B:
            raise Infeasible(f"data parallelism needs at least one sample per GPU: "
                              f"{p} GPUs > global batch {B}")
        b = B / p if ctx.paradl else math.ceil(B / p)
        parts.compute_s = b * t
        parts.grad_allreduce_s = _weights_allreduce(ctx, param_bytes, p)
        parts.local_params = st.parameters
        parts.activation_samples = b
        parts.activation_elems = _activation_elems(ctx)
        parts.extra_bytes = param_bytes  # packed gradient buffer
        parts.samples_per_node = b * min(gpn, p)
    elif strat in ("filter", "channel", "spatial"):
        split = _split_mask(ctx, strat, p)
        if not split.any() and p > 1:
            raise Infeasible(f"no layer of {ctx.model.name} can be split {p} ways by {strat}")
        _structural(ctx, strat, split, p)
        frac = float(ctx.share[split].sum())
        parts.compute_s = B * t * (frac / p + (1 - frac))
        parts.samples_per_node = B
        if strat == "spatial":
            parts.other_comm_s = _halo_comm(ctx, split, B, p) + _gather_before_unsplit(ctx, split, B, p)
            parts.grad_allreduce_s = _weights_allreduce(ctx, param_bytes, p)
            parts.local_params = st.parameters
            parts.activation_elems = _activation_elems(ctx, split, p)
            parts.extra_bytes = param_bytes
        else:
            parts.other_comm_s = _filter_comm(ctx, split, B, p, channel=strat == "channel")
            split_params = float(st.params[split].sum())
            parts.local_params = split_params / p + (st.parameters - split_params)
            parts.activation_elems = _activation_elems(ctx)
            parts.extra_bytes = B * float(st.y_elems.max()) * ctx.delta
        parts.activation_samples = B
    elif strat in ("df", "ds"):
        g = req.group_size or gpn
        if g > p or p % g:
            raise Infeasible(f"{strat} needs the GPU count ({p}) to be a multiple of the "
                              f"group size ({g})")
        groups = p // g
        if groups > B:
            raise Infeasible(f"{strat}: {groups} groups > global batch {B}")
        b = B / groups if ctx.paradl else math.ceil(B / groups)
        inner = "filter" if strat == "df" else "spatial"
        split = _split_mask(ctx, inner, g)
        _structural(ctx, inner, split, g)
        frac = float(ctx.share[split].sum())
        parts.compute_s = b * t * (frac / g + (1 - frac))
        parts.samples_per_node = b * max(1, gpn // g)
        parts.activation_samples = b
        if strat == "df":
            parts.other_comm_s = _filter_comm(ctx, split, b, g)
            split_params = float(st.params[split].sum())
            shard = split_params / g
            rest = st.parameters - split_params
            t_ar = ctx.record("allreduce_gradients",
                              ctx.fabric.allreduce(shard * ctx.delta, groups, g))
            t_ar += ctx.record("allreduce_gradients_replicated",
                               ctx.fabric.allreduce(rest * ctx.delta, p))
            parts.grad_allreduce_s = t_ar
            parts.local_params = shard + rest
            parts.activation_elems = _activation_elems(ctx)
            parts.extra_bytes = b * float(st.y_elems.max()) * ctx.delta
        else:
            parts.other_comm_s = _halo_comm(ctx, split, b, g) + _gather_before_unsplit(ctx, split, b, g)
            parts.grad_allreduce_s = _weights_allreduce(ctx, param_bytes, p)
            parts.local_params = st.parameters
            parts.activation_elems = _activation_elems(ctx, split, g)
            parts.extra_bytes = param_bytes
    elif strat == "pipeline":
        _pipeline(ctx, parts)
    parts.forward_s = parts.compute_s / 3.0
    parts.backward_s = parts.compute_s - parts.forward_s
    return parts


def _structural(ctx: _Context, strat: str, split: np.ndarray, parts: int) -> None:
    st = ctx.stats
    if ctx.paradl or parts <= 1:
        return
    if strat == "filter":
        f_min = st.out_channels[split].min() if split.any() else 0
        if parts > f_min:
            raise Infeasible(f"filter parallelism over {parts} GPUs > {int(f_min)} filters")
    elif strat == "channel":
        c_min = st.in_channels[split].min() if split.any() else 0
        if parts > c_min:
            raise Infeasible(f"channel parallelism over {parts} GPUs > {int(c_min)} channels")
    elif strat == "spatial":
        reason = _spatial_limit(ctx, split, parts)
        if reason:
            raise Infeasible(reason)


def _gather_before_unsplit(ctx: _Context, split: np.ndarray, samples: int, parts: int) -> float:
    """After the last spatially split layer the activations are gathered (forward) so the
    fully connected head sees whole samples; its gradient is scattered back (free)."""
    if parts <= 1 or ctx.paradl or not split.any():
        return 0.0
    last = int(np.flatnonzero(split)[-1])
    if last + 1 >= len(split):
        return 0.0
    nbytes = samples * ctx.stats.y_elems[last] * ctx.delta
    return ctx.record("allgather_activations", ctx.fabric.allgather(nbytes, parts))


def _pipeline(ctx: _Context, parts: Parts) -> None:
    """GPipe / 1F1B over ``p`` stages of consecutive layers balanced by compute.

    Time = (m + p − 1) micro-batch slots of the slowest stage; the (p − 1) extra slots
    are the bubble. 1F1B keeps at most p micro-batches of activations (the first stage),
    GPipe all m.
    """
    req = ctx.req
    st = ctx.stats
    p, B, t = ctx.p, ctx.B, ctx.t_sample
    n_layers = len(ctx.share)
    if p > n_layers:
        raise Infeasible(f"pipeline of {p} stages > {n_layers} layers")
    m = req.micro_batches or min(B, 4 * p)
    if m > B:
        raise Infeasible(f"{m} micro-batches > global batch {B}")
    b_micro = B / m
    # balanced contiguous partition by cumulative share (greedy on quantiles)
    cum = np.cumsum(ctx.share)
    cuts = [0]
    for k in range(1, p):
        idx = int(np.searchsorted(cum, k / p))
        idx = max(idx + 1, cuts[-1] + 1)
        idx = min(idx, n_layers - (p - k))
        cuts.append(idx)
    cuts.append(n_layers)
    stage_share = [float(ctx.share[a:b].sum()) for a, b in zip(cuts[:-1], cuts[1:], strict=True)]
    worst = int(np.argmax(stage_share))
    t_stage = stage_share[worst] * t * b_micro
    parts.compute_s = m * t_stage
    parts.bubble_s = (p - 1) * t_stage
    boundary = max((st.y_elems[c - 1] for c in cuts[1:-1]), default=0.0)
    p2p = ctx.fabric.p2p(b_micro * boundary * ctx.delta)
    if p > 1:
        parts.other_comm_s = ctx.record("p2p_activations", p2p, 2 * (m + p - 2))
    stage_params = [float(st.params[a:b].sum()) for a, b in zip(cuts[:-1], cuts[1:], strict=True)]
    parts.local_params = max(stage_params)
    stashed = m if req.schedule == "gpipe" else min(m, p)
    first = slice(cuts[0], cuts[1])
    parts.activation_samples = stashed * b_micro
    parts.activation_elems = _activation_elems(ctx, layers=first)
    parts.samples_per_node = B / max(1, p // ctx.system.node.gpus_per_node) if p > 1 else B

