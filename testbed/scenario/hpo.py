"""The ``hpo:`` section of a scenario: search space, trial cost, scheduler, failures.

```yaml
hpo:
  search: grid                  # grid (row-major, as written) | random (seeded) | tpe (Optuna)
  space: {optimizer: [adam, sgd], lr: {low: 1e-4, high: 1e-1, log: true}, epochs: [20, 50]}
  n_trials: 100                 # random / tpe / asha; a grid has as many as it has points
  trial_resources: {gpus: 1, cores: 4, memory: 16GiB}
  node_resources: {cores: 40, memory: 384GiB}      # per node; unlimited when omitted
  epoch_time: 1s                # or cost: {table: …} | {oracle: …} | {trace: FILE.jsonl}
  scheduler: fifo               # fifo | longest_first | asha | hyperband
  rungs: {min_epochs: 1, max_epochs: 81, reduction_factor: 3}   # asha / hyperband
  promotion: pause              # asha / hyperband: pause (promote later) | stop (Syne Tune, Ray)
  on_failure: retry             # retry | ignore | cancel_successors | fail
  max_retries: 2                # PyCOMPSs: once on the same worker, then on another
  checkpoint_every_epochs: 10
  failures: {probability: 0.05, trial_mtbf: 10h, nodes: true}
  inject_failures: [{trial: 26, at_epoch: 50}, {node: 0, at: 2h, repair: 30min}]
```

Semantics that the engines share (see :mod:`testbed.hpo.controller`):

* trials are numbered from 0 in submission order; a grid enumerates the space in
  row-major order of the keys as written (the last key varies fastest);
* an injection ``{trial: i, at_epoch: E}`` strikes the first time trial ``i`` has
  trained ``E`` epochs (fractions allowed), before that epoch's checkpoint is
  committed; ``at: 30s`` strikes 30 s into the trial's attempt ``attempt`` (default 0);
* a failed trial under ``retry`` runs again at once on the same worker, then on another
  worker, at most ``max_retries`` times, each time from its last checkpoint; when the
  retries are spent the trial is FAILED and the sweep goes on (PyCOMPSs would then stop
  the application: that is ``fail``);
* a node failure PREEMPTS the trials on that node: they resume from their checkpoint
  on the next free worker, which uses no retry and never counts as a failure; so does
  the loss of the real driver (``cause: driver_lost``);
* ``promotion: pause`` (the default) runs promotion ASHA and synchronous Hyperband:
  a trial pauses at each rung and is promoted later; ``promotion: stop`` runs stopping
  ASHA and asynchronous Hyperband as Syne Tune and Ray Tune do (a trial keeps its
  worker and is stopped at a rung if it is not in the top 1/η so far,
  :mod:`testbed.hpo.stopping`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Annotated, Any, Literal, get_args

from pydantic import Field, model_validator

from testbed.io.schema import Duration, PositiveDuration, Size, Strict, one_of, positive_duration_s
from testbed.oracle.names import StrategyName
from testbed.oracle.state import PrecisionName

Search = Literal["grid", "random", "tpe"]
SEARCHES: tuple[str, ...] = get_args(Search)
Scheduler = Literal["fifo", "longest_first", "asha", "hyperband"]
SCHEDULERS: tuple[str, ...] = get_args(Scheduler)
#: What a failed trial does (PyCOMPSs' on_failure policies).
FailurePolicy = Literal["retry", "ignore", "cancel_successors", "fail"]
ON_FAILURE: tuple[str, ...] = get_args(FailurePolicy)
#: Most points a grid may have (a larger one is surely a mistake in the file).
MAX_GRID_POINTS = 10_000_000
#: Most trials one sweep may plan: the simulator runs about 20,000 trials a second, so a
#: million is under a minute; beyond that a typo is likelier than a wish.
MAX_TRIALS = 1_000_000
#: Optuna's TPE costs a few milliseconds a trial and grows with the history (5,000
#: trials: 14 s here); it is meant for hundreds to thousands of trials.
MAX_TPE_TRIALS = 20_000
#: Most GPU slots an HPO sweep schedules over: the scheduler keeps a list of each node's
#: free GPUs, and 2²⁰ slots (a 131,072-node cluster of 8-GPU nodes) is beyond any machine.
MAX_SLOTS = 2**20
#: PyCOMPSs' RETRY: once more on the same worker, then once on another worker.
PYCOMPSS_RETRIES = 2
#: Most epochs one trial may train: ten times the longest trainings of the HPO
#: literature (Hyperband's largest budgets are a few hundred to a thousand epochs; Li et
#: al., JMLR 18, 2018). The engines walk a failed attempt epoch by epoch.
MAX_EPOCHS = 100_000
#: Most retries of a failed trial (a trial that fails a thousand times is broken, and
#: each retry is an attempt the engines run).
MAX_RETRIES = 1_000


Scalar = bool | int | float | str


SearchName = Annotated[Search, one_of(SEARCHES, "search")]
SchedulerName = Annotated[Scheduler, one_of(SCHEDULERS, "scheduler")]
FailurePolicyName = Annotated[FailurePolicy, one_of(ON_FAILURE, "failure policy")]
#: What ASHA and Hyperband do at a rung: pause the trial and promote it later
#: (promotion ASHA, synchronous Hyperband) or stop it unless it is in the top 1/η so far.
Promotion = Literal["pause", "stop"]
PROMOTIONS: tuple[str, ...] = get_args(Promotion)
PromotionName = Annotated[Promotion, one_of(PROMOTIONS, "promotion")]


class Range(Strict):
    """A continuous (or integer) range for random search and TPE."""

    low: float
    high: float
    log: bool = False
    type: Literal["float", "int"] = "float"

    @model_validator(mode="after")
    def _ordered(self) -> Range:
        if not self.low < self.high:
            raise ValueError(f"[high] must be greater than low ({self.low})")
        if self.log and self.low <= 0:
            raise ValueError("[low] a log range needs low > 0")
        return self


class TrialResources(Strict):
    """What one trial holds while it runs, all on one node."""

    gpus: int = Field(default=1, ge=0)
    cores: int = Field(default=1, ge=1)
    memory: Size = 0


class NodeResources(Strict):
    """Cores and memory of each node (GPUs come from ``cluster.gpus_per_node``)."""

    cores: int | None = Field(default=None, gt=0)
    memory: Size | None = None


class OracleCost(Strict):
    """Epoch time from the oracle for the trial's model, batch size and GPUs.

    ``model`` may be omitted when the space has a ``model`` key; the global batch is
    the trial's ``batch_size`` (``batch`` key of the space, default ``batch_size``).
    """

    system: str
    model: str | None = None
    strategy: StrategyName = "data"
    epoch_samples: int = Field(gt=0)
    input_shape: str | None = None
    precision: PrecisionName = "fp32"
    optimizer: str = "momentum"
    batch_key: str = "batch_size"


class Cost(Strict):
    """Where the epoch time of a trial comes from (exactly one)."""

    table: str | list[dict[str, Scalar]] | None = None
    oracle: OracleCost | None = None
    trace: str | None = None

    @model_validator(mode="after")
    def _one(self) -> Cost:
        given = [k for k in ("table", "oracle", "trace") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError("[table] give exactly one of 'table', 'oracle' or 'trace'")
        if isinstance(self.table, list):
            if not self.table:
                raise ValueError("[table] the table has no rows")
            for i, row in enumerate(self.table):
                if "epoch_time" not in row:
                    raise ValueError(f"[table[{i}].epoch_time] every row needs 'epoch_time'")
                try:
                    positive_duration_s(row["epoch_time"])
                except ValueError as exc:
                    raise ValueError(f"[table[{i}].epoch_time] {exc}") from None
        return self


class Rungs(Strict):
    """Resource levels of ASHA and Hyperband: min_epochs · η^k up to max_epochs."""

    min_epochs: int = Field(default=1, gt=0, le=MAX_EPOCHS)
    max_epochs: int | None = Field(default=None, gt=0, le=MAX_EPOCHS)
    reduction_factor: int = Field(default=3, ge=2, le=MAX_EPOCHS)


class Metric(Strict):
    """The value trials report and which way is better."""

    name: str = "val_loss"
    mode: Literal["min", "max"] = "min"


class TrialFailures(Strict):
    """Sampled failures: per attempt (probability, or exponential with ``trial_mtbf``
    of running time) and node failures from the scenario's ``failures`` section."""

    probability: float = Field(default=0.0, ge=0, lt=1)
    trial_mtbf: PositiveDuration | None = None
    nodes: bool = False
    repair: Duration | None = None


class Injection(Strict):
    """One explicit failure: of a trial (``at_epoch`` or ``at``) or of a node (``at``)."""

    trial: int | None = Field(default=None, ge=0, lt=MAX_TRIALS)
    node: int | None = Field(default=None, ge=0, lt=MAX_SLOTS)
    at_epoch: float | None = Field(default=None, gt=0, le=MAX_EPOCHS)
    at: Duration | None = None
    attempt: int | None = Field(default=None, ge=0, le=MAX_RETRIES)
    repair: Duration | None = None

    @model_validator(mode="after")
    def _consistent(self) -> Injection:
        if (self.trial is None) == (self.node is None):
            raise ValueError("[trial] give exactly one of 'trial' or 'node'")
        if self.trial is not None:
            if (self.at_epoch is None) == (self.at is None):
                raise ValueError("[at_epoch] a trial injection needs exactly one of "
                                 "'at_epoch' or 'at'")
            if self.repair is not None:
                raise ValueError("[repair] 'repair' applies to node injections only")
        else:
            if self.at is None:
                raise ValueError("[at] a node injection needs 'at' (time since the start)")
            if self.at_epoch is not None or self.attempt is not None:
                key = "at_epoch" if self.at_epoch is not None else "attempt"
                raise ValueError(f"[{key}] '{key}' applies to trial injections only")
        return self


SpaceValue = list[Scalar] | Range


def grid_point(space: dict[str, Any], index: int) -> dict[str, Any]:
    """Point ``index`` of a grid over ``space`` (row-major: the last key varies fastest)."""
    keys = list(space)
    out: dict[str, Any] = {}
    for key in reversed(keys):
        values = space[key]
        index, pos = divmod(index, len(values))
        out[key] = values[pos]
    return {k: out[k] for k in keys}


class HpoSpec(Strict):
    """The whole ``hpo:`` section (see the module docstring)."""

    search: SearchName = "grid"
    space: dict[str, SpaceValue]
    n_trials: int | None = Field(default=None, gt=0)
    seed: int | None = Field(default=None, ge=0)
    epochs: int | None = Field(default=None, gt=0, le=MAX_EPOCHS)
    trial_resources: TrialResources = Field(default_factory=TrialResources)
    node_resources: NodeResources = Field(default_factory=NodeResources)
    epoch_time: PositiveDuration | None = None
    cost: Cost | None = None
    startup_time: Duration = 0.0
    checkpoint_time: Duration = 0.0
    restore_time: Duration = 0.0
    scheduler: SchedulerName = "fifo"
    rungs: Rungs = Field(default_factory=Rungs)
    promotion: PromotionName | None = None
    metric: Metric = Field(default_factory=Metric)
    objective: str | list[dict[str, Scalar]] = "synthetic"
    failures: TrialFailures = Field(default_factory=TrialFailures)
    on_failure: FailurePolicyName = "retry"
    max_retries: int = Field(default=PYCOMPSS_RETRIES, ge=0, le=MAX_RETRIES)
    checkpoint_every_epochs: int | None = Field(default=None, gt=0, le=MAX_EPOCHS)
    inject_failures: list[Injection] = Field(default_factory=list)

    @model_validator(mode="after")
    def _consistent(self) -> HpoSpec:
        self._check_space()
        self._check_epochs()
        if (self.epoch_time is None) == (self.cost is None):
            raise ValueError("[epoch_time] give exactly one of 'epoch_time' (the same for every "
                             "epoch) or 'cost' (table, oracle or trace)")
        if self.scheduler == "longest_first" and self.search == "tpe":
            raise ValueError("[scheduler] longest_first needs every trial's cost before the "
                             "sweep starts, which TPE cannot give (it proposes trials as "
                             "results come in)")
        if self.promotion is not None and self.scheduler not in ("asha", "hyperband"):
            raise ValueError(f"[promotion] applies to asha and hyperband, not "
                             f"{self.scheduler!r}")
        if isinstance(self.objective, str) and not self.objective:
            raise ValueError("[objective] give 'synthetic', a CSV file or a list of rows")
        self._check_injections()
        return self

    # ------------------------------------------------------------------ checks

    def _check_space(self) -> None:
        if not self.space:
            raise ValueError("[space] the search space is empty: give at least one "
                             "hyperparameter with its values")
        for name, values in self.space.items():
            if isinstance(values, list):
                if not values:
                    raise ValueError(f"[space.{name}] has no values")
                for v in values:
                    if isinstance(v, float) and not math.isfinite(v):
                        raise ValueError(f"[space.{name}] values must be finite")
            elif self.search == "grid":
                raise ValueError(f"[space.{name}] a grid needs a list of values, not a range")
        if self.search == "grid":
            size = self.grid_size
            if size > MAX_GRID_POINTS:
                raise ValueError(f"[space] the grid has {size:,} points, more than "
                                 f"{MAX_GRID_POINTS:,}")
            if self.n_trials is not None and self.n_trials > size:
                raise ValueError(f"[n_trials] the grid has only {size} point(s)")
        elif self.n_trials is None and self.scheduler != "hyperband":
            raise ValueError(f"[n_trials] search {self.search!r} needs 'n_trials'")
        most = MAX_TPE_TRIALS if self.search == "tpe" else MAX_TRIALS
        if self.n_trials is not None and self.n_trials > most:
            raise ValueError(f"[n_trials] {self.n_trials:,} trials are more than {most:,}, "
                             f"the most a {self.search} sweep may plan")
        if self.search == "grid" and self.n_trials is None and self.grid_size > MAX_TRIALS:
            raise ValueError(f"[space] the grid has {self.grid_size:,} points, more than "
                             f"{MAX_TRIALS:,} trials: give n_trials to run part of it")
        for key in ("epochs", "gpus"):
            given = self.space.get(key)
            if given is None:
                continue
            top = MAX_EPOCHS if key == "epochs" else MAX_SLOTS
            if not isinstance(given, list) or any(
                    isinstance(v, bool) or not isinstance(v, int) or v < (key == "epochs")
                    or v > top for v in given):
                low = 1 if key == "epochs" else 0
                raise ValueError(f"[space.{key}] '{key}' values must be whole numbers in "
                                 f"{low}…{top:,}")

    def _check_epochs(self) -> None:
        multi = self.scheduler in ("asha", "hyperband")
        if multi:
            if "epochs" in self.space:
                raise ValueError(f"[space.epochs] scheduler {self.scheduler!r} decides how many "
                                 "epochs each trial trains; give rungs.max_epochs instead")
            top = self.rungs.max_epochs or self.epochs
            if top is None:
                raise ValueError("[rungs.max_epochs] asha and hyperband need rungs.max_epochs "
                                 "(or epochs)")
            if top < self.rungs.min_epochs:
                raise ValueError(f"[rungs.max_epochs] must be >= rungs.min_epochs "
                                 f"({self.rungs.min_epochs})")
        elif "epochs" not in self.space and self.epochs is None:
            raise ValueError("[epochs] give 'epochs' (or an 'epochs' key in the space)")
        if self.scheduler == "hyperband" and self.n_trials is None:
            r = self.rungs
            n = trials_per_iteration(brackets(r.min_epochs, self.max_epochs,
                                              r.reduction_factor))
            if n > MAX_TRIALS:
                raise ValueError(f"[rungs] one Hyperband iteration over these rungs has {n:,} "
                                 f"trials, more than {MAX_TRIALS:,}: give n_trials, a larger "
                                 f"min_epochs or reduction_factor")

    def _check_injections(self) -> None:
        n = self.planned_trials
        for i, inj in enumerate(self.inject_failures):
            if inj.trial is None:
                continue
            if n is not None and inj.trial >= n:
                raise ValueError(f"[inject_failures[{i}].trial] there is no trial {inj.trial}: "
                                 f"the sweep has {n} trial(s), numbered 0 to {n - 1}")
            top = self.trial_epochs_bound(inj.trial)
            if inj.at_epoch is not None and top is not None and inj.at_epoch > top:
                raise ValueError(f"[inject_failures[{i}].at_epoch] trial {inj.trial} trains at "
                                 f"most {top} epoch(s), so epoch {inj.at_epoch:g} is never reached")

    # ------------------------------------------------------------------ derived

    @property
    def grid_size(self) -> int:
        """Points of the grid (the product of the value counts)."""
        size = 1
        for values in self.space.values():
            size *= len(values) if isinstance(values, list) else 1
        return size

    @property
    def value_lists(self) -> dict[str, list[Scalar]]:
        """The keys of the space given as lists of values (all of them for a grid)."""
        return {k: v for k, v in self.space.items() if isinstance(v, list)}

    @property
    def space_gpus(self) -> list[int]:
        """The GPU counts a ``gpus`` key of the space lists (whole numbers, checked)."""
        values = self.space.get("gpus")
        return [int(v) for v in values] if isinstance(values, list) else []

    @property
    def planned_trials(self) -> int | None:
        """Trials the sweep will create, when known before it runs (not for Hyperband
        without ``n_trials``, which takes one full iteration)."""
        if self.search == "grid":
            return self.n_trials or self.grid_size
        return self.n_trials

    @property
    def promotion_mode(self) -> str:
        """``pause`` (the default for asha and hyperband) or ``stop``."""
        return self.promotion or "pause"

    @property
    def max_epochs(self) -> int:
        """Epochs of a full-budget trial under asha/hyperband (or the default epochs)."""
        return self.rungs.max_epochs or self.epochs or 0

    def trial_epochs_bound(self, trial: int) -> int | None:
        """The most epochs ``trial`` can train, when it is known from the spec alone."""
        if self.scheduler in ("asha", "hyperband"):
            return self.max_epochs
        values = self.value_lists.get("epochs")     # whole numbers (checked above)
        if values is None:
            return self.epochs
        if self.search == "grid":
            return int(grid_point(self.space, trial)["epochs"])
        return max(int(v) for v in values)


# ---------------------------------------------------------------- Hyperband geometry
# Li et al. (JMLR 18, 2018), Algorithm 1: the brackets one Hyperband iteration plans.
# They belong to the section because they decide how many trials it plans (and so
# whether it is too large); testbed.hpo.hyperband runs them.

@dataclass(frozen=True)
class Bracket:
    """Bracket ``s``: its trial count and the epochs of each rung."""

    s: int
    n: int
    epochs: tuple[int, ...]


def brackets(min_epochs: int, max_epochs: int, eta: int) -> tuple[Bracket, ...]:
    """One Hyperband iteration's brackets, most aggressive first."""
    s_max = 0
    while min_epochs * eta ** (s_max + 1) <= max_epochs:
        s_max += 1
    out = []
    for s in range(s_max, -1, -1):
        n = -(-(s_max + 1) * eta ** s // (s + 1))          # ceil without floats
        epochs = tuple(max(min_epochs, round(max_epochs / eta ** (s - i))) for i in range(s + 1))
        out.append(Bracket(s, n, epochs))
    return tuple(out)


def trials_per_iteration(bs: tuple[Bracket, ...]) -> int:
    return sum(b.n for b in bs)
