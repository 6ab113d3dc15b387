"""The job's progress between two interruptions, in closed form (the fast path's core).

A running job is at committed checkpoint ``c`` with ``off`` more seconds of compute of
segment c + 1 already safe (a planned stop commits mid-segment; ``off`` may be a whole
segment when the stop cut a checkpoint write short). With segment compute τ, blocking
cost b and background persist p, checkpoint j after a start at s is committed at
s' + τ + b + p + (j − 1)·(max(τ, p) + b), where s' = s − off, so one division tells how
many checkpoints a failure at f leaves committed (a failure wins a tie). Multi-level
plans advance checkpoint by checkpoint (still without simulating steps).
:func:`state_at` walks the last stretch to find everything the job has at an arbitrary
time (what a planned stop commits).
"""

from __future__ import annotations

from typing import NamedTuple

from testbed.resilience.plan import JobPlan


class Advance(NamedTuple):
    """Where a run from a start got to: finished at ``t`` (``done``) or cut at ``t``
    with ``c`` committed; ``commits`` and ``ckpt_s`` were added on the way."""

    done: bool
    t: float
    c: int
    commits: int
    ckpt_s: float


def run_until(plan: JobPlan, s: float, c: int, off: float, f: float) -> Advance:
    """Run from ``s`` (state ``c``, ``off``) until it finishes or ``f`` (a failure) cuts it."""
    n = plan.n_segments
    if c >= n:
        return Advance(True, s, c, 0, 0.0)
    if len(plan.levels) <= 1:
        tau, last, p = plan.interval_s, plan.last_s, plan.persist_s
        b = plan.levels[0].cost_s if plan.levels else 0.0
        has = bool(plan.levels)
        period = max(tau, p) + b
        s0 = s - off
        togo = n - c
        if togo == 1:
            end = s0 + last + b + p
        else:
            end = s0 + tau + b + (togo - 2) * period + max(last, p) + b + p
        if f > end:
            ckpt = 0.0
            if has:
                stall = max(0.0, p - tau)
                ckpt = togo * b + p + (max(0, togo - 2) * stall if togo >= 2 else 0.0)
                if togo >= 2:
                    ckpt += max(0.0, p - last)
            return Advance(True, end, n, togo if has else 0, ckpt)
        if togo > 1 and has:
            first = s0 + tau + b + p
            if f > first:
                m = min(int(-((first - f) // period)), togo - 1)
                return Advance(False, f, c + m, m, m * b + (m - 1) * max(0.0, p - tau))
        return Advance(False, f, c, 0, 0.0)
    tj = s - off
    commits, ckpt = 0, 0.0
    while True:
        j = c + 1
        tj = tj + plan.segment_s(j) + plan.cost_of(j)
        if tj >= f:
            return Advance(False, f, c, commits, ckpt)
        ckpt += plan.cost_of(j)
        c = j
        commits += 1
        if j == n:
            return Advance(True, tj, c, commits, ckpt)


class Cut(NamedTuple):
    """What a job running since ``s`` has at time ``x``: checkpoints committed before
    ``x`` (``c``; an in-flight background persist counts as committed), compute of
    segment c + 1 done (``off``, seconds), and the checkpoint time those commits add."""

    c: int
    off: float
    commits: int
    ckpt_s: float


def _steps_done(plan: JobPlan, start: float, x: float, avail: float) -> float:
    """Compute seconds done by ``x`` of a stretch of ``avail`` seconds started at
    ``start`` (whole steps only in stepped mode, a step ending exactly at ``x`` not)."""
    done = min(avail, max(0.0, x - start))
    if plan.step_s is None or done >= avail:
        return done
    k = int(done / plan.step_s)
    if k > 0 and start + k * plan.step_s >= x:
        k -= 1
    return k * plan.step_s


def state_at(plan: JobPlan, s: float, c: int, off: float, x: float) -> Cut:
    """The job's state at ``x`` < its end (see :class:`Cut`), walking segment by
    segment from the start ``s``: the same timeline as the SimPy engine's job."""
    n, p = plan.n_segments, plan.persist_s
    t, j, first = s, c + 1, off
    commits, ckpt = 0, 0.0
    pend: tuple[float, float] | None = None      # in-flight persist of j − 1: (commit time, cost)
    while True:
        avail = plan.segment_s(j) - first
        if x <= t + avail or not plan.levels:        # cut while computing segment j
            done = first + _steps_done(plan, t, x, avail)
            if pend is not None:
                return Cut(j - 1, done, commits + 1, ckpt + pend[1])
            return Cut(j - 1, done, commits, ckpt)
        t += avail
        first = 0.0
        stall = 0.0
        if pend is not None:
            if pend[0] > t:
                if x <= pend[0]:                     # cut while waiting for the persist
                    return Cut(j - 1, plan.segment_s(j), commits + 1, ckpt + pend[1])
                stall = pend[0] - t
                t = pend[0]
            commits += 1
            ckpt += pend[1]
            pend = None
        cost = plan.cost_of(j)
        if x <= t + cost:                            # cut while writing: the write is lost
            return Cut(j - 1, plan.segment_s(j), commits, ckpt)
        t += cost
        if p:
            pend = (t + p, cost + stall)
        else:
            commits += 1
            ckpt += cost + stall
        if j == n:                                   # cut in the final persist wait
            return Cut(n, 0.0, commits + (pend is not None),
                       ckpt + (pend[1] if pend is not None else 0.0))
        j += 1


def work_done_s(plan: JobPlan, c: int, off: float) -> float:
    """Useful compute secured by state (``c``, ``off``)."""
    return plan.work_at(c) + off
