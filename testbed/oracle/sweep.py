"""Strategy comparison: every strategy × powers of two of GPUs × batch sizes, ranked.

The sweep is the oracle's answer to "which strategy, at what scale?": each feasible
configuration with its time per iteration, throughput and the phase that bounds it;
infeasible ones are kept with their reason so they can be counted, not crashed on.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from testbed.model.ir import Model
from testbed.oracle.estimate import STRATEGIES, Estimate, Request, estimate
from testbed.systems import SystemProfile


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
        return sorted(best.values(), key=lambda e: e.time_per_iteration_s)


def powers_of_two(max_gpus: int) -> list[int]:
    out, p = [], 1
    while p <= max_gpus:
        out.append(p)
        p *= 2
    return out


def sweep(model: Model, system: SystemProfile, global_batches: Iterable[int], *,
          max_gpus: int = 4096, strategies: Iterable[str] = STRATEGIES,
          group_size: int | None = None, precision: str = "fp32",
          optimizer: str = "momentum", mode: str = "testbed") -> SweepResult:
    """Estimate every strategy on 1, 2, 4, … ``max_gpus`` GPUs for each batch size."""
    out: list[Estimate] = []
    for batch in global_batches:
        for strategy in strategies:
            for p in powers_of_two(max_gpus):
                if strategy == "serial" and p > 1:
                    break
                if strategy != "serial" and p == 1:
                    continue  # one GPU of any strategy is the serial run
                if strategy in ("df", "ds"):
                    g = group_size or system.node.gpus_per_node
                    if p < g:
                        continue
                    gs = g
                else:
                    gs = None
                out.append(estimate(Request(model=model, system=system, strategy=strategy,
                                            gpus=p, global_batch=batch, group_size=gs,
                                            precision=precision, optimizer=optimizer,
                                            mode=mode)))
    return SweepResult(tuple(out))
