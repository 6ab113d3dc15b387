"""Checkpoint policies: one small protocol, and a registry keyed by the policy's name.

A policy decides, from the scenario's checkpoint section and the job's figures, what
it writes (its levels: cost, load time and how often each is written) and how much
compute lies between checkpoints. The schema asks the policy to check its own keys,
the resolver asks it for levels and the interval; nothing else compares policy names.

Built in (:data:`POLICIES`):

* ``none`` — no checkpoints: a failure loses everything done so far;
* ``fixed`` — a given interval of compute, or every N steps;
* ``young`` — Young's optimum √(2·C·M) (Young, CACM 17(9), 1974);
* ``daly`` — Daly's optimum (Daly, FGCS 22(3), 2006): first order √(2C(M+R)), the
  higher-order formula (default) or the exact optimum of the exponential model
  (:mod:`testbed.resilience.intervals`);
* ``multilevel`` — levels written every k-th checkpoint (cheap node-local ones often,
  the file system rarely, as SCR does: Moody et al., SC 2010), the first level at Daly's
  interval.

A new policy is a class with these four members, added to :data:`POLICIES` and to the
:data:`PolicyName` literal the schema validates against (a test keeps them equal).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, Protocol, get_args

from testbed.errors import InputError
from testbed.resilience import intervals
from testbed.resilience.plan import CkptLevel

PolicyName = Literal["none", "fixed", "young", "daly", "multilevel"]
DalyOrder = Literal["first", "higher", "exact"]
DALY_ORDERS: tuple[str, ...] = get_args(DalyOrder)


class LevelSection(Protocol):
    """One level of a multilevel section (read-only)."""

    @property
    def name(self) -> str: ...
    @property
    def cost(self) -> float: ...
    @property
    def restart(self) -> float: ...
    @property
    def every(self) -> int: ...


class CheckpointSection(Protocol):
    """What a policy reads of the scenario's ``checkpoint:`` section (read-only)."""

    @property
    def interval(self) -> float | None: ...
    @property
    def every_steps(self) -> int | None: ...
    @property
    def daly_order(self) -> str: ...
    @property
    def persist(self) -> float: ...
    @property
    def levels(self) -> Sequence[LevelSection] | None: ...


@dataclass(frozen=True)
class JobFigures:
    """What an interval depends on: one checkpoint's blocking cost, the restart after a
    failure (load + detection + requeue), the job's MTBF, its compute and step."""

    cost_s: float
    restart_s: float
    mtbf_s: float
    work_s: float
    step_s: float | None


class CheckpointPolicy(Protocol):
    """A checkpoint policy (see the module docstring)."""

    name: str
    #: whether one checkpoint's cost and load time come from the section's ``cost`` and
    #: ``restart`` or the storage physics (False: the policy writes nothing, or its
    #: levels carry their own)
    derives_cost: bool

    def check(self, section: CheckpointSection) -> None:
        """Refuse keys that do not belong to this policy: ``ValueError("[key] …")``."""

    def levels(self, section: CheckpointSection, cost_s: float, load_s: float
               ) -> tuple[CkptLevel, ...]:
        """The levels written, cheapest and most frequent first (empty: none)."""

    def interval_s(self, section: CheckpointSection, job: JobFigures) -> float | None:
        """Compute between checkpoints (None: no checkpoints); an
        :class:`~testbed.errors.InputError` naming the key when it cannot be chosen."""


def _refuse(section: CheckpointSection, name: str, keys: tuple[str, ...]) -> None:
    for key in keys:
        if getattr(section, key) is not None:
            raise ValueError(f"[{key}] '{key}' applies to policy "
                             f"{'fixed' if key != 'levels' else 'multilevel'!r} only, "
                             f"not {name!r}")


def _single(cost_s: float, load_s: float) -> tuple[CkptLevel, ...]:
    return (CkptLevel("checkpoint", cost_s, load_s, 1),)


def _optimum_s(order: str, job: JobFigures, name: str) -> float:
    """Young's or Daly's interval; without failures one checkpoint at the end."""
    if not math.isfinite(job.mtbf_s):
        return job.work_s
    if job.cost_s <= 0:
        raise InputError(f"policy {name!r} needs a checkpoint cost > 0",
                         field="checkpoint.cost")
    if order == "young":
        return intervals.young_interval_s(job.cost_s, job.mtbf_s)
    if order == "first":
        return intervals.daly_first_order_interval_s(job.cost_s, job.mtbf_s, job.restart_s)
    if order == "exact":
        return intervals.daly_exact_interval_s(job.cost_s, job.mtbf_s)
    return intervals.daly_higher_order_interval_s(job.cost_s, job.mtbf_s)


class NoCheckpoints:
    name, derives_cost = "none", False

    def check(self, section: CheckpointSection) -> None:
        _refuse(section, self.name, ("interval", "every_steps", "levels"))

    def levels(self, section, cost_s, load_s) -> tuple[CkptLevel, ...]:
        return ()

    def interval_s(self, section, job) -> float | None:
        return None


class Fixed:
    name, derives_cost = "fixed", True

    def check(self, section: CheckpointSection) -> None:
        if (section.interval is None) == (section.every_steps is None):
            raise ValueError("[interval] policy 'fixed' needs exactly one of 'interval' or "
                             "'every_steps'")
        _refuse(section, self.name, ("levels",))

    def levels(self, section, cost_s, load_s) -> tuple[CkptLevel, ...]:
        return _single(cost_s, load_s)

    def interval_s(self, section, job) -> float | None:
        if section.every_steps is None:
            return section.interval
        if job.step_s is None:
            raise InputError("'every_steps' needs a workload in steps",
                             field="checkpoint.every_steps")
        return section.every_steps * job.step_s


class Optimum:
    """Young's or Daly's optimum interval for one level."""

    derives_cost = True

    def __init__(self, name: str) -> None:
        self.name = name

    def check(self, section: CheckpointSection) -> None:
        _refuse(section, self.name, ("interval", "every_steps", "levels"))

    def levels(self, section, cost_s, load_s) -> tuple[CkptLevel, ...]:
        return _single(cost_s, load_s)

    def interval_s(self, section, job) -> float | None:
        order = "young" if self.name == "young" else section.daly_order
        return _optimum_s(order, job, self.name)


class Multilevel:
    name, derives_cost = "multilevel", False

    def check(self, section: CheckpointSection) -> None:
        _refuse(section, self.name, ("interval", "every_steps"))
        levels = section.levels
        if not levels:
            raise ValueError("[levels] policy 'multilevel' needs 'levels'")
        for a, b in zip(levels, levels[1:], strict=False):
            if b.every % a.every:
                raise ValueError(f"[levels] level {b.name!r} every={b.every} must be a "
                                 f"multiple of level {a.name!r} every={a.every}")
        if section.persist:
            raise ValueError("[persist] 'persist' (asynchronous part) is for single-level "
                             "policies")

    def levels(self, section, cost_s, load_s) -> tuple[CkptLevel, ...]:
        return tuple(CkptLevel(lv.name, lv.cost, lv.restart, lv.every)
                     for lv in section.levels or ())

    def interval_s(self, section, job) -> float | None:
        return _optimum_s(section.daly_order, job, self.name)


#: The policies by name (the ``checkpoint.policy`` of a scenario).
POLICIES: dict[str, CheckpointPolicy] = {p.name: p for p in (
    NoCheckpoints(), Fixed(), Optimum("young"), Optimum("daly"), Multilevel())}


def policy(name: str) -> CheckpointPolicy:
    """The policy called ``name`` (the schema has already refused unknown names)."""
    return POLICIES[name]
