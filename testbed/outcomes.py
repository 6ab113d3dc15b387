"""Typed results of the cluster simulator: one replication, and a summary of many.

These frozen dataclasses are what crosses from the engines (``simulators/``) to the
application (CLI, store, report), each with ``to_dict()`` for JSON. One vocabulary of
keys everywhere, units in the names: where the wall time went is always
``useful_s``, ``checkpoint_s``, ``lost_s``, ``restart_s`` and ``waiting_s``
(:data:`BREAKDOWN_KEYS`), in a replication, a summary, a store row and a report.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, fields

import numpy as np

from testbed.stats import MeanCI, mean_ci95

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
        return out


def close_books(wall_s: float, work_s: float, ckpt_s: float, restart_s: float, wait_s: float,
                failures: int, checkpoints: int, by_cause: list[int]) -> RepResult:
    """A replication's result: lost time is what the other categories do not explain."""
    lost = wall_s - work_s - ckpt_s - restart_s - wait_s
    if -1e-9 * max(wall_s, 1.0) < lost < 0:
        lost = 0.0
    return RepResult(wall_s=wall_s, useful_s=work_s, checkpoint_s=ckpt_s, lost_s=lost,
                     restart_s=restart_s, waiting_s=wait_s, failures=failures,
                     checkpoints=checkpoints, by_cause=tuple(by_cause))


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

    ``ettr`` is the mean over replications of each replication's useful / wall time
    with its Student-t 95% interval; ``ettr_of_means`` is useful / mean wall time
    (the ratio of the means), the figure a whole allocation sees.
    """

    replications: int
    wall_time_s: MeanCI
    ettr: MeanCI
    failures: MeanCI
    checkpoints: MeanCI
    breakdown_s: Breakdown
    failures_by_cause: dict[str, float] = field(default_factory=dict)

    @property
    def ettr_of_means(self) -> float:
        return self.breakdown_s.useful_s / self.wall_time_s.mean

    def to_dict(self) -> dict:
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out = {k: (v.to_dict() if hasattr(v, "to_dict") else v) for k, v in out.items()}
        out["failures_by_cause"] = dict(self.failures_by_cause)
        out["ettr_of_means"] = self.ettr_of_means
        return out


def replicated(results: Sequence[RepResult], cause_names: Sequence[str] = ()) -> Replicated:
    """Means and 95% intervals over replications (see :class:`Replicated`)."""
    n = len(results)
    by_cause = np.sum([r.by_cause for r in results], axis=0) if cause_names else []
    return Replicated(
        replications=n,
        wall_time_s=mean_ci95([r.wall_s for r in results], low=0.0),
        ettr=mean_ci95([r.ettr for r in results], low=0.0, high=1.0),
        failures=mean_ci95([r.failures for r in results], low=0.0),
        checkpoints=mean_ci95([r.checkpoints for r in results], low=0.0),
        breakdown_s=Breakdown.mean_of([r.breakdown for r in results]),
        failures_by_cause={name: float(c) / n for name, c in zip(cause_names, by_cause,
                                                                 strict=True) if c})


def replicated_from_rows(rows: Sequence[Sequence[float]]) -> Replicated:
    """The same statistics from store rows of :data:`OUTCOME_KEYS` values."""
    cols = dict(zip(OUTCOME_KEYS, zip(*rows, strict=True), strict=True))
    return Replicated(
        replications=len(rows),
        wall_time_s=mean_ci95(cols["wall_s"], low=0.0),
        ettr=mean_ci95(cols["ettr"], low=0.0, high=1.0),
        failures=mean_ci95(cols["failures"], low=0.0),
        checkpoints=mean_ci95(cols["checkpoints"], low=0.0),
        breakdown_s=Breakdown(**{k: float(np.mean(cols[k])) for k in BREAKDOWN_KEYS}))


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

    def to_dict(self) -> dict:
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "stats"}
        out["analytical"] = self.analytical.to_dict()
        out.update(self.stats.to_dict())
        return out
