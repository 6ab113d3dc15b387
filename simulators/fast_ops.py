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
        #: per cause: (levels it survives, detection, requeue)
        self.cause_info = [(c.survives, c.detect_s, c.restart_s) for c in self.causes]
        #: a single level (or none) loads the same at every checkpoint
        self.load_at = self.plan.load_of(1) if len(self.plan.levels) <= 1 else None

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
        ops, info, by_cause = self.ops, self.cause_info, self.by_cause
        survives, detect, requeue = None, 0.0, 0.0
        while True:
            cause = ops.strike(t)
            if info:
                by_cause[cause] += 1
                survives, detect, requeue = info[cause]
            if self.lose_work:
                self.rollback(survives)
            load = self.load_at if self.load_at is not None else self.plan.load_of(self.c)
            if self.windows is None:
                res, t = ops.recover(t, detect, requeue, load, self)
                if res == cops.RECOVERED:
                    return t
                if res == cops.EXHAUSTED:
                    self.depleted = True
                    self.end_t = t
                    return None
                continue
            holds = ops.recovery(t, detect, requeue, load, self.windows, self.stop_ckpt_s)
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
    t: float | None = 0.0
    first = ops.initial_selection_s()
    if first:
        t = job.hold_plain(cops.HOST_SELECTION, cops.RESTARTING, 0.0, first)
    if windows is not None and t is not None:
        end = windows.blocked_until(t, job.stop_ckpt_s)
        if end is not None:
            t = job.hold_plain(cops.MAINTENANCE, cops.WAITING, t, end)
    if t is not None:
        t = (_run_plain(job, t) if windows is None and not plan.levels and plan.step_s is None
             else _run(job, t))
    if t is None:       # depleted: the run ends where the cluster gave out
        t = job.end_t
    ops.finish(t)
    return job.result(t)


def _run_plain(job: _Job, t: float) -> float | None:
    """The job's runs between failures without checkpoints, steps or windows: one
    segment (:func:`run_until`'s arithmetic, inlined). Returns when it ended (None:
    depleted)."""
    plan, ops = job.plan, job.ops
    n, last, b, p = plan.n_segments, plan.last_s, 0.0, plan.persist_s
    work, keep = plan.work_s, not job.lose_work
    info, by_cause = job.cause_info, job.by_cause
    load = plan.load_of(0)            # no checkpoint: every restart loads the same
    fail_over, recovered = ops.fail_over, cops.RECOVERED
    while True:
        f = ops.next_failure_s()
        if job.c >= n:
            break
        end = t - job.off + last + b + p
        if f > end:
            t = end
            job.c, job.off = n, 0.0
            break
        if keep:                            # what ran is kept (one segment: just add it)
            job.off = job.off + min(work - job.off, max(0.0, f - t))
        t = f
        while True:                         # job.on_failure(f), inlined
            res, t = fail_over(t, load, job)   # (the rollback touches only the job)
            if info:
                by_cause[ops.struck_cause] += 1
            if not keep:
                job.rollback(info[ops.struck_cause][0] if info else None)
            if res == recovered:
                break
            if res == cops.EXHAUSTED:
                job.depleted = True
                job.end_t = t
                return None
    return t


def _run(job: _Job, t: float | None) -> float | None:
    """The job's runs between failures and planned stops, in closed form (any plan).
    Returns when it ended (None: depleted)."""
    plan, ops, windows = job.plan, job.ops, job.windows
    plain = not plan.levels and plan.step_s is None
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
    return t
