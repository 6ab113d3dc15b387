"""Strategy comparison: every strategy × powers of two of GPUs × batch sizes, ranked.

The sweep is the oracle's answer to "which strategy, at what scale?": each feasible
configuration with its time per iteration, throughput and the phase that bounds it;
infeasible ones are kept with their reason so they can be counted, not crashed on.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace

from testbed.errors import InputError
from testbed.model.ir import Model
from testbed.oracle.estimate import Estimate, estimate, skipped
from testbed.oracle.names import GROUPED, STRATEGIES
from testbed.oracle.request import Request
from testbed.oracle.strategies import MICRO_BATCHES_PER_STAGE
from testbed.systems.profile import SystemProfile


@dataclass(frozen=True)
class SweepResult:
    """All estimates of a sweep; ``ranked`` holds the feasible ones, fastest first."""

    estimates: tuple[Estimate, ...]

    @property
    def feasible(self) -> list[Estimate]:
        return [e for e in self.estimates if e.feasible]

    @property
    def infeasible(self) -> list[Estimate]:
        return [e for e in self.estimates if not e.feasible]

    def ranked(self, global_batch: int | None = None) -> list[Estimate]:
        """Feasible estimates by time per iteration (ties: fewer GPUs first)."""
        rows = [e for e in self.feasible if global_batch is None or e.global_batch == global_batch]
        return sorted(rows, key=lambda e: (e.time_per_iteration_s, e.gpus, e.strategy))

    def best_per_strategy(self, global_batch: int) -> list[Estimate]:
        """The fastest configuration of each strategy at one batch size."""
        best: dict[str, Estimate] = {}
        for e in self.ranked(global_batch):
            best.setdefault(e.strategy, e)
        return sorted(best.values(), key=lambda e: e.time_per_iteration_s or 0.0)


def powers_of_two(max_gpus: int) -> list[int]:
    out, p = [], 1
    while p <= max_gpus:
        out.append(p)
        p *= 2
    return out


#: Smallest batch a model replica sees per step (a pipeline's micro-batch) that a
#: practitioner trains a batch-normalised CNN with: batch-norm error rises sharply below
#: 16 images per GPU (Wu & He, "Group Normalization", ECCV 2018, Fig. 1).
DEFAULT_MIN_BATCH_PER_GPU = 16
#: Smallest parallel efficiency worth paying for: a configuration whose samples/s per GPU
#: fall below half of the best per-GPU rate at the same global batch wastes more GPUs
#: than it uses (the usual rule of thumb for strong scaling).
DEFAULT_MIN_EFFICIENCY = 0.5


def replica_batch(strategy: str, gpus: int, global_batch: int, group: int | None) -> float:
    """Samples one model replica processes per step (its batch-norm batch)."""
    if strategy in ("serial", "data"):
        return global_batch / gpus
    if strategy in GROUPED:
        return global_batch / (gpus // (group or 1))
    return float(global_batch)


def _configurations(system: SystemProfile, strategies: Iterable[str], max_gpus: int,
                    group_size: int | None) -> Iterator[tuple[str, int, int | None]]:
    for strategy in strategies:
        for p in powers_of_two(max_gpus):
            if strategy == "serial" and p > 1:
                break
            if strategy != "serial" and p == 1:
                continue  # one GPU of any strategy is the serial run
            group = None
            if strategy in GROUPED:
                group = group_size or system.node.gpus_per_node
                if p <= group:
                    continue  # one group is the filter/spatial run itself
            yield strategy, p, group


def sweep(model: Model, system: SystemProfile, global_batches: Iterable[int], *,
          max_gpus: int = 4096, strategies: Iterable[str] = STRATEGIES,
          group_size: int | None = None, precision: str | None = None,
          optimizer: str = "momentum", mode: str = "testbed",
          min_batch_per_gpu: int = DEFAULT_MIN_BATCH_PER_GPU,
          min_efficiency: float = DEFAULT_MIN_EFFICIENCY,
          input_precision: str | None = None, software: str | None = None) -> SweepResult:
    """Estimate every strategy on 1, 2, 4, … ``max_gpus`` GPUs for each batch size, in
    the system's usual training precision unless ``precision`` says otherwise.

    Points where a replica would see fewer than ``min_batch_per_gpu`` samples per step
    are kept as infeasible with the reason (a pipeline takes at most that many
    micro-batches instead: ``m = min(4p, B // min_batch_per_gpu)``), and so are points
    whose parallel efficiency — samples/s per GPU over the best per-GPU rate at the same
    global batch — is below ``min_efficiency``. ``software`` names the profile's software
    stack (default: its own)."""
    if min_batch_per_gpu < 1:
        raise InputError(f"minimum batch per GPU must be >= 1, got {min_batch_per_gpu}",
                         field="min_batch_per_gpu")
    if not 0 <= min_efficiency <= 1:
        raise InputError(f"minimum efficiency must be in [0, 1], got {min_efficiency}",
                         field="min_efficiency")
    out: list[Estimate] = []
    for batch in global_batches:
        for strategy, p, group in _configurations(system, strategies, max_gpus, group_size):
            micro = None
            if strategy == "pipeline":
                micro = min(MICRO_BATCHES_PER_STAGE * p, batch // min_batch_per_gpu) or None
            req = Request(model=model, system=system, strategy=strategy, gpus=p,
                          global_batch=batch, group_size=group, precision=precision,
                          optimizer=optimizer, mode=mode, micro_batches=micro,
                          input_precision=input_precision, software=software)
            per_replica = batch / micro if micro else replica_batch(strategy, p, batch, group)
            if micro is None and strategy == "pipeline" or per_replica < min_batch_per_gpu:
                out.append(skipped(req, f"skipped: {per_replica:g} samples per GPU < the "
                                        f"minimum of {min_batch_per_gpu} (min_batch_per_gpu)"))
                continue
            out.append(estimate(req))
    return SweepResult(tuple(_efficiency_floor(out, min_efficiency)))


def _efficiency_floor(estimates: list[Estimate], floor: float) -> list[Estimate]:
    """Mark feasible points below ``floor`` of their batch's best per-GPU rate."""
    best: dict[int, float] = {}
    for e in estimates:
        if e.feasible and e.samples_per_s:
            best[e.global_batch] = max(best.get(e.global_batch, 0.0), e.samples_per_s / e.gpus)
    out = []
    for e in estimates:
        if e.feasible and e.samples_per_s and best.get(e.global_batch):
            eff = e.samples_per_s / e.gpus / best[e.global_batch]
            if eff < floor:
                e = replace(e, feasible=False, reason=(
                    f"skipped: parallel efficiency {eff:.0%} < {floor:.0%} of the best "
                    f"per-GPU rate at this batch (min_efficiency)"))
        out.append(e)
    return out
