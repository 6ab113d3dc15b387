"""Studies a scenario report shows, run through the sweep machinery.

:func:`interval_study` answers "how does ETTR depend on the checkpoint interval?" for
one scenario: the scenario re-planned with ``policy: fixed`` at multiples of a base
interval, every point validated and resolved by :func:`~testbed.app.sweep.runner.plan_points`
and simulated by :func:`~testbed.app.sweep.runner.point_rows` like any sweep point, with
the scenario's own replication count and **common random numbers** (every point uses
the scenario's seed), so points differ only by their interval.

The base interval is the scenario's own, so the study's 1× point *is* the scenario
and equals its summary exactly. A multi-level scenario is studied as single-level
checkpoints to its slowest level (what the fast levels buy shows as the gap), based
on Daly's interval for that level. Intervals whose segment (interval + checkpoint)
exceeds :data:`MAX_SEGMENT_MTBFS` job MTBFs are left out — each such segment needs
about e^that many attempts — and the study says which it left out.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from simulators.run import event_log, simulate
from testbed.app.progress import Progress
from testbed.app.resolve import (
    OracleComparison,
    oracle_comparison,
    oracle_estimate,
    resolve,
)
from testbed.app.resolve.runaway import refuse_stepwise
from testbed.app.sweep.runner import plan_points, point_rows
from testbed.outcomes import OUTCOME_KEYS, Replicated, SimSummary, replicated_from_rows
from testbed.resilience.spec import SimSpec, SpecFacts, optimum_intervals_s
from testbed.scenario.schema import Scenario

#: Intervals of the study, as multiples of the base interval.
MULTIPLES = (0.25, 0.35, 0.5, 0.7, 1.0, 1.4, 2.0, 2.8, 4.0)
#: Longest segment (interval + checkpoint) studied, in job MTBFs.
MAX_SEGMENT_MTBFS = 2.5
#: Where useful and wall seconds sit in a replication's outcome row.
_USEFUL, _WALL = OUTCOME_KEYS.index("useful_s"), OUTCOME_KEYS.index("wall_s")


@dataclass(frozen=True)
class StudyPoint:
    """One interval of the study and its replicated outcome."""

    multiple: float
    interval_s: float
    stats: Replicated
    analytic_wall_s: float | None
    #: ``(useful_s, wall_s)`` of each replication, in replication order: on common
    #: random numbers replication r of every point saw the same draws, so two points
    #: are compared pair by pair (:func:`testbed.app.report.common.paired_ettr_difference`).
    replications_useful_wall_s: tuple[tuple[float, float], ...] = ()

    def to_dict(self) -> dict:
        return {"multiple": self.multiple, "interval_s": self.interval_s,
                "analytic_wall_s": self.analytic_wall_s, **self.stats.to_dict()}


@dataclass(frozen=True)
class IntervalStudy:
    """ETTR against the checkpoint interval for one scenario (see the module docstring)."""

    base: str                       # what 1× is
    base_interval_s: float
    young_interval_s: float | None
    daly_interval_s: float | None
    replications: int
    seed: int
    single_level: bool              # a multi-level scenario studied as one level
    points: tuple[StudyPoint, ...]
    left_out: tuple[float, ...] = ()   # multiples left out as unfinishable

    def to_dict(self) -> dict:
        return {"base": self.base, "base_interval_s": self.base_interval_s,
                "young_interval_s": self.young_interval_s,
                "daly_interval_s": self.daly_interval_s, "replications": self.replications,
                "seed": self.seed, "single_level": self.single_level,
                "left_out_multiples": list(self.left_out),
                "points": [p.to_dict() for p in self.points]}


def _base(facts: SpecFacts) -> tuple[str, float | None, float, float | None, float | None]:
    """(label, base interval, studied checkpoint cost, Young, Daly) of the study."""
    if len(facts.levels) > 1:
        slowest = facts.levels[-1]
        young, daly = optimum_intervals_s(slowest.cost_s, facts.job_mtbf_s)
        return (f"Daly's interval for level {slowest.name!r}", daly, slowest.cost_s,
                young, daly)
    if facts.interval_s is not None and facts.ckpt_cost_s > 0:
        return ("the scenario's interval", facts.interval_s, facts.ckpt_cost_s,
                facts.young_interval_s, facts.daly_interval_s)
    return "", None, facts.ckpt_cost_s, None, None


def _checkpoint_overrides(sc: Scenario, facts: SpecFacts, interval_s: float) -> dict:
    """The point's overrides: single-level fixed checkpoints every ``interval_s``."""
    levels = facts.levels
    multi = len(levels) > 1
    cost = levels[-1].cost_s if multi else facts.ckpt_cost_s
    load = levels[-1].load_s if multi else facts.load_s
    ck = {"policy": "fixed", "interval": interval_s, "cost": cost, "restart": load}
    if not multi and sc.checkpoint.persist:
        ck["persist"] = sc.checkpoint.persist
    out = {"checkpoint": ck}
    if multi and sc.failures is not None:
        # causes name the levels that survive them; the study's one level is the
        # slowest, which the resolver names "checkpoint"
        f = sc.failures.model_dump(mode="json", exclude_none=True)
        slowest = levels[-1].name
        entries = (f["causes"] if isinstance(f.get("causes"), list) else []) + list(
            f.get("category_costs", {}).values())
        for entry in entries:
            if entry.get("survives") is not None:
                entry["survives"] = ["checkpoint"] if slowest in entry["survives"] else []
        out["failures"] = f
    return out


def interval_study(sc: Scenario, spec: SimSpec, *, replications: int, seed: int,
                   engine: str = "fast", progress: Callable[[int], None] | None = None
                   ) -> IntervalStudy | None:
    """The study of the module docstring (None without failures or checkpoint cost)."""
    facts = spec.facts
    label, base, cost, young, daly = _base(facts)
    if base is None or not facts.job_mtbf_s:
        return None
    kept = [m for m in MULTIPLES if base * m + cost <= MAX_SEGMENT_MTBFS * facts.job_mtbf_s]
    left = tuple(m for m in MULTIPLES if m not in kept)
    raw = sc.model_dump(mode="json", exclude={"source", "lines"}, exclude_none=True)
    if spec.step_s is not None and raw.get("workload", {}).get("steps"):
        raw["workload"] = {"steps": raw["workload"]["steps"], "step_time": spec.step_s}
    overrides = [_checkpoint_overrides(sc, facts, base * m) for m in kept]
    points, specs, _facts = plan_points(raw, sc, sc.source or "<study>", overrides,
                                        replications=replications, seed=seed, engine=engine,
                                        common_seed=True)
    out = []
    for m, point, s in zip(kept, points, specs, strict=True):
        if not isinstance(s, SimSpec):      # infeasible (an HPO point never gets here)
            continue
        rows = point_rows(s, point.seed, point.replications, point.engine)
        if progress is not None:
            progress(point.replications)
        outcomes = [r[1:-1] for r in rows]
        out.append(StudyPoint(multiple=m, interval_s=s.plan.interval_s,
                              stats=replicated_from_rows(outcomes),
                              analytic_wall_s=s.analytical_wall_s,
                              replications_useful_wall_s=tuple(
                                  (float(o[_USEFUL]), float(o[_WALL])) for o in outcomes)))
    return IntervalStudy(base=label, base_interval_s=base, young_interval_s=young,
                         daly_interval_s=daly, replications=replications, seed=seed,
                         single_level=len(facts.levels) > 1, points=tuple(out), left_out=left)


def study_size(spec: SimSpec) -> int:
    """How many points :func:`interval_study` will simulate (for progress bars)."""
    label, base, cost, _y, _d = _base(spec.facts)
    mtbf = spec.facts.job_mtbf_s
    if base is None or not mtbf:
        return 0
    return sum(1 for m in MULTIPLES if base * m + cost <= MAX_SEGMENT_MTBFS * mtbf)


#: The input precision every other is compared with (how scientific data usually arrive).
BASELINE_INPUT_PRECISION = "fp32"


@dataclass(frozen=True)
class PrecisionSide:
    """One input precision of the comparison: the oracle's step and the simulated run."""

    input_precision: str
    input_bytes_per_sample: float
    dataset_bytes: float
    time_per_iteration_s: float
    io_s: float
    compute_s: float
    bottleneck: str
    wall_time_s: float
    ettr: float

    def to_dict(self) -> dict:
        return dict(self.__dict__)


@dataclass(frozen=True)
class InputPrecisionComparison:
    """The scenario's input precision against fp32 inputs, same seed and replications."""

    scenario: PrecisionSide
    baseline: PrecisionSide

    @property
    def speedup(self) -> float:
        """fp32 wall time over the scenario's (>1: the lower precision is faster)."""
        return self.baseline.wall_time_s / self.scenario.wall_time_s

    def to_dict(self) -> dict:
        return {"scenario": self.scenario.to_dict(), "baseline": self.baseline.to_dict(),
                "speedup": self.speedup}


def _side(sc: Scenario, summary: SimSummary) -> PrecisionSide:
    est = oracle_estimate(sc)
    return PrecisionSide(
        input_precision=(sc.workload.input_precision if sc.workload else None) or "uint8",
        input_bytes_per_sample=est.input_bytes_per_sample or 0.0,
        dataset_bytes=est.dataset_bytes or 0.0, time_per_iteration_s=est.iteration_s,
        io_s=est.io_s or 0.0, compute_s=est.compute_s or 0.0, bottleneck=est.bottleneck or "",
        wall_time_s=summary.stats.wall_time_s.mean, ettr=summary.stats.ettr.mean)


def input_precision_comparison(sc: Scenario, summary: SimSummary, *, replications: int,
                               seed: int, engine: str) -> InputPrecisionComparison | None:
    """The same scenario with fp32 inputs (common random numbers), when the scenario stores
    its inputs at another precision and takes its step time from the oracle."""
    w = sc.workload
    if (w is None or not w.input_precision or w.input_precision == BASELINE_INPUT_PRECISION
            or w.steps is None or w.step_time is not None or sc.model is None):
        return None
    from testbed.scenario.schema import scenario_from_dict
    data = sc.model_dump(mode="json", exclude={"source", "lines"}, exclude_none=True)
    data["workload"]["input_precision"] = BASELINE_INPUT_PRECISION
    base_sc = scenario_from_dict(data, source=sc.source or "<scenario>", lines=sc.lines)
    base = simulate(resolve(base_sc), replications, seed, engine)
    return InputPrecisionComparison(_side(sc, summary), _side(base_sc, base))


@dataclass(frozen=True)
class ScenarioRun:
    """Everything ``testbed run`` computes for one scenario; the report presents it."""

    scenario: Scenario
    comparison: OracleComparison | None
    spec: SimSpec | None
    summary: SimSummary | None
    study: IntervalStudy | None
    events: tuple[dict, ...] = ()
    input_precision: InputPrecisionComparison | None = None

    def to_dict(self) -> dict:
        return {"scenario": self.scenario.name, "source": self.scenario.source,
                "oracle": self.comparison.to_dict() if self.comparison else None,
                "simulation": self.summary.to_dict() if self.summary else None,
                "checkpoint_cost": self.spec.checkpoint_terms if self.spec else None,
                "interval_study": self.study.to_dict() if self.study else None,
                "input_precision": (self.input_precision.to_dict()
                                    if self.input_precision else None)}


def run_scenario(sc: Scenario, *, replications: int | None = None, seed: int | None = None,
                 engine: str | None = None, study: bool = True, events: bool = True,
                 progress: bool = False) -> ScenarioRun:
    """The oracle comparison, the simulated run, the interval study and replication 0's
    event log of a scenario (the parts it has)."""
    comparison = oracle_comparison(sc)
    if sc.workload is None:
        return ScenarioRun(sc, comparison, None, None, None)
    spec = resolve(sc)
    reps = replications or sc.simulation.replications
    seed = sc.simulation.seed if seed is None else seed
    engine = engine or sc.simulation.engine
    refuse_stepwise(spec, engine=engine, events=events, option="or run with --no-report")
    total = reps * (1 + (study_size(spec) if study else 0))
    with Progress(total, unit="rep", desc=sc.name, enabled=progress) as bar:
        summary = simulate(spec, reps, seed, engine, progress=bar.update)
        result = interval_study(sc, spec, replications=reps, seed=seed, engine=engine,
                                progress=bar.update) if study else None
    log = tuple(event_log(spec, seed, 0)) if events else ()
    precision = input_precision_comparison(sc, summary, replications=reps, seed=seed,
                                           engine=engine)
    return ScenarioRun(sc, comparison, spec, summary, result, log, precision)
