"""The step-by-step SimPy engine: a training job on a cluster, interrupted by failures.

The engine only moves the clock; durations come from the resolved scenario
(:class:`~testbed.resilience.spec.SimSpec`) and the cluster's state machine
(:class:`~testbed.resilience.ops.ClusterOps`, which the fast path runs too). Processes:

* the **job** runs training steps (one timeout per step, or per segment when the
  workload is given as compute time) and writes checkpoints (a blocking part, then an
  optional background persist; a checkpoint counts only once committed);
* **watchers** wait for the next failure of the job's nodes, or the next planned stop,
  and turn it into a SimPy ``Interrupt`` of the job. A failure rolls the job back to its
  latest surviving checkpoint (nothing with ``lose_work: false``); a planned stop
  commits everything computed so far with one checkpoint before the maintenance window;
* the job's **holds** after a failure (detection, standby swap, host selection,
  preemption, stalls for repairs, requeue, load) come from
  :meth:`ClusterOps.recovery`; a failure during a hold starts the restart over.

Every state change is appended to an event log (:mod:`testbed.events` vocabulary).
"""

from __future__ import annotations

import math

import simpy

from simulators.books import JobBooks
from testbed import events as ev
from testbed.outcomes import RepResult
from testbed.resilience import ops as cops
from testbed.resilience.ops import ClusterOps
from testbed.resilience.spec import SimSpec

INF = math.inf


class Job(JobBooks):
    """The training job process (see the module docstring)."""

    def __init__(self, env: simpy.Environment, spec: SimSpec, ops: ClusterOps,
                 log: list[dict] | None) -> None:
        super().__init__(spec, ops)
        self.env, self.log = env, log
        self.step = 0
        self.gen = 0
        self.arm_id = 0
        self.persisting: simpy.Process | None = None
        self.pending: tuple[int, float] | None = None     # in-flight persist (index, cost)
        self.where: tuple[str, int] = ("compute", 1)
        self.cur_start = 0.0
        self.cur_first = 0.0
        self.events = 0
        self.proc: simpy.Process | None = None      # set by run_simpy before it runs

    def _log(self, event: str, **fields) -> None:
        if self.log is not None:
            self.log.append({"t_s": self.env.now, "event": event, **fields})

    def _timeout(self, delay: float):
        self.events += 1
        return self.env.timeout(delay)

    # ----------------------------------------------------------------- process
    def process(self):
        self._log(ev.JOB_START, work_s=self.plan.work_s, segments=self.plan.n_segments)
        first = self.ops.initial_selection_s()
        if first:
            yield from self._hold_plain(cops.HOST_SELECTION, cops.RESTARTING, first)
        if self.windows is not None and not self.depleted:
            end = self.windows.blocked_until(self.env.now, self.stop_ckpt_s)
            if end is not None:
                yield from self._hold_plain(cops.MAINTENANCE, cops.WAITING, end)
        while not self.depleted:
            self._arm()
            try:
                yield from self._run()
                break
            except simpy.Interrupt as intr:
                self.arm_id += 1
                what = intr.cause
                if what[0] == "fail":
                    self._cut_for_failure()
                    yield from self._on_failure(self.env.now)
                else:
                    yield from self._on_stop(self.env.now, what[1])
        self.ops.finish(self.env.now)
        self._log(ev.JOB_END, checkpoint=self.c, depleted=self.depleted)

    def _arm(self) -> None:
        """Watch for the next failure or planned stop of this running stretch."""
        self.arm_id += 1
        now = self.env.now
        f = self.ops.next_failure_s()
        stop, end = (self.windows.next_stop_s(now, self.stop_ckpt_s) if self.windows
                     else (INF, INF))
        if f <= stop and f < INF:
            self.env.process(self._watch(self.env.timeout(f - now), self.arm_id, ("fail",)))
        elif stop < INF:
            self.env.process(self._watch(self.env.timeout(stop - now), self.arm_id,
                                         ("stop", end)))

    def _watch(self, timeout, arm_id: int, what: tuple):
        yield timeout
        proc = self.proc
        if arm_id == self.arm_id and proc is not None and proc.is_alive:
            proc.interrupt(what)

    # ----------------------------------------------------------------- running
    def _compute(self, j: int, first_off: float):
        plan = self.plan
        self.where = ("compute", j)
        self.cur_start, self.cur_first = self.env.now, first_off
        if plan.step_s is None:
            try:
                yield self._timeout(plan.segment_s(j) - first_off)
            finally:
                self._log(ev.STEPS, segment=j, compute_s=self.env.now - self.cur_start)
            return
        first = self.step
        todo = plan.segment_steps(j) - round(first_off / plan.step_s)
        try:
            for _ in range(todo):
                yield self._timeout(plan.step_s)
                self.step += 1
        finally:
            if self.step > first:
                self._log(ev.STEPS, start_step=first, end_step=self.step)

    def _commit(self, j: int, spent_s: float) -> None:
        self.c, self.off = j, 0.0
        self.ckpt_s += spent_s
        self.commits += 1
        self._log(ev.CHECKPOINT_COMMIT, checkpoint=j, level=self._level(j))

    def _level(self, j: int) -> str:
        return self.plan.levels[self.plan.level_of(j)].name

    def _persist(self, j: int, gen: int, spent_s: float):
        yield self._timeout(self.plan.persist_s)
        if gen == self.gen:
            self.pending = None
            self._commit(j, spent_s)

    def _run(self):
        plan = self.plan
        self.persisting = None
        self.pending = None
        self.step = self._step_at(self.c) + (round(self.off / plan.step_s) if plan.step_s
                                             else 0)
        for j in range(self.c + 1, plan.n_segments + 1):
            yield from self._compute(j, self.off if j == self.c + 1 else 0.0)
            if not plan.levels:
                continue
            stall = 0.0
            if self.persisting is not None and self.persisting.is_alive:
                self.where = ("stall", j)
                t0 = self.env.now
                yield self.persisting
                stall = self.env.now - t0
            cost = plan.cost_of(j)
            self.where = ("write", j)
            self._log(ev.CHECKPOINT_BEGIN, checkpoint=j, level=self._level(j))
            yield self._timeout(cost)
            if plan.persist_s:
                self.pending = (j, cost + stall)
                self.persisting = self.env.process(self._persist(j, self.gen, cost + stall))
            else:
                self._commit(j, cost + stall)
        if self.persisting is not None and self.persisting.is_alive:
            self.where = ("final", plan.n_segments)
            t0 = self.env.now
            yield self.persisting
            self.ckpt_s += self.env.now - t0
        self.where = ("done", plan.n_segments)

    def _step_at(self, idx: int) -> int:
        """Training steps committed by checkpoint ``idx`` (stepped mode; else 0)."""
        return self.plan.steps_at(idx) if self.plan.step_s is not None else 0

    def _done_in_segment(self) -> float:
        """Compute seconds of the current segment done at an interruption."""
        kind, j = self.where
        if kind != "compute":
            return self.plan.segment_s(j) if kind in ("stall", "write") else 0.0
        if self.plan.step_s is None:
            return self.cur_first + (self.env.now - self.cur_start)
        return (self.step - self._step_at(j - 1)) * self.plan.step_s

    # ----------------------------------------------------------------- interruptions
    def _cut_for_failure(self) -> None:
        """A failure struck the running job: in-flight work is lost (or kept, without
        work loss)."""
        self.gen += 1
        if self.where[0] in ("write", "stall") or self.pending is not None:
            self._log(ev.CHECKPOINT_ABORT, checkpoint=self.pending[0] if self.pending
                      else self.where[1])
        if not self.lose_work:
            self.off = self._done_in_segment() if self.where[0] != "done" else self.off
        self.pending = None

    def _hold_plain(self, kind: str, phase: int, until: float):
        """A hold outside any failure handling (the initial maintenance wait)."""
        self.ops.set_phase(self.env.now, phase)
        self._log(ev.WAIT, reason=kind, until_s=until)
        start = self.env.now
        f = self.ops.next_failure_s()
        if f <= until:
            yield self._timeout(f - self.env.now)
            self.book(kind, self.env.now - start)
            yield from self._on_failure(self.env.now)
            return
        yield self._timeout(until - self.env.now)
        self.book(kind, self.env.now - start)
        self.ops.set_phase(self.env.now, cops.RUNNING)

    def _drive(self, holds, on_done=None):
        """Run the holds of ``holds``; returns None when they are over, the failure time
        when a failure cut one short, or ``'depleted'``."""
        try:
            h = next(holds)
        except StopIteration:
            return None
        while True:
            if h.kind == cops.DEPLETED:
                return cops.DEPLETED
            if h.kind == cops.LOAD:
                self._log(ev.LOAD, checkpoint=self.c)
            elif h.kind in cops.WAIT_KINDS:
                self._log(ev.WAIT, reason=h.kind, until_s=h.until_s)
            start = self.env.now
            f = self.ops.next_failure_s()
            if f <= h.until_s:
                yield self._timeout(f - self.env.now)
                self.book(h.kind, self.env.now - start)
                return self.env.now
            yield self._timeout(h.until_s - self.env.now)
            self.book(h.kind, self.env.now - start)
            if on_done is not None:
                on_done(h.kind)
            try:
                h = holds.send(self.env.now)
            except StopIteration:
                return None

    def _on_failure(self, t: float):
        """Failures and the restart after them, until the job runs again."""
        while True:
            info = self.ops.fail(t)
            survives = None
            if self.causes:
                cause = self.causes[info.cause]
                self.by_cause[info.cause] += 1
                survives = cause.survives
                detect, requeue = cause.detect_s, cause.restart_s
                self._log(ev.FAILURE, cause=cause.name, node=info.node, repair_s=cause.repair_s)
            else:
                detect = requeue = 0.0
                self._log(ev.FAILURE, cause="failure", node=info.node, repair_s=0.0)
            self.rollback(survives)
            self._log(ev.RESTART_BEGIN, checkpoint=self.c)
            holds = self.ops.recovery(t, detect, requeue, self.plan.load_of(self.c),
                                      self.windows, self.stop_ckpt_s)
            res = yield from self._drive(holds)
            if res is None:
                break
            if res == cops.DEPLETED:
                self.depleted = True
                return
            t = res
        self.ops.set_phase(self.env.now, cops.RUNNING)
        self._log(ev.RESTART_END, checkpoint=self.c)

    def _on_stop(self, t: float, end: float):
        """A planned stop: commit everything computed (one checkpoint), then the window."""
        plan = self.plan
        self.gen += 1
        commit = plan.checkpoints or not self.lose_work
        done = self._done_in_segment()
        if self.pending is not None:
            j, spent = self.pending
            self.pending = None
            self._commit(j, spent)
        elif self.where[0] == "write":
            self._log(ev.CHECKPOINT_ABORT, checkpoint=self.where[1])
        if self.where[0] == "final":
            done = 0.0
        self._log(ev.PLANNED_STOP, until_s=end, checkpoint_s=self.stop_ckpt_s)
        self._log(ev.MAINTENANCE, until_s=end)

        def committed(kind: str) -> None:
            if kind == cops.PLANNED_CKPT:
                self._commit_stop(done)

        if self.stop_ckpt_s <= 0 and commit:
            self._commit_stop(done)
        res = yield from self._drive(self.ops.planned_stop(t, self.stop_ckpt_s, end),
                                     committed)
        if res is None:
            self.ops.set_phase(self.env.now, cops.RUNNING)
            return
        self._rollback_stop_failure()
        yield from self._on_failure(res)

    def _commit_stop(self, done: float) -> None:
        if self.commit_stop(done):
            self._log(ev.CHECKPOINT_COMMIT, checkpoint=self.c, level="planned",
                      offset_s=self.off)

    def _rollback_stop_failure(self) -> None:
        """A failure during the planned stop: nothing more to cut (the job was stopped)."""
        self.gen += 1


def run_simpy(spec: SimSpec, seed: int, rep: int, log: list[dict] | None = None
              ) -> tuple[RepResult, int]:
    """Simulate replication ``rep``; returns the result and the number of SimPy events.

    Pass a list as ``log`` to collect the event log records.
    """
    env = simpy.Environment()
    ops = ClusterOps(spec.failures, spec.lifecycle, spec.nodes, seed, rep, spec.limits, log)
    job = Job(env, spec, ops, log)
    job.proc = env.process(job.process())
    env.run(until=job.proc)
    if log is not None:
        # the cluster logs its own events (repairs ending, idle nodes failing) when it
        # processes them, at their times: a stable sort puts the log in time order
        log.sort(key=lambda rec: rec["t_s"])
    return job.result(env.now), job.events + ops.counts["failures"]
