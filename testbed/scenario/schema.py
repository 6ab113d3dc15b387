"""Scenario files: the pydantic schema and a YAML loader whose errors say where.

A scenario says *what* is trained (``model``, ``parallelism``, ``workload``), *on what*
(``system``, ``cluster``), what goes wrong (``failures``), how the job protects itself
(``checkpoint``) and how to simulate it (``simulation``). The same file drives the
oracle (``system``/``model``/``parallelism``) and the simulator (the rest).

Durations are written ``30s``, ``5min``, ``24h`` or as plain seconds and are stored in
seconds; sizes (``2GiB``) in bytes; bandwidths (``12.5GB/s``) in bytes per second.
Unknown keys are errors, with a did-you-mean hint. Every error names the file, the
line where the YAML loader can tell, and the key path (``failures.mtbf``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

from pydantic import Field, model_validator

from testbed.errors import InputError, ScenarioError
from testbed.io.read import load_yaml
from testbed.io.schema import (
    Bandwidth,
    Duration,
    PositiveDuration,
    Size,
    Strict,
    line_for,
    one_of,
    validate,
)
from testbed.oracle.names import ScheduleName, StrategyName
from testbed.oracle.state import PrecisionName
from testbed.resilience.ckpt_cost import CkptTier, Writers
from testbed.resilience.ckpt_policy import POLICIES, DalyOrder, policy
from testbed.resilience.ckpt_policy import PolicyName as Policy
from testbed.resilience.distributions import DRAWN_KINDS, FAMILIES, DrawnKind, Family
from testbed.resilience.exposure import EXPOSURES, STARTS, ClockStart, Exposure
from testbed.resilience.lifecycle import (
    COMBINE,
    CONVENTION_PRESETS,
    DEPLETION_RULES,
    ESCALATE,
    HOST_SCOPES,
    INITIAL_SELECTIONS,
    PREEMPT_RULES,
    STALL_COUNTS,
    Combine,
    DepletionRule,
    Escalate,
    HostScope,
    InitialSelection,
    PreemptRule,
    StallCount,
)
from testbed.resilience.spec import (
    DEFAULT_MAX_FAILURES,
    DEFAULT_MAX_SIMULATED_S,
    ENGINES,
    TARGET_FIGURES,
    Engine,
    TargetFigure,
)
from testbed.scenario.hpo import HpoSpec
from testbed.units import did_you_mean

#: Most replications one scenario may ask for (10⁶ of the fastest job take minutes).
MAX_REPLICATIONS = 1_000_000
#: Most nodes of any pool of a cluster: the largest machines have about 10⁴ nodes
#: (Frontier 9,408; a 100,000-GPU AI cluster 12,500 nodes of 8), and the engines keep
#: per-node state, so 10⁶ is a generous ceiling that keeps memory bounded.
MAX_NODES = 1_000_000
#: Most GPUs of one node (an NVL72 rack-scale domain has 72).
MAX_GPUS_PER_NODE = 1_024

# the closed sets of names a scenario uses (each a Literal, refused with a did-you-mean)
PolicyName = Annotated[Policy, one_of(tuple(POLICIES), "policy")]
DistributionName = Annotated[Family, one_of(FAMILIES, "distribution")]
DrawnKindName = Annotated[DrawnKind, one_of(DRAWN_KINDS, "distribution")]
StartName = Annotated[ClockStart, one_of(STARTS, "start")]
ExposureName = Annotated[Exposure, one_of(EXPOSURES, "exposure")]
EscalateName = Annotated[Escalate, one_of(ESCALATE, "mode")]
CombineName = Annotated[Combine, one_of(COMBINE, "rule", choose="choose any or all")]
FigureName = Annotated[TargetFigure, one_of(TARGET_FIGURES, "figure")]
EngineName = Annotated[Engine, one_of(ENGINES, "engine")]


class ModelSpec(Strict):
    """What is trained, for the oracle: a zoo name plus input and numerics."""

    name: str
    input_shape: str | list[int] | None = None
    precision: PrecisionName = "fp32"
    optimizer: str = "momentum"
    sequence_length: int | None = Field(default=None, gt=0)


class ParallelismSpec(Strict):
    """How it is trained, for the oracle: strategy, GPU count, batch."""

    strategy: StrategyName = "data"
    gpus: int = Field(gt=0)
    global_batch: int = Field(gt=0)
    group_size: int | None = Field(default=None, gt=0)
    micro_batches: int | None = Field(default=None, gt=0)
    schedule: ScheduleName | None = None


class Workload(Strict):
    """How much training: failure-free compute time, or a number of steps.

    ``steps`` with ``step_time`` needs no oracle; ``steps`` alone takes the step time
    from the oracle (``system``, ``model`` and ``parallelism`` must be given).
    """

    compute_time: PositiveDuration | None = None
    steps: int | None = Field(default=None, gt=0)
    step_time: PositiveDuration | None = None
    #: how input samples are stored and moved (fp32, fp16, bf16, int8 … int2, uint8):
    #: bytes per sample in the oracle's dataset, staging, host-to-device and input memory
    input_precision: str | None = None

    @model_validator(mode="after")
    def _one_kind(self) -> Workload:
        if self.input_precision is not None:
            from testbed.oracle.state import input_bytes_per_value
            try:
                input_bytes_per_value(self.input_precision)
            except InputError as exc:
                raise ValueError(f"[input_precision] {exc.message}") from None
        if (self.compute_time is None) == (self.steps is None):
            raise ValueError("[compute_time] give exactly one of 'compute_time' or 'steps'")
        if self.compute_time is not None and self.step_time is not None:
            raise ValueError("[step_time] 'step_time' goes with 'steps', not with 'compute_time'")
        return self


class DrawnDuration(Strict):
    """A duration that is fixed (``2h``) or drawn: ``{distribution: exponential, mean: 2h}``
    (``shape`` for weibull, ``sigma`` for lognormal)."""

    distribution: DrawnKindName = "fixed"
    mean: Duration
    shape: float | None = Field(default=None, gt=0)
    sigma: float | None = Field(default=None, gt=0)

    @model_validator(mode="before")
    @classmethod
    def _scalar(cls, value: Any) -> Any:
        return value if isinstance(value, dict) else {"distribution": "fixed", "mean": value}

    @model_validator(mode="after")
    def _consistent(self) -> DrawnDuration:
        if self.distribution != "fixed" and self.mean <= 0:
            raise ValueError("[mean] a drawn duration needs a mean > 0")
        if self.distribution == "weibull" and self.shape is None:
            raise ValueError("[shape] weibull needs 'shape'")
        if self.distribution == "lognormal" and self.sigma is None:
            raise ValueError("[sigma] lognormal needs 'sigma'")
        if self.shape is not None and self.distribution != "weibull":
            raise ValueError("[shape] 'shape' applies to the weibull distribution only")
        if self.sigma is not None and self.distribution != "lognormal":
            raise ValueError("[sigma] 'sigma' applies to the lognormal distribution only")
        return self


Probability = Annotated[float, Field(ge=0, le=1)]


class Costs(Strict):
    """What replacing failed nodes costs the job (fixed or drawn durations)."""

    swap: DrawnDuration = Field(default_factory=lambda: DrawnDuration(mean=0.0))
    host_selection: DrawnDuration = Field(default_factory=lambda: DrawnDuration(mean=0.0))
    preemption: DrawnDuration = Field(default_factory=lambda: DrawnDuration(mean=0.0))


class RepairStage(Strict):
    """One repair stage: its duration and the probability that it reports success but
    did not fix the node (``silent_failure``)."""

    duration: DrawnDuration
    silent_failure: Probability = 0.0


class Repairs(Strict):
    """The repair pipeline: automatic, then manual with probability ``escalation``
    (``escalate: always`` — whatever the automatic outcome, the AIReSim paper's model;
    ``on_failure`` — only when the automatic stage did not fix the node)."""

    automatic: RepairStage
    manual: RepairStage | None = None
    escalation: Probability = 0.0
    escalate: EscalateName = "always"

    @model_validator(mode="after")
    def _consistent(self) -> Repairs:
        if self.escalation > 0 and self.manual is None:
            raise ValueError("[manual] an escalation probability needs a 'manual' stage")
        return self


class Diagnosis(Strict):
    """How well failures are diagnosed: ``miss`` — the node goes back untouched (the
    restart is still paid); ``wrong_node`` — another node of the job is repaired while
    the culprit stays."""

    miss: Probability = 0.0
    wrong_node: Probability = 0.0


class Regeneration(Strict):
    """Bad nodes appear over time (AIReSim's ``bad_server_regeneration``): every
    ``every``, max(1, ⌊good · fraction · share⌋) good nodes turn bad."""

    every: PositiveDuration
    share: float = Field(default=0.1, gt=0, le=1)


class BadNodes(Strict):
    """A ``fraction`` of bad nodes failing at (1 + ``multiplier``)× the rate until a
    repair fixes them (``regeneration``: more turn bad over time)."""

    fraction: Probability
    multiplier: float = Field(ge=0)
    regeneration: Regeneration | None = None


class Conventions(Strict):
    """Where the testbed's operations and AIReSim's differ, the one to run (each field's
    first value is the testbed's; see the README's table of differences)."""

    host_selection: Annotated[HostScope, one_of(HOST_SCOPES, "host selection")] = \
        "empty_slots"
    preemption: Annotated[PreemptRule, one_of(PREEMPT_RULES, "preemption rule")] = \
        "to_refill_standbys"
    initial_selection: Annotated[InitialSelection, one_of(INITIAL_SELECTIONS,
                                                          "initial selection")] = "free"
    depletion: Annotated[DepletionRule, one_of(DEPLETION_RULES, "depletion rule")] = \
        "no_repair_pending"
    stalls: Annotated[StallCount, one_of(STALL_COUNTS, "stall count")] = "episodes"


ConventionPreset = Annotated[str, one_of(tuple(CONVENTION_PRESETS), "conventions")]


class WindowRetirement(Strict):
    """Retire a node with ``failures`` recorded failures within ``within``."""

    failures: int = Field(gt=0)
    within: PositiveDuration


class ScoreRetirement(Strict):
    """score = initial − penalty·failures + increment·(complete ``period``s of uptime in
    each uninterrupted run); retire at or below ``threshold`` (null: only score, for
    ``host_selection: highest_score``)."""

    initial: float = 100.0
    penalty: float = Field(default=30.0, ge=0)
    increment: float = Field(default=10.0, ge=0)
    period: PositiveDuration = 86400.0
    threshold: float | None = 0.0


class Retirement(Strict):
    """Retirement after repair by a failure window, a score, or both (``combine``)."""

    window: WindowRetirement | None = None
    score: ScoreRetirement | None = None
    combine: CombineName = "any"

    @model_validator(mode="after")
    def _consistent(self) -> Retirement:
        if self.window is None and self.score is None:
            raise ValueError("[window] give a 'window' or a 'score' rule (or both)")
        return self


HOST_POLICIES = ("random", "fewest_failures", "highest_score")


class Cluster(Strict):
    """Nodes the job needs, spare nodes, how long a failed node is away, and how the
    cluster is operated (see the README, "Cluster operations").

    ``spares`` omitted means replacements are always at hand (no waiting); an integer
    means an idle pool of that many nodes, refilled as failed nodes come back from
    repair, so that a job without a free node waits for a repair. ``working_pool`` (the
    job's nodes, its standbys and the idle pool together) may be given instead.
    """

    nodes: int | None = Field(default=None, gt=0, le=MAX_NODES)
    gpus_per_node: int | None = Field(default=None, gt=0, le=MAX_GPUS_PER_NODE)
    spares: int | None = Field(default=None, ge=0, le=MAX_NODES)
    repair: Duration = 0.0
    standbys: int = Field(default=0, ge=0, le=MAX_NODES)
    working_pool: int | None = Field(default=None, gt=0, le=MAX_NODES)
    spare_pool: int = Field(default=0, ge=0, le=MAX_NODES)
    technicians: int | None = Field(default=None, gt=0, le=MAX_NODES)
    costs: Costs = Field(default_factory=Costs)
    host_selection: str = "random"
    repairs: Repairs | None = None
    diagnosis: Diagnosis = Field(default_factory=Diagnosis)
    bad_nodes: BadNodes | None = None
    node_rates: str | None = None
    retirement: Retirement | None = None
    #: ``testbed`` (default), ``airesim``, or each operation's convention by name
    conventions: ConventionPreset | Conventions = "testbed"

    @model_validator(mode="after")
    def _consistent(self) -> Cluster:
        hs = self.host_selection
        if ":" not in hs and hs not in HOST_POLICIES:
            raise ValueError(f"[host_selection] unknown host-selection policy {hs!r}"
                             f"{did_you_mean(hs, HOST_POLICIES)}; choose one of "
                             f"{', '.join(HOST_POLICIES)} or name a Python policy as "
                             "'module:function'")
        if hs == "highest_score" and (self.retirement is None or self.retirement.score is None):
            raise ValueError("[host_selection] 'highest_score' needs retirement.score (set "
                             "its threshold to null to score nodes without retiring them)")
        if self.working_pool is not None and self.spares is not None:
            raise ValueError("[working_pool] give 'working_pool' or 'spares', not both")
        return self


class Burst(Strict):
    """Correlated failures: a failure brings ``size`` more within ``window``, with ``probability``."""

    probability: float = Field(gt=0, le=1)
    size: int = Field(default=1, gt=0)
    window: PositiveDuration


class Maintenance(Strict):
    """Planned maintenance windows: every ``every``, lasting ``duration``, first at ``first``."""

    every: PositiveDuration
    duration: PositiveDuration
    first: Duration | None = None


class CauseCost(Strict):
    """Repair and restart costs of one cause or category of failure; ``job_induced``
    marks causes that come from the job (strike only while it runs, no repair)."""

    repair: Duration | None = None
    detect: Duration | None = None
    restart: Duration | None = None
    survives: list[str] | None = None
    job_induced: bool | None = None


class Cause(CauseCost):
    """One failure cause: relative weight (count or probability) plus its costs."""

    name: str
    weight: float = Field(gt=0)
    category: str | None = None


class Failures(Strict):
    """How failures arrive: a distribution of inter-arrival times, or a trace to replay.

    ``mtbf`` is the mean time between failures of the whole job; ``node_mtbf`` is per
    node, so that the job's failure rate scales with its node count. ``start``,
    ``exposure``, ``idle_rate_factor`` and ``lose_work`` set the failure semantics (see
    :mod:`testbed.resilience.exposure` and the README, "Failure semantics");
    ``maintenance`` windows are planned stops.
    """

    distribution: DistributionName = "exponential"
    mtbf: PositiveDuration | None = None
    node_mtbf: PositiveDuration | None = None
    shape: float | None = Field(default=None, gt=0)
    sigma: float | None = Field(default=None, gt=0)
    trace: str | None = None
    detect: Duration = 0.0
    restart: Duration = 0.0
    causes: str | list[Cause] | None = None
    category_costs: dict[str, CauseCost] = Field(default_factory=dict)
    bursts: Burst | None = None
    maintenance: Maintenance | None = None
    #: stationary: every renewal clock starts in equilibrium; fresh: new at t = 0
    start: StartName = "stationary"
    #: in_use: job-induced causes only while running, hardware also while restarting;
    #: running: nothing fails unless the job runs (AIReSim)
    exposure: ExposureName = "in_use"
    #: hazard of a node not in use (waiting, standby, idle) relative to one in use
    idle_rate_factor: Probability = 0.0
    #: false: a failure loses no work (AIReSim-compatible; needs checkpoint.policy none)
    lose_work: bool = True

    @model_validator(mode="after")
    def _consistent(self) -> Failures:
        if self.trace is None and (self.mtbf is None) == (self.node_mtbf is None):
            raise ValueError("[mtbf] give exactly one of 'mtbf' (whole job) or 'node_mtbf' (per node)"
                             ", or a 'trace' to replay")
        if self.shape is not None and self.distribution != "weibull":
            raise ValueError("[shape] 'shape' applies to the weibull distribution only")
        if self.sigma is not None and self.distribution != "lognormal":
            raise ValueError("[sigma] 'sigma' applies to the lognormal distribution only")
        if self.trace is not None:
            given = [k for k in ("mtbf", "node_mtbf", "bursts", "maintenance")
                     if getattr(self, k) is not None]
            if given:
                raise ValueError(f"[{given[0]}] a trace replays recorded failures; "
                                 f"'{given[0]}' cannot be combined with 'trace'")
        if self.maintenance and self.maintenance.duration >= self.maintenance.every:
            raise ValueError("[maintenance.duration] a maintenance window must be shorter "
                             "than its period ('every')")
        if isinstance(self.causes, list):
            names = [c.name for c in self.causes]
            dup = next((n for n in names if names.count(n) > 1), None)
            if dup is not None:
                raise ValueError(f"[causes] cause {dup!r} appears twice")
        return self

    def survives_fields(self) -> list[tuple[str, list[str]]]:
        """(key path, level names) of every ``survives`` list in this section."""
        out = []
        if isinstance(self.causes, list):
            out += [(f"failures.causes[{i}].survives", c.survives)
                    for i, c in enumerate(self.causes) if c.survives is not None]
        out += [(f"failures.category_costs.{k}.survives", v.survives)
                for k, v in self.category_costs.items() if v.survives is not None]
        return out


class Level(Strict):
    """One checkpoint level of a multi-level policy (fastest first)."""

    name: str
    cost: PositiveDuration
    restart: Duration
    every: int = Field(default=1, gt=0)


class Storage(Strict):
    """Storage bandwidths that override the system profile's, for the checkpoint cost model."""

    pfs_write_bandwidth: Bandwidth | None = None
    pfs_read_bandwidth: Bandwidth | None = None
    node_write_bandwidth: Bandwidth | None = None
    node_read_bandwidth: Bandwidth | None = None
    metadata_per_writer: Duration = 0.0


class Checkpoint(Strict):
    """Checkpoint cost and policy.

    ``cost`` is the blocking part of a checkpoint and ``persist`` the part written in the
    background while training continues (asynchronous checkpointing); a checkpoint is
    committed only when both are done. ``restart`` is the time to load a checkpoint.
    Either may be omitted when the state size comes from the oracle or ``state``.
    """

    cost: PositiveDuration | None = None
    persist: Duration = 0.0
    restart: Duration | None = None
    state: Size | None = None
    policy: PolicyName = "daly"
    interval: PositiveDuration | None = None
    every_steps: int | None = Field(default=None, gt=0)
    daly_order: DalyOrder = "higher"
    levels: list[Level] | None = None
    #: who writes a replicated state and where (the physics of the derived cost, see
    #: testbed.resilience.ckpt_cost): one writer per shard, every data-parallel rank its
    #: share, or every rank a full copy; parallel file system, node-local disk or burst buffer
    writers: Writers = "single"
    tier: CkptTier = "pfs"

    @model_validator(mode="after")
    def _consistent(self) -> Checkpoint:
        policy(self.policy).check(self)     # each policy refuses keys that are not its own
        return self


class TargetCI(Strict):
    """Adaptive replications: run in deterministic batches until the 95% half-width of
    ``figure`` is at most ``relative_half_width`` of its estimate."""

    figure: FigureName = "ettr"
    relative_half_width: float = Field(gt=0, lt=1)
    min: int = Field(default=30, gt=1, le=MAX_REPLICATIONS)
    max: int = Field(default=10000, gt=1, le=MAX_REPLICATIONS)

    @model_validator(mode="after")
    def _consistent(self) -> TargetCI:
        if self.max < self.min:
            raise ValueError(f"[max] 'max' ({self.max}) must be at least 'min' ({self.min})")
        return self


class Simulation(Strict):
    """Replications, seed and engine (``fast`` exact path or step-by-step ``simpy``)."""

    replications: int = Field(default=100, gt=0, le=MAX_REPLICATIONS)
    seed: int = Field(default=0, ge=0, lt=2**63)
    engine: EngineName = "fast"
    #: hard caps of one replication (a runaway job stops with a clear error)
    max_failures: int = Field(default=DEFAULT_MAX_FAILURES, gt=0)
    max_simulated_time: PositiveDuration = DEFAULT_MAX_SIMULATED_S
    #: adaptive replication count (replaces ``replications``)
    target_ci: TargetCI | None = None


class Scenario(Strict):
    """A whole scenario file."""

    name: str = "scenario"
    description: str | None = None
    system: str | None = None
    model: ModelSpec | None = None
    parallelism: ParallelismSpec | None = None
    workload: Workload | None = None
    cluster: Cluster = Field(default_factory=Cluster)
    failures: Failures | None = None
    checkpoint: Checkpoint = Field(default_factory=Checkpoint)
    storage: Storage | None = None
    simulation: Simulation = Field(default_factory=Simulation)
    hpo: HpoSpec | None = None
    #: the file the scenario came from (set by :func:`load_scenario`), for error messages
    source: str | None = None
    #: key path → line number in the source file
    lines: dict[str, int] = Field(default_factory=dict, repr=False)

    @model_validator(mode="after")
    def _levels_known(self) -> Scenario:
        ck = self.checkpoint
        levels = [lv.name for lv in ck.levels] if ck.levels else ["checkpoint"]
        if ck.levels:
            dup = next((n for n in levels if levels.count(n) > 1), None)
            if dup is not None:
                raise ValueError(f"[checkpoint.levels] level name {dup!r} appears twice")
        for key, names in (self.failures.survives_fields() if self.failures else []):
            unknown = [n for n in names if n not in levels]
            if unknown:
                raise ValueError(f"[{key}] unknown checkpoint level {unknown[0]!r}"
                                 f"{did_you_mean(unknown[0], levels)}; levels: "
                                 f"{', '.join(levels)}")
        return self

    def error(self, message: str, field: str) -> ScenarioError:
        """A :class:`ScenarioError` naming this scenario's file, line and ``field``."""
        return ScenarioError(message, source=self.source, field=field,
                             line=line_for(self.lines, field))


# --------------------------------------------------------------------------- loading

def scenario_from_dict(data: Any, *, source: str = "<scenario>",
                       lines: dict[str, int] | None = None) -> Scenario:
    """Validate a parsed mapping into a :class:`Scenario`; errors name ``source`` and key."""
    lines = lines or {}
    if not isinstance(data, dict):
        raise ScenarioError("a scenario must be a mapping of keys to values", source=source)
    for reserved in ("source", "lines"):
        if reserved in data:
            raise ScenarioError(f"unknown key {reserved!r}", source=source, field=reserved,
                                line=lines.get(reserved))
    return validate(Scenario, {**data, "source": source, "lines": lines}, source=source,
                    lines=lines, what="scenario")


def load_scenario(path: str | Path) -> Scenario:
    """Read and validate a scenario YAML file (through the input boundary)."""
    source = str(path)
    doc = load_yaml(path, source=source)
    return scenario_from_dict(doc.data, source=source, lines=doc.lines)


def check_overrides(replications: int | None, seed: int | None) -> None:
    """Validate command-line overrides of the ``simulation`` section
    (``--replications``, ``--seed``) with the same rules as the file."""
    if replications is not None and not 0 < replications <= MAX_REPLICATIONS:
        raise InputError(f"must be an integer in 1…{MAX_REPLICATIONS:,}, got {replications}",
                         source="--replications")
    if seed is not None and not 0 <= seed < 2**63:
        raise InputError(f"must be an integer in 0…2^63−1, got {seed}", source="--seed")
