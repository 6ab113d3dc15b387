"""The step-by-step SimPy engine: a training job on a cluster, interrupted by failures.

The engine only moves the clock; durations come from the resolved scenario
(:class:`~testbed.resilience.spec.SimSpec`). Processes:

* the **job** runs training steps (one timeout per step, or per segment when the
  workload is given as compute time), writes checkpoints (a blocking part, then an
  optional background persist; a checkpoint counts only once committed) and, when a
  failure interrupts it, rolls back to the latest surviving checkpoint, then pays
  detection, waits for maintenance to end and for replacement nodes, pays requeue
  and checkpoint load, and resumes. Failures also strike during checkpoints and
  restarts;
* the **cluster** keeps a pool of spare nodes (a ``simpy.Container``); a failed node
  goes to a repair process and comes back to the pool; without a free spare the job
  waits for a repair. Without ``spares`` replacements are immediate;
* the **injector** replays the failure stream of :meth:`FailureModel.events` and turns
  each failure into a SimPy ``Interrupt`` of the job.

Every state change is appended to an event log (:mod:`testbed.events` vocabulary).
"""

from __future__ import annotations

import simpy

from testbed import events as ev
from testbed.outcomes import RepResult, close_books
from testbed.resilience.failures import MAINTENANCE, Failure
from testbed.resilience.spec import SimSpec


class Cluster:
    """Spare-node pool with repairs; ``needed`` counts job nodes still to replace."""

    def __init__(self, env: simpy.Environment, spares: int | None) -> None:
        self.env = env
        self.pool = None if spares is None else simpy.Container(env, init=spares)
        self.needed = 0
        self.events = 0

    def fail(self, repair_s: float) -> None:
        """A job node failed: send it to repair and note that it needs a replacement."""
        if self.pool is None:
            return
        self.needed += 1
        self.env.process(self._repair(repair_s))

    def _repair(self, repair_s: float):
        yield self.env.timeout(repair_s)
        self.events += 1
        yield self.pool.put(1)

    def acquire(self):
        """Take one spare per failed node, waiting for repairs when the pool is empty."""
        while self.needed:
            req = self.pool.get(1)
            try:
                yield req
            except simpy.Interrupt:
                req.cancel()
                raise
            self.events += 1
            self.needed -= 1


class Job:
    """The training job process (see the module docstring)."""

    def __init__(self, env: simpy.Environment, spec: SimSpec, cluster: Cluster,
                 log: list[dict] | None) -> None:
        self.env = env
        self.spec = spec
        self.plan = spec.plan
        self.cluster = cluster
        self.log = log
        self.causes = spec.failures.causes
        self.c = 0
        self.step = 0
        self.ckpt_s = self.restart_s = self.wait_s = 0.0
        self.failures = self.commits = 0
        self.by_cause = [0] * len(self.causes)
        self.blocked = 0.0
        self.gen = 0
        self.persisting = None
        self.writing = None
        self.failure: Failure | None = None
        self.events = 0

    def _log(self, event: str, **fields) -> None:
        if self.log is not None:
            self.log.append({"t_s": self.env.now, "event": event, **fields})

    def _timeout(self, delay: float):
        self.events += 1
        return self.env.timeout(delay)

    def process(self):
        self._log(ev.JOB_START, work_s=self.plan.work_s, segments=self.plan.n_segments)
        while True:
            try:
                if self.failure is not None:
                    yield from self._recover()
                yield from self._run()
                self._log(ev.JOB_END, checkpoint=self.c)
                return
            except simpy.Interrupt as intr:
                self._on_failure(intr.cause)

    # ----------------------------------------------------------------- running
    def _compute(self, j: int):
        plan = self.plan
        if plan.step_s is None:
            start = self.env.now
            try:
                yield self._timeout(plan.segment_s(j))
            finally:
                self._log(ev.STEPS, segment=j, compute_s=self.env.now - start)
            return
        first = self.step
        try:
            for _ in range(plan.segment_steps(j)):
                yield self._timeout(plan.step_s)
                self.step += 1
        finally:
            if self.step > first:
                self._log(ev.STEPS, start_step=first, end_step=self.step)

    def _commit(self, j: int, spent_s: float) -> None:
        self.c = j
        self.ckpt_s += spent_s
        self.commits += 1
        self._log(ev.CHECKPOINT_COMMIT, checkpoint=j, level=self._level(j))

    def _level(self, j: int) -> str:
        return self.plan.levels[self.plan.level_of(j)].name

    def _persist(self, j: int, gen: int, spent_s: float):
        yield self._timeout(self.plan.persist_s)
        if gen == self.gen:
            self._commit(j, spent_s)

    def _run(self):
        plan = self.plan
        self.persisting = None
        self.step = self._step_at(self.c)
        for j in range(self.c + 1, plan.n_segments + 1):
            yield from self._compute(j)
            if not plan.levels:
                continue
            stall = 0.0
            if self.persisting is not None and self.persisting.is_alive:
                t0 = self.env.now
                yield self.persisting
                stall = self.env.now - t0
            cost = plan.cost_of(j)
            self.writing = j
            self._log(ev.CHECKPOINT_BEGIN, checkpoint=j, level=self._level(j))
            yield self._timeout(cost)
            self.writing = None
            if plan.persist_s:
                self.writing = j
                self.persisting = self.env.process(self._persist(j, self.gen, cost + stall))
            else:
                self._commit(j, cost + stall)
        if self.persisting is not None and self.persisting.is_alive:
            t0 = self.env.now
            yield self.persisting
            self.ckpt_s += self.env.now - t0
        self.writing = None

    def _step_at(self, idx: int) -> int:
        """Training steps committed by checkpoint ``idx`` (stepped mode; else 0)."""
        plan = self.plan
        if plan.step_s is None:
            return 0
        if idx >= plan.n_segments:
            return (plan.n_segments - 1) * plan.interval_steps + plan.last_steps
        return idx * plan.interval_steps

    # ----------------------------------------------------------------- failures
    def _on_failure(self, fail: Failure) -> None:
        self.failures += 1
        self.gen += 1
        if self.writing is not None:
            self._log(ev.CHECKPOINT_ABORT, checkpoint=self.writing)
            self.writing = None
        if fail.cause == MAINTENANCE:
            self.blocked = max(self.blocked, fail.until_s)
            self._log(ev.MAINTENANCE, until_s=fail.until_s)
            survives = None
        else:
            cause = self.causes[fail.cause]
            self.by_cause[fail.cause] += 1
            self.cluster.fail(fail.repair_s)
            self._log(ev.FAILURE, cause=cause.name, node=fail.node, repair_s=fail.repair_s)
            survives = cause.survives
        if survives is not None:
            self.c = self.plan.rollback(self.c, survives)
        self.failure = fail
        self._log(ev.RESTART_BEGIN, checkpoint=self.c)

    def _spend(self, kind: str, delay: float):
        start = self.env.now
        try:
            yield self._timeout(delay)
        finally:
            if kind == "restart":
                self.restart_s += self.env.now - start
            else:
                self.wait_s += self.env.now - start

    def _recover(self):
        fail = self.failure
        if fail.cause == MAINTENANCE:
            detect = requeue = 0.0
        else:
            cause = self.causes[fail.cause]
            detect, requeue = cause.detect_s, cause.restart_s
        yield from self._spend("restart", detect)
        if self.blocked > self.env.now:
            self._log(ev.WAIT, reason="maintenance", until_s=self.blocked)
            yield from self._spend("wait", self.blocked - self.env.now)
        if self.cluster.needed:
            start = self.env.now
            self._log(ev.WAIT, reason="nodes", nodes=self.cluster.needed)
            try:
                yield from self.cluster.acquire()
            finally:
                self.wait_s += self.env.now - start
        yield from self._spend("restart", requeue)
        self._log(ev.LOAD, checkpoint=self.c)
        yield from self._spend("restart", self.plan.load_of(self.c))
        self._log(ev.RESTART_END, checkpoint=self.c)
        self.failure = None


def _inject(env: simpy.Environment, failures, job_proc: simpy.Process, cluster: Cluster,
            nodes: int, counter: list[int], check):
    """Interrupt the job at each failure of the stream.

    With a finite spare pool, a failure that strikes while every one of the job's
    ``nodes`` slots already waits for a replacement finds no node to fail: skipped.
    """
    for fail in failures:
        yield env.timeout(max(0.0, fail.t_s - env.now))
        counter[0] += 1
        if not job_proc.is_alive:
            return
        if fail.cause != MAINTENANCE and cluster.pool is not None and cluster.needed >= nodes:
            continue
        job_proc.interrupt(fail)
        check(env.now)


def run_simpy(spec: SimSpec, seed: int, rep: int, log: list[dict] | None = None
              ) -> tuple[RepResult, int]:
    """Simulate replication ``rep``; returns the result and the number of SimPy events.

    Pass a list as ``log`` to collect the event log records.
    """
    env = simpy.Environment()
    cluster = Cluster(env, spec.spares)
    job = Job(env, spec, cluster, log)
    proc = env.process(job.process())
    counter = [0]
    env.process(_inject(env, spec.failures.events(seed, rep), proc, cluster, spec.nodes,
                        counter, lambda now: spec.limits.check(job.failures + 1, now, rep)))
    env.run(until=proc)
    result = close_books(env.now, spec.plan.work_s, job.ckpt_s, job.restart_s, job.wait_s,
                         job.failures, job.commits, job.by_cause)
    return result, job.events + cluster.events + counter[0]
