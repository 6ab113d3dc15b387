"""Typed results of the cluster simulator: one replication, and a summary of many.

These frozen dataclasses are what crosses from the engines (``simulators/``) to the
application (CLI, store, report), each with ``to_dict()`` for JSON. One vocabulary of
keys everywhere, units in the names: where the wall time went is always
``useful_s``, ``checkpoint_s``, ``lost_s``, ``restart_s`` and ``waiting_s``
(:data:`BREAKDOWN_KEYS`), in a replication, a summary, a store row and a report.

**ETTR** (effective training time ratio) is one figure: useful compute over wall time,
estimated over replications as the *ratio of sums* Σ useful / Σ wall (the share of all
simulated wall time that was useful — what an allocation sees; the same quantity as the
closed form's work / E[wall]) with a delta-method Student-t 95% interval
(:func:`ratio_ci95`). The mean of the per-replication ratios, AIReSim's "ETR", is
reported beside it as ``ettr_per_run``; it is larger by Jensen's inequality when wall
times vary. Cluster-operation counts use AIReSim's vocabulary (:class:`OpsCounts`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, fields

import numpy as np

from testbed.stats import CONFIDENCE, MeanCI, mean_ci95

#: Where the wall time went, in plot order.
BREAKDOWN_KEYS = ("useful_s", "checkpoint_s", "lost_s", "restart_s", "waiting_s")
#: Per-replication outcome columns, in store order.
OUTCOME_KEYS = ("wall_s", *BREAKDOWN_KEYS, "failures", "checkpoints", "ettr")


@dataclass(frozen=True)
class Breakdown:
    """Where the wall time of a run went; the five parts sum to the wall time.

    ``useful_s`` is the failure-free compute, ``checkpoint_s`` the time spent on
    checkpoints that committed (blocking part, stalls behind a background persist, the
    final persist), ``restart_s`` detection + requeue + load, ``waiting_s`` waiting for
    spare or repaired nodes and for maintenance to end, and ``lost_s`` the rest: compute
    rolled back and checkpoints cut short by failures.
    """

    useful_s: float
    checkpoint_s: float
    lost_s: float
    restart_s: float
    waiting_s: float

    def to_dict(self) -> dict[str, float]:
        return asdict(self)

    @property
    def total_s(self) -> float:
        return self.useful_s + self.checkpoint_s + self.lost_s + self.restart_s + self.waiting_s

    @classmethod
    def mean_of(cls, parts: Sequence[Breakdown]) -> Breakdown:
        return cls(**{k: float(np.mean([getattr(p, k) for p in parts])) for k in BREAKDOWN_KEYS})

    @classmethod
    def from_dict(cls, data: dict) -> Breakdown:
        return cls(**{k: float(data[k]) for k in BREAKDOWN_KEYS})


@dataclass(frozen=True)
class OpsCounts:
    """Cluster operations of one replication, in AIReSim's vocabulary.

    Failures of the job by class (hardware / job-induced; ``failures_systematic`` those
    of bad nodes attributed to their extra rate, ``failures_burst`` burst followers),
    failures of nodes not in use (``failures_idle``), planned stops, diagnosis misses
    and wrong blames, repairs by stage and outcome (``repairs_failed``: reported fixed but
    not), bad nodes cured, retirements, preempted spare-pool nodes, host selections,
    standby swaps, stalls (waits for a repair) and the seconds spent in each, and whether
    the cluster was depleted (the run ended without finishing).
    """

    failures_hardware: int = 0
    failures_job_induced: int = 0
    failures_idle: int = 0
    failures_systematic: int = 0
    failures_burst: int = 0
    planned_stops: int = 0
    missed_diagnoses: int = 0
    misdiagnoses: int = 0
    repairs_automatic: int = 0
    repairs_manual: int = 0
    repairs_successful: int = 0
    repairs_failed: int = 0
    bad_nodes_cured: int = 0
    retirements: int = 0
    preemptions: int = 0
    host_selections: int = 0
    swaps: int = 0
    stalls: int = 0
    stall_s: float = 0.0
    swap_s: float = 0.0
    host_selection_s: float = 0.0
    preemption_s: float = 0.0
    maintenance_s: float = 0.0
    depleted: bool = False

    def to_dict(self) -> dict:
        return asdict(self)


#: Names of the :class:`OpsCounts` figures averaged in a summary.
OPS_KEYS = tuple(f.name for f in fields(OpsCounts))


@dataclass(frozen=True)
class RepResult:
    """One replication: wall time and where it went, failures and checkpoints."""

    wall_s: float
    useful_s: float
    checkpoint_s: float
    lost_s: float
    restart_s: float
    waiting_s: float
    failures: int
    checkpoints: int
    by_cause: tuple[int, ...]
    ops: OpsCounts | None = None

    @property
    def ettr(self) -> float:
        """Effective training time ratio of this replication: useful compute / wall time."""
        return self.useful_s / self.wall_s

    @property
    def breakdown(self) -> Breakdown:
        return Breakdown(self.useful_s, self.checkpoint_s, self.lost_s, self.restart_s,
                         self.waiting_s)

    def outcome_row(self) -> tuple:
        """The values of :data:`OUTCOME_KEYS`, in order (a store row)."""
        return (self.wall_s, self.useful_s, self.checkpoint_s, self.lost_s, self.restart_s,
                self.waiting_s, int(self.failures), int(self.checkpoints), self.ettr)

    def to_dict(self) -> dict:
        out = asdict(self)
        out["by_cause"] = list(self.by_cause)
        out["ettr"] = self.ettr
        out["ops"] = self.ops.to_dict() if self.ops is not None else None
        return out


def close_books(wall_s: float, work_s: float, ckpt_s: float, restart_s: float, wait_s: float,
                failures: int, checkpoints: int, by_cause: list[int],
                ops: OpsCounts | None = None) -> RepResult:
    """A replication's result: lost time is what the other categories do not explain.

    ``work_s`` is the useful compute done: the job's work, or less when the cluster was
    depleted before it finished."""
    lost = wall_s - work_s - ckpt_s - restart_s - wait_s
    if -1e-9 * max(wall_s, 1.0) < lost < 0:
        lost = 0.0
    return RepResult(wall_s=wall_s, useful_s=work_s, checkpoint_s=ckpt_s, lost_s=lost,
                     restart_s=restart_s, waiting_s=wait_s, failures=failures,
                     checkpoints=checkpoints, by_cause=tuple(by_cause), ops=ops)


def ratio_ci95(num: Sequence[float], den: Sequence[float], low: float = 0.0,
               high: float = 1.0) -> MeanCI:
    """The ratio of sums Σnum/Σden with a delta-method Student-t 95% interval.

    With R = Σnum/Σden and residuals d_i = num_i − R·den_i, the standard error is
    s_d / (mean(den)·√n) (s_d the sample standard deviation of d, n − 1 degrees of
    freedom); ``std`` holds s_d / mean(den), the standard deviation of the linearised
    per-replication contribution. Clipped to [``low``, ``high``].
    """
    x = np.asarray(num, dtype=float)
    y = np.asarray(den, dtype=float)
    if x.size == 0:
        raise ValueError("no values")
    ratio = float(x.sum() / y.sum())
    if x.size < 2:
        return MeanCI(ratio, ratio, ratio, 0.0, int(x.size))
    sd = float(np.std(x - ratio * y, ddof=1)) / float(y.mean())
    from scipy import stats as scipy_stats  # lazily: scipy.stats costs 0.3 s to import
    t = float(scipy_stats.t.ppf(0.5 + CONFIDENCE / 2, x.size - 1))
    half = t * sd / np.sqrt(x.size)
    return MeanCI(ratio, max(ratio - half, low), min(ratio + half, high), sd, int(x.size))


#: How :attr:`Replicated.ettr` is estimated (printed in JSON and in the CLI table).
ETTR_ESTIMATOR = ("ratio of sums: Σ useful / Σ wall over replications, delta-method "
                  "Student-t 95% CI")


@dataclass(frozen=True)
class Analytical:
    """Closed forms where their assumptions hold (exponential failures, one level, …)."""

    wall_time_s: float | None = None
    daly_formula_wall_time_s: float | None = None
    ettr: float | None = None

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Replicated:
    """Statistics over replications of one configuration (a summary or a sweep point).

    ``ettr`` is THE ETTR: Σ useful / Σ wall with a delta-method Student-t 95% interval
    (:data:`ETTR_ESTIMATOR`); ``ettr_per_run`` the mean of per-replication ratios with
    its Student-t interval (AIReSim's ETR). ``ops`` holds the means of
    :class:`OpsCounts` over replications and ``depleted_runs`` how many ended depleted.
    """

    replications: int
    wall_time_s: MeanCI
    ettr: MeanCI
    failures: MeanCI
    checkpoints: MeanCI
    breakdown_s: Breakdown
    failures_by_cause: dict[str, float] = field(default_factory=dict)
    ettr_per_run: MeanCI | None = None
    ops: dict[str, float] | None = None
    depleted_runs: int = 0

    def to_dict(self) -> dict:
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out = {k: (v.to_dict() if hasattr(v, "to_dict") else v) for k, v in out.items()}
        out["failures_by_cause"] = dict(self.failures_by_cause)
        out["ops"] = dict(self.ops) if self.ops is not None else None
        out["ettr_estimator"] = ETTR_ESTIMATOR
        return out


def _ops_means(results: Sequence[RepResult]) -> dict[str, float] | None:
    ops = [r.ops for r in results if r.ops is not None]
    if not ops:
        return None
    return {k: float(np.mean([getattr(o, k) for o in ops])) for k in OPS_KEYS}


def replicated(results: Sequence[RepResult], cause_names: Sequence[str] = ()) -> Replicated:
    """Means and 95% intervals over replications (see :class:`Replicated`)."""
    n = len(results)
    by_cause = np.sum([r.by_cause for r in results], axis=0) if cause_names else []
    return Replicated(
        replications=n,
        wall_time_s=mean_ci95([r.wall_s for r in results], low=0.0),
        ettr=ratio_ci95([r.useful_s for r in results], [r.wall_s for r in results]),
        failures=mean_ci95([r.failures for r in results], low=0.0),
        checkpoints=mean_ci95([r.checkpoints for r in results], low=0.0),
        breakdown_s=Breakdown.mean_of([r.breakdown for r in results]),
        failures_by_cause={name: float(c) / n for name, c in zip(cause_names, by_cause,
                                                                 strict=True) if c},
        ettr_per_run=mean_ci95([r.ettr for r in results], low=0.0, high=1.0),
        ops=_ops_means(results),
        depleted_runs=sum(1 for r in results if r.ops is not None and r.ops.depleted))


def replicated_from_rows(rows: Sequence[Sequence[float]]) -> Replicated:
    """The same statistics from store rows of :data:`OUTCOME_KEYS` values."""
    cols = dict(zip(OUTCOME_KEYS, zip(*rows, strict=True), strict=True))
    return Replicated(
        replications=len(rows),
        wall_time_s=mean_ci95(cols["wall_s"], low=0.0),
        ettr=ratio_ci95(cols["useful_s"], cols["wall_s"]),
        failures=mean_ci95(cols["failures"], low=0.0),
        checkpoints=mean_ci95(cols["checkpoints"], low=0.0),
        breakdown_s=Breakdown(**{k: float(np.mean(cols[k])) for k in BREAKDOWN_KEYS}),
        ettr_per_run=mean_ci95(cols["ettr"], low=0.0, high=1.0))


@dataclass(frozen=True)
class Semantics:
    """The failure semantics a run simulated (printed next to its results)."""

    start: str                  # stationary | fresh
    exposure: str               # in_use | running
    idle_rate_factor: float
    hardware_share: float       # share of causes that also strike a job not running
    lose_work: bool
    failure_rate_per_h: float   # the job's failure rate while it runs, from t = 0

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class SimSummary:
    """What ``testbed simulate`` reports: the resolved job and its replicated outcome."""

    scenario: str
    engine: str
    seed: int
    policy: str
    nodes: int
    work_s: float
    step_s: float | None
    job_mtbf_s: float | None
    checkpoint_interval_s: float | None
    checkpoint_cost_s: float
    restart_s: float
    young_interval_s: float | None
    daly_interval_s: float | None
    stats: Replicated
    analytical: Analytical
    events_file: str | None = None
    semantics: Semantics | None = None
    #: why replication stopped: ``fixed`` count, ``target reached`` or ``maximum reached``
    stopped: str = "fixed"
    target_ci: dict | None = None

    def to_dict(self) -> dict:
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "stats"}
        out["analytical"] = self.analytical.to_dict()
        out["semantics"] = self.semantics.to_dict() if self.semantics else None
        out.update(self.stats.to_dict())
        return out
