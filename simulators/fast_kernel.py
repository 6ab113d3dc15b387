"""The fast path's inlined loop compiled with numba, for many replications at once.

:func:`simulators.fast.run_simple` is the reference: pure Python, one replication per
call, drawing its failure marks and causes from the named streams in blocks. This
module runs the same loop — line for line, the same arithmetic in the same order — as
a numba function over arrays holding those very draws (a generator yields the same
sequence whatever the block size it is asked for), so a replication here gives the
reference's :class:`~testbed.outcomes.RepResult` exactly (``tests/sim/test_kernel.py``
compares them field by field). When a replication needs more draws than it was given
it says so and is run again with twice as many.

It covers what the reference covers with a single checkpoint level (or none); a
multi-level plan stays on the reference. numba is imported on first use (about 0.4 s,
and a few seconds of compilation the first time, cached in ``__pycache__``); without
numba every replication takes the reference path. :func:`batch_runner` is how
:func:`simulators.run.replicate` uses it: one prepared plan for all replications.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from testbed.outcomes import OpsCounts, RepResult, close_books
from testbed.resilience.exposure import cause_tables, lane_of, phase_speeds
from testbed.resilience.spec import SimSpec

#: Replications below which the reference loop is used (numba's import costs more).
MIN_REPLICATIONS = 64
_STATE: dict[str, object] = {}
OK, MORE_GAPS, MORE_CAUSES, LIMIT = 0, 1, 2, 3


def _heap_push(heap, size, x):
    i = size
    heap[i] = x
    while i > 0:
        parent = (i - 1) >> 1
        if heap[parent] <= heap[i]:
            break
        heap[parent], heap[i] = heap[i], heap[parent]
        i = parent
    return size + 1


def _heap_pop(heap, size):
    size -= 1
    heap[0] = heap[size]
    i = 0
    while True:
        left = 2 * i + 1
        if left >= size:
            break
        child = left
        if left + 1 < size and heap[left + 1] < heap[left]:
            child = left + 1
        if heap[i] <= heap[child]:
            break
        heap[i], heap[child] = heap[child], heap[i]
        i = child
    return size


def _bisect_right(a, x):
    lo, hi = 0, a.shape[0]
    while lo < hi:
        mid = (lo + hi) >> 1
        if x < a[mid]:
            hi = mid
        else:
            lo = mid + 1
    return lo


def _loop(gaps, key0, causes_u, cum_full, cum_hw, induced, repair, detect, requeue, reset,  # noqa: C901, PLR0912, PLR0913, PLR0915
          multi, poisson, s_run, s_rst, n_nodes, finite, spares, max_fail, max_t,
          n, tau, last, p, b, has_ckpt, load_at, keep, out_f, by_cause):
    """The loop of :func:`simulators.fast.run_simple` for a single level (see there)."""
    returns = np.empty(gaps.shape[0] + 1)
    nret = 0
    idle = spares
    present = n_nodes
    gi, ci = 0, 0
    key = key0
    val, tref = 0.0, 0.0
    rate = s_run * (present if poisson else 1.0)
    period = max(tau, p) + b
    stall = max(0.0, p - tau)
    head = tau + b
    tail = max(last, p) + b + p
    only = last + b + p
    full_ckpt = b + p + max(0.0, p - last)
    inf = math.inf
    t = 0.0
    c = 0
    ckpt = restart = wait = 0.0
    nfail = commits = n_hs = n_stalls = 0
    stalling = False
    n_repairs = 0
    done = 0.0
    while True:
        f = tref + (key - val) / rate if rate > 0.0 else inf
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
        if keep:
            done += f - t
        t = f
        running = True
        while True:
            while nret > 0 and returns[0] <= t:
                nret = _heap_pop(returns, nret)
                idle += 1
            if gi >= gaps.shape[0]:
                return MORE_GAPS
            key += gaps[gi]
            gi += 1
            if multi:
                if ci >= causes_u.shape[0]:
                    return MORE_CAUSES
                cz = _bisect_right(cum_full if running else cum_hw, causes_u[ci])
                ci += 1
            else:
                cz = 0
            nfail += 1
            if nfail > max_fail or t > max_t:
                out_f[0] = t
                out_f[1] = nfail
                return LIMIT
            by_cause[cz] += 1
            if not induced[cz] and present > 0:
                present -= 1
                if finite:
                    n_repairs += 1
                    if repair[cz] <= 0.0:
                        idle += 1
                    else:
                        nret = _heap_push(returns, nret, t + repair[cz])
            if reset[cz]:
                c = 0
            running = False
            val += rate * (t - tref)
            tref = t
            rate = s_rst * (present if poisson else 1.0)
            det = detect[cz]
            if det > 0.0:
                te = t + det
                f = tref + (key - val) / rate if rate > 0.0 else inf
                if f <= te:
                    restart += f - t
                    t = f
                    continue
                restart += det
                t = te
            while True:
                while nret > 0 and returns[0] <= t:
                    nret = _heap_pop(returns, nret)
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
                val += rate * (t - tref)
                tref = t
                rate = 0.0
                r = returns[0]
                wait += r - t
                t = r
            val += rate * (t - tref)
            tref = t
            rate = s_rst * (present if poisson else 1.0)
            req = requeue[cz]
            if req > 0.0:
                te = t + req
                f = tref + (key - val) / rate if rate > 0.0 else inf
                if f <= te:
                    restart += f - t
                    t = f
                    continue
                restart += req
                t = te
            if load_at > 0.0:
                te = t + load_at
                f = tref + (key - val) / rate if rate > 0.0 else inf
                if f <= te:
                    restart += f - t
                    t = f
                    continue
                restart += load_at
                t = te
            break
        val += rate * (t - tref)
        tref = t
        rate = s_run * (present if poisson else 1.0)
    pending = 0
    for i in range(nret):
        if returns[i] > t:
            pending += 1
    out_f[0] = t
    out_f[1] = ckpt
    out_f[2] = restart
    out_f[3] = wait
    out_f[4] = nfail
    out_f[5] = commits
    out_f[6] = n_hs
    out_f[7] = n_stalls
    out_f[8] = n_repairs - pending
    return OK


# ----------------------------------------------------------------------------- seeding
# numpy's SeedSequence (O'Neill's seed_seq hash, as numpy/random/bit_generator.pyx
# implements it) and PCG64's seeding, so that the streams of testbed.streams.stream()
# are made in a few microseconds instead of 50 (tests/sim/test_kernel.py checks the
# states against numpy's for many keys).
_M32 = 0xFFFFFFFF
_PCG_MULT = 0x2360ED051FC65DA44385DF649FCCF645
_M128 = (1 << 128) - 1


def _words(n: int) -> list[int]:
    """The little-endian 32-bit words of ``n`` (numpy: ``[0]`` for 0)."""
    if n == 0:
        return [0]
    out = []
    while n:
        out.append(n & _M32)
        n >>= 32
    return out


def _seed_state(ent, out):
    """SeedSequence(entropy, spawn_key).generate_state(4, uint64) of the assembled
    entropy words ``ent`` (run words padded to 4, then the spawn key's) into ``out``."""
    m32 = np.uint64(0xFFFFFFFF)
    h = np.uint64(0x43B0D7E5)
    mixer = np.zeros(4, np.uint64)
    for i in range(4):
        v = ent[i] if i < ent.shape[0] else np.uint64(0)
        v ^= h
        h = (h * np.uint64(0x931E8875)) & m32
        v = (v * h) & m32
        v ^= v >> np.uint64(16)
        mixer[i] = v
    for src in range(4):
        for dst in range(4):
            if src != dst:
                v = mixer[src] ^ h
                h = (h * np.uint64(0x931E8875)) & m32
                v = (v * h) & m32
                v ^= v >> np.uint64(16)
                r = (np.uint64(0xCA01F9DD) * mixer[dst] - np.uint64(0x4973F715) * v) & m32
                mixer[dst] = r ^ (r >> np.uint64(16))
    for src in range(4, ent.shape[0]):
        for dst in range(4):
            v = ent[src] ^ h
            h = (h * np.uint64(0x931E8875)) & m32
            v = (v * h) & m32
            v ^= v >> np.uint64(16)
            r = (np.uint64(0xCA01F9DD) * mixer[dst] - np.uint64(0x4973F715) * v) & m32
            mixer[dst] = r ^ (r >> np.uint64(16))
    h = np.uint64(0x8B51F9DD)
    for i in range(8):
        v = mixer[i % 4] ^ h
        h = (h * np.uint64(0x58F38DED)) & m32
        v = (v * h) & m32
        v ^= v >> np.uint64(16)
        if i % 2 == 0:
            out[i // 2] = v
        else:
            out[i // 2] |= v << np.uint64(32)


class _Streams:
    """Reusable generators set to the state ``testbed.streams.stream(seed, rep, purpose)``
    would start in (a seed sequence per call costs 50 µs; this, about 6)."""

    def __init__(self, seed_state) -> None:
        from testbed.streams import PURPOSES
        self.purposes = PURPOSES
        self.seed_state = seed_state
        self.bits: dict[str, np.random.PCG64] = {}
        self.gens: dict[str, np.random.Generator] = {}
        self.words = np.zeros(4, np.uint64)
        self.run: tuple[int, list[int]] = (-1, [])

    def get(self, seed: int, rep: int, purpose: str, index: int = 0) -> np.random.Generator:
        if self.run[0] != seed:
            words = _words(int(seed))
            self.run = (seed, words + [0] * (4 - len(words)))
        ent = np.asarray(self.run[1] + _words(self.purposes[purpose]) + _words(int(rep))
                         + _words(int(index)), np.uint64)
        w = self.words
        self.seed_state(ent, w)
        s = (int(w[0]) << 64) | int(w[1])
        inc = (((int(w[2]) << 64) | int(w[3])) << 1 | 1) & _M128
        # PCG64's seeding: state 0, one step (→ inc), add the seed, one step
        state = (((inc + s) & _M128) * _PCG_MULT + inc) & _M128
        bits = self.bits.get(purpose)
        if bits is None:
            bits = self.bits[purpose] = np.random.PCG64(0)
            self.gens[purpose] = np.random.Generator(bits)
        bits.state = {"bit_generator": "PCG64", "state": {"state": state, "inc": inc},
                      "has_uint32": 0, "uinteger": 0}
        return self.gens[purpose]


def _compiled():
    """The numba-compiled loop and seeding (None without numba)."""
    if "loop" not in _STATE:
        try:
            import numba
        except ImportError:                   # pragma: no cover - numba is a dependency
            _STATE["loop"] = None
            return None
        glob = globals()
        for name in ("_heap_push", "_heap_pop", "_bisect_right"):
            glob[name] = numba.njit(cache=True, nogil=True)(glob[name])
        _STATE["loop"] = numba.njit(cache=True, nogil=True)(_loop)
        _STATE["seed"] = numba.njit(cache=True, nogil=True)(_seed_state)
    return _STATE["loop"]


def fast_streams() -> _Streams | None:
    """Generators in the states of :func:`testbed.streams.stream` (None without numba)."""
    if _compiled() is None:
        return None
    return _Streams(_STATE["seed"])


class _Prepared:
    """What the loop needs from a spec, computed once for all its replications."""

    def __init__(self, spec: SimSpec) -> None:
        plan, fm, life = spec.plan, spec.failures, spec.lifecycle
        self.spec, self.fm = spec, fm
        causes = fm.causes
        self.lane = lane_of(fm, life)
        cum_full, cum_hw, p_hw = cause_tables(fm)
        s_run, s_rst, _, _ = phase_speeds(fm, p_hw)
        self.cum_full = np.asarray(cum_full, float)
        self.cum_hw = np.asarray(cum_hw, float)
        self.induced = np.asarray([c.job_induced for c in causes] or [False], np.bool_)
        self.repair = np.asarray([c.repair_s for c in causes] or [0.0], float)
        self.detect = np.asarray([c.detect_s for c in causes] or [0.0], float)
        self.requeue = np.asarray([c.restart_s for c in causes] or [0.0], float)
        # a failure whose cause the single level does not survive restarts from 0
        self.reset = np.asarray([bool(c.survives is not None and plan.levels
                                      and plan.rollback(1, c.survives) == 0)
                                 for c in causes] or [False], np.bool_)
        self.multi = len(causes) > 1
        self.ncause = max(1, len(causes))
        self.names = len(causes)
        lim = spec.limits
        self.scalars = (self.multi, self.lane == "poisson", s_run, s_rst, spec.nodes,
                        life.spares is not None, life.spares or 0,
                        lim.max_failures, lim.max_simulated_s, plan.n_segments,
                        plan.interval_s, plan.last_s, plan.persist_s,
                        plan.levels[0].cost_s if plan.levels else 0.0, bool(plan.levels),
                        plan.load_of(1), not fm.lose_work)
        mtbf = spec.job_mtbf_s if math.isfinite(spec.job_mtbf_s) else math.inf
        expected = plan.failure_free_s() / mtbf if mtbf > 0 else 0.0
        self.gaps_n = int(256 * math.ceil((1.5 * expected + 64) / 256))
        self.no_causes = np.empty(0)

    def run(self, loop, streams: _Streams, seed: int, rep: int) -> RepResult:
        fm = self.fm
        dist = fm.interarrival
        want = self.gaps_n
        while True:
            g_fail = streams.get(seed, rep, "failures")
            if self.lane == "none" or dist is None:
                key0, gaps = math.inf, np.empty(0)
            elif self.lane == "job" and fm.start == "stationary" and dist.kind != "exponential":
                key0 = float(dist.equilibrium(streams.get(seed, rep, "lifecycle"), 1)[0])
                gaps = dist.draw(g_fail, want)
            else:
                drawn = dist.draw(g_fail, want + 1)
                key0, gaps = float(drawn[0]), drawn[1:]
            causes_u = (streams.get(seed, rep, "causes").random(want) if self.multi
                        else self.no_causes)
            out = np.zeros(9)
            by_cause = np.zeros(self.ncause, np.int64)
            status = loop(gaps, key0, causes_u, self.cum_full, self.cum_hw, self.induced,
                          self.repair, self.detect, self.requeue, self.reset, *self.scalars,
                          out, by_cause)
            if status == OK:
                return self._result(out, by_cause)
            if status == LIMIT:
                self.spec.limits.check(int(out[1]), float(out[0]), rep)
            want *= 2

    def _result(self, out: np.ndarray, by_cause: np.ndarray) -> RepResult:
        t, ckpt, restart, wait = (float(x) for x in out[:4])
        nfail, commits, n_hs, n_stalls, n_ok = (int(x) for x in out[4:9])
        counts = by_cause.tolist()
        n_ji = sum(k for k, ji in zip(counts, self.induced.tolist(), strict=True) if ji)
        ops = OpsCounts(failures_hardware=nfail - n_ji, failures_job_induced=n_ji,
                        repairs_successful=n_ok, host_selections=n_hs, stalls=n_stalls,
                        stall_s=wait)
        return close_books(t, self.spec.plan.work_s, ckpt, restart, wait, nfail, commits,
                           counts if self.names else [], ops)


def covered(spec: SimSpec) -> bool:
    """Whether the compiled loop runs ``spec`` (the reference's cases, one level)."""
    from simulators.fast import is_simple
    return is_simple(spec) and len(spec.plan.levels) <= 1


def batch_runner(spec: SimSpec, replications: int) -> Callable[[int, int], RepResult] | None:
    """A ``(seed, rep) -> RepResult`` running the compiled loop for ``spec``, or None
    when the reference should run (not covered, too few replications, no numba)."""
    if replications < MIN_REPLICATIONS or not covered(spec):
        return None
    loop = _compiled()
    streams = fast_streams()
    if loop is None or streams is None:
        return None
    prepared = _Prepared(spec)
    return lambda seed, rep: prepared.run(loop, streams, seed, rep)
