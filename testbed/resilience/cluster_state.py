"""The state shared by the mixins of :class:`testbed.resilience.ops.ClusterOps`.

:class:`~testbed.resilience.pools.Pools` and :class:`~testbed.resilience.repairs.RepairShop`
work on attributes that ``ClusterOps.__init__`` sets and call methods that ``ClusterOps``
or the other mixin defines. This base class declares them (annotations only: no
attribute or method exists here at run time), so each mixin is type-checked on its own.
"""

from __future__ import annotations

import itertools
from collections import deque
from typing import TYPE_CHECKING, Any

import numpy as np

from testbed.resilience.causes import ResolvedCause
from testbed.resilience.draws import Buffer, Clock, Durations
from testbed.resilience.failures import FailureModel, TraceFailure
from testbed.resilience.lifecycle import Lifecycle, ScoreRule, WindowRule
from testbed.resilience.spec import RunLimits


class ClusterState:
    """Attributes of one replication's cluster (set by ``ClusterOps``)."""

    # configuration
    fm: FailureModel
    life: Lifecycle
    n: int
    rep: int
    limits: RunLimits
    log: list[dict[str, Any]] | None
    causes: tuple[ResolvedCause, ...]
    lane: str
    speeds: tuple[float, float, float, float]
    phase: int
    _idle_on: bool
    counts: dict[str, int]
    _seq: itertools.count[int]
    trace: tuple[TraceFailure, ...]
    # random streams (r_life, r_select, r_regen: properties of ClusterOps)
    u_nodes: Buffer
    u_repairs: Buffer
    u_select: Buffer
    gaps: Buffer
    idle_gaps: Buffer
    idle_life: Buffer
    idle_fresh: Buffer
    slot_rem: list[float]
    places: list[float]
    _back: int
    d_auto: Durations
    d_manual: Durations
    # per node (indexed by node id)
    state: list[int]
    bad: list[bool]
    ver: list[int]
    rem: list[float]
    km: list[float]
    jkey: list[float]
    fails: list[int]
    repairs_done: list[int]
    last_fail: list[float]
    score: list[float]
    gjoin: list[int]
    iver: list[int]
    slot_of: list[int]
    recent: list[deque[float]] | None
    score_rule: ScoreRule | None
    window: WindowRule | None
    G: int
    # the job's slots and the pools
    slots: list[int]
    filled: list[int]
    fpos: list[int]
    empty: list[int]
    standby: list[int]
    idle: list[int]
    ipos: dict[int, int]
    iheap: list[tuple[Any, ...]]
    spare: list[int]
    next_id: int
    # repairs
    rheap: list[tuple[float, int, int, int]]
    rqueue: deque[tuple[int, int, float]]
    busy: int
    in_repair: int
    # failure clocks
    jclock: Clock
    iclock: Clock
    jheap: list[tuple[float, int, int]]
    iheap_f: list[tuple[float, int, int]]
    key: float
    ikey: float

    if TYPE_CHECKING:
        # defined by ClusterOps (ops.py)
        def _rates(self, t: float) -> None: ...
        @property
        def r_life(self) -> np.random.Generator: ...
        @property
        def r_select(self) -> np.random.Generator: ...
        def _mult(self, node: int) -> float: ...
        def _log(self, t: float, event: str, **fields: Any) -> None: ...
        def _pick_cause(self, running: bool) -> int: ...
        def _record(self, t: float, node: int) -> None: ...
        # defined by Pools (pools.py)
        def _into_pool(self, t: float, node: int) -> None: ...
        def _pop_standby(self, node: int | None = None) -> int: ...
        def _drop_idle(self, node: int) -> None: ...
