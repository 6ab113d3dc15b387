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

import math
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, model_validator

from testbed.errors import InputError, ScenarioError
from testbed.hpo.spec import HpoSpec
from testbed.inputs import load_yaml
from testbed.resilience.spec import DEFAULT_MAX_FAILURES, DEFAULT_MAX_SIMULATED_S
from testbed.schema import Strict, line_for, validate
from testbed.units import did_you_mean, parse_bandwidth_Bps, parse_duration_s, parse_size_bytes


def _duration(value: Any) -> float:
    try:
        return parse_duration_s(value)
    except ScenarioError:
        raise
    except Exception as exc:  # InputError from units: re-raised by pydantic as a value error
        raise ValueError(getattr(exc, "message", str(exc))) from None


def _positive_duration(value: Any) -> float:
    seconds = _duration(value)
    if seconds <= 0:
        raise ValueError(f"must be a duration > 0, got {value!r}")
    return seconds


def _size(value: Any) -> int:
    try:
        return parse_size_bytes(value)
    except Exception as exc:
        raise ValueError(getattr(exc, "message", str(exc))) from None


def _bandwidth(value: Any) -> float:
    try:
        bw = parse_bandwidth_Bps(value)
    except Exception as exc:
        raise ValueError(getattr(exc, "message", str(exc))) from None
    if not math.isfinite(bw) or bw <= 0:
        raise ValueError(f"must be a bandwidth > 0, got {value!r}")
    return bw


#: A duration >= 0 in seconds (``'5min'`` → 300.0).
Duration = Annotated[float, BeforeValidator(_duration)]
#: A duration > 0 in seconds.
PositiveDuration = Annotated[float, BeforeValidator(_positive_duration)]
#: A size in bytes (``'2GiB'``).
Size = Annotated[int, BeforeValidator(_size)]
#: A bandwidth in bytes per second (``'12.5GB/s'``).
Bandwidth = Annotated[float, BeforeValidator(_bandwidth)]

POLICIES = ("none", "fixed", "young", "daly", "multilevel")
#: Most replications one scenario may ask for (10⁶ of the fastest job take minutes).
MAX_REPLICATIONS = 1_000_000
DISTRIBUTIONS = ("exponential", "weibull", "lognormal")


class ModelSpec(Strict):
    """What is trained, for the oracle: a zoo name plus input and numerics."""

    name: str
    input_shape: str | list[int] | None = None
    precision: str = "fp32"
    optimizer: str = "momentum"
    sequence_length: int | None = Field(default=None, gt=0)


class ParallelismSpec(Strict):
    """How it is trained, for the oracle: strategy, GPU count, batch."""

    strategy: str = "data"
    gpus: int = Field(gt=0)
    global_batch: int = Field(gt=0)
    group_size: int | None = Field(default=None, gt=0)
    micro_batches: int | None = Field(default=None, gt=0)
    schedule: str | None = None


class Workload(Strict):
    """How much training: failure-free compute time, or a number of steps.

    ``steps`` with ``step_time`` needs no oracle; ``steps`` alone takes the step time
    from the oracle (``system``, ``model`` and ``parallelism`` must be given).
    """

    compute_time: PositiveDuration | None = None
    steps: int | None = Field(default=None, gt=0)
    step_time: PositiveDuration | None = None

    @model_validator(mode="after")
    def _one_kind(self) -> Workload:
        if (self.compute_time is None) == (self.steps is None):
            raise ValueError("[compute_time] give exactly one of 'compute_time' or 'steps'")
        if self.compute_time is not None and self.step_time is not None:
            raise ValueError("[step_time] 'step_time' goes with 'steps', not with 'compute_time'")
        return self


class Cluster(Strict):
    """Nodes the job needs, spare nodes, and how long a failed node is away.

    ``spares`` omitted means replacements are always at hand (no waiting); an integer
    means a pool of that many spare nodes, refilled as failed nodes come back from
    repair, so that a job without a free spare waits for a repair.
    """

    nodes: int | None = Field(default=None, gt=0)
    gpus_per_node: int | None = Field(default=None, gt=0)
    spares: int | None = Field(default=None, ge=0)
    repair: Duration = 0.0


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
    """Repair and restart costs of one cause or category of failure."""

    repair: Duration | None = None
    detect: Duration | None = None
    restart: Duration | None = None
    survives: list[str] | None = None


class Cause(CauseCost):
    """One failure cause: relative weight (count or probability) plus its costs."""

    name: str
    weight: float = Field(gt=0)
    category: str | None = None


class Failures(Strict):
    """How failures arrive: a distribution of inter-arrival times, or a trace to replay.

    ``mtbf`` is the mean time between failures of the whole job; ``node_mtbf`` is per
    node, so that the job's failure rate scales with its node count.
    """

    distribution: str = "exponential"
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

    @model_validator(mode="after")
    def _consistent(self) -> Failures:
        if self.distribution not in DISTRIBUTIONS:
            raise ValueError(f"[distribution] unknown distribution {self.distribution!r}"
                             f"{did_you_mean(self.distribution, DISTRIBUTIONS)}; "
                             f"choose one of {', '.join(DISTRIBUTIONS)}")
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
    policy: str = "daly"
    interval: PositiveDuration | None = None
    every_steps: int | None = Field(default=None, gt=0)
    daly_order: Literal["first", "higher", "exact"] = "higher"
    levels: list[Level] | None = None

    @model_validator(mode="after")
    def _consistent(self) -> Checkpoint:
        if self.policy not in POLICIES:
            raise ValueError(f"[policy] unknown policy {self.policy!r}{did_you_mean(self.policy, POLICIES)}"
                             f"; choose one of {', '.join(POLICIES)}")
        if self.policy == "fixed":
            if (self.interval is None) == (self.every_steps is None):
                raise ValueError("[interval] policy 'fixed' needs exactly one of 'interval' or 'every_steps'")
        elif self.interval is not None or self.every_steps is not None:
            key = "interval" if self.interval is not None else "every_steps"
            raise ValueError(f"[{key}] '{key}' applies to policy 'fixed' only, not {self.policy!r}")
        if self.policy == "multilevel":
            if not self.levels:
                raise ValueError("[levels] policy 'multilevel' needs 'levels'")
            for a, b in zip(self.levels, self.levels[1:], strict=False):
                if b.every % a.every:
                    raise ValueError(f"[levels] level {b.name!r} every={b.every} must be a multiple of "
                                     f"level {a.name!r} every={a.every}")
            if self.persist:
                raise ValueError("[persist] 'persist' (asynchronous part) is for single-level policies")
        elif self.levels is not None:
            raise ValueError(f"[levels] 'levels' applies to policy 'multilevel' only, not {self.policy!r}")
        return self


class Simulation(Strict):
    """Replications, seed and engine (``fast`` exact path or step-by-step ``simpy``)."""

    replications: int = Field(default=100, gt=0, le=MAX_REPLICATIONS)
    seed: int = Field(default=0, ge=0, lt=2**63)
    engine: Literal["fast", "simpy"] = "fast"
    #: hard caps of one replication (a runaway job stops with a clear error)
    max_failures: int = Field(default=DEFAULT_MAX_FAILURES, gt=0)
    max_simulated_time: PositiveDuration = DEFAULT_MAX_SIMULATED_S


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
