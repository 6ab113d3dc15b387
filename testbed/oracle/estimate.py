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
data across groups). The per-strategy work lives in :mod:`testbed.oracle.strategies`,
memory and I/O in :mod:`testbed.oracle.resources`; this module validates the request,
applies calibration and overlap, and assembles the :class:`Estimate`.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

from testbed.errors import InputError, UnknownNameError
from testbed.model.ir import Model
from testbed.oracle.collectives import CollectiveCost, Fabric
from testbed.oracle.profile import ModelStats, model_stats
from testbed.oracle.resources import exposed_io_s, memory_bytes
from testbed.oracle.state import dtype_bytes, optimizer_slots, state_bytes
from testbed.oracle.strategies import Infeasible, assemble
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

def estimate(req: Request) -> Estimate:
    """Predict one configuration; infeasible ones carry ``feasible=False`` and a reason."""
    _validate(req)
    base = dict(model=req.model.name, system=req.system.name, strategy=req.strategy,
                gpus=req.gpus, global_batch=req.global_batch,
                group_size=req.group_size if req.strategy in ("df", "ds") else None,
                mode=req.mode, parameters=req.model.parameters)
    base["state_bytes"] = state_bytes(req.model.parameters, req.optimizer, req.precision)
    if req.gpus > req.system.max_gpus:
        return Estimate(**base, feasible=False,
                        reason=f"{req.gpus} GPUs > {req.system.max_gpus} in system {req.system.name}")
    try:
        ctx = _Context(req)
        parts = assemble(ctx)
    except Infeasible as exc:
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
    io_s = exposed_io_s(ctx, parts, compute_s)
    total = compute_s + parts.bubble_s + comm_exposed + io_s + overhead_s
    mem = memory_bytes(ctx, parts)
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
