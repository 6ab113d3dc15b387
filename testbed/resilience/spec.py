"""The engines' input: a resolved job (:class:`SimSpec`), and the pure math that plans it.

A :class:`SimSpec` is what both simulator engines run: the checkpoint plan, the
failure model, spares, and the figures reports show next to the results
(:class:`SpecFacts`). Turning a scenario file into one — reading profiles, traces and
cause tables, asking the oracle — is the application's job (:mod:`testbed.app.resolve`);
this module only holds the frozen specs and the closed form of the expected wall time
where one holds (a policy's interval is the policy's: :mod:`testbed.resilience.ckpt_policy`).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, Literal, get_args

from testbed.resilience import closed_forms, intervals
from testbed.resilience.exposure import cause_tables, phase_speeds
from testbed.resilience.failures import FailureModel
from testbed.resilience.lifecycle import PLAIN, Lifecycle
from testbed.resilience.maintenance import Windows
from testbed.resilience.plan import JobPlan

#: The simulator engines: the fast exact path and the step-by-step SimPy engine.
Engine = Literal["fast", "simpy"]
ENGINES: tuple[str, ...] = get_args(Engine)


@dataclass(frozen=True)
class LevelFacts:
    """One checkpoint level as reports show it."""

    name: str
    cost_s: float
    load_s: float
    every: int

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class SpecFacts:
    """Deterministic facts of a resolved job that reports plot next to its results."""

    policy: str
    nodes: int
    work_s: float
    interval_s: float | None
    ckpt_cost_s: float
    load_s: float
    restart_s: float
    job_mtbf_s: float | None
    young_interval_s: float | None
    daly_interval_s: float | None
    analytical_wall_s: float | None
    levels: tuple[LevelFacts, ...] = ()
    infeasible: str | None = None

    def to_dict(self) -> dict:
        out = asdict(self)
        out["levels"] = [lv.to_dict() for lv in self.levels]
        return out

    @classmethod
    def from_dict(cls, data: dict) -> SpecFacts:
        if data.get("infeasible") and "policy" not in data:
            return cls.infeasible_point(data["infeasible"])
        values: dict[str, Any] = {k: data.get(k) for k in cls.__dataclass_fields__
                                  if k != "levels"}
        values["levels"] = tuple(LevelFacts(**lv) for lv in data.get("levels", ()))
        return cls(**values)

    @classmethod
    def infeasible_point(cls, reason: str) -> SpecFacts:
        """The facts of a point the oracle cannot run (kept, with its reason)."""
        return cls(policy="", nodes=0, work_s=0.0, interval_s=None, ckpt_cost_s=0.0,
                   load_s=0.0, restart_s=0.0, job_mtbf_s=None, young_interval_s=None,
                   daly_interval_s=None, analytical_wall_s=None, infeasible=reason)


#: Default hard caps of one replication (configurable in ``simulation``): far above any
#: job that finishes in useful time, low enough that a runaway one stops in seconds.
DEFAULT_MAX_FAILURES = 2_000_000
DEFAULT_MAX_SIMULATED_S = 1000 * 365.25 * 86400.0   # a thousand years


@dataclass(frozen=True)
class RunLimits:
    """Hard caps of one replication; an engine that reaches one raises
    :class:`~testbed.errors.RunawayError` naming the scenario file (``source``)."""

    max_failures: int = DEFAULT_MAX_FAILURES
    max_simulated_s: float = DEFAULT_MAX_SIMULATED_S
    source: str | None = None

    def check(self, failures: int, t_s: float, rep: int) -> None:
        """Raise when a replication has gone past a cap."""
        if failures <= self.max_failures and t_s <= self.max_simulated_s:
            return
        from testbed.errors import RunawayError
        what = (f"{failures:,} failures" if failures > self.max_failures
                else f"{t_s / 86400 / 365.25:,.0f} simulated years")
        raise RunawayError(f"replication {rep} stopped after {what}: this job does not finish "
                           "in reasonable time (raise simulation.max_failures or "
                           "simulation.max_simulated_time if that is intended)",
                           source=self.source, field="simulation")


#: Figures an adaptive run can aim its confidence interval at.
TargetFigure = Literal["ettr", "wall_time", "failures"]
TARGET_FIGURES: tuple[str, ...] = get_args(TargetFigure)


@dataclass(frozen=True)
class TargetCI:
    """Replicate in deterministic batches until the 95% half-width of ``figure`` is at
    most ``relative_half_width`` of its estimate (at least ``min_reps``, at most
    ``max_reps`` replications)."""

    figure: str
    relative_half_width: float
    min_reps: int
    max_reps: int


@dataclass(frozen=True)
class SimSpec:
    """A resolved scenario: plan, failure model, spares and the analytical estimate."""

    name: str
    plan: JobPlan
    failures: FailureModel
    spares: int | None
    nodes: int
    policy: str
    job_mtbf_s: float
    ckpt_cost_s: float
    restart_s: float                   # load + detection + requeue (mean over causes)
    analytical_wall_s: float | None    # exact expectation of this job where a closed form holds
    daly_formula_wall_s: float | None  # Daly's T_w = M e^{R/M}(e^{(τ+δ)/M} − 1) T_s/τ
    step_s: float | None = None
    state_bytes: int | None = None
    limits: RunLimits = field(default_factory=RunLimits)
    lifecycle: Lifecycle = PLAIN
    windows: Windows | None = None
    target: TargetCI | None = None
    #: the derived checkpoint cost term by term (who writes, d2h, serialise, transfer,
    #: metadata, fsync; see testbed.resilience.ckpt_cost), None when given or legacy
    checkpoint_terms: dict | None = field(default=None, compare=False)

    @property
    def failure_rate_per_s(self) -> float:
        """Failures per second of the job while it runs, as simulated from t = 0."""
        return 1.0 / self.job_mtbf_s if math.isfinite(self.job_mtbf_s) else 0.0

    @property
    def facts(self) -> SpecFacts:
        plan = self.plan
        mtbf = self.job_mtbf_s if math.isfinite(self.job_mtbf_s) else None
        young, daly = optimum_intervals_s(self.ckpt_cost_s, mtbf)
        return SpecFacts(
            policy=self.policy, nodes=self.nodes, work_s=plan.work_s,
            interval_s=plan.interval_s if plan.levels else None,
            ckpt_cost_s=self.ckpt_cost_s, load_s=plan.restart_load_s, restart_s=self.restart_s,
            job_mtbf_s=mtbf, young_interval_s=young, daly_interval_s=daly,
            analytical_wall_s=self.analytical_wall_s,
            levels=tuple(LevelFacts(lv.name, lv.cost_s, lv.load_s, lv.every)
                         for lv in plan.levels))


def optimum_intervals_s(cost_s: float, mtbf_s: float | None
                        ) -> tuple[float | None, float | None]:
    """Young's and Daly's (higher-order) optimum intervals, or None without failures."""
    if not mtbf_s or not math.isfinite(mtbf_s) or cost_s <= 0:
        return None, None
    return (intervals.young_interval_s(cost_s, mtbf_s),
            intervals.daly_higher_order_interval_s(cost_s, mtbf_s))


def closed_form_wall_s(model: FailureModel, plan: JobPlan, *, cost_s: float, restart_s: float,
                       mtbf_s: float, spares: int | None, life: Lifecycle = PLAIN,
                       nodes: int = 1, windows: Windows | None = None
                       ) -> tuple[float | None, float | None]:
    """(exact expected wall time, Daly's formula) where their assumptions hold, else None.

    Assumptions: exponential failures of one detection and restart cost, a single level,
    no background persist, no bursts, maintenance or other node operations, every level
    surviving; replacements at hand (no spare limit) or one node without a spare waiting
    for its repair. The restart semantics are the simulator's (see
    :mod:`testbed.resilience.closed_forms`). Daly's formula is returned beside it.
    """
    if not model.has_failures and windows is None:
        return plan.failure_free_s(), None
    if (model.trace is not None or model.interarrival is None or windows is not None
            or model.interarrival.kind != "exponential"
            or model.burst_probability or model.maintenance_every_s is not None
            or len(plan.levels) > 1 or plan.persist_s or not life.is_simple()):
        return None, None
    causes = model.causes
    extras = {(c.detect_s, c.restart_s) for c in causes}
    if len(extras) > 1 or any(c.survives is not None for c in causes):
        return None, None
    detect, requeue = next(iter(extras)) if extras else (0.0, 0.0)
    down = _expected_down_s(model, model.interarrival.mean_s, nodes, spares, detect,
                            requeue + plan.load_of(0))
    if down is None:
        return None, None
    if not model.lose_work:
        return closed_forms.no_loss_expected_s(plan.failure_free_s(), mtbf_s, down), None
    if not plan.levels:
        return closed_forms.segments_expected_s([plan.work_s], mtbf_s, down), None
    # n − 1 equal segments and the last one, summed in closed form (10¹⁵ segments are
    # two terms, not a list of 10¹⁵ lengths)
    exact = closed_forms.segments_expected_s([plan.last_s + cost_s], mtbf_s, down)
    if plan.n_segments > 1:
        exact += (plan.n_segments - 1) * closed_forms.segments_expected_s(
            [plan.interval_s + cost_s], mtbf_s, down)
    daly = intervals.daly_expected_wall_time_s(plan.work_s, plan.interval_s, cost_s,
                                               restart_s, mtbf_s)
    return exact, daly


def _expected_down_s(model: FailureModel, gap_mean_s: float, nodes: int,
                     spares: int | None, detect_s: float, rest_s: float) -> float | None:
    """E[A] of the restart after a failure, where a closed form holds (else None);
    ``gap_mean_s`` is the mean time between failures of the model's clock."""
    _, _, p_hw = cause_tables(model)
    speed = phase_speeds(model, p_hw)[1]
    if not model.per_node:
        if spares is not None:
            return None
        return closed_forms.expected_down_job_s(gap_mean_s, speed,
                                                detect_s + rest_s)
    repairs = {c.repair_s for c in model.causes if not c.job_induced}
    if spares is None:
        return closed_forms.expected_down_nodes_s(nodes, gap_mean_s, speed,
                                                  p_hw, detect_s, rest_s)
    if nodes == 1 and spares == 0 and len(repairs) == 1:
        return closed_forms.expected_down_nodes_s(1, gap_mean_s, speed, p_hw,
                                                  detect_s, rest_s, repair_s=repairs.pop())
    return None
