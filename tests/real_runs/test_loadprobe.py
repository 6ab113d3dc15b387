"""The load sensors of a supervised run (real_runs.loadprobe): the running count of
/proc/loadavg, the CPU stretch the kernel's per-thread sched statistics give, and the
core probe (how slow a core ran, blind to the waiting)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from real_runs.loadprobe import core_probe_ms, cpu_stretch, runnable_besides_me, sched_ns

LINUX_SCHED = os.path.exists(f"/proc/{os.getpid()}/task/{os.getpid()}/schedstat")
#: A busy loop that runs until killed.
SPIN = "while True: pass"


def test_cpu_stretch_closed_forms():
    assert cpu_stretch(10**9, 0) == 1.0                 # alone on a core
    assert cpu_stretch(10**9, 10**9) == 2.0             # waited as long as it ran
    assert cpu_stretch(4, 2) == 1.5
    assert cpu_stretch(10**9, -5) == 1.0                # a counter read out of order
    assert cpu_stretch(0, 10**9) is None                # nothing ran: no figure


@pytest.mark.skipif(not LINUX_SCHED, reason="needs Linux sched statistics")
def test_sched_ns_counts_this_process_and_refuses_the_absent():
    before = sched_ns(os.getpid())
    assert before is not None and before[0] > 0 and before[1] >= 0
    t0 = time.process_time()
    while time.process_time() - t0 < 0.05:
        pass
    after = sched_ns(os.getpid())
    assert after is not None and after[0] - before[0] >= 0.04e9     # the 50 ms just spun
    assert sched_ns(2**22 + 12345) is None                            # no such process
    n = runnable_besides_me()
    assert n is None or n >= 0


@pytest.mark.measured
@pytest.mark.skipif(not LINUX_SCHED or not hasattr(os, "sched_setaffinity"),
                    reason="needs Linux sched statistics and CPU affinity")
def test_two_busy_loops_on_one_core_each_live_a_stretch_of_two():
    """Two CPU-bound processes pinned to the same core, in the same session group: the
    scheduler gives each half of it, so each waits about as long as it runs — a CPU
    stretch of 2 (more if other work on the machine takes that core too, never less
    than 1.6), and together they are on the core no longer than the wall time."""
    core = min(os.sched_getaffinity(0))
    procs = [subprocess.Popen([sys.executable, "-c", SPIN],
                              preexec_fn=lambda: os.sched_setaffinity(0, {core}))
             for _ in range(2)]
    try:
        time.sleep(0.3)                                   # both started and spinning
        start = [sched_ns(p.pid) for p in procs]
        t0 = time.perf_counter()
        time.sleep(1.5)
        end = [sched_ns(p.pid) for p in procs]
        wall_ns = (time.perf_counter() - t0) * 1e9
    finally:
        for p in procs:
            p.kill()
            p.wait()
    assert all(s is not None for s in start + end)
    deltas = [(b[0] - a[0], b[1] - a[1]) for a, b in zip(start, end, strict=True)]
    stretches = [cpu_stretch(*d) for d in deltas]
    assert all(s is not None and s >= 1.6 for s in stretches), stretches
    assert sum(d[0] for d in deltas) <= 1.05 * wall_ns, (deltas, wall_ns)
    # each one's time on the core and waiting add up to the interval it lived
    for on_cpu, waiting in deltas:
        assert on_cpu + waiting == pytest.approx(wall_ns, rel=0.1)


def _probes(n: int) -> tuple[float, float]:
    """Median CPU ms and median wall ms of ``n`` core probes."""
    cpu, wall = [], []
    for _ in range(n):
        t0 = time.perf_counter()
        cpu.append(core_probe_ms())
        wall.append((time.perf_counter() - t0) * 1e3)
    return sorted(cpu)[n // 2], sorted(wall)[n // 2]


@pytest.mark.measured
@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="needs CPU affinity")
def test_the_core_probe_counts_time_on_the_core_not_the_wait():
    """The probe pinned to one core, alone and then beside two busy loops pinned to the
    same core: beside them it waits for the core (its wall time at least 1.5× its CPU
    time: a third of the core each), but what it reports, its time on the core, stays
    what it was alone within the cache traffic of the switches (0.5–2×, where counting
    the wait would give about 3×; medians of 15) — so a restart's waiting is counted once, by the stretch, not again here."""
    core = min(os.sched_getaffinity(0))
    mask = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {core})
    procs: list[subprocess.Popen] = []
    try:
        alone_cpu, _ = _probes(15)
        procs = [subprocess.Popen([sys.executable, "-c", SPIN],
                                  preexec_fn=lambda: os.sched_setaffinity(0, {core}))
                 for _ in range(2)]
        time.sleep(0.3)
        shared_cpu, shared_wall = _probes(15)
    finally:
        for p in procs:
            p.kill()
            p.wait()
        os.sched_setaffinity(0, mask)
    assert alone_cpu > 0
    assert shared_wall >= 1.5 * shared_cpu, (shared_wall, shared_cpu)
    assert 0.5 <= shared_cpu / alone_cpu <= 2.0, (alone_cpu, shared_cpu)
