"""What model parallelism adds: which layers are split, the limits of a split, and the
traffic it causes (filter/channel collectives per layer, halo exchanges, the gather
before an unsplit head)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from testbed.errors import Infeasible
from testbed.oracle.context import Context
from testbed.oracle.geometry import halo_geometry, spatial_limit
from testbed.oracle.traffic import NO_COMM, Comm, Traffic, collective

#: Halo exchanges per split dimension and iteration: forward (input activations) and
#: backward (their gradients), each with two neighbours, one after another.
HALO_PASSES = 2
HALO_NEIGHBOURS = 2
#: ParaDL's filter parallelism per split layer: all-gather + all-reduce of one chunk
#: each, 3(p − 1) ring steps in total (Kahira et al., HPDC'21, Table 2).
PARADL_FILTER_STEPS_PER_PART = 3


def split_mask(ctx: Context, strategy: str) -> np.ndarray:
    """Which layers a model-parallel strategy splits (the request's mask wins)."""
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
    return np.zeros(len(st.share_testbed), dtype=bool)


def check_split(ctx: Context, strategy: str, split: np.ndarray, parts: int) -> None:
    """Raise :class:`Infeasible` when ``parts`` exceeds what the split layers allow:
    filters (filter), input channels (channel) or rows per GPU (spatial)."""
    st = ctx.stats
    if not ctx.rules.structural_limits or parts <= 1:
        return
    if strategy == "filter":
        f_min = st.out_channels[split].min() if split.any() else 0
        if parts > f_min:
            raise Infeasible(f"filter parallelism over {parts} GPUs > {int(f_min)} filters")
    elif strategy == "channel":
        c_min = st.in_channels[split].min() if split.any() else 0
        if parts > c_min:
            raise Infeasible(f"channel parallelism over {parts} GPUs > {int(c_min)} channels")
    elif strategy == "spatial":
        reason = spatial_limit(ctx.req.model, split, parts)
        if reason:
            raise Infeasible(reason)


def filter_comm(ctx: Context, split: np.ndarray, samples: float, parts: int,
                channel: bool = False) -> Comm:
    """Per split layer: filter = all-gather of the output (forward) + all-reduce of the
    input gradient (backward); channel = all-reduce of partial outputs + all-gather of
    the input gradient. ParaDL's rule: 3(p−1) steps of chunk B·|y|·δ/p per layer."""
    if parts <= 1:
        return NO_COMM
    st, fab = ctx.stats, ctx.fabric
    y_bytes = samples * st.y_elems[split] * ctx.delta
    if ctx.rules.filter_comm == "paradl":
        link = fab.link_for(parts)
        total = PARADL_FILTER_STEPS_PER_PART * (parts - 1) * (
            len(y_bytes) * link.alpha_s + float(y_bytes.sum()) / parts / link.bandwidth_Bps)
    else:
        x_bytes = samples * st.x_elems[split] * ctx.delta
        if channel:
            total = fab.allreduce_sum(y_bytes, parts) + fab.allgather_sum(x_bytes, parts)
        else:
            total = fab.allgather_sum(y_bytes, parts) + fab.allreduce_sum(x_bytes, parts)
    if total <= 0:
        return Comm(total)
    record = Traffic("channel_comm" if channel else "filter_comm", total, "per-layer",
                     fab.link_for(parts).name, int(split.sum()))
    return Comm(total, (record,))


def halo_comm(ctx: Context, split: np.ndarray, samples: float, parts: int) -> Comm:
    """Halo exchange of every split layer with a kernel wider than 1 over a near-square
    grid of ``parts`` GPUs (see the constants above)."""
    if parts <= 1:
        return NO_COMM
    exchanges, elems = halo_geometry(ctx.req.model, split, parts, ctx.rules.halo_face)
    if exchanges == 0:
        return NO_COMM
    link = ctx.fabric.halo or ctx.fabric.link_for(parts)
    total = HALO_PASSES * HALO_NEIGHBOURS * (
        exchanges * link.alpha_s + samples * elems * ctx.delta / link.bandwidth_Bps)
    return Comm(total, (Traffic("halo_exchange", total, "send-recv", link.name, exchanges),))


def gather_before_unsplit(ctx: Context, split: np.ndarray, samples: float, parts: int) -> Comm:
    """After the last spatially split layer the activations are gathered (forward) so the
    fully connected head sees whole samples; its gradient is scattered back (free)."""
    if parts <= 1 or not ctx.rules.gather_before_unsplit or not split.any():
        return NO_COMM
    last = int(np.flatnonzero(split)[-1])
    if last + 1 >= len(split):
        return NO_COMM
    nbytes = samples * ctx.stats.y_elems[last] * ctx.delta
    return collective("allgather_activations", ctx.fabric.allgather(nbytes, parts))


@dataclass(frozen=True)
class Activations:
    """Activation memory one sample leaves for backward on one GPU."""

    elems: float            # values at the training precision
    fixed_bytes: float      # precision-independent (max-pool indices)


def activations(ctx: Context, split: np.ndarray | None = None, parts: int = 1,
                layers: slice | None = None) -> Activations:
    """What PyTorch saves for backward per sample (:func:`~testbed.oracle.profile.
    saved_buffers`): spatially split layers keep 1/parts of their buffers; a pipeline
    stage keeps its own layers' buffers plus its input."""
    st = ctx.stats
    y = st.saved_elems if ctx.req.inplace else st.saved_elems_copy
    fixed = st.saved_fixed_bytes
    if split is not None and parts > 1:
        y = np.where(split, y / parts, y)
        fixed = np.where(split, fixed / parts, fixed)
    first = st.saved_input_elems
    if layers is not None:
        y, fixed = y[layers], fixed[layers]
        if layers.start:
            first = st.x_elems[layers.start]
    return Activations(float(y.sum() + first), float(fixed.sum()))
