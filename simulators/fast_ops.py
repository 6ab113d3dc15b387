"""The fast path's general loop: the job in closed form, the cluster's state machine as is.

For scenarios with cluster operations (standbys, pools, repair pipelines, diagnosis,
bad nodes, retirement, idle failures, planned maintenance, bursts, traces, no work
loss) the fast path runs the same :class:`~testbed.resilience.ops.ClusterOps` as the
SimPy engine, calls it at the same times in the same order, and replaces only the
job's step-by-step progress by :mod:`simulators.jobmath`. The cost per failure is the
state machine's: O(1) or O(log N) (heaps of repairs, node clocks and policy keys).
"""

from __future__ import annotations

import math

from simulators.books import JobBooks
from simulators.jobmath import run_until, state_at
from testbed.outcomes import RepResult
from testbed.resilience import ops as cops
from testbed.resilience.ops import ClusterOps
from testbed.resilience.spec import SimSpec

INF = math.inf


class _Job(JobBooks):
    """The job's books in the general loop (the same quantities as the SimPy job's)."""

    def __init__(self, spec: SimSpec, ops: ClusterOps) -> None:
        super().__init__(spec, ops)
        self.end_t = 0.0

    def drive(self, holds, t: float, on_done=None) -> tuple[str | None, float]:
        """(None, end) when the holds are over, ('fail', time) when a failure cuts one
        short, ('depleted', t)."""
        ops = self.ops
        try:
            h = next(holds)
        except StopIteration:
            return None, t
        while True:
            if h.kind == cops.DEPLETED:
                return cops.DEPLETED, t
            f = ops.next_failure_s()
            if f <= h.until_s:
                self.book(h.kind, f - t)
                return "fail", f
            self.book(h.kind, h.until_s - t)
            t = h.until_s
            if on_done is not None:
                on_done(h.kind)
            try:
                h = holds.send(t)
            except StopIteration:
                return None, t

    def on_failure(self, t: float) -> float | None:
        """Failures and the restart after them; the time the job runs again (None:
        depleted). Without maintenance windows the restart runs without a generator
        (:meth:`ClusterOps.recover`, the same steps as :meth:`ClusterOps.recovery`)."""
        ops = self.ops
        causes, by_cause = self.causes, self.by_cause
        while True:
            info = ops.fail(t)
            survives = None
            detect = requeue = 0.0
            if causes:
                cause = causes[info.cause]
                by_cause[info.cause] += 1
                survives, detect, requeue = cause.survives, cause.detect_s, cause.restart_s
            if self.lose_work:
                self.rollback(survives)
            if self.windows is None:
                res, t = ops.recover(t, detect, requeue, self.plan.load_of(self.c), self.book)
                if res == cops.RECOVERED:
                    break
                if res == cops.EXHAUSTED:
                    self.depleted = True
                    self.end_t = t
                    return None
                continue
            holds = ops.recovery(t, detect, requeue, self.plan.load_of(self.c), self.windows,
                                 self.stop_ckpt_s)
            res2, t = self.drive(holds, t)
            if res2 is None:
                break
            if res2 == cops.DEPLETED:
                self.depleted = True
                self.end_t = t
                return None
        ops.set_phase(t, cops.RUNNING)
        return t

    def on_stop(self, t: float, end: float, done: float) -> float | None:
        """A planned stop at ``t`` (state already cut): checkpoint, window."""
        commit = self.plan.checkpoints or not self.lose_work
        if self.stop_ckpt_s <= 0 and commit:
            self.commit_stop(done)
        res, t = self.drive(self.ops.planned_stop(t, self.stop_ckpt_s, end), t,
                            lambda kind: self.commit_stop(done) if kind == cops.PLANNED_CKPT
                            else None)
        if res is None:
            self.ops.set_phase(t, cops.RUNNING)
            return t
        return self.on_failure(t)

    def hold_plain(self, kind: str, phase: int, start: float, until: float) -> float | None:
        """A hold outside any failure handling (the counted first host selection, the
        initial maintenance wait) from ``start`` to ``until``."""
        ops = self.ops
        ops.set_phase(start, phase)
        f = ops.next_failure_s()
        if f <= until:
            self.book(kind, f - start)
            return self.on_failure(f)
        self.book(kind, until - start)
        ops.set_phase(until, cops.RUNNING)
        return until


def run_general(spec: SimSpec, seed: int, rep: int) -> RepResult:
    """Simulate replication ``rep`` with the cluster's state machine (see the module
    docstring)."""
    plan = spec.plan
    ops = ClusterOps(spec.failures, spec.lifecycle, spec.nodes, seed, rep, spec.limits)
    job = _Job(spec, ops)
    windows = job.windows
    plain = not plan.levels and plan.step_s is None
    t: float | None = 0.0
    first = ops.initial_selection_s()
    if first:
        t = job.hold_plain(cops.HOST_SELECTION, cops.RESTARTING, 0.0, first)
    if windows is not None and t is not None:
        end = windows.blocked_until(t, job.stop_ckpt_s)
        if end is not None:
            t = job.hold_plain(cops.MAINTENANCE, cops.WAITING, t, end)
    while t is not None:
        f = ops.next_failure_s()
        stop, end = windows.next_stop_s(t, job.stop_ckpt_s) if windows else (INF, INF)
        horizon = f if f <= stop else stop
        adv = run_until(plan, t, job.c, job.off, horizon)
        if adv.done:
            t = adv.t
            job.ckpt_s += adv.ckpt_s
            job.commits += adv.commits
            job.c, job.off = adv.c, 0.0
            break
        if f <= stop:
            if not job.lose_work:          # what ran is kept (one segment: just add it)
                job.off = (job.off + min(plan.work_s - job.off, max(0.0, f - t)) if plain
                           else state_at(plan, t, job.c, job.off, f).off)
            elif adv.commits:
                job.c, job.off = adv.c, 0.0
            job.ckpt_s += adv.ckpt_s
            job.commits += adv.commits
            t = job.on_failure(f)
        else:
            cut = state_at(plan, t, job.c, job.off, stop)
            if cut.commits:
                job.c, job.off = cut.c, 0.0
            job.commits += cut.commits
            job.ckpt_s += cut.ckpt_s
            t = job.on_stop(stop, end, cut.off)
    if t is None:       # depleted: the run ends where the cluster gave out
        t = job.end_t
    ops.finish(t)
    return job.result(t)
