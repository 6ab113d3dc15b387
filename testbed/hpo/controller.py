"""Trials, the queue and the failure policy: the decisions of an HPO sweep, engine-agnostic.

The simulator (a :class:`~testbed.hpo.protocols.SimClock` it moves) and the real driver
(a monotonic clock) drive the same :class:`Controller`, so a simulated schedule and a
real one make the same decisions. Every decision is taken at ``clock.now()``:

* ``dispatch()`` fills free resources and returns the attempts to start;
* ``milestone(start, epoch, value)`` — a running attempt of a stopping scheduler
  reached one of its rungs: it goes on (True) or is stopped there;
* ``finish(start, value)`` — an attempt reached its target epoch;
* ``fail(start, …)`` — an attempt died: FAILED (its own fault: the policy
  decides) or PREEMPTED (its node went down, or the real driver was lost: it resumes
  from its checkpoint on the next free worker, uses no retry and is never a failure);
* ``finalize()`` — the sweep is over.

Queue order: retries and resumed trials first (in submission order), then the
scheduler's jobs. A job that does not fit now lets later jobs of other shapes pass
(back-filling, as PyCOMPSs' ready queue does). Failure policies (PyCOMPSs):

* ``retry`` — the first retry runs at once on the same worker (same GPUs), later ones
  wait for another worker (not the GPUs it failed on, unless the cluster has no
  other place for it); at most ``max_retries``; then the trial is FAILED and the
  sweep goes on;
* ``ignore`` — the trial is FAILED, the sweep goes on;
* ``cancel_successors`` — the trial is FAILED; trials submitted after it that have
  not started are CANCELLED and no new trials are created; running ones finish;
* ``fail`` — the sweep stops: running attempts and queued trials are CANCELLED.

Every decision is recorded as an event ``(t_s, kind, fields)`` in the vocabulary of
:mod:`testbed.events`.
"""

from __future__ import annotations

import heapq
from collections import deque
from typing import Any

from testbed import events as ev
from testbed.hpo.cluster import Alloc, Cluster, Shape
from testbed.hpo.plan import HpoPlan
from testbed.hpo.protocols import Clock, Sampler
from testbed.hpo.schedulers import AshaScheduler, HyperbandScheduler, Scheduler, Static
from testbed.hpo.stopping import StoppingScheduler
from testbed.hpo.timing import Attempt, TrialCost

PENDING, RUNNING, PAUSED = "pending", "running", "paused"
COMPLETED, STOPPED, FAILED, CANCELLED = "completed", "stopped", "failed", "cancelled"


class Trial:
    """One trial's state."""

    __slots__ = ("index", "config", "top", "shape", "cost", "status", "ckpt", "attempts",
                 "retries", "streak", "value", "told", "judged")

    def __init__(self, index: int, config: dict, top: int, shape: Shape, cost: TrialCost):
        self.index, self.config, self.top, self.shape, self.cost = index, config, top, shape, cost
        self.status = PENDING
        self.ckpt = 0            # epoch of the newest durable checkpoint
        self.attempts = 0        # attempts started
        self.retries = 0         # retries used (failures retried)
        self.streak = 0          # failures since the last successful attempt
        self.value: float | None = None
        self.told = False
        self.judged = 0          # the highest rung a stopping scheduler judged it at


class Start:
    """One attempt handed to an engine: train ``trial`` from epoch ``a`` to ``b``, judged
    at the rungs ``stops`` on the way (stopping schedulers only)."""

    __slots__ = ("token", "trial", "attempt", "a", "b", "alloc", "kind", "t_s", "stops",
                 "timeline")

    def __init__(self, token: int, trial: int, attempt: int, a: int, b: int, alloc: Alloc,
                 kind: str, t_s: float, stops: tuple[int, ...] = ()) -> None:
        self.token, self.trial, self.attempt, self.a, self.b = token, trial, attempt, a, b
        self.alloc, self.kind, self.t_s, self.stops = alloc, kind, t_s, stops
        #: the simulator's timeline of this attempt (None in a real run)
        self.timeline: Attempt | None = None


def make_scheduler(plan: HpoPlan) -> Scheduler:
    s = plan.spec
    r = s.rungs
    if s.scheduler in ("asha", "hyperband") and s.promotion_mode == "stop":
        return StoppingScheduler(r.min_epochs, s.max_epochs, r.reduction_factor,
                                 s.metric.mode, hyperband=s.scheduler == "hyperband",
                                 seed=plan.seed)
    if s.scheduler == "asha":
        return AshaScheduler(r.min_epochs, s.max_epochs, r.reduction_factor, s.metric.mode)
    if s.scheduler == "hyperband":
        return HyperbandScheduler(r.min_epochs, s.max_epochs, r.reduction_factor, s.n_trials,
                                  s.metric.mode)
    return Static([])


class Controller:
    """See the module docstring."""

    def __init__(self, plan: HpoPlan, sampler: Sampler, clock: Clock, *,
                 record: bool = True) -> None:
        self.plan = plan
        self.spec = plan.spec
        self.sampler = sampler
        self.clock = clock
        self.cluster = Cluster(plan.nodes, plan.gpus_per_node, plan.cores_per_node,
                               plan.memory_per_node_bytes)
        self.scheduler = make_scheduler(plan)
        self.trials: list[Trial] = []
        self.running: dict[int, Start] = {}
        self.on_node: list[set[int]] = [set() for _ in range(plan.nodes)]
        self.events: list[tuple[float, str, dict]] = []
        self.record = record
        self.stopped = False          # policy 'fail' struck
        self.closed = False           # no new trials (cancel_successors)
        self.cutoff: int | None = None
        self.makespan_s = 0.0
        self._token = 0
        self._seq = 0
        self._urgent: dict[Shape, list] = {}     # heap of (trial, seq, a, b, avoid, kind)
        self._jobs: dict[Shape, deque[tuple[int, int, int, int]]] = {}   # (seq, trial, a, b)
        self._waiting_jobs = 0
        self._limit = plan.spec.planned_trials
        if self.scheduler.stopping and self._limit is None:
            self._limit = self.spec.n_trials or _iteration_trials(plan)
        self._targets: dict[int, int] = {}
        self._min_gpus = plan.fewest_gpus
        if self.scheduler.static:
            self._enqueue_all()

    # ------------------------------------------------------------------ trials

    def log(self, t_s: float, kind: str, **fields: Any) -> None:
        """Append an event (engines add their own, e.g. measured ``trial_result``)."""
        if self.record:
            self.events.append((t_s, kind, fields))

    def start_log(self, **fields: Any) -> None:
        p, s = self.plan, self.spec
        if s.scheduler in ("asha", "hyperband"):
            fields["promotion"] = s.promotion_mode
        self.log(self.clock.now(), ev.JOB_START, hpo=p.name, search=s.search,
                 scheduler=s.scheduler, on_failure=s.on_failure, nodes=p.nodes,
                 gpus_per_node=p.gpus_per_node, slots=p.slots, trials=s.planned_trials,
                 seed=p.seed, max_retries=s.max_retries,
                 checkpoint_every_epochs=s.checkpoint_every_epochs,
                 rungs=[s.rungs.min_epochs, s.max_epochs, s.rungs.reduction_factor],
                 mode=s.metric.mode, metric=s.metric.name, **fields)

    def new_trial(self) -> int | None:
        """Create the next trial (None when the sweep has all it will have)."""
        i = len(self.trials)
        if self.closed or (self._limit is not None and i >= self._limit):
            return None
        config = dict(self.sampler.config(i))
        p = self.plan
        self.trials.append(Trial(i, config, p.trial_epochs(config), p.trial_shape(config),
                                 p.trial_cost(i, config)))
        return i

    def _enqueue_all(self) -> None:
        while self.new_trial() is not None:
            pass
        order: range | list[int] = range(len(self.trials))
        if self.spec.scheduler == "longest_first":
            dur = [self.plan.full_duration_s(t.index, t.config) for t in self.trials]
            order = sorted(order, key=lambda i: (-dur[i], i))
        for i in order:
            t = self.trials[i]
            self._push_job(t.shape, i, 0, t.top)

    def _push_job(self, shape: Shape, trial: int, a: int, b: int) -> None:
        self._seq += 1
        self._jobs.setdefault(shape, deque()).append((self._seq, trial, a, b))
        self._waiting_jobs += 1

    def _push_urgent(self, trial: Trial, avoid: tuple[int, ...], kind: str) -> None:
        self._seq += 1
        heapq.heappush(self._urgent.setdefault(trial.shape, []),
                       (trial.index, self._seq, trial.ckpt, self._target(trial), avoid, kind))

    def _target(self, t: Trial) -> int:
        """The epoch the trial's current segment aims at (its rung, or the full budget)."""
        return self._targets.get(t.index, t.top)

    # ------------------------------------------------------------------ dispatch

    def dispatch(self) -> list[Start]:
        """Start every attempt that fits now."""
        now = self.clock.now()
        out: list[Start] = []
        if self.stopped:
            return out
        cluster = self.cluster
        while cluster.free_gpus > 0 or self._min_gpus == 0:
            picked = self._pick()
            if picked is None:
                if self.scheduler.static or self._waiting_jobs:
                    break
                job = self.scheduler.next_job(self.new_trial)
                if job is None:
                    break
                trial, a, b = job
                self._push_job(self.trials[trial].shape, trial, a, b)
                continue
            trial, a, b, alloc, kind = picked
            out.append(self._launch(self.trials[trial], a, b, alloc, kind, now))
        return out

    def _pick(self):
        """The first queued entry (urgent before jobs, in order) that can be placed now."""
        cands = []
        for shape, heap in self._urgent.items():
            if heap:
                cands.append(((0, heap[0][0], heap[0][1]), shape, True))
        for shape, dq in self._jobs.items():
            if dq:
                cands.append(((1, dq[0][0], 0), shape, False))
        if len(cands) > 1:
            cands.sort(key=lambda c: c[0])
        for _, shape, urgent in cands:
            if urgent:
                trial, _, a, b, avoid, kind = self._urgent[shape][0]
            else:
                _, trial, a, b = self._jobs[shape][0]
                avoid, kind = (), ("new" if a == 0 else "promote")
            alloc = self.cluster.allocate(shape, avoid)
            if alloc is None:
                continue
            if urgent:
                heapq.heappop(self._urgent[shape])
            else:
                self._jobs[shape].popleft()
                self._waiting_jobs -= 1
            return trial, a, b, alloc, kind
        return None

    def _launch(self, t: Trial, a: int, b: int, alloc: Alloc, kind: str, now: float) -> Start:
        self._token += 1
        stops: tuple[int, ...] = ()
        if self.scheduler.stopping:
            floor = max(a, t.judged)
            stops = tuple(m for m in self.scheduler.milestones(t.index) if floor < m < b)
        start = Start(self._token, t.index, t.attempts, a, b, alloc, kind, now, stops)
        t.attempts += 1
        t.status = RUNNING
        self._targets[t.index] = b
        self.running[start.token] = start
        self.on_node[alloc.node].add(start.token)
        if self.record:
            fields = dict(trial=t.index, attempt=start.attempt, node=alloc.node,
                          slots=list(alloc.slots), from_epoch=a, to_epoch=b, kind=kind)
            if start.attempt == 0:
                fields["config"] = t.config
            self.events.append((now, ev.TRIAL_START, fields))
        return start

    def restart_log(self, start: Start) -> None:
        """Record ``start`` (decided earlier, never recorded) as starting now: the real
        driver's resume of an attempt the lost driver had decided on but not begun."""
        start.t_s = self.clock.now()
        t = self.trials[start.trial]
        fields = dict(trial=t.index, attempt=start.attempt, node=start.alloc.node,
                      slots=list(start.alloc.slots), from_epoch=start.a, to_epoch=start.b,
                      kind=start.kind)
        if start.attempt == 0:
            fields["config"] = t.config
        self.log(start.t_s, ev.TRIAL_START, **fields)

    def _free(self, start: Start, now: float) -> Trial:
        del self.running[start.token]
        self.on_node[start.alloc.node].discard(start.token)
        self.cluster.release(start.alloc)
        self.makespan_s = max(self.makespan_s, now)
        return self.trials[start.trial]

    # ------------------------------------------------------------------ outcomes

    def milestone(self, start: Start, epoch: int, value: float | None) -> bool:
        """A running attempt reached rung ``epoch`` of a stopping scheduler and reported
        ``value``: True if it goes on, False if it was stopped there (and freed)."""
        now = self.clock.now()
        t = self.trials[start.trial]
        t.judged = max(t.judged, epoch)
        goes_on = self.scheduler.decide(t.index, epoch, value)
        t.value = value
        self._tell(t, value)
        if goes_on:
            self.log(now, ev.TRIAL_RUNG, trial=t.index, attempt=start.attempt, epoch=epoch,
                     value=value, decision="continue")
            return True
        self._free(start, now)
        t.status = STOPPED
        self.log(now, ev.TRIAL_END, trial=t.index, attempt=start.attempt, epoch=epoch,
                 value=value, status=STOPPED)
        return False

    def finish(self, start: Start, value: float | None, extra: dict | None = None) -> None:
        """The attempt trained up to its target epoch ``start.b`` and reported ``value``
        (``extra``: fields the engine adds to the event, e.g. the pid)."""
        now = self.clock.now()
        t = self._free(start, now)
        t.ckpt = start.b
        t.streak = 0
        t.value = value
        complete, stopped = self.scheduler.record(t.index, start.b, value)
        complete = complete or start.b >= t.top
        t.status = COMPLETED if complete else PAUSED
        self.log(now, ev.TRIAL_END, trial=t.index, attempt=start.attempt, epoch=start.b,
                 value=value, status=t.status, **(extra or {}))
        self._tell(t, value)
        for i in stopped:
            if self.trials[i].status == PAUSED:
                self.trials[i].status = STOPPED

    def _tell(self, t: Trial, value: float | None) -> None:
        if not t.told:
            t.told = True
            self.sampler.observe(t.index, value)

    def fail(self, start: Start, *, epoch: float, resume: int, lost_s: float,
             cause: str, preempted: bool = False, extra: dict | None = None,
             restart_at: float | None = None) -> list[Start]:
        """The attempt died ``epoch`` epochs in; its newest checkpoint is ``resume``.
        Returns the attempts to start at once (a retry on the same worker), at
        ``restart_at`` (default now; later when the failure is noticed late)."""
        now = self.clock.now()
        t = self._free(start, now)
        t.ckpt = max(t.ckpt, resume)
        if preempted:
            self.log(now, ev.TRIAL_PREEMPTED, trial=t.index, attempt=start.attempt,
                     epoch=epoch, resume_epoch=t.ckpt, lost_s=lost_s, cause=cause,
                     node=start.alloc.node, **(extra or {}))
            t.status = PENDING
            self._push_urgent(t, (), "resume")
            return []
        retry = self.spec.on_failure == "retry" and t.retries < self.spec.max_retries
        self.log(now, ev.TRIAL_FAILED, trial=t.index, attempt=start.attempt, epoch=epoch,
                 resume_epoch=t.ckpt, lost_s=lost_s, cause=cause, final=not retry,
                 **(extra or {}))
        if retry:
            t.retries += 1
            t.streak += 1
            t.status = PENDING
            if t.streak == 1 and self.cluster.take(start.alloc):
                return [self._launch(t, t.ckpt, start.b, start.alloc, "retry",
                                     now if restart_at is None else restart_at)]
            avoid = start.alloc.slots
            if not self.cluster.could_ever_fit(t.shape, avoid):
                avoid = ()
            self._push_urgent(t, avoid, "retry")
            return []
        self._give_up(t, now)
        return []

    def _give_up(self, t: Trial, now: float) -> None:
        t.status = FAILED
        self._tell(t, None)
        for i in self.scheduler.dead(t.index):
            if self.trials[i].status == PAUSED:
                self.trials[i].status = STOPPED
        policy = self.spec.on_failure
        if policy == "cancel_successors":
            self._cancel_after(t.index, now)
        elif policy == "fail":
            self._stop(now)

    def _cancel_after(self, index: int, now: float) -> None:
        self.closed = True
        self.scheduler.close()
        self.cutoff = index if self.cutoff is None else min(self.cutoff, index)
        for shape, dq in self._jobs.items():
            keep: deque[tuple[int, int, int, int]] = deque()
            for entry in dq:
                if entry[1] > index:
                    self._cancel_queued(entry[1], now)
                    self._waiting_jobs -= 1
                else:
                    keep.append(entry)
            self._jobs[shape] = keep
        for shape, heap in self._urgent.items():
            kept = [e for e in heap if e[0] <= index]
            for e in heap:
                if e[0] > index:
                    self._cancel_queued(e[0], now)
            heapq.heapify(kept)
            self._urgent[shape] = kept

    def _cancel_queued(self, trial: int, now: float) -> None:
        t = self.trials[trial]
        if t.status in (PENDING, PAUSED):
            t.status = CANCELLED
            self.log(now, ev.TRIAL_CANCELLED, trial=trial, attempt=None, lost_s=0.0)

    def _stop(self, now: float) -> None:
        """Policy 'fail': cancel everything, running or queued."""
        self.stopped = True
        self.closed = True
        self.scheduler.close()
        for start in sorted(self.running.values(), key=lambda s: s.token):
            t = self._free(start, now)
            t.status = CANCELLED
            self.log(now, ev.TRIAL_CANCELLED, trial=t.index, attempt=start.attempt,
                      lost_s=now - start.t_s)
        for t in self.trials:
            if t.status in (PENDING, PAUSED):
                t.status = CANCELLED
                self.log(now, ev.TRIAL_CANCELLED, trial=t.index, attempt=None, lost_s=0.0)
        self._jobs.clear()
        self._urgent.clear()
        self._waiting_jobs = 0

    # ------------------------------------------------------------------ nodes

    def starts_on(self, node: int) -> list[Start]:
        """Attempts running on ``node`` (to preempt when it fails), oldest first."""
        return [self.running[k] for k in sorted(self.on_node[node])]

    def log_failure(self, node: int, cause: str, repair_s: float) -> None:
        """Record a node failure (``node`` −1: every node, a maintenance window)."""
        self.log(self.clock.now(), ev.FAILURE, node=node, cause=cause, repair_s=repair_s)

    def node_down(self, node: int) -> None:
        self.cluster.node_down(node)

    def node_up(self, node: int) -> None:
        self.cluster.node_up(node)
        self.log(self.clock.now(), ev.NODE_UP, node=node)

    # ------------------------------------------------------------------ end

    @property
    def queued(self) -> int:
        return self._waiting_jobs + sum(len(h) for h in self._urgent.values())

    def finalize(self) -> None:
        """Close the sweep: paused trials were stopped early; queued ones never ran."""
        now = self.clock.now()
        for t in self.trials:
            if t.status == PAUSED:
                t.status = STOPPED
            elif t.status == PENDING:
                t.status = CANCELLED
                self.log(now, ev.TRIAL_CANCELLED, trial=t.index, attempt=None, lost_s=0.0)
        status = "failed" if self.stopped else "completed"
        self.log(self.makespan_s if not self.stopped else now, ev.JOB_END, status=status)


def _iteration_trials(plan: HpoPlan) -> int:
    """Trials of one Hyperband iteration over the plan's rungs (a stopping Hyperband
    without ``n_trials`` runs that many, as the synchronous one does)."""
    from testbed.scenario.hpo import brackets, trials_per_iteration
    r = plan.spec.rungs
    return trials_per_iteration(brackets(r.min_epochs, plan.spec.max_epochs,
                                         r.reduction_factor))
