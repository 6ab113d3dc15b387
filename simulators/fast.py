"""The fast exact path: the same job as the SimPy engine, advanced analytically.

Between two failures the job's progress is a closed form (:mod:`simulators.jobmath`).
Restarts (detection, waiting for a repaired node, requeue, load) are a few comparisons
against the next failure time. Two loops:

* :func:`run_simple` — the common case (identical exponential nodes or a job-level
  MTBF, a spare pool refilled by per-cause repairs or replacements at hand, no other
  cluster operation; work lost to a failure, or none lost — the AIReSim-compatible
  mode): the node lifecycle of :class:`~testbed.resilience.ops.ClusterOps` reduced to
  counts and inlined, drawing the same failure marks and causes from the same named
  streams in the same order, about 1.5 µs per failure at any node count (and the same
  loop compiled, :mod:`simulators.fast_kernel`, for many replications);
* :func:`simulators.fast_ops.run_general` — everything else: the state machine itself,
  with only the job's progress in closed form.

Both give the SimPy engine's failures, causes, checkpoints and cluster counts exactly,
and its times up to float round-off (the engine adds step times one by one, this path
multiplies) — see ``tests/sim/test_fast_equals_simpy.py``.
"""

from __future__ import annotations

import bisect
import heapq
import math

from simulators.fast_ops import run_general
from simulators.jobmath import run_until
from testbed.outcomes import OpsCounts, RepResult, close_books
from testbed.resilience.exposure import cause_tables, lane_of, phase_speeds
from testbed.resilience.spec import SimSpec
from testbed.streams import stream

INF = math.inf
BLOCK = 256


def is_simple(spec: SimSpec) -> bool:
    """Whether :func:`run_simple` handles ``spec`` (see the module docstring)."""
    fm, life = spec.failures, spec.lifecycle
    if not (life.is_simple() and spec.windows is None and fm.trace is None
            and (fm.lose_work or (not spec.plan.levels and spec.plan.step_s is None))
            and not fm.burst_probability and lane_of(fm, life) in ("job", "poisson", "none")):
        return False
    return phase_speeds(fm, cause_tables(fm)[2])[2] == 0.0


def run_fast(spec: SimSpec, seed: int, rep: int) -> RepResult:
    """Simulate replication ``rep`` of ``spec`` under run seed ``seed``."""
    if is_simple(spec):
        return run_simple(spec, seed, rep)
    return run_general(spec, seed, rep)


# long on purpose: state in locals, holds inlined (a loop over them: 1.53 → 1.67 µs/failure)
def run_simple(spec: SimSpec, seed: int, rep: int) -> RepResult:  # noqa: C901 - one hot loop
    """The inlined loop (see the module docstring)."""
    plan, fm, life = spec.plan, spec.failures, spec.lifecycle
    causes = fm.causes
    lane = lane_of(fm, life)
    poisson = lane == "poisson"
    cum_full, cum_hw, p_hw = cause_tables(fm)
    s_run, s_rst, _, _ = phase_speeds(fm, p_hw)
    ji = [c.job_induced for c in causes] or [False]
    repair = [c.repair_s for c in causes] or [0.0]
    detect = [c.detect_s for c in causes] or [0.0]
    requeue = [c.restart_s for c in causes] or [0.0]
    survives = [c.survives for c in causes] or [None]
    multi = len(causes) > 1
    limits = spec.limits
    max_fail, max_t = limits.max_failures, limits.max_simulated_s
    # a single level (or none) loads the same at every checkpoint
    load_at = plan.load_of(1) if len(plan.levels) <= 1 else None
    n_nodes = spec.nodes
    finite = life.spares is not None
    idle = life.spares if life.spares is not None else 0
    returns: list[float] = []
    # streams, in the order ClusterOps draws them
    dist = fm.interarrival
    g_fail = stream(seed, rep, "failures")
    g_cause = stream(seed, rep, "causes")
    gbuf: list[float] = []
    cbuf: list[float] = []
    if lane == "none" or dist is None:       # the same here: is_simple() refuses traces
        key = INF
    elif lane == "job" and fm.start == "stationary" and dist.kind != "exponential":
        key = float(dist.equilibrium(stream(seed, rep, "lifecycle"), 1)[0])
    else:
        gbuf = dist.draw(g_fail, BLOCK).tolist()[::-1]
        key = gbuf.pop()
    # the job's failure clock
    present = n_nodes
    val, tref = 0.0, 0.0
    rate = s_run * (present if poisson else 1.0)
    n = plan.n_segments
    single = len(plan.levels) <= 1
    tau, last, p = plan.interval_s, plan.last_s, plan.persist_s
    has_ckpt = bool(plan.levels)
    b = plan.levels[0].cost_s if has_ckpt else 0.0
    period = max(tau, p) + b
    stall = max(0.0, p - tau)
    head = tau + b                       # a start to the end of its first checkpoint
    tail = max(last, p) + b + p          # the last segment after the one before it
    only = last + b + p                  # a single segment left
    full_ckpt = b + p + max(0.0, p - last)   # checkpoint time of a finished run (+ stalls)
    keep = not fm.lose_work              # no work lost: compute done so far is kept
    done = 0.0

    heappush, heappop, bisect_right = heapq.heappush, heapq.heappop, bisect.bisect_right
    t = 0.0
    c = 0
    ckpt = restart = wait = 0.0
    nfail = commits = n_hs = n_stalls = 0
    stalling = False
    by_cause = [0] * max(1, len(causes))
    info = list(zip(ji, repair, detect, requeue, survives, strict=True))
    n_repairs = 0

    while True:
        f = tref + (key - val) / rate if rate > 0.0 else INF
        # ---------------------------------------------------------------- run phase
        if single:
            togo = n - c
            end = t + (only - done) if togo == 1 else t + head + (togo - 2) * period + tail
            if f > end:
                if has_ckpt:
                    if togo == 1:
                        ckpt += b + p
                    else:
                        ckpt += (togo - 1) * b + (togo - 2) * stall + full_ckpt
                    commits += togo
                t = end
                break
            if togo > 1 and has_ckpt:
                first = t + head + p
                if f > first:
                    m = int(-((first - f) // period))
                    if m > togo - 1:
                        m = togo - 1
                    ckpt += m * b + (m - 1) * stall
                    c += m
                    commits += m
        else:
            adv = run_until(plan, t, c, 0.0, f)
            ckpt += adv.ckpt_s
            commits += adv.commits
            c = adv.c
            if adv.done:
                t = adv.t
                break
        if keep:
            done += f - t
        t = f
        running = True
        # ---------------------------------------------------------------- failures
        while True:
            while returns and returns[0] <= t:
                heappop(returns)
                idle += 1
            if not gbuf:
                assert dist is not None          # a failure struck, so the job has a clock
                gbuf = dist.draw(g_fail, BLOCK).tolist()[::-1]
            key += gbuf.pop()
            if multi:
                if not cbuf:
                    cbuf = g_cause.random(BLOCK).tolist()[::-1]
                cz = bisect_right(cum_full if running else cum_hw, cbuf.pop())
            else:
                cz = 0
            nfail += 1
            if nfail > max_fail or t > max_t:
                limits.check(nfail, t, rep)
            by_cause[cz] += 1
            induced, rep_s, det, req, surv = info[cz]
            if not induced and present > 0:
                present -= 1
                if finite:
                    n_repairs += 1
                    if rep_s <= 0.0:
                        idle += 1
                    else:
                        heappush(returns, t + rep_s)
            if surv is not None:
                c = plan.rollback(c, surv)
            running = False
            val += rate * (t - tref)
            tref = t
            rate = s_rst * (present if poisson else 1.0)
            if det > 0.0:
                te = t + det
                f = tref + (key - val) / rate if rate > 0.0 else INF
                if f <= te:
                    restart += f - t
                    t = f
                    continue
                restart += det
                t = te
            # replacements: at hand, from the pool, or a stall until a repair ends
            while True:
                while returns and returns[0] <= t:
                    heappop(returns)
                    idle += 1
                need = n_nodes - present
                if not need:
                    stalling = False
                    break
                take = need if not finite or need <= idle else idle
                if take:
                    if finite:
                        idle -= take
                    present += take
                    n_hs += 1
                val += rate * (t - tref)
                tref = t
                rate = s_rst * (present if poisson else 1.0)
                if present == n_nodes:
                    stalling = False
                    break
                if not stalling:
                    n_stalls += 1
                stalling = True
                val += rate * (t - tref)     # waiting: the job's nodes do not fail
                tref = t
                rate = 0.0
                r = returns[0]
                wait += r - t
                t = r
            val += rate * (t - tref)
            tref = t
            rate = s_rst * (present if poisson else 1.0)
            if req > 0.0:
                te = t + req
                f = tref + (key - val) / rate if rate > 0.0 else INF
                if f <= te:
                    restart += f - t
                    t = f
                    continue
                restart += req
                t = te
            load = load_at if load_at is not None else plan.load_of(c)
            if load > 0.0:
                te = t + load
                f = tref + (key - val) / rate if rate > 0.0 else INF
                if f <= te:
                    restart += f - t
                    t = f
                    continue
                restart += load
                t = te
            break
        val += rate * (t - tref)
        tref = t
        rate = s_run * (present if poisson else 1.0)
    n_ji = sum(k for k, induced in zip(by_cause, ji, strict=True) if induced)
    n_hw = nfail - n_ji
    n_ok = n_repairs - sum(1 for r in returns if r > t)
    by_cause = by_cause if causes else []
    ops = OpsCounts(failures_hardware=n_hw, failures_job_induced=n_ji, repairs_successful=n_ok,
                    host_selections=n_hs, stalls=n_stalls, stall_s=wait)
    return close_books(t, plan.work_s, ckpt, restart, wait, nfail, commits, by_cause, ops)
