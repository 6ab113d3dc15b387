"""The oracle: time per iteration (compute, communication, I/O) and memory per GPU.

One function, :func:`estimate`, takes a :class:`Request` — *what* (a model), *how*
(strategy, GPUs, batch, group size, precision, optimizer) and *on what* (a system
profile) — and returns an :class:`Estimate` with a per-phase breakdown. Configurations
that cannot run (out of memory, more GPUs than samples or filters, …) come back with
``feasible=False`` and the reason, never as a number.

Two modes:

* ``testbed`` (default): corrected and calibrated — real networks with projection
  shortcuts, halo exchanges with channels and the full face, memory checked for every
  strategy, NCCL-style ring/tree choice with oversubscription, measured per-sample
  compute and fitted efficiencies from the profile's ``calibration`` section.
* ``paradl``: ParaDL's formulas and network constants as published (HPDC'21), including
  its memory rule and ring-only collectives, to reproduce its outputs.

Strategy names: serial, data, spatial, filter, channel, pipeline, df (filter inside
groups of ``group_size`` GPUs + data across groups) and ds (spatial inside groups +
data across groups).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import numpy as np

from testbed.errors import InputError, UnknownNameError
from testbed.model.ir import Model
from testbed.oracle.collectives import CollectiveCost, Fabric
from testbed.oracle.profile import ModelStats, model_stats
from testbed.oracle.state import dtype_bytes, optimizer_slots
from testbed.systems import SystemProfile
from testbed.units import did_you_mean, format_bytes

STRATEGIES = ("serial", "data", "spatial", "filter", "channel", "pipeline", "df", "ds")
#: Calibration fallback: a strategy without its own fitted factors borrows its family's.
FAMILY = {"serial": "data", "data": "data", "spatial": "spatial", "ds": "spatial",
          "filter": "filter", "df": "filter", "channel": "channel", "pipeline": "pipeline"}
MODES = ("testbed", "paradl")
SCHEDULES = ("gpipe", "1f1b")
#: Share of an all-reduce that stays exposed when overlapped with backward (last bucket).
OVERLAP_TAIL = 0.05


@dataclass(frozen=True)
class Request:
    """Everything one prediction depends on."""

    model: Model
    system: SystemProfile
    strategy: str
    gpus: int
    global_batch: int
    group_size: int | None = None
    precision: str = "fp32"
    optimizer: str = "momentum"
    micro_batches: int | None = None
    schedule: str = "1f1b"
    overlap: bool | None = None
    mode: str = "testbed"
    mask: tuple[bool, ...] | None = None
    sample_bytes: float | None = None
    epoch_samples: int | None = None
    inplace: bool = True


@dataclass(frozen=True)
class Estimate:
    """A prediction for one configuration (times in seconds, sizes in bytes)."""

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

    def to_dict(self) -> dict:
        out = asdict(self)
        out["collectives"] = [dict(c) for c in self.collectives]
        return out


class _Infeasible(Exception):
    def __init__(self, reason: str) -> None:
        self.reason = reason


def _validate(req: Request) -> None:
    if req.strategy not in STRATEGIES:
        raise UnknownNameError(f"unknown strategy {req.strategy!r}"
                               f"{did_you_mean(req.strategy, STRATEGIES)}; "
                               f"known: {', '.join(STRATEGIES)}", field="strategy")
    if req.mode not in MODES:
        raise UnknownNameError(f"unknown mode {req.mode!r}; known: {', '.join(MODES)}",
                               field="mode")
    if req.schedule not in SCHEDULES:
        raise UnknownNameError(f"unknown pipeline schedule {req.schedule!r}; known: "
                               f"{', '.join(SCHEDULES)}", field="schedule")
    if isinstance(req.gpus, bool) or req.gpus <= 0:
        raise InputError(f"GPU count must be a positive integer, got {req.gpus}", field="gpus")
    if req.global_batch <= 0:
        raise InputError(f"global batch must be positive, got {req.global_batch}",
                         field="global_batch")
    if req.group_size is not None and req.group_size <= 0:
        raise InputError(f"group size must be positive, got {req.group_size}",
                         field="group_size")
    if req.micro_batches is not None and req.micro_batches <= 0:
        raise InputError(f"micro-batches must be positive, got {req.micro_batches}",
                         field="micro_batches")
    if req.mask is not None and len(req.mask) != len(req.model.layers):
        raise InputError(f"layer mask has {len(req.mask)} entries for "
                         f"{len(req.model.layers)} layers", field="mask")
    dtype_bytes(req.precision)
    optimizer_slots(req.optimizer)


class _Context:
    """Shared quantities for one request."""

    def __init__(self, req: Request) -> None:
        self.req = req
        self.model = req.model
        self.system = req.system
        self.stats: ModelStats = model_stats(req.model)
        self.paradl = req.mode == "paradl"
        self.delta = (req.system.paradl.bytes_per_value if self.paradl and req.system.paradl
                      else dtype_bytes(req.precision))
        self.p = req.gpus
        self.B = req.global_batch
        cal = None if self.paradl else req.system.model_calibration(req.model.name)
        self.model_cal = cal
        self.sources: list[str] = []
        eff = {}
        if not self.paradl and req.system.calibration is not None:
            eff.update(req.system.calibration.network_efficiency)
        if cal is not None and cal.network_efficiency:
            eff.update(cal.network_efficiency)
            self.sources.append(f"network fitted ({req.model.name})")
        elif eff:
            self.sources.append("network fitted (median of models)")
        else:
            self.sources.append("network nominal")
        self.fabric = Fabric.from_spec(req.system.network, req.system.node.gpus_per_node,
                                       eff, nominal=self.paradl)
        if self.paradl:
            self.fabric = Fabric(self.fabric.links, self.fabric.gpus_per_node,
                                 self.fabric.halo, ("ring",))
        self.share = self.stats.share_paradl if self.paradl else self.stats.share_testbed
        self.t_sample = self._time_per_sample()
        self.collectives: list[dict] = []

    def _time_per_sample(self) -> float:
        """Forward+backward seconds per sample on one GPU: measured for this model (scaled
        by FLOPs to this input size), else profiled per layer, else FLOPs over the peak
        times the efficiency the calibration measured on other models (or the profile's)."""
        cal = self.model_cal
        if cal is not None:
            ref = cal.forward_flops or self.stats.forward_flops
            self.sources.append(f"compute measured ({self.model.name})")
            return cal.s_per_sample * self.stats.forward_flops / ref
        if self.model.profiled_s_per_sample:
            self.sources.append("compute profiled (model file)")
            return self.model.profiled_s_per_sample
        gpu = self.system.gpu
        precision = self.req.precision
        eff = gpu.efficiency(precision)
        fitted = self.system.calibration.compute_efficiency if (
            self.system.calibration and not self.paradl) else {}
        if precision in fitted:
            eff = fitted[precision]
            self.sources.append(f"compute from FLOPs at fitted efficiency {eff:.2f}")
        else:
            self.sources.append(f"compute from FLOPs at nominal efficiency {eff:.2f}")
        flops = self.stats.forward_flops * 3.0
        return flops / (gpu.peak_flops(precision) * eff)

    def strategy_calibration(self):
        """Fitted factors for this strategy: the model's own, else the median over the
        measured models for the same strategy, else the same for its family."""
        if self.paradl or self.system.calibration is None:
            return None
        strategy = self.req.strategy
        own = self.model_cal.strategies if self.model_cal else {}
        common = self.system.calibration.strategies
        for key, table, label in ((strategy, own, "measured"), (strategy, common, "median of models"),
                                  (FAMILY[strategy], own, "measured, family"),
                                  (FAMILY[strategy], common, "median of models, family")):
            if key in table and key != "data":
                self.sources.append(f"{key} factors {label}")
                return table[key]
        return None

    def record(self, phase: str, cost: CollectiveCost, count: int = 1) -> float:
        t = cost.time_s * count
        if t > 0:
            self.collectives.append({"phase": phase, "time_s": t, "algorithm": cost.algorithm,
                                     "tier": cost.tier, "count": count})
        return t


# -- layer selections ------------------------------------------------------------------

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
class _Parts:
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


def _assemble(ctx: _Context) -> _Parts:
    req = ctx.req
    st = ctx.stats
    p, B, t = ctx.p, ctx.B, ctx.t_sample
    strat = req.strategy
    parts = _Parts()
    param_bytes = st.parameters * ctx.delta if not ctx.paradl else st.w_elems.sum() * ctx.delta
    gpn = ctx.system.node.gpus_per_node

    if strat == "serial":
        if p != 1:
            raise _Infeasible(f"serial runs on 1 GPU, not {p}")
        parts.compute_s = B * t
        parts.local_params = st.parameters
        parts.activation_samples = B
        parts.activation_elems = _activation_elems(ctx)
        parts.samples_per_node = B
    elif strat == "data":
        if p > B:
            raise _Infeasible(f"data parallelism needs at least one sample per GPU: "
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
            raise _Infeasible(f"no layer of {ctx.model.name} can be split {p} ways by {strat}")
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
            raise _Infeasible(f"{strat} needs the GPU count ({p}) to be a multiple of the "
                              f"group size ({g})")
        groups = p // g
        if groups > B:
            raise _Infeasible(f"{strat}: {groups} groups > global batch {B}")
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
            raise _Infeasible(f"filter parallelism over {parts} GPUs > {int(f_min)} filters")
    elif strat == "channel":
        c_min = st.in_channels[split].min() if split.any() else 0
        if parts > c_min:
            raise _Infeasible(f"channel parallelism over {parts} GPUs > {int(c_min)} channels")
    elif strat == "spatial":
        reason = _spatial_limit(ctx, split, parts)
        if reason:
            raise _Infeasible(reason)


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


def _pipeline(ctx: _Context, parts: _Parts) -> None:
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
        raise _Infeasible(f"pipeline of {p} stages > {n_layers} layers")
    m = req.micro_batches or min(B, 4 * p)
    if m > B:
        raise _Infeasible(f"{m} micro-batches > global batch {B}")
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


def _memory(ctx: _Context, parts: _Parts) -> dict[str, float]:
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


def _io(ctx: _Context, parts: _Parts, compute_s: float) -> float:
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


def estimate(req: Request) -> Estimate:
    """Predict one configuration; infeasible ones carry ``feasible=False`` and a reason."""
    _validate(req)
    base = dict(model=req.model.name, system=req.system.name, strategy=req.strategy,
                gpus=req.gpus, global_batch=req.global_batch,
                group_size=req.group_size if req.strategy in ("df", "ds") else None,
                mode=req.mode, parameters=req.model.parameters)
    from testbed.oracle.state import state_bytes
    base["state_bytes"] = state_bytes(req.model.parameters, req.optimizer, req.precision)
    if req.gpus > req.system.max_gpus:
        return Estimate(**base, feasible=False,
                        reason=f"{req.gpus} GPUs > {req.system.max_gpus} in system {req.system.name}")
    try:
        ctx = _Context(req)
        parts = _assemble(ctx)
    except _Infeasible as exc:
        return Estimate(**base, feasible=False, reason=exc.reason)

    cal = ctx.strategy_calibration()
    compute_s = parts.compute_s * (cal.compute_scale if cal else 1.0)
    overhead_s = cal.overhead_s if cal else 0.0
    backward_s = compute_s * 2 / 3
    overlap = req.system.overlap_allreduce if req.overlap is None else req.overlap
    grad_exposed = parts.grad_allreduce_s
    if overlap and not ctx.paradl and grad_exposed > 0:
        grad_exposed = max(grad_exposed - backward_s, OVERLAP_TAIL * grad_exposed)
    comm_total = parts.grad_allreduce_s + parts.other_comm_s
    comm_exposed = grad_exposed + parts.other_comm_s
    io_s = _io(ctx, parts, compute_s)
    total = compute_s + parts.bubble_s + comm_exposed + io_s + overhead_s
    mem = _memory(ctx, parts)
    mem_total = int(round(sum(mem.values())))
    capacity = req.system.gpu.memory_bytes
    phases = {"forward": compute_s / 3, "backward": backward_s, "bubble": parts.bubble_s,
              "gradient_allreduce": grad_exposed, "model_parallel_comm": parts.other_comm_s,
              "io": io_s, "overhead": overhead_s}
    bottleneck = max(("compute", compute_s + parts.bubble_s), ("communication", comm_exposed),
                     ("io", io_s), ("overhead", overhead_s), key=lambda kv: kv[1])[0]
    samples = req.epoch_samples or (req.system.paradl.dataset_samples
                                    if req.system.paradl else 1280000)
    iters = math.ceil(samples / req.global_batch)
    # ParaDL counts data-parallel compute as (D/p)·ΣC (fractional last iteration)
    compute_iters = samples / req.global_batch if (
        ctx.paradl and req.strategy in ("serial", "data")) else iters
    feasible, reason = True, None
    if mem_total > capacity and not (ctx.paradl and req.strategy == "ds"):
        feasible = False
        reason = (f"needs {format_bytes(mem_total)} per GPU > {format_bytes(capacity)} "
                  f"on {req.system.gpu.model}")
    return Estimate(
        **base, feasible=feasible, reason=reason,
        time_per_iteration_s=total, compute_s=compute_s, communication_s=comm_exposed,
        communication_total_s=comm_total, io_s=io_s, overhead_s=overhead_s,
        bubble_s=parts.bubble_s, memory_per_gpu_bytes=mem_total, memory_capacity_bytes=capacity,
        memory_breakdown_bytes={k: int(round(v)) for k, v in mem.items()},
        phases_s=phases, collectives=tuple(ctx.collectives), bottleneck=bottleneck,
        samples_per_s=req.global_batch / total if total > 0 else None,
        iterations_per_epoch=iters, epoch_s=iters * total, compute_epoch_s=compute_iters * compute_s,
        communication_epoch_s=iters * comm_exposed,
        calibration="; ".join(ctx.sources) if not ctx.paradl else "ParaDL rules",
    )
