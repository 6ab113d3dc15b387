"""The node lifecycle: where a node of the cluster can be, what moves it, and what it costs.

A node is in exactly one state at a time:

========================  ======================================================
``running``               one of the job's N nodes
``standby``               a warm standby of the job, swapped in at ``swap`` cost
``idle``                  idle in the working pool, taken by host selection
``spare``                 in the spare pool (other work), preempted at a cost per node
``automatic_repair``      in the automatic repair stage
``manual_repair``         in (or queued for) the manual stage, needs a technician
``retired``               out of service for good
========================  ======================================================

:data:`TRANSITIONS` lists every move with what triggers it and the field of
:class:`Lifecycle` that prices it. The spec is data; :mod:`testbed.resilience.ops`
executes it for the engines (both engines run the same state machine with the same
seeded streams, so they see the same nodes fail, repair and come back).

Design choices (see the README, "Cluster operations"), each beside AIReSim's
convention, which :class:`Conventions` names so a scenario can choose it:

* host selection fills only the job's empty slots and refills its standbys from the idle
  pool; nodes that are running stay (``host_selection: whole_job``: AIReSim re-picks the
  job and its standbys from every available node, an O(N) step);
* spare-pool nodes are preempted whenever the idle pool cannot fill the empty slots and
  the standbys (``preemption: when_job_short``: AIReSim preempts only when the job
  itself cannot be filled, then until it and its standbys can);
* the first host selection (before the job starts) is free and not counted
  (``initial_selection: counted``: AIReSim counts it and charges its cost);
* the cluster is depleted when the job is short and no node is in repair
  (``depletion: below_job_and_standbys``: AIReSim, when fewer nodes than the job and
  its standbys are not retired);
* a stall is counted once per episode (``stalls: wake_ups``: AIReSim counts every
  wake-up of the stalled job when a repair ends);
* a repaired node becomes a standby when the job is short of standbys, else idle;
* with an unlimited idle pool (``spares`` omitted) replacements are fresh nodes and
  repaired nodes vanish into the pool, so repairs never delay the job;
* a node's *recorded* failures (what the operator's diagnosis attributed to it) drive the
  policies: retirement windows, scores and "fewest failures first".
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, get_args

from testbed.resilience.distributions import ZERO, Drawn

RUNNING = "running"
STANDBY = "standby"
IDLE = "idle"
SPARE = "spare"
AUTO_REPAIR = "automatic_repair"
MANUAL_REPAIR = "manual_repair"
RETIRED = "retired"
STATES = (RUNNING, STANDBY, IDLE, SPARE, AUTO_REPAIR, MANUAL_REPAIR, RETIRED)
#: The same states as small ints (the state machine's arrays), plus ``S_GONE``: a node
#: handed back to an unlimited pool.
S_RUN, S_STANDBY, S_IDLE, S_SPARE, S_AUTO, S_MANUAL, S_RETIRED, S_GONE = range(8)
#: Repair stages: one stage of the cause's duration, or the pipeline's two.
STAGE_SIMPLE, STAGE_AUTO, STAGE_MANUAL = 0, 1, 2
STAGE_NAMES = ("repair", "automatic", "manual")

#: (from, to, trigger, cost field of :class:`Lifecycle` or the cause) of every move.
TRANSITIONS = (
    (RUNNING, AUTO_REPAIR, "diagnosed hardware failure (pipeline)", "job restart"),
    (RUNNING, MANUAL_REPAIR, "diagnosed hardware failure (single-stage repair)",
     "job restart"),
    (RUNNING, RUNNING, "missed diagnosis or job-induced failure: node stays", "job restart"),
    (STANDBY, RUNNING, "swap after a failure", "swap"),
    (IDLE, RUNNING, "host selection when no standby is left", "host_selection"),
    (IDLE, STANDBY, "host selection refills the standbys", "host_selection"),
    (SPARE, IDLE, "preemption when the working pool is short", "preemption (per node)"),
    (AUTO_REPAIR, MANUAL_REPAIR, "escalation", "manual duration"),
    (AUTO_REPAIR, STANDBY, "repaired, the job is short of standbys", "automatic duration"),
    (AUTO_REPAIR, IDLE, "repaired", "automatic duration"),
    (MANUAL_REPAIR, STANDBY, "repaired, the job is short of standbys", "manual duration"),
    (MANUAL_REPAIR, IDLE, "repaired", "manual duration"),
    (AUTO_REPAIR, RETIRED, "retirement policy after repair", "-"),
    (MANUAL_REPAIR, RETIRED, "retirement policy after repair", "-"),
    (STANDBY, AUTO_REPAIR, "hardware failure of a node not in use (idle_rate_factor > 0)",
     "-"),
    (IDLE, AUTO_REPAIR, "hardware failure of a node not in use (idle_rate_factor > 0)", "-"),
)

#: Built-in host-selection policies (a user's policy is named ``module:function``).
HOST_POLICIES = ("random", "fewest_failures", "highest_score")
#: When the automatic stage escalates: ``always`` — with probability ``escalation``
#: whatever the (unobservable) outcome, the AIReSim paper's model; ``on_failure`` —
#: only automatic repairs that did not fix the node can escalate.
Escalate = Literal["always", "on_failure"]
ESCALATE: tuple[str, ...] = get_args(Escalate)
#: How a retirement's window and score rules combine.
Combine = Literal["any", "all"]
COMBINE: tuple[str, ...] = get_args(Combine)
#: The testbed's conventions and AIReSim's, per operation (see :class:`Conventions`).
HostScope = Literal["empty_slots", "whole_job"]
HOST_SCOPES: tuple[str, ...] = get_args(HostScope)
PreemptRule = Literal["to_refill_standbys", "when_job_short"]
PREEMPT_RULES: tuple[str, ...] = get_args(PreemptRule)
InitialSelection = Literal["free", "counted"]
INITIAL_SELECTIONS: tuple[str, ...] = get_args(InitialSelection)
DepletionRule = Literal["no_repair_pending", "below_job_and_standbys"]
DEPLETION_RULES: tuple[str, ...] = get_args(DepletionRule)
StallCount = Literal["episodes", "wake_ups"]
STALL_COUNTS: tuple[str, ...] = get_args(StallCount)


@dataclass(frozen=True)
class Conventions:
    """How operations are counted and decided where the testbed and AIReSim differ (the
    module docstring and the README's table say what each changes)."""

    host_selection: str = "empty_slots"
    preemption: str = "to_refill_standbys"
    initial_selection: str = "free"
    depletion: str = "no_repair_pending"
    stalls: str = "episodes"

    @property
    def is_default(self) -> bool:
        return self == TESTBED


#: The testbed's own conventions, and AIReSim's (Lin, Pattabiraman, Patel 2026).
TESTBED = Conventions()
AIRESIM = Conventions("whole_job", "when_job_short", "counted", "below_job_and_standbys",
                      "wake_ups")
CONVENTION_PRESETS = {"testbed": TESTBED, "airesim": AIRESIM}


@dataclass(frozen=True)
class Regeneration:
    """Bad nodes appear over time (AIReSim's ``bad_server_regeneration``): every
    ``every_s`` of wall time, max(1, ⌊good · fraction · share⌋) good nodes that are not
    retired turn bad (``fraction``: the scenario's bad-node fraction; AIReSim's share
    is 0.1)."""

    every_s: float
    share: float = 0.1


@dataclass(frozen=True)
class RepairStage:
    """One repair stage: its duration and the probability it reports success but did
    not fix the node (a bad node stays bad)."""

    duration: Drawn
    silent_failure: float = 0.0


@dataclass(frozen=True)
class WindowRule:
    """Retire a node with ``failures`` recorded failures within ``within_s``."""

    failures: int
    within_s: float


@dataclass(frozen=True)
class ScoreRule:
    """score = initial − penalty·failures + increment·uptime periods; retire at or below
    ``threshold`` (None: score only, for ``highest_score`` host selection)."""

    initial: float = 100.0
    penalty: float = 30.0
    increment: float = 10.0
    period_s: float = 86400.0
    threshold: float | None = 0.0


@dataclass(frozen=True)
class Retirement:
    """Retirement after repair: a window rule, a score rule, or both (``combine`` any|all)."""

    window: WindowRule | None = None
    score: ScoreRule | None = None
    combine: str = "any"


@dataclass(frozen=True)
class Lifecycle:
    """Pools, costs, repairs, diagnosis, heterogeneity and retirement of a cluster."""

    standbys: int = 0
    spares: int | None = None            # idle pool; None = unlimited (always at hand)
    spare_pool: int = 0
    swap: Drawn = ZERO
    host_selection: Drawn = ZERO
    preemption: Drawn = ZERO             # per preempted node
    host_policy: str = "random"
    host_policy_fn: Callable | None = None
    automatic: RepairStage | None = None   # None: one stage with each cause's repair time
    manual: RepairStage | None = None
    escalation: float = 0.0
    escalate: str = "always"
    technicians: int | None = None       # repairs that need a person at once (None: any)
    diagnosis_miss: float = 0.0
    diagnosis_wrong: float = 0.0
    bad_fraction: float = 0.0
    bad_multiplier: float = 0.0
    node_rates: tuple[float, ...] | None = None
    retirement: Retirement | None = None
    conventions: Conventions = TESTBED
    regeneration: Regeneration | None = None

    @property
    def pipeline(self) -> bool:
        return self.automatic is not None

    @property
    def scored(self) -> bool:
        return self.retirement is not None and self.retirement.score is not None

    @property
    def heterogeneous(self) -> bool:
        """Nodes differ in failure rate (bad nodes or per-node rates)."""
        return (self.bad_fraction > 0 and self.bad_multiplier > 0) or self.node_rates is not None

    @property
    def tracks_history(self) -> bool:
        """Per-node failure history matters (retirement, or a policy that reads it)."""
        return self.retirement is not None or self.host_policy != "random"

    def is_simple(self) -> bool:
        """Nothing beyond a pool of spares with fixed per-cause repairs: the fast path's
        inlined loop handles it without a per-node model."""
        return (self.standbys == 0 and self.spare_pool == 0 and self.swap.is_zero
                and self.host_selection.is_zero and self.preemption.is_zero
                and self.host_policy == "random" and self.host_policy_fn is None
                and self.automatic is None and self.technicians is None
                and self.diagnosis_miss == 0 and self.diagnosis_wrong == 0
                and not self.heterogeneous and self.retirement is None
                and self.conventions.is_default and self.regeneration is None)

    @property
    def total_nodes(self) -> float:
        """Nodes of the cluster beyond the job's (∞ with an unlimited pool)."""
        if self.spares is None:
            return math.inf
        return self.standbys + self.spares + self.spare_pool


#: The lifecycle of a scenario that says nothing about cluster operations.
PLAIN = Lifecycle()
