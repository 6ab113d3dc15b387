"""The fast exact path: the same job as the SimPy engine, advanced analytically.

Between two failures the job's progress is a closed form: with segment compute τ,
blocking cost b and background persist p, checkpoint j after a (re)start at s is
committed at s + τ + b + p + (j − 1)·(max(τ, p) + b), so one division tells how many
checkpoints a failure at f leaves committed. Restarts (detection, waiting for spares
or maintenance, requeue, load) are a few comparisons against the next failure time.
Failure times, causes and repair durations come from the same
:meth:`FailureModel.events` stream as in the SimPy engine, so for the same seed both
give the same failures, checkpoints and causes, and the same times up to float
round-off (the engine adds step times one by one, this path multiplies).
Multi-level plans advance checkpoint by checkpoint (still without simulating steps).
"""

from __future__ import annotations

import heapq
import math

from testbed.outcomes import RepResult, close_books
from testbed.resilience.failures import MAINTENANCE
from testbed.resilience.spec import SimSpec

INF = math.inf


def _skip_until(events, fail, f: float, until: float, needed: int, nodes: int):
    """Drop failures up to ``until`` that find every job node already away (see the
    SimPy injector): while all ``nodes`` slots wait for a replacement there is no node
    left to fail. Returns the next failure that counts and its time."""
    while f <= until and needed >= nodes and fail.cause != MAINTENANCE:
        fail = next(events, None)
        f = fail.t_s if fail is not None else INF
    return fail, f


def run_fast(spec: SimSpec, seed: int, rep: int) -> RepResult:
    """Simulate replication ``rep`` of ``spec`` under run seed ``seed``."""
    plan = spec.plan
    causes = spec.failures.causes
    n = plan.n_segments
    tau = plan.interval_s
    last = plan.last_s
    p = plan.persist_s
    has_ckpt = bool(plan.levels)
    single = len(plan.levels) <= 1
    b = plan.levels[0].cost_s if has_ckpt else 0.0
    period = max(tau, p) + b
    stall = max(0.0, p - tau)
    spares = spec.spares
    # with a finite spare pool, a failure striking while all of the job's node slots
    # already wait for replacements finds no node to fail: it is skipped
    nodes = spec.nodes if spares is not None else 1 << 62
    events = spec.failures.events(seed, rep)
    limits = spec.limits

    fail = next(events, None)
    f = fail.t_s if fail is not None else INF
    t = 0.0
    c = 0
    ckpt = restart = wait = 0.0
    nfail = commits = 0
    by_cause = [0] * len(causes)
    avail = spares if spares is not None else 0
    returns: list[float] = []
    needed = 0
    blocked = 0.0

    while True:
        # ---------------------------------------------------------------- run phase
        s = t
        done = False
        if single:
            togo = n - c
            if togo == 1:
                end = s + last + b + p
            else:
                e_last_full = s + tau + b + (togo - 2) * period
                end = e_last_full + max(last, p) + b + p
            if f > end:
                if has_ckpt:
                    ckpt += togo * b + p + (max(0, togo - 2) * stall if togo >= 2 else 0.0)
                    if togo >= 2:
                        ckpt += max(0.0, p - last)
                    commits += togo
                t = end
                done = True
            elif togo > 1:
                first = s + tau + b + p
                if f > first:
                    # checkpoints committed strictly before f (a failure wins a tie)
                    m = min(int(-((first - f) // period)), togo - 1)
                    ckpt += m * b + (m - 1) * stall
                    c += m
                    commits += m
        else:
            tj = s
            while True:
                j = c + 1
                tj = tj + plan.segment_s(j) + plan.cost_of(j)
                if tj >= f:
                    break
                ckpt += plan.cost_of(j)
                c = j
                commits += 1
                if j == n:
                    t = tj
                    done = True
                    break
        if done:
            break
        t = f
        # ---------------------------------------------------------------- failures
        while True:
            nfail += 1
            limits.check(nfail, t, rep)
            if fail.cause == MAINTENANCE:
                blocked = max(blocked, fail.until_s)
                det = req = 0.0
                surv = None
            else:
                cz = causes[fail.cause]
                by_cause[fail.cause] += 1
                det, req, surv = cz.detect_s, cz.restart_s, cz.survives
                if spares is not None:
                    heapq.heappush(returns, t + fail.repair_s)
                    needed += 1
            if surv is not None:
                c = plan.rollback(c, surv)
            fail = next(events, None)
            f = fail.t_s if fail is not None else INF
            te = t + det
            fail, f = _skip_until(events, fail, f, te, needed, nodes)
            if f <= te:
                restart += f - t
                t = f
                continue
            restart += det
            t = te
            if blocked > t:
                fail, f = _skip_until(events, fail, f, blocked, needed, nodes)
                if f <= blocked:
                    wait += f - t
                    t = f
                    continue
                wait += blocked - t
                t = blocked
            if needed:
                interrupted = False
                while True:
                    while returns and returns[0] <= t:
                        heapq.heappop(returns)
                        avail += 1
                    take = min(avail, needed)
                    avail -= take
                    needed -= take
                    if not needed:
                        break
                    r = returns[0]
                    fail, f = _skip_until(events, fail, f, r, needed, nodes)
                    if f <= r:
                        wait += f - t
                        t = f
                        interrupted = True
                        break
                    wait += r - t
                    t = r
                if interrupted:
                    continue
            te = t + req
            fail, f = _skip_until(events, fail, f, te, needed, nodes)
            if f <= te:
                restart += f - t
                t = f
                continue
            restart += req
            t = te
            te = t + plan.load_of(c)
            fail, f = _skip_until(events, fail, f, te, needed, nodes)
            if f <= te:
                restart += f - t
                t = f
                continue
            restart += te - t
            t = te
            break
    return close_books(t, plan.work_s, ckpt, restart, wait, nfail, commits, by_cause)
