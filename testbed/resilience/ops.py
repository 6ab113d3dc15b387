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

Stationary start (the default): every node's first failure comes from the equilibrium
residual-life distribution (:meth:`Interarrival.equilibrium`), so the job sees the
renewal rate N/MTBF from t = 0; ``failures.start: fresh`` starts every clock new.
"""

from __future__ import annotations

import bisect
import heapq
import itertools
import math
from collections import deque
from collections.abc import Generator
from typing import NamedTuple

from testbed import events as ev
from testbed.resilience.distributions import ZERO
from testbed.resilience.draws import Buffer, Clock, Durations
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
from testbed.resilience.lifecycle import S_IDLE, S_RUN, S_SPARE, S_STANDBY, Lifecycle
from testbed.resilience.maintenance import Windows
from testbed.resilience.pools import Pools
from testbed.resilience.repairs import RepairShop
from testbed.resilience.spec import RunLimits
from testbed.streams import stream

INF = math.inf
BLOCK = 256

# hold kinds and how the engines book them
DETECT, SWAP, HOST_SELECTION, PREEMPTION, STALL = ("detect", "swap", "host_selection",
                                                   "preemption", "stall")
MAINTENANCE, REQUEUE, LOAD, PLANNED_CKPT, DEPLETED = ("maintenance", "requeue", "load",
                                                      "planned_checkpoint", "depleted")
RESTART_KINDS = frozenset({DETECT, SWAP, HOST_SELECTION, REQUEUE, LOAD})
WAIT_KINDS = frozenset({PREEMPTION, STALL, MAINTENANCE})


class Hold(NamedTuple):
    """The job holds until ``until_s`` in ``phase`` (an engine moves the clock there,
    unless a failure comes first)."""

    kind: str
    phase: int
    until_s: float


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
        self.phase = RUNNING
        self.run_start = 0.0
        self.counts = dict.fromkeys(
            ("failures", "failures_hardware", "failures_job_induced", "failures_idle",
             "failures_systematic", "failures_burst", "missed_diagnoses", "misdiagnoses",
             "repairs_automatic", "repairs_manual", "repairs_successful", "repairs_failed",
             "bad_nodes_cured", "retirements", "preemptions", "host_selections", "swaps",
             "stalls"), 0)
        self._stalling = False
        self._seq = itertools.count()
        self.followers: list[tuple[float, int]] = []
        self.trace = failures.trace or ()
        self.trace_i = 0
        #: anything but repairs can happen outside the job (idle failures, bursts, traces)
        self._external = bool(self.trace or failures.burst_probability)
        self._idle_on = self.speeds[3] > 0 and life.spares is not None and self.lane != "job"
        self._busy_outside = self._external or self._idle_on
        self._streams(seed, rep)
        self._init_nodes()
        self._init_lane()

    # ----------------------------------------------------------------- setup
    def _streams(self, seed: int, rep: int) -> None:
        fm = self.fm
        self.r_life = stream(seed, rep, "lifecycle")
        self.u_nodes = Buffer(stream(seed, rep, "nodes"), lambda g, n: g.random(n))
        self.u_causes = Buffer(stream(seed, rep, "causes"), lambda g, n: g.random(n))
        self.r_bursts = stream(seed, rep, "bursts")
        life = self.life
        self.u_repairs = Buffer(stream(seed, rep, "repairs"), lambda g, n: g.random(n))
        self.d_auto = Durations(life.automatic.duration if life.automatic else ZERO, seed, rep,
                                 "repairs", 1)
        self.d_manual = Durations(life.manual.duration if life.manual else ZERO, seed, rep,
                                   "repairs", 2)
        self.u_diag = Buffer(stream(seed, rep, "diagnosis"), lambda g, n: g.random(n))
        self.r_select = stream(seed, rep, "selection")
        self.d_swap = Durations(life.swap, seed, rep, "costs", 0)
        self.d_hs = Durations(life.host_selection, seed, rep, "costs", 1)
        self.d_preempt = Durations(life.preemption, seed, rep, "costs", 2)
        self.u_class = Buffer(stream(seed, rep, "classes"), lambda g, n: g.random(n))
        if fm.interarrival is not None:
            dist = fm.interarrival
            self.gaps = Buffer(stream(seed, rep, "failures"), lambda g, n: dist.draw(g, n))
            self.idle_gaps = Buffer(stream(seed, rep, "idle"), lambda g, n: dist.draw(g, n))

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
        self.slots = list(range(n))
        self.filled = list(range(n))
        self.fpos = list(range(n))
        self.slot_of = list(range(n)) + [-1] * extra
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
            for _ in range(life.spares):
                self._push_idle(i)
                i += 1
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
            self.ikey = self.idle_gaps.next()
        elif self.lane == "clocks":
            total = len(self.state)
            first = (dist.equilibrium(self.r_life, total) if fm.start == "stationary"
                     else dist.draw(self.r_life, total)).tolist()
            self.rem = first
            self.jheap = [(first[i] / self._mult(i), i, 0) for i in range(self.n)]
            for i in range(self.n):
                self.jkey[i] = self.jheap[i][0]
            heapq.heapify(self.jheap)
            if self.speeds[3] > 0:
                for node in self.standby + self.idle:
                    self._idle_clock_in(node, 0.0)
        self._rates(0.0)

    # ----------------------------------------------------------------- clocks
    def _rates(self, t: float) -> None:
        """Set the group clocks' rates for the current phase and membership."""
        speed = self.speeds[self.phase] if self.phase != DONE else 0.0
        if self.lane == "poisson":
            self.jclock.set(t, speed * len(self.filled))
            if self._idle_on:
                self.iclock.set(t, self.speeds[3] * (len(self.standby) + len(self.idle)))
        else:
            self.jclock.set(t, speed)
            if self._idle_on:
                self.iclock.set(t, self.speeds[3])

    def set_phase(self, t: float, phase: int) -> None:
        """The job enters ``phase`` at ``t`` (clock speeds change; a running chunk ends)."""
        self._advance(t)
        if phase == self.phase:
            return
        if self.phase == RUNNING and self.score_rule is not None:
            self.G += int((t - self.run_start) // self.score_rule.period_s)
        if phase == RUNNING:
            self.run_start = t
        self.phase = phase
        self._rates(t)

    def _job_time(self) -> float:
        """Wall time of the next failure of the job's own clock (lane)."""
        if self.lane == "clocks":
            heap = self.jheap
            while heap and heap[0][2] != self.ver[heap[0][1]]:
                heapq.heappop(heap)
            return self.jclock.time_of(heap[0][0]) if heap else INF
        if self.lane == "poisson" and not self.filled:
            return INF
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
            while heap and heap[0][0] <= t:
                done, _, node, stage = heapq.heappop(heap)
                self._stage_done(done, node, stage)
            return
        while True:
            tr = self.rheap[0][0] if self.rheap else INF
            ti = self._idle_time()
            te = self._external_time()[0] if not self.filled else INF
            nxt = min(tr, ti, te)
            if nxt > t:
                return
            if tr == nxt:
                done, _, node, stage = heapq.heappop(self.rheap)
                self._stage_done(done, node, stage)
            elif ti == nxt:
                self._idle_failure(ti)
            else:
                src = self._external_time()[1]
                if src == 1:
                    heapq.heappop(self.followers)
                else:
                    self.trace_i += 1

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
        self._advance(t)
        tj = self._job_time()
        te, src = self._external_time() if self.filled else (INF, 0)
        running = self.phase == RUNNING
        repair_s = None
        primary = tj <= te
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
        self.counts["failures"] += 1
        self.limits.check(self.counts["failures"] + self.counts["failures_idle"], t, self.rep)
        ji = bool(self.causes and self.causes[cause].job_induced)
        self.counts["failures_job_induced" if ji else "failures_hardware"] += 1
        if node >= 0 and self.bad[node] and self.life.bad_multiplier > 0:
            m = self.life.bad_multiplier
            if self.u_class.next() < m / (1.0 + m):
                self.counts["failures_systematic"] += 1
        if primary and self.fm.burst_probability:
            self._maybe_burst(t)
        blamed, missed = -1, False
        if node >= 0 and not ji:
            blamed, missed = self._diagnose(t, node)
        if node >= 0 and self.score_rule is not None:
            self._settle(node)
            if blamed >= 0 and blamed != node:
                self._settle(blamed)
        if blamed >= 0:
            self._record(t, blamed)
            self._leave_job(t, blamed)
            self._to_repair(t, blamed, cause, repair_s)
        self.set_phase(t, RESTARTING)
        if node >= 0 and node != blamed and self.score_rule is not None:
            self.gjoin[node] = self.G      # no credit for the chunk in which it failed
        return JobFailure(t, node, cause, ji, blamed, missed, blamed >= 0)

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
        idle pool (preempting spare-pool nodes when it is short). Returns (holds as
        (kind, phase, seconds), still short?, depleted?)."""
        self._advance(t)
        holds: list[tuple[str, int, float]] = []
        need = len(self.empty)
        if not need:
            self._stalling = False
            return holds, False, False
        k = min(need, len(self.standby))
        if k:
            nodes = [self._pop_standby() for _ in range(k)]
            for node in nodes:
                self._clock_leave_idle(node, t)
                self._join_job(t, node)
            self.counts["swaps"] += k
            holds.append((SWAP, RESTARTING, self.d_swap.next()))
            self._log(t, ev.STANDBY_SWAP, nodes=nodes)
            need -= k
        if need:
            need -= self._from_pool(t, need, holds)
        self._rates(t)
        short = need > 0
        depleted = short and self.in_repair == 0
        if short and not depleted and not self._stalling:
            self.counts["stalls"] += 1
        self._stalling = short
        if depleted:
            self._log(t, ev.DEPLETED, short=need)
        return holds, short, depleted

    def _from_pool(self, t: float, need: int, holds: list[tuple[str, int, float]]) -> int:
        """Host selection from the idle pool for ``need`` empty slots (preempting
        spare-pool nodes when it is short) and refilling the standbys; the slots filled."""
        life = self.life
        want = need + max(0, life.standbys - len(self.standby))
        unlimited = life.spares is None      # an unlimited pool has every node at hand
        avail = want if unlimited else len(self.idle)
        if avail < want and self.spare:
            avail += self._preempt(t, min(want - avail, len(self.spare)), holds)
        take = min(need, avail)
        if not take:
            return 0
        nodes = self._take_idle(take)
        for node in nodes:
            self._clock_leave_idle(node, t)
            self._join_job(t, node)
        refill = life.standbys - len(self.standby)
        if not unlimited:
            refill = min(refill, len(self.idle))
        for node in self._take_idle(max(0, refill)):
            self._push_standby(node)
            if self._idle_clocked():
                self._idle_clock_in(node, t)
        self.counts["host_selections"] += 1
        holds.append((HOST_SELECTION, RESTARTING, self.d_hs.next()))
        self._log(t, ev.HOST_SELECTION, nodes=nodes, policy=life.host_policy)
        return take

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
        if self._idle_clocked():
            self._clock_out(node, self.iclock, t)

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
            if self.standby or self.idle or self.spare or not self.in_repair:
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
