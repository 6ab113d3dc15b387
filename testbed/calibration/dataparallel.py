"""Data parallelism of ranks that share one host's CPU cores (the local harness).

The oracle prices a data-parallel step as one rank's compute plus the exposed gradient
all-reduce (the backend's fitted α–β; overlapped with backward where the stack
buckets it), each rank on a device of its own. Ranks that are processes of one host
share its ``C`` cores instead, which adds what the harness measures and the oracle
alone does not see:

* **time slicing**: ``p`` ranks of ``h`` library threads on ``C`` cores each get the
  CPU at most ``C/(p·h)`` of the time once ``p·h > C``, so compute (fitted as one
  process's CPU time) takes ``max(1, p·h/C)`` times as long in wall time;
* **the harness's second collective**: every step also all-reduces its loss (4 bytes,
  ``real_runs/ddp.py``), priced by the same α–β as the gradients;
* **scheduling delay**: a collective is a chain of hand-offs — a ring all-reduce of
  ``p`` ranks is ``2(p−1)`` steps, each a rank blocking until its neighbour's message
  wakes it. While a core is idle a wake-up costs microseconds; once the runnable tasks
  (the ranks' threads, plus the supervisor that reads every rank's per-step events:
  ``p·h + 1``) exceed the cores by ``e = max(0, p·h + 1 − C)``, a woken rank finds no
  free core with probability about ``e/(p·h + 1)`` and waits ``κ`` for one. So a step
  of ``k`` collective calls waits ``κ · k · 2(p−1) · e/(p·h + 1)``. ``κ`` is the one
  constant fitted here: the median over the fit set's data-parallel runs of what their
  measured steps leave after the priced parts, per expected wait (a median: one run
  under a burst of load does not set it). Runs with no excess cannot inform it. It
  comes out near the scheduler's time slice — on the 2-core machine 1.5–2.0 ms, where
  Linux's EEVDF base slice is 0.75 ms × (1 + log₂ 2) = 1.5 ms — which is what a woken
  task without a free core waits for.

:func:`dp_terms` is the price of one configuration; :func:`fit_data_parallel` fits
``κ``; :func:`step_s` adds them up. All of it is the calibration layer's: the oracle
itself stays the model of ranks on devices of their own.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from dataclasses import dataclass

from testbed.calibration.compute import train_request
from testbed.calibration.metrics import residuals, sig
from testbed.calibration.network import collective_time_s, find_collective
from testbed.measurements import TrainConfig, TrainSummary
from testbed.oracle import Estimate, estimate
from testbed.systems.calibrated import DataParallelFit
from testbed.systems.profile import SystemProfile

#: Bytes of the loss the harness all-reduces every step (one fp32 scalar).
LOSS_BYTES = 4
#: Runnable tasks besides the ranks' threads: the supervisor reading their events.
SUPERVISOR_TASKS = 1


def host_cores(rec: TrainSummary) -> int:
    """The cores the ranks could run on: the CPUs of the recorded affinity (``"0-1,4"``
    → 3), else the machine's CPU count."""
    aff = rec.method.affinity if rec.method is not None else ""
    count = 0
    for part in filter(None, aff.split(",")):
        lo, _, hi = part.partition("-")
        try:
            count += int(hi or lo) - int(lo) + 1
        except ValueError:
            return rec.env.cpu_count
    return count or rec.env.cpu_count


def rank_threads(rec: TrainSummary) -> int:
    """Library threads per rank (the harness runs one)."""
    return rec.method.threads if rec.method is not None else 1


def excess_tasks(processes: int, threads: int, cores: int) -> int:
    """Runnable tasks beyond the cores: ``max(0, p·h + 1 − C)`` (module doc)."""
    return max(0, processes * threads + SUPERVISOR_TASKS - cores)


def expected_waits(calls: int, processes: int, threads: int, cores: int) -> float:
    """Hand-offs per step that wait for a core: ``k · 2(p−1) · e/(p·h + 1)``."""
    tasks = processes * threads + SUPERVISOR_TASKS
    return calls * 2 * (processes - 1) * excess_tasks(processes, threads, cores) / tasks


def time_share(processes: int, threads: int, cores: int) -> float:
    """How much longer compute takes in wall time: ``max(1, p·h/C)``."""
    return max(1.0, processes * threads / cores)


@dataclass(frozen=True)
class DpTerms:
    """The priced parts of one data-parallel step (seconds), before the fitted delay."""

    oracle_s: float          # the oracle's step: compute + exposed gradient all-reduce
    compute_s: float         # of which one rank's compute
    share: float             # time-slicing factor of the compute
    loss_allreduce_s: float  # the harness's per-step loss all-reduce
    calls: int               # collective calls per step (gradient buckets + the loss)
    excess: int              # runnable tasks beyond the cores
    waits: float             # expected hand-offs per step that wait for a core

    @property
    def priced_s(self) -> float:
        return self.oracle_s + (self.share - 1.0) * self.compute_s + self.loss_allreduce_s


def dp_terms(cfg: TrainConfig, system: SystemProfile, cores: int, threads: int,
             est: Estimate | None = None) -> DpTerms | None:
    """The priced parts of ``cfg`` (``processes > 1``) on ``system``, or None when the
    oracle has no step for it or the profile no all-reduce fit for its backend
    (``est``: the oracle's estimate of ``cfg`` when the caller has it already)."""
    est = est if est is not None else estimate(train_request(cfg, system))
    fit = system.records_fit
    if est.time_per_iteration_s is None or fit is None:
        return None
    ab = find_collective(fit.network, "allreduce", cfg.backend, cfg.processes)
    if ab is None:
        return None
    grad_calls = sum(int(c.get("count", 1)) for c in est.collectives
                     if str(c.get("phase", "")).startswith("allreduce")) or 1
    calls = grad_calls + 1
    return DpTerms(oracle_s=est.time_per_iteration_s, compute_s=est.compute_s or 0.0,
                   share=time_share(cfg.processes, threads, cores),
                   loss_allreduce_s=collective_time_s(ab, LOSS_BYTES, cfg.processes),
                   calls=calls, excess=excess_tasks(cfg.processes, threads, cores),
                   waits=expected_waits(calls, cfg.processes, threads, cores))


def find_data_parallel(fits: tuple[DataParallelFit, ...], backend: str, device: str
                       ) -> DataParallelFit | None:
    return next((f for f in fits if f.backend == backend and f.device == device), None)


def step_s(terms: DpTerms, fit: DataParallelFit | None) -> float:
    """The step: the priced parts plus ``κ`` per expected wait for a core."""
    kappa = fit.wait_s if fit is not None else 0.0
    return terms.priced_s + kappa * terms.waits


def fit_data_parallel(records: list[TrainSummary], system: SystemProfile
                      ) -> tuple[DataParallelFit, ...]:
    """One :class:`DataParallelFit` per (backend, device) of the data-parallel runs in
    ``records`` (priced on ``system``, the profile with its compute and network fits)."""
    groups: dict[tuple[str, str], list[tuple[TrainSummary, DpTerms, int]]] = defaultdict(list)
    for rec in records:
        cfg = rec.config
        if cfg.processes < 2:
            continue
        cores = host_cores(rec)
        terms = dp_terms(cfg, system, cores, rank_threads(rec))
        if terms is not None:
            groups[(cfg.backend, cfg.device)].append((rec, terms, cores))
    out = []
    for (backend, device), rows in sorted(groups.items()):
        per_wait = [max(0.0, rec.metrics.step_s - t.priced_s) / t.waits
                    for rec, t, _ in rows if t.waits > 0]
        kappa = statistics.median(per_wait) if per_wait else 0.0
        fit = DataParallelFit(
            backend=backend, device=device, cores=min(c for _, _, c in rows),
            wait_s=sig(kappa),
            processes=tuple(sorted({rec.config.processes for rec, _, _ in rows})),
            points=len(rows), residuals=residuals([0.0], [1.0]))
        pred = [step_s(t, fit) for _, t, _ in rows]
        out.append(fit.model_copy(update={"residuals": residuals(
            pred, [rec.metrics.step_s for rec, _, _ in rows])}))
    return tuple(out)
