"""Cluster operations of one replication: the node lifecycle executed step by step.

:class:`ClusterOps` is the state machine both engines run (the SimPy engine and the fast
path's general loop): which nodes fail and when, diagnosis, repairs, standbys, host
selection, preemption, retirement, depletion. It is *passive*: it never moves a clock.
Every method takes the time of the caller's event and first processes the internal
events up to it (repairs finishing, nodes not in use failing), so two engines that call
it at the same times in the same order see the same cluster, draw for draw, from the
named streams of :mod:`testbed.streams`.

**When failures strike** (the README's "Failure semantics"). The job is in one of three
phases: ``RUNNING`` (computing or writing a checkpoint), ``RESTARTING`` (detection,
swap, host selection, requeue, load) and ``WAITING`` (preemption, a stall for a repair,
a maintenance window). A node's failure clock runs at speed 1 while the job runs and
every cause can strike; while the job restarts only causes that are not job-induced
strike (speed = their share ``p_hw``); nodes not in use — the job's nodes while it
waits, standbys and idle nodes — run at ``idle_rate_factor·p_hw`` (0 by default: their
clocks stop). With ``exposure: running`` nothing fails unless the job runs. Spare-pool
nodes belong to other work and never fail here.

**Where failures come from** (the cost per failure is O(1) or O(log N), never O(N)):

* ``job`` lane — a job-level renewal process (``failures.mtbf``) on the job's clock;
* ``poisson`` lane — N identical exponential nodes: the job's failures are a Poisson
  process of rate (nodes present)·speed/MTBF, drawn as marks on an integrated-hazard
  clock, the failed node uniform among those present;
* ``clocks`` lane — one renewal clock per node (Weibull or lognormal nodes, bad nodes,
  per-node rates): a heap keyed by the reading of its group's clock at which the node
  fails; a node moving between groups keeps its remaining age.

**Stationary places** (the default, ``failures.start: stationary``; clocks lane). The
renewal clocks belong to *places*, and nodes move between them: each of the job's N
slots, and each place of the pool (standbys and idle nodes), is a renewal process in
the time it is occupied, started in equilibrium (:meth:`Interarrival.equilibrium`,
density S(t)/μ) and renewed with a fresh life at each failure in it. A node that joins
the job continues the clock of the slot it fills (a failure emptied it: the slot has
just renewed); a node that enters the pool takes a free place and continues its clock
(a new place starts in equilibrium); a place whose node failed renews. The job
therefore sees N·T/μ in T of running time with any pool, and the pool fails at
``idle_rate_factor``·p_hw/μ per idle node, whatever moves between them (a pool node
whose clock was frozen at t = 0 used to carry an equilibrium residual — longer than a
life under a decreasing hazard — into the job, and a freshly repaired node waiting in
the pool failed at the hazard of age 0). ``failures.start: fresh`` starts every clock
new at t = 0. A node carries its record (failures, score) and its rate (bad nodes,
per-node rates) from place to place, not an age.

**Conventions** (:class:`~testbed.resilience.lifecycle.Conventions`): where the
testbed and AIReSim differ (host selection of the empty slots or the whole job, when
spare-pool nodes are preempted, whether the first host selection counts, when the
cluster is depleted, how stalls are counted), each engine runs the convention the
scenario names. Bad nodes can regenerate over time (AIReSim's
``bad_server_regeneration``).
"""

from __future__ import annotations

import bisect
import heapq
import itertools
import math
from collections import deque
from collections.abc import Generator
from typing import NamedTuple

import numpy as np

from testbed import events as ev
from testbed.resilience.distributions import ZERO
from testbed.resilience.draws import Buffer, Clock, Durations, LazyStream
from testbed.resilience.exposure import (
    DONE,
    RESTARTING,
    RUNNING,
    WAITING,
    cause_tables,
    lane_of,
    phase_speeds,
)
from testbed.resilience.failures import FailureModel
from testbed.resilience.lifecycle import (
    S_IDLE,
    S_MANUAL,
    S_RETIRED,
    S_RUN,
    S_SPARE,
    S_STANDBY,
    STAGE_NAMES,
    Lifecycle,
)
from testbed.resilience.maintenance import Windows
from testbed.resilience.policies import NodeRecord, checked_choice
from testbed.resilience.pools import Pools
from testbed.resilience.repairs import RepairShop
from testbed.resilience.spec import RunLimits

INF = math.inf
BLOCK = 256

# hold kinds and how the engines book them
DETECT, SWAP, HOST_SELECTION, PREEMPTION, STALL = ("detect", "swap", "host_selection",
                                                   "preemption", "stall")
MAINTENANCE, REQUEUE, LOAD, PLANNED_CKPT, DEPLETED = ("maintenance", "requeue", "load",
                                                      "planned_checkpoint", "depleted")
RESTART_KINDS = frozenset({DETECT, SWAP, HOST_SELECTION, REQUEUE, LOAD})
#: Outcomes of :meth:`ClusterOps.recover`.
RECOVERED, CUT, EXHAUSTED = 0, 1, 2
WAIT_KINDS = frozenset({PREEMPTION, STALL, MAINTENANCE})


class Hold(NamedTuple):
    """The job holds until ``until_s`` in ``phase`` (an engine moves the clock there,
    unless a failure comes first)."""

    kind: str
    phase: int
    until_s: float


_IDENTITY: dict[int, list[int]] = {}


def _identity(n: int) -> list[int]:
    """``list(range(n))``, made once per size (copying it costs a tenth of making it:
    a replication of 2,048 nodes needs four)."""
    ids = _IDENTITY.get(n)
    if ids is None:
        if len(_IDENTITY) > 64:
            _IDENTITY.clear()
        ids = _IDENTITY[n] = list(range(n))
    return ids


class HoldTimes:
    """Seconds an engine booked to the job's holds: restarts, waits and each kind's own
    total. :meth:`ClusterOps.recover` books into it directly (no call per hold); an
    engine's job derives from it and books the holds it runs itself with :meth:`book`,
    by the same rule."""

    def __init__(self) -> None:
        self.restart_s = self.wait_s = 0.0
        self.times = dict.fromkeys(RESTART_KINDS | WAIT_KINDS, 0.0)

    def book(self, kind: str, spent_s: float) -> None:
        """Book ``spent_s`` of a hold of ``kind`` (restart or wait, and its own total)."""
        if kind in RESTART_KINDS:
            self.restart_s += spent_s
        elif kind in WAIT_KINDS:
            self.wait_s += spent_s
        if kind in self.times:
            self.times[kind] += spent_s


class JobFailure(NamedTuple):
    """A failure that interrupts the job: cause index, the node that failed and the one
    diagnosis blamed (−1: none), and whether a slot of the job is now empty."""

    t_s: float
    node: int
    cause: int
    job_induced: bool
    blamed: int
    missed: bool
    emptied: bool


class ClusterOps(Pools, RepairShop):
    """The cluster of one replication (see the module docstring)."""

    def __init__(self, failures: FailureModel, life: Lifecycle, nodes: int, seed: int,
                 rep: int, limits: RunLimits | None = None, log: list | None = None) -> None:
        self.fm, self.life, self.n, self.rep = failures, life, nodes, rep
        self.limits = limits or RunLimits()
        self.log = log
        self.causes = failures.causes
        self.cum_full, self.cum_hw, self.p_hw = cause_tables(failures)
        self.speeds = phase_speeds(failures, self.p_hw)
        self.lane = lane_of(failures, life)
        self._poisson = self.lane == "poisson"
        self._diagnosed = bool(life.diagnosis_miss or life.diagnosis_wrong)

        self._induced = [c.job_induced for c in self.causes] or [False]
        self.phase = RUNNING
        self.run_start = 0.0
        self.counts = dict.fromkeys(
            ("failures", "failures_hardware", "failures_job_induced", "failures_idle",
             "failures_systematic", "failures_burst", "missed_diagnoses", "misdiagnoses",
             "repairs_automatic", "repairs_manual", "repairs_successful", "repairs_failed",
             "bad_nodes_cured", "retirements", "preemptions", "host_selections", "swaps",
             "stalls"), 0)
        self._stalling = False
        self._in_loop = False          # the job could not be filled: AIReSim's wait loop
        self._preempting = False       # this round preempted (a wait, not a stall)
        self._back = self._back_seen = 0   # nodes back from repair (or retired) so far
        conv = life.conventions
        self._whole_job = conv.host_selection == "whole_job"
        self._when_short = conv.preemption == "when_job_short"
        self._wake_ups = conv.stalls == "wake_ups"
        self._aire_depletion = conv.depletion == "below_job_and_standbys"
        regen = life.regeneration if life.bad_fraction > 0 else None
        self._regen_every = regen.every_s if regen is not None else INF
        self._regen_share = regen.share if regen is not None else 0.0
        self._regen_next = self._regen_every
        self._pending_bad: list[int] = []
        self._seq = itertools.count()
        self.followers: list[tuple[float, int]] = []
        self.trace = failures.trace or ()
        self.trace_i = 0
        #: anything but repairs can happen outside the job (idle failures, bursts, traces)
        self._external = bool(self.trace or failures.burst_probability)
        self._idle_on = self.speeds[3] > 0 and life.spares is not None and self.lane != "job"
        self._busy_outside = (self._external or self._idle_on
                              or (life.regeneration is not None and life.bad_fraction > 0))
        #: one repair stage per failure, no technician queue: inlined in strike
        self._simple_shop = (life.spares is not None and not life.pipeline
                             and life.technicians is None)
        #: … and nothing to decide when it ends (no retirement, bad nodes, idle clocks)
        self._simple_return = (self._simple_shop and life.retirement is None
                               and not life.heterogeneous and not self._idle_on)
        #: host selection :meth:`_fill_plain` and :meth:`_replace_fast` inline (random, no
        #: clocks, no conventions)
        self._plain_pool = (self._poisson and life.spares is not None
                            and life.host_policy == "random" and life.host_policy_fn is None
                            and life.conventions.is_default and not self._idle_on)
        #: failures :meth:`strike` handles inlined (poisson lane, nothing external)
        self._plain = (self._poisson and not failures.trace and not failures.burst_probability
                       and not self._diagnosed and life.retirement is None)
        #: a restarting or waiting job cannot be struck (exposure: running, no bursts
        #: or trace): its holds need not look for the next failure
        self._quiet = (self.speeds[RESTARTING] == 0.0 and self.speeds[WAITING] == 0.0
                       and not self._external)
        #: a change of phase only processes repairs and sets the clocks' rates (nothing
        #: outside the job, no scores to credit): the hot paths inline it
        self._lean_phases = not self._busy_outside and (
            life.retirement is None or life.retirement.score is None)
        # per-cause and per-run constants of the hot paths
        self._multi = len(self.causes) > 1
        self._repair_s = [c.repair_s for c in self.causes] or [0.0]
        self._detect_s = [c.detect_s for c in self.causes] or [0.0]
        self._requeue_s = [c.restart_s for c in self.causes] or [0.0]
        self._s_run, self._s_restart = self.speeds[RUNNING], self.speeds[RESTARTING]
        self._max_failures = self.limits.max_failures
        self._max_t = self.limits.max_simulated_s
        #: the node the last :meth:`strike` hit and the one it sent to repair (−1: none)
        self.struck_node = self.struck_blamed = -1
        self.struck_cause = 0          # … and its cause (:meth:`fail_over`)
        self._round_short = False      # the last replacement round left the job short
        #: the idle pool keeps a heap of policy keys (ordered host-selection policies)
        self._keyed_idle = life.host_policy in ("fewest_failures", "highest_score")
        #: :meth:`fail_over` runs fused: the fast path's commonest cluster
        self._lean_quiet = (self._plain and self._lean_phases and self._simple_shop
                            and self._plain_pool and not life.standbys and log is None
                            and self._quiet)
        self._streams(seed, rep)
        self._init_nodes()
        self._init_lane()

    # ----------------------------------------------------------------- setup
    def _streams(self, seed: int, rep: int) -> None:
        """The replication's named streams (each made on its first draw)."""
        fm, life = self.fm, self.life

        def uniform(purpose: str, index: int = 0) -> Buffer:
            return Buffer((seed, rep, purpose, index), lambda g, n: g.random(n))

        self.s_life = LazyStream(seed, rep, "lifecycle")
        self.u_nodes = uniform("nodes")
        self.u_causes = uniform("causes")
        self.s_bursts = LazyStream(seed, rep, "bursts")
        self.u_repairs = uniform("repairs")
        self.d_auto = Durations(life.automatic.duration if life.automatic else ZERO, seed, rep,
                                 "repairs", 1)
        self.d_manual = Durations(life.manual.duration if life.manual else ZERO, seed, rep,
                                   "repairs", 2)
        self.u_diag = uniform("diagnosis")
        self.s_select = LazyStream(seed, rep, "selection")
        self.d_swap = Durations(life.swap, seed, rep, "costs", 0)
        self.d_hs = Durations(life.host_selection, seed, rep, "costs", 1)
        self.d_preempt = Durations(life.preemption, seed, rep, "costs", 2)
        self.u_class = uniform("classes")
        self.u_select = uniform("selection", 1)
        self.s_regen = LazyStream(seed, rep, "regeneration")
        if fm.interarrival is not None:
            dist = fm.interarrival
            self.gaps = Buffer((seed, rep, "failures", 0), lambda g, n: dist.draw(g, n))
            self.idle_gaps = Buffer((seed, rep, "idle", 0), lambda g, n: dist.draw(g, n))
            #: the pool's places: new ones start stationary, each renews at a failure
            self.idle_life = Buffer((seed, rep, "idle", 1), lambda g, n: dist.equilibrium(g, n))
            self.idle_fresh = Buffer((seed, rep, "idle", 2), lambda g, n: dist.draw(g, n))

    @property
    def r_life(self) -> np.random.Generator:
        return self.s_life.get()

    @property
    def r_bursts(self) -> np.random.Generator:
        return self.s_bursts.get()

    @property
    def r_select(self) -> np.random.Generator:
        return self.s_select.get()

    @property
    def r_regen(self) -> np.random.Generator:
        return self.s_regen.get()

    def _init_nodes(self) -> None:
        life, n = self.life, self.n
        extra = 0 if life.spares is None else life.standbys + life.spares + life.spare_pool
        total = n + extra
        self.state = [S_RUN] * n + [S_STANDBY] * life.standbys * (extra > 0)
        if life.spares is not None:
            self.state += [S_IDLE] * life.spares + [S_SPARE] * life.spare_pool
        self.bad = [False] * total
        if life.heterogeneous and life.bad_fraction > 0 and life.bad_multiplier > 0:
            k = int(total * life.bad_fraction)
            for i in self.r_life.choice(total, size=k, replace=False).tolist():
                self.bad[i] = True
        self.ver = [0] * total
        self.rem = [0.0] * total       # remaining own-clock age (clocks lane)
        self.km = [1.0] * total        # the rate multiplier its clock entry was built with
        self.slot_rem = [0.0] * n      # remaining life of an empty slot's renewal clock
        self.places: list[float] = []  # remaining lives of the pool's free places
        self.jkey = [0.0] * total      # heap key while in a group (clocks lane)
        self.fails = [0] * total
        self.repairs_done = [0] * total
        self.last_fail = [-INF] * total
        sc = life.retirement.score if life.retirement is not None else None
        self.score_rule = sc
        self.score = [sc.initial if sc else 0.0] * total
        self.gjoin = [0] * total
        self.G = 0
        win = life.retirement.window if life.retirement else None
        self.window = win
        self.recent = [deque(maxlen=win.failures) for _ in range(total)] if win else None
        ids = _identity(n)
        self.slots = ids[:]
        self.filled = ids[:]
        self.fpos = ids[:]
        self.slot_of = ids + [-1] * extra
        self.empty: list[int] = []
        self.standby: list[int] = []
        self.idle: list[int] = []
        self.ipos: dict[int, int] = {}
        self.iheap: list[tuple] = []
        self.iver = [0] * total
        self.spare: list[int] = []
        i = n
        if life.spares is not None:
            for _ in range(life.standbys):
                self._push_standby(i)
                i += 1
            self.idle = list(range(i, i + life.spares))       # _push_idle of each
            self.ipos = {node: k for k, node in enumerate(self.idle)}
            if life.host_policy in ("fewest_failures", "highest_score"):
                for node in self.idle:
                    self.iver[node] += 1
                    heapq.heappush(self.iheap, (*self._policy_key(node), self.iver[node]))
            i += life.spares
            self.spare = list(range(i, total))[::-1]
        self.next_id = total
        self.rheap: list[tuple[float, int, int, int]] = []   # (done, seq, node, stage)
        self.rqueue: deque[tuple[int, int, float]] = deque()
        self.busy = 0
        self.in_repair = 0

    def _mult(self, node: int) -> float:
        """A node's clock speed relative to a good node of average rate."""
        life = self.life
        m = life.node_rates[node % len(life.node_rates)] if life.node_rates else 1.0
        return m * (1.0 + life.bad_multiplier) if self.bad[node] else m

    def _init_lane(self) -> None:
        fm = self.fm
        self.jclock = Clock()
        self.iclock = Clock()
        self.jheap: list[tuple[float, int, int]] = []
        self.iheap_f: list[tuple[float, int, int]] = []
        self.key = INF
        self.ikey = INF
        dist = fm.interarrival           # None only in the "none" lane
        if dist is None:
            pass
        elif self.lane == "job":
            if fm.start == "stationary" and dist.kind != "exponential":
                self.key = float(dist.equilibrium(self.r_life, 1)[0])
            else:
                self.key = self.gaps.next()
        elif self.lane == "poisson":
            self.key = self.gaps.next()
            if self._idle_on:          # the pool's clock (its stream only when it runs)
                self.ikey = self.idle_gaps.next()
        elif self.lane == "clocks":
            total = len(self.state)
            first = (dist.equilibrium(self.r_life, total) if fm.start == "stationary"
                     else dist.draw(self.r_life, total)).tolist()
            self.rem = first
            self.jheap = [(first[i] / self._mult(i), i, 0) for i in range(self.n)]
            for i in range(self.n):
                self.jkey[i] = self.jheap[i][0]
                self.km[i] = self._mult(i)
            heapq.heapify(self.jheap)
            if self._idle_clocked():
                for node in self.standby + self.idle:
                    self._idle_clock_in(node, 0.0, first[node])
        self._rates(0.0)

    # ----------------------------------------------------------------- clocks
    def _rates(self, t: float) -> None:
        """Set the group clocks' rates for the current phase and membership."""
        speed = self.speeds[self.phase] if self.phase != DONE else 0.0
        if self._poisson:
            rate = speed * len(self.filled)          # Clock.set, inlined
            clock = self.jclock
            if rate != clock.rate or t != clock.t_ref:
                clock.value += clock.rate * (t - clock.t_ref)
                clock.t_ref = t
                clock.rate = rate
            if self._idle_on:
                self.iclock.set(t, self.speeds[3] * (len(self.standby) + len(self.idle)))
        else:
            self.jclock.set(t, speed)
            if self._idle_on:
                self.iclock.set(t, self.speeds[3])

    def set_phase(self, t: float, phase: int) -> None:
        """The job enters ``phase`` at ``t`` (clock speeds change; a running chunk ends)."""
        if self._busy_outside or (self.rheap and self.rheap[0][0] <= t):
            self._advance(t)
        if phase == self.phase:
            return
        if self.phase == RUNNING and self.score_rule is not None:
            self.G += int((t - self.run_start) // self.score_rule.period_s)
        if phase == RUNNING:
            self.run_start = t
            if self._pending_bad:
                self._apply_pending_bad(t)
        self.phase = phase
        self._rates(t)

    def _job_time(self) -> float:
        """Wall time of the next failure of the job's own clock (lane)."""
        if self._poisson:
            clock = self.jclock
            if not self.filled or clock.rate <= 0.0:
                return INF
            return clock.t_ref + (self.key - clock.value) / clock.rate
        if self.lane == "clocks":
            heap = self.jheap
            while heap and heap[0][2] != self.ver[heap[0][1]]:
                heapq.heappop(heap)
            return self.jclock.time_of(heap[0][0]) if heap else INF
        return self.jclock.time_of(self.key) if self.lane != "none" else INF

    def _idle_time(self) -> float:
        if self.speeds[3] <= 0 or self.life.spares is None:
            return INF
        if self.lane == "clocks":
            heap = self.iheap_f
            while heap and heap[0][2] != self.ver[heap[0][1]]:
                heapq.heappop(heap)
            return self.iclock.time_of(heap[0][0]) if heap else INF
        if self.lane == "poisson":
            return self.iclock.time_of(self.ikey) if (self.standby or self.idle) else INF
        return INF

    def _external_time(self) -> tuple[float, int]:
        """(time, source) of the next burst follower (1) or trace record (2)."""
        best, src = INF, 0
        if self.followers:
            best, src = self.followers[0][0], 1
        if self.trace_i < len(self.trace) and self.trace[self.trace_i].t_s < best:
            best, src = self.trace[self.trace_i].t_s, 2
        return best, src

    def next_failure_s(self) -> float:
        """Wall time of the next failure that interrupts the job (∞: none)."""
        if self._poisson:                            # _job_time, inlined
            clock = self.jclock
            t = (clock.t_ref + (self.key - clock.value) / clock.rate
                 if self.filled and clock.rate > 0.0 else INF)
        else:
            t = self._job_time()
        if self._external and self.filled:
            t = min(t, self._external_time()[0])
        return t

    # ----------------------------------------------------------------- internal events
    def _advance(self, t: float) -> None:
        """Process repairs finishing, nodes not in use failing and external failures
        that find no node of the job, up to and including ``t``."""
        if not self._busy_outside:
            heap = self.rheap
            if not self._simple_return:
                while heap and heap[0][0] <= t:
                    done, _, node, stage = heapq.heappop(heap)
                    self._stage_done(done, node, stage)
                return
            if self.log is not None or self.life.standbys or self._keyed_idle:
                while heap and heap[0][0] <= t:
                    done, _, node, _ = heapq.heappop(heap)
                    self._return_plain(done, node)
                return
            counts, repairs_done, state, idle, ipos = (self.counts, self.repairs_done,
                                                       self.state, self.idle, self.ipos)
            while heap and heap[0][0] <= t:   # _return_plain into the idle pool, inlined
                node = heapq.heappop(heap)[2]
                self.busy -= 1
                self.in_repair -= 1
                counts["repairs_successful"] += 1
                repairs_done[node] += 1
                self._back += 1
                state[node] = S_IDLE
                ipos[node] = len(idle)
                idle.append(node)
            return
        while True:
            tr = self.rheap[0][0] if self.rheap else INF
            ti = self._idle_time()
            te = self._external_time()[0] if not self.filled else INF
            tg = self._regen_next
            nxt = min(tr, ti, te, tg)
            if nxt > t:
                return
            if tr == nxt:
                done, _, node, stage = heapq.heappop(self.rheap)
                self._stage_done(done, node, stage)
            elif ti == nxt:
                self._idle_failure(ti)
            elif tg == nxt:
                self._regenerate(tg)
            else:
                src = self._external_time()[1]
                if src == 1:
                    heapq.heappop(self.followers)
                else:
                    self.trace_i += 1

    def _return_plain(self, t: float, node: int) -> None:
        """:meth:`_stage_done` → :meth:`_finish` → :meth:`_into_pool` of a one-stage
        repair with no technician queue, retirement or bad nodes, inlined (and
        :meth:`_push_idle` of a random pick)."""
        self.busy -= 1
        self.in_repair -= 1
        self.counts["repairs_successful"] += 1
        self.repairs_done[node] += 1
        self._back += 1
        log = self.log
        if log is not None:
            self._log(t, ev.REPAIR_END, node=node, stage=STAGE_NAMES[0], fixed=True)
        if len(self.standby) < self.life.standbys:
            self._push_standby(node)
            where = "standby"
        elif self._keyed_idle:
            self._push_idle(node)
            where = "idle"
        else:
            self.state[node] = S_IDLE
            idle = self.idle
            self.ipos[node] = len(idle)
            idle.append(node)
            where = "idle"
        if log is not None:
            self._log(t, ev.NODE_UP, node=node, to=where)

    def _regenerate(self, t: float) -> None:
        """Bad-node regeneration at ``t``: max(1, ⌊good · fraction · share⌋) good nodes
        that are not retired turn bad (AIReSim's rule), drawn uniformly."""
        self._regen_next = t + self._regen_every
        good = [i for i, bad in enumerate(self.bad) if not bad and self.state[i] != S_RETIRED]
        if not good:
            return
        k = min(len(good), max(1, int(len(good) * self.life.bad_fraction * self._regen_share)))
        for node in sorted(self.r_regen.choice(len(good), size=k, replace=False).tolist()):
            self._set_bad(t, good[node])
        self._rates(t)

    def _set_bad(self, t: float, node: int) -> None:
        """``node`` turns bad. An idle node's clock runs at its new speed at once; a node
        of the job keeps the rate its current run started with (as AIReSim draws a run's
        failure time from the rates at its start) and speeds up when the job next
        starts running (:meth:`set_phase`)."""
        self.bad[node] = True
        if self.lane != "clocks":
            return
        if self.state[node] == S_RUN and self.slot_of[node] >= 0:
            self._pending_bad.append(node)
        elif self.state[node] in (S_STANDBY, S_IDLE) and self._idle_clocked():
            self._clock_out(node, self.iclock, t)
            self._idle_clock_in(node, t, self.rem[node])

    def _apply_pending_bad(self, t: float) -> None:
        """Job nodes that turned bad during the last run take their new rate now."""
        for node in self._pending_bad:
            if self.state[node] == S_RUN and self.slot_of[node] >= 0 \
                    and self.km[node] != self._mult(node):
                self._clock_out(node, self.jclock, t)
                self._job_clock_in(node, t)
        self._pending_bad.clear()

    def _log(self, t: float, event: str, **fields) -> None:
        if self.log is not None:
            self.log.append({"t_s": t, "event": event, **fields})

    # ----------------------------------------------------------------- job failures
    def _pick_cause(self, running: bool) -> int:
        if len(self.causes) <= 1:
            return 0
        return bisect.bisect_right(self.cum_full if running else self.cum_hw,
                                   self.u_causes.next())

    def _random_filled(self) -> int:
        """A uniformly random node of the job (−1 when none is present)."""
        if not self.filled:
            return -1
        u = self.u_nodes.next()
        return self.slots[self.filled[min(int(u * len(self.filled)), len(self.filled) - 1)]]

    def fail(self, t: float) -> JobFailure:
        """The failure at ``t = next_failure_s()``: diagnosis, repairs, empty slots; the
        job enters ``RESTARTING``."""
        if self._plain:
            cause = self.strike(t)
            node, blamed = self.struck_node, self.struck_blamed
            return JobFailure(t, node, cause, self._induced[cause], blamed, False, blamed >= 0)
        self._advance(t)
        running = self.phase == RUNNING
        repair_s = None
        if self._external and self.filled:
            tj = self._job_time()
            te, src = self._external_time()
            primary = tj <= te
        else:
            primary, src = True, 0
        if primary:
            node = self._primary_node(t)
            cause = self._pick_cause(running)
        elif src == 1:
            heapq.heappop(self.followers)
            node = self._random_filled()
            cause = self._pick_cause(running)
            self.counts["failures_burst"] += 1
        else:
            rec = self.trace[self.trace_i]
            self.trace_i += 1
            node, cause, repair_s = self._trace_node(rec.node), rec.cause, rec.repair_s
        counts = self.counts
        counts["failures"] += 1
        total = counts["failures"] + counts["failures_idle"]
        if total > self.limits.max_failures or t > self.limits.max_simulated_s:
            self.limits.check(total, t, self.rep)
        ji = self._induced[cause]
        counts["failures_job_induced" if ji else "failures_hardware"] += 1
        if node >= 0 and self.bad[node] and self.life.bad_multiplier > 0:
            m = self.life.bad_multiplier
            if self.u_class.next() < m / (1.0 + m):
                self.counts["failures_systematic"] += 1
        if primary and self.fm.burst_probability:
            self._maybe_burst(t)
        blamed, missed = -1, False
        if node >= 0 and not ji:
            if self._diagnosed:
                blamed, missed = self._diagnose(t, node)
            else:
                blamed = node
        if node >= 0 and self.score_rule is not None:
            self._settle(node)
            if blamed >= 0 and blamed != node:
                self._settle(blamed)
        if blamed >= 0:
            self._record(t, blamed)
            self._leave_job(t, blamed)
            self._to_repair(t, blamed, cause, repair_s)
        if self.phase == RESTARTING:
            self._rates(t)             # the job lost a node (the poisson lane's rate)
        else:
            self.set_phase(t, RESTARTING)
        if node >= 0 and node != blamed and self.score_rule is not None:
            self.gjoin[node] = self.G      # no credit for the chunk in which it failed
        return JobFailure(t, node, cause, ji, blamed, missed, blamed >= 0)

    def strike(self, t: float) -> int:
        """:meth:`fail` for an engine that needs only the failure's cause (the fast path):
        the same steps and draws; for identical exponential nodes with nothing else
        striking and no diagnosis or scores (:attr:`_plain`) inlined, without a record
        of the failure (:meth:`fail` builds it from :attr:`struck`)."""
        if not self._plain:
            return self.fail(t).cause
        heap = self.rheap
        if heap and heap[0][0] <= t or self._busy_outside:
            self._advance(t)
        running = self.phase == RUNNING
        buf = self.gaps.buf
        self.key += buf.pop() if buf else self.gaps.next()
        filled = self.filled
        node = -1
        if filled:
            k = len(filled)
            buf = self.u_nodes.buf
            u = buf.pop() if buf else self.u_nodes.next()
            node = self.slots[filled[min(int(u * k), k - 1)]]
        cause = 0
        if self._multi:
            buf = self.u_causes.buf
            u = buf.pop() if buf else self.u_causes.next()
            cause = bisect.bisect_right(self.cum_full if running else self.cum_hw, u)
        counts = self.counts
        counts["failures"] += 1
        total = counts["failures"] + counts["failures_idle"]
        if total > self._max_failures or t > self._max_t:
            self.limits.check(total, t, self.rep)
        blamed = -1
        if self._induced[cause]:
            counts["failures_job_induced"] += 1
        else:
            counts["failures_hardware"] += 1
            if node >= 0:
                blamed = node
                self.fails[node] += 1
                self.last_fail[node] = t
                if self.recent is not None:
                    self.recent[node].append(t)
                slot = self.slot_of[node]            # _leave_job (no clocks), inlined
                fpos = self.fpos
                i = fpos[slot]
                last = filled[-1]
                filled[i] = last
                fpos[last] = i
                filled.pop()
                fpos[slot] = -1
                self.slots[slot] = -1
                self.slot_of[node] = -1
                self.empty.append(slot)
                repair_s = self._repair_s[cause]
                if self._simple_shop and repair_s > 0.0:   # _to_repair, one stage, inlined
                    self.in_repair += 1
                    self.state[node] = S_MANUAL
                    self.busy += 1
                    if self.log is not None:
                        self._log(t, ev.REPAIR_BEGIN, node=node, stage=STAGE_NAMES[0])
                    heapq.heappush(heap, (t + repair_s, next(self._seq), node, 0))
                else:
                    self._to_repair(t, node, cause, None)
        self.struck_node, self.struck_blamed = node, blamed
        if self.phase == RESTARTING or self._lean_phases:
            if self.phase != RESTARTING:       # set_phase, inlined (nothing to advance)
                if heap and heap[0][0] <= t:
                    self._advance(t)
                self.phase = RESTARTING
            rate = self._s_restart * len(filled)      # _rates (poisson lane), inlined
            clock = self.jclock
            if rate != clock.rate or t != clock.t_ref:
                clock.value += clock.rate * (t - clock.t_ref)
                clock.t_ref = t
                clock.rate = rate
            if self._idle_on:
                self.iclock.set(t, self.speeds[3] * (len(self.standby) + len(self.idle)))
        else:
            self.set_phase(t, RESTARTING)
        return cause

    def _primary_node(self, t: float) -> int:
        """The node whose clock fired (renewed), or a random one of the job."""
        if self.lane == "clocks":
            _, node, _ = heapq.heappop(self.jheap)
            self.rem[node] = self.gaps.next()
            self._job_clock_in(node, t)
            return node
        self.key += self.gaps.next()
        return self._random_filled()

    def _trace_node(self, index: int) -> int:
        """The job's node in slot ``index mod N`` (the next filled slot if it is empty)."""
        if not self.filled:
            return -1
        k = index % self.n
        for j in itertools.chain(range(k, self.n), range(k)):
            if self.slots[j] >= 0:
                return self.slots[j]
        return -1

    def _maybe_burst(self, t: float) -> None:
        fm = self.fm
        if self.r_bursts.random() < fm.burst_probability:
            offsets = self.r_bursts.uniform(0.0, fm.burst_window_s, fm.burst_size).tolist()
            for off in offsets:
                heapq.heappush(self.followers, (t + off, next(self._seq)))

    def _diagnose(self, t: float, node: int) -> tuple[int, bool]:
        """(node sent to repair, missed?) for a hardware failure of ``node``."""
        life = self.life
        if life.diagnosis_miss and self.u_diag.next() < life.diagnosis_miss:
            self.counts["missed_diagnoses"] += 1
            self._log(t, ev.DIAGNOSIS, node=node, blamed=-1, outcome="missed")
            return -1, True
        if life.diagnosis_wrong and len(self.filled) > 1 and \
                self.u_diag.next() < life.diagnosis_wrong:
            others = len(self.filled) - 1
            k = min(int(self.u_diag.next() * others), others - 1)
            slot = self.filled[k]
            if self.slots[slot] == node:
                slot = self.filled[-1]
            blamed = self.slots[slot]
            self.counts["misdiagnoses"] += 1
            self._log(t, ev.DIAGNOSIS, node=node, blamed=blamed, outcome="wrong_node")
            return blamed, False
        return node, False

    def _record(self, t: float, node: int) -> None:
        """A failure the operator attributes to ``node``."""
        self.fails[node] += 1
        self.last_fail[node] = t
        if self.recent is not None:
            self.recent[node].append(t)
        if self.score_rule is not None:
            self.score[node] -= self.score_rule.penalty

    def _settle(self, node: int) -> None:
        """Credit ``node``'s uptime periods so far into its stored score."""
        rule = self.score_rule
        if rule is not None and self.state[node] == S_RUN:
            self.score[node] += rule.increment * (self.G - self.gjoin[node])
            self.gjoin[node] = self.G

    # ----------------------------------------------------------------- replacement
    def replace(self, t: float) -> tuple[list[tuple[str, int, float]], bool, bool]:
        """Fill the job's empty slots: warm standbys first, then host selection from the
        idle pool (preempting spare-pool nodes when it is short), under the scenario's
        conventions. Returns (holds as (kind, phase, seconds), still short?,
        depleted?)."""
        self._advance(t)
        holds: list[tuple[str, int, float]] = []
        need = len(self.empty)
        if not need:
            self._stalling = self._in_loop = False
            return holds, False, False
        if self._plain_pool and need <= len(self.idle) and not self.standby \
                and not self.life.standbys:
            return self._fill_plain(t, need, holds)
        self._preempting = False
        if self._when_short and self._in_loop and not self._ready(need):
            self._wait_round(t, need, holds)      # AIReSim: wait for job and standbys
            return self._after_round(t, need, holds)
        k = min(need, len(self.standby))
        if k:
            nodes = [self._pop_standby() for _ in range(k)]
            for node in nodes:
                self._clock_leave_idle(node, t)
                self._join_job(t, node)
            self.counts["swaps"] += k
            holds.append((SWAP, RESTARTING, self.d_swap.next()))
            if self.log is not None:
                self._log(t, ev.STANDBY_SWAP, nodes=nodes)
            need -= k
        if need:
            need -= self._from_pool(t, need, holds)
        return self._after_round(t, need, holds)

    def _fill_plain(self, t: float, need: int, holds: list[tuple[str, int, float]]
                    ) -> tuple[list[tuple[str, int, float]], bool, bool]:
        """:meth:`replace` when the idle pool holds every node the job lacks, there are
        no standbys and host selection is random (identical nodes): the same draws and
        counts as :meth:`_from_pool`, inlined."""
        idle, u, ipos = self.idle, self.u_select, self.ipos
        nodes = []
        for _ in range(need):
            k = len(idle)
            node = idle[min(int(u.next() * k), k - 1)]
            i = ipos.pop(node)                     # _drop_idle
            last = idle.pop()
            if last != node:
                idle[i] = last
                ipos[last] = i
            self._join_job(t, node)
            nodes.append(node)
        self.counts["host_selections"] += 1
        holds.append((HOST_SELECTION, RESTARTING, self.d_hs.next()))
        if self.log is not None:
            self._log(t, ev.HOST_SELECTION, nodes=nodes, policy=self.life.host_policy)
        self._preempting = False
        return self._after_round(t, 0, holds)

    def _after_round(self, t: float, need: int, holds: list[tuple[str, int, float]]
                     ) -> tuple[list[tuple[str, int, float]], bool, bool]:
        """Close a replacement round with ``need`` slots still empty: stall counting
        and depletion."""
        self._rates(t)
        short = need > 0
        self._in_loop = short
        stall = short and not self._preempting
        depleted = stall and self._depleted()
        if stall and not depleted and (not self._stalling or (
                self._wake_ups and self._back != self._back_seen)):
            self.counts["stalls"] += 1
        self._back_seen = self._back
        self._stalling = stall
        if depleted:
            self._log(t, ev.DEPLETED, short=need)
        return holds, short, depleted

    def _depleted(self) -> bool:
        """The job is short and can never be filled again (see the conventions)."""
        if self._aire_depletion and self.life.spares is not None:
            alive = len(self.state) - self.counts["retirements"]
            return alive < self.n + self.life.standbys
        return self.in_repair == 0

    def _from_pool(self, t: float, need: int, holds: list[tuple[str, int, float]]) -> int:
        """Host selection from the idle pool for ``need`` empty slots (preempting
        spare-pool nodes when it is short) and refilling the standbys; the slots filled.

        ``to_refill_standbys``: preempt whenever the idle pool cannot fill the slots and
        the standbys (all the nodes short at once), fill what it can.
        ``when_job_short`` (AIReSim): once the job cannot be filled, preempt one node at a
        time (each with its cost, nodes back from repair meanwhile counted) until the
        job and its standbys can be, then wait for repairs until they can (unless
        nothing is left in repair), and only then select."""
        life = self.life
        want = need + max(0, life.standbys - len(self.standby))
        unlimited = life.spares is None      # an unlimited pool has every node at hand
        avail = want if unlimited else len(self.idle)
        if self._when_short and avail < need:
            self._wait_round(t, need, holds)      # the job cannot be filled
            return 0
        if not self._when_short and avail < want and self.spare:
            avail += self._preempt(t, min(want - avail, len(self.spare)), holds)
        take = min(need, avail)
        if not take:
            return 0
        if self._whole_job:
            nodes = self._repick(t)
        else:
            nodes = self._take_idle(take)
            for node in nodes:
                self._clock_leave_idle(node, t)
                self._join_job(t, node)
            refill = life.standbys - len(self.standby)
            if not unlimited:
                refill = min(refill, len(self.idle))
            if refill > 0:
                for node in self._take_idle(refill):
                    self._push_standby(node)   # its idle clock runs on
        self.counts["host_selections"] += 1
        holds.append((HOST_SELECTION, RESTARTING, self.d_hs.next()))
        if self.log is not None:
            self._log(t, ev.HOST_SELECTION, nodes=nodes, policy=life.host_policy)
        return take

    def _ready(self, need: int) -> bool:
        """AIReSim's wait loop is over: the pool holds the job's empty slots and all its
        standbys (or the slots, when nothing is left in repair to wait for)."""
        if self.life.spares is None:
            return True
        pool = len(self.idle) + len(self.standby)
        return pool >= need + self.life.standbys or (pool >= need and self.in_repair == 0)

    def _wait_round(self, t: float, need: int, holds: list[tuple[str, int, float]]) -> None:  # noqa: ARG002
        """One round of AIReSim's wait loop: preempt one spare-pool node (with its
        cost), or, when the spare pool is empty, stall (the caller holds the job)."""
        if self.spare:
            self._preempt(t, 1, holds)
            self._preempting = True

    def _repick(self, t: float) -> list[int]:
        """AIReSim's host selection: the job and its standbys re-picked by the policy
        from every available node (the job's, the standbys, the idle pool); the job's
        nodes that are not picked go back to the idle pool. Returns the nodes that
        joined the job. O(nodes) — AIReSim's cost per host selection."""
        life = self.life
        for slot in self.filled:
            self._settle(self.slots[slot])
        pool = sorted([self.slots[s] for s in self.filled] + self.standby + self.idle)
        order = self._rank(pool, min(len(pool), self.n + life.standbys))
        job = set(order[:self.n])
        for slot in list(self.filled):
            node = self.slots[slot]
            if node not in job:
                self._leave_job(t, node)
                self._push_idle(node)
                if self._idle_clocked():
                    self._idle_clock_in(node, t)
        joined = []
        for node in order[:self.n]:
            if self.state[node] == S_RUN:
                continue
            if self.state[node] == S_STANDBY:
                self._pop_standby(node)
            else:
                self._drop_idle(node)
            self._clock_leave_idle(node, t)
            self._join_job(t, node)
            joined.append(node)
        for node in list(self.standby):
            self._pop_standby(node)
            self._push_idle(node)
        for node in order[self.n:]:
            self._drop_idle(node)
            self._push_standby(node)
        return joined

    def _rank(self, pool: list[int], count: int) -> list[int]:
        """``count`` nodes of ``pool`` in the order the host-selection policy picks them
        (random: a uniform sample, as ``random.sample``)."""
        life = self.life
        if life.host_policy_fn is not None:
            cands = [NodeRecord(n, self.fails[n], self.score[n], self.repairs_done[n],
                                self.last_fail[n]) for n in pool]
            return checked_choice(life.host_policy_fn(cands, count, self.r_select), cands,
                                  count, life.host_policy)
        if life.host_policy == "random":
            order = list(pool)
            for i in range(count):                 # a partial Fisher–Yates shuffle
                j = i + min(int(self.u_select.next() * (len(order) - i)), len(order) - i - 1)
                order[i], order[j] = order[j], order[i]
            return order[:count]
        return sorted(pool, key=self._policy_key)[:count]

    def _preempt(self, t: float, count: int, holds: list[tuple[str, int, float]]) -> int:
        """Move ``count`` spare-pool nodes into the idle pool (one preemption hold)."""
        wait = 0.0
        for _ in range(count):
            node = self.spare.pop()
            self._push_idle(node)
            if self._idle_clocked():
                self._idle_clock_in(node, t)
            wait += self.d_preempt.next()
        self.counts["preemptions"] += count
        holds.append((PREEMPTION, WAITING, wait))
        self._log(t, ev.PREEMPTION, nodes=count)
        return count

    def _clock_leave_idle(self, node: int, t: float) -> None:
        """``node`` leaves the pool: its place keeps the remaining life for the next."""
        if self._idle_clocked():
            self._clock_out(node, self.iclock, t)
            self.places.append(self.rem[node])

    def _may_retry(self) -> bool:
        """Whether a short job should try again at once rather than stall: nodes are
        at hand (AIReSim's rule: enough for the job and its standbys), or nothing is
        left in repair (it is then depleted)."""
        if not self.in_repair:
            return True
        if self._when_short and self._in_loop:
            return self._ready(len(self.empty)) or bool(self.spare)
        return bool(self.standby or self.idle or self.spare)

    def initial_selection_s(self) -> float | None:
        """AIReSim's counted first host selection (``initial_selection: counted``): it
        is counted here and its duration returned, for the engines to hold the job
        before it starts (None: the testbed's free initial placement)."""
        if self.life.conventions.initial_selection != "counted":
            return None
        self.counts["host_selections"] += 1
        self._log(0.0, ev.HOST_SELECTION, nodes=[], policy=self.life.host_policy)
        return self.d_hs.next()

    def next_return_s(self) -> float:
        """When the next repair stage ends (a stalled job looks again then)."""
        return self.rheap[0][0] if self.rheap else INF

    # ----------------------------------------------------------------- the job's holds
    def recovery(self, t: float, detect_s: float, requeue_s: float, load_s: float,
                 windows: Windows | None = None,
                 stop_ckpt_s: float = 0.0) -> Generator[Hold, float, None]:
        """The holds of a restart after a failure at ``t`` (send each hold's end time
        back): detect → replacements (swap, preemption, host selection, stalls) → wait
        for an open maintenance window → requeue → load → wait if a planned stop has
        begun. Yields a ``depleted`` hold when the cluster can never give the job its
        nodes again."""
        if detect_s > 0:
            t = yield Hold(DETECT, RESTARTING, t + detect_s)
        while True:
            holds, short, depleted = self.replace(t)
            if depleted:
                self.set_phase(t, WAITING)
                yield Hold(DEPLETED, WAITING, INF)
                return
            for kind, phase, dur in holds:
                if dur > 0:
                    self.set_phase(t, phase)
                    t = yield Hold(kind, phase, t + dur)
            if not short:
                break
            self._advance(t)
            if self._may_retry():
                continue              # nodes came back (or retired) during the holds
            self.set_phase(t, WAITING)
            t = yield Hold(STALL, WAITING, self.next_return_s())
        if windows is not None:
            end = windows.open_until(t)
            if end is not None:
                self.set_phase(t, WAITING)
                t = yield Hold(MAINTENANCE, WAITING, end)
        self.set_phase(t, RESTARTING)
        if requeue_s > 0:
            t = yield Hold(REQUEUE, RESTARTING, t + requeue_s)
        if load_s > 0:
            t = yield Hold(LOAD, RESTARTING, t + load_s)
        if windows is not None:
            end = windows.blocked_until(t, stop_ckpt_s)
            if end is not None:
                self.set_phase(t, WAITING)
                yield Hold(MAINTENANCE, WAITING, end)

    def recover(self, t: float, detect_s: float, requeue_s: float, load_s: float,
                books: HoldTimes) -> tuple[int, float]:
        """:meth:`recovery` without a generator, for an engine without maintenance
        windows that books each hold into ``books``: the same steps in the same order
        (``tests/sim/test_fast_equals_simpy.py`` holds the two to each other), and the
        job set running when it is over. Returns (:data:`RECOVERED`, when the job runs
        again), (:data:`CUT`, the failure that cut a hold short) or (:data:`EXHAUSTED`,
        when the cluster was found depleted)."""
        quiet = self._quiet          # nothing can strike the job before it runs again
        times = books.times
        if detect_s > 0:
            until = t + detect_s
            f = INF if quiet else self.next_failure_s()
            if f <= until:
                books.restart_s += f - t
                times[DETECT] += f - t
                return CUT, f
            books.restart_s += until - t
            times[DETECT] += until - t
            t = until
        while True:
            dur = self._replace_fast(t) if not self._busy_outside else None
            if dur is not None:            # one host selection at most, or nothing to do
                if dur > 0:
                    if self.phase != RESTARTING:
                        self.set_phase(t, RESTARTING)
                    elif self.rheap and self.rheap[0][0] <= t:
                        self._advance(t)
                    until = t + dur
                    f = INF if quiet else self.next_failure_s()
                    if f <= until:
                        books.restart_s += f - t
                        times[HOST_SELECTION] += f - t
                        return CUT, f
                    books.restart_s += until - t
                    times[HOST_SELECTION] += until - t
                    t = until
                break
            res = self._replace_holds(t, books)
            if res[0] != RECOVERED:
                return res
            t = res[1]
            if not self._round_short:
                break
            self._advance(t)
            if self._may_retry():
                continue
            self.set_phase(t, WAITING)
            until = self.next_return_s()
            f = INF if quiet else self.next_failure_s()
            if f <= until:
                books.book(STALL, f - t)
                return CUT, f
            books.book(STALL, until - t)
            t = until
        if self.phase != RESTARTING:
            self.set_phase(t, RESTARTING)
        elif self.rheap and self.rheap[0][0] <= t or self._busy_outside:
            self._advance(t)
        if requeue_s > 0:
            until = t + requeue_s
            f = INF if quiet else self.next_failure_s()
            if f <= until:
                books.restart_s += f - t
                times[REQUEUE] += f - t
                return CUT, f
            books.restart_s += until - t
            times[REQUEUE] += until - t
            t = until
        if load_s > 0:
            until = t + load_s
            f = INF if quiet else self.next_failure_s()
            if f <= until:
                books.restart_s += f - t
                times[LOAD] += f - t
                return CUT, f
            books.restart_s += until - t
            times[LOAD] += until - t
            t = until
        if not self._lean_phases:                  # the job runs again
            self.set_phase(t, RUNNING)
            return RECOVERED, t
        heap = self.rheap                           # set_phase(t, RUNNING), inlined
        if heap and heap[0][0] <= t:
            self._advance(t)
        if self.phase != RUNNING:
            self.run_start = t
            self.phase = RUNNING
            if self._poisson and not self._idle_on:
                rate = self._s_run * len(self.filled)
                clock = self.jclock
                if rate != clock.rate or t != clock.t_ref:
                    clock.value += clock.rate * (t - clock.t_ref)
                    clock.t_ref = t
                    clock.rate = rate
            else:
                self._rates(t)
        return RECOVERED, t

    def fail_over(self, t: float, load_s: float, books: HoldTimes) -> tuple[int, float]:
        """:meth:`strike` at ``t`` then :meth:`recover` with the cause's detection and
        requeue, fused for the commonest cluster (:attr:`_lean_quiet`: identical
        exponential nodes, nothing outside the job but one-stage repairs into a random
        idle pool, no standbys or log, a restarting job that cannot be struck): the
        same steps and draws, with what the two calls would repeat done once. The
        cause is :attr:`struck_cause`. Where the cluster is not that simple or the pool
        cannot fill the job, the steps go on in :meth:`recover` itself."""
        if not self._lean_quiet:
            cause = self.struck_cause = self.strike(t)
            return self.recover(t, self._detect_s[cause], self._requeue_s[cause], load_s,
                                books)
        heap = self.rheap
        if heap and heap[0][0] <= t:
            self._advance(t)
        running = self.phase == RUNNING
        buf = self.gaps.buf
        self.key += buf.pop() if buf else self.gaps.next()
        filled, slots, fpos, slot_of = self.filled, self.slots, self.fpos, self.slot_of
        node = -1
        if filled:
            k = len(filled)
            buf = self.u_nodes.buf
            u = buf.pop() if buf else self.u_nodes.next()
            node = slots[filled[min(int(u * k), k - 1)]]
        cause = 0
        if self._multi:
            buf = self.u_causes.buf
            u = buf.pop() if buf else self.u_causes.next()
            cause = bisect.bisect_right(self.cum_full if running else self.cum_hw, u)
        counts = self.counts
        counts["failures"] += 1
        total = counts["failures"] + counts["failures_idle"]
        if total > self._max_failures or t > self._max_t:
            self.limits.check(total, t, self.rep)
        blamed = -1
        empty = self.empty
        if self._induced[cause]:
            counts["failures_job_induced"] += 1
        else:
            counts["failures_hardware"] += 1
            if node >= 0:
                blamed = node
                self.fails[node] += 1
                self.last_fail[node] = t
                slot = slot_of[node]                 # _leave_job (no clocks)
                i = fpos[slot]
                last = filled[-1]
                filled[i] = last
                fpos[last] = i
                filled.pop()
                fpos[slot] = -1
                slots[slot] = -1
                slot_of[node] = -1
                empty.append(slot)
                repair_s = self._repair_s[cause]
                if repair_s > 0.0:                   # _to_repair, one stage
                    self.in_repair += 1
                    self.state[node] = S_MANUAL
                    self.busy += 1
                    heapq.heappush(heap, (t + repair_s, next(self._seq), node, 0))
                else:
                    self._to_repair(t, node, cause, None)
        self.struck_node, self.struck_blamed, self.struck_cause = node, blamed, cause
        # set_phase(t, RESTARTING). Its _advance and recover's before the requeue find
        # repairs that end up to the next _advance below, and nothing in between looks
        # at the pool: that _advance processes them in the same (heap) order.
        self.phase = RESTARTING
        clock = self.jclock                          # _rates: restarting, no clock runs
        rate = self._s_restart * len(filled)
        if rate != clock.rate or t != clock.t_ref:
            clock.value += clock.rate * (t - clock.t_ref)
            clock.t_ref = t
            clock.rate = rate
        times = books.times                          # recover(…), no failure can cut it
        detect_s = self._detect_s[cause]
        if detect_s > 0:
            until = t + detect_s
            books.restart_s += until - t
            times[DETECT] += until - t
            t = until
        if heap and heap[0][0] <= t:                 # _replace_fast
            self._advance(t)
        need = len(empty)
        if need:
            idle = self.idle
            if need > len(idle):
                return self.recover(t, 0.0, self._requeue_s[cause], load_s, books)
            u_sel, ipos, state, gjoin, g = self.u_select, self.ipos, self.state, self.gjoin, self.G
            for _ in range(need):
                k = len(idle)
                buf = u_sel.buf
                x = buf.pop() if buf else u_sel.next()
                node = idle[min(int(x * k), k - 1)]
                i = ipos.pop(node)                   # _drop_idle
                last = idle.pop()
                if last != node:
                    idle[i] = last
                    ipos[last] = i
                slot = empty.pop()                   # _join_job (no clocks)
                slots[slot] = node
                slot_of[node] = slot
                fpos[slot] = len(filled)
                filled.append(slot)
                state[node] = S_RUN
                gjoin[node] = g
            counts["host_selections"] += 1
            d = self.d_hs
            dur = d.fixed if d.fixed is not None else d.buf.next()
            self._preempting = False
            rate = self._s_restart * len(filled)     # _after_round: _rates
            if rate != clock.rate or t != clock.t_ref:
                clock.value += clock.rate * (t - clock.t_ref)
                clock.t_ref = t
                clock.rate = rate
            self._back_seen = self._back
            if dur > 0:                              # (nothing new to advance at t)
                until = t + dur
                books.restart_s += until - t
                times[HOST_SELECTION] += until - t
                t = until
        self._stalling = self._in_loop = False
        requeue_s = self._requeue_s[cause]
        if requeue_s > 0:
            until = t + requeue_s
            books.restart_s += until - t
            times[REQUEUE] += until - t
            t = until
        if load_s > 0:
            until = t + load_s
            books.restart_s += until - t
            times[LOAD] += until - t
            t = until
        if heap and heap[0][0] <= t:                 # set_phase(t, RUNNING)
            self._advance(t)
        self.run_start = t
        self.phase = RUNNING
        rate = self._s_run * len(filled)
        if rate != clock.rate or t != clock.t_ref:
            clock.value += clock.rate * (t - clock.t_ref)
            clock.t_ref = t
            clock.rate = rate
        return RECOVERED, t

    def _replace_holds(self, t: float, books: HoldTimes) -> tuple[int, float]:
        """One round of :meth:`replace` and its holds for :meth:`recover`:
        (:data:`RECOVERED`, the time the holds are over; :attr:`_round_short` says
        whether the job is still short), or (:data:`CUT` | :data:`EXHAUSTED`, time)."""
        holds, short, depleted = self.replace(t)
        self._round_short = short
        if depleted:
            self.set_phase(t, WAITING)
            return EXHAUSTED, t
        quiet = self._quiet
        for kind, phase, dur in holds:
            if dur > 0:
                if phase != self.phase:
                    self.set_phase(t, phase)
                elif self.rheap and self.rheap[0][0] <= t or self._busy_outside:
                    self._advance(t)
                until = t + dur
                f = INF if quiet else self.next_failure_s()
                if f <= until:
                    books.book(kind, f - t)
                    return CUT, f
                books.book(kind, until - t)
                t = until
        return RECOVERED, t

    def _replace_fast(self, t: float) -> float | None:
        """:meth:`replace` in its commonest cases, inlined, when nothing but repairs
        happens outside the job: no empty slot, or a random pick of identical nodes from
        an idle pool holding every node the job lacks (no standbys). Returns the one
        host selection's seconds (0: no hold), or None for :meth:`replace` to run."""
        heap = self.rheap
        if heap and heap[0][0] <= t:
            self._advance(t)
        empty = self.empty
        need = len(empty)
        if not need:
            self._stalling = self._in_loop = False
            return 0.0
        idle = self.idle
        if not self._plain_pool or need > len(idle) or self.standby or self.life.standbys:
            return None
        u, ipos, slots, slot_of = self.u_select, self.ipos, self.slots, self.slot_of
        filled, fpos, state, gjoin, g = self.filled, self.fpos, self.state, self.gjoin, self.G
        nodes: list[int] | None = [] if self.log is not None else None
        for _ in range(need):
            k = len(idle)
            buf = u.buf
            x = buf.pop() if buf else u.next()
            node = idle[min(int(x * k), k - 1)]
            i = ipos.pop(node)                     # _drop_idle
            last = idle.pop()
            if last != node:
                idle[i] = last
                ipos[last] = i
            slot = empty.pop()                     # _join_job (no clocks)
            slots[slot] = node
            slot_of[node] = slot
            fpos[slot] = len(filled)
            filled.append(slot)
            state[node] = S_RUN
            gjoin[node] = g
            if nodes is not None:
                nodes.append(node)
        self.counts["host_selections"] += 1
        d = self.d_hs
        dur = d.fixed if d.fixed is not None else d.buf.next()
        if nodes is not None:
            self._log(t, ev.HOST_SELECTION, nodes=nodes, policy=self.life.host_policy)
        self._preempting = False
        rate = self.speeds[self.phase] * len(filled)   # _after_round(t, 0, …): _rates
        clock = self.jclock
        if rate != clock.rate or t != clock.t_ref:
            clock.value += clock.rate * (t - clock.t_ref)
            clock.t_ref = t
            clock.rate = rate
        self._in_loop = self._stalling = False
        self._back_seen = self._back
        return dur

    def planned_stop(self, t: float, ckpt_s: float,
                     end_s: float) -> Generator[Hold, float, None]:
        """A planned stop at ``t``: write the checkpoint (still running), then the window."""
        if ckpt_s > 0:
            t = yield Hold(PLANNED_CKPT, RUNNING, t + ckpt_s)
        self.set_phase(t, WAITING)
        yield Hold(MAINTENANCE, WAITING, end_s)

    def finish(self, t: float) -> None:
        """The job is over at ``t``."""
        self.set_phase(t, DONE)
