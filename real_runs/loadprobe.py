"""How many tasks compete for the cores right now: the running count of
``/proc/loadavg`` (its fourth field, ``running/total``), read by the supervisor every
time it looks at its worker (each reported step, at least every 50 ms), kept apart for
restarts and for training.

A restart is a framework import and a model build, and a step of the harness runs one
library thread — CPU-bound, single-threaded work — so its wall time is its CPU time
stretched by the tasks it shares the cores with; the one-minute load average lags a
restart of a few seconds by far too much to tell. The
count includes the reader itself (running while it reads), which is left out: what is
recorded is the runnable tasks besides the supervisor — the restarting worker and
whatever else the machine runs. Reading the file costs microseconds and takes no core
from the worker. Off Linux there is no such file and nothing is recorded.

**What the worker lived.** A count of runnable tasks is not the share of a core the
worker got: Linux shares the cores between *session groups* first (autogroup, on by
default on desktops and on this VM), then between the tasks of a group, so one busy
session of four tasks and one of one task halve the cores between them — ``R/C``
says 2.5×, the worker sees 1×. The kernel counts what each thread lived:
``/proc/PID/task/TID/schedstat`` holds its nanoseconds on a core and its nanoseconds
runnable but waiting for one. Their ratio over a stretch of the worker's life,
``(on-CPU + waiting) / on-CPU`` (:func:`cpu_stretch`), is how much longer its
CPU-bound work took than on a core of its own, whatever the scheduler's policy; the
supervisor reads it at the worker's first step and just before a kill or at its
result, a few reads an incarnation.

**How fast a core was.** The stretch counts the waiting, not a core that ran slower:
on this VM the CPU time of one ``import torch`` drifts 1.4× between minutes of an
idle machine, and moves with what the other vCPU runs (its cache and memory
traffic, the host's neighbours), none of which any counter of the guest shows. So
the supervisor times a fixed slice of interpreter and memory work of its own
(:func:`core_probe_ms`, ~2 ms of CPU every :data:`PROBE_EVERY_S`, ~1 % of a core)
while its worker runs, and keeps the mean for the first start, each restart and
the training. With a co-runner switching between idle, memory copies and a Python
loop, the probe's mean followed the CPU time of 16 concurrent ``import torch`` runs
with a correlation of 0.83, and dividing by it cut their spread (coefficient of
variation) from 14.6 % to 8.7 %; on a steady idle machine it neither helps nor
hurts much (6.8 % → 9.0 %: there is little left to explain). A fitted restart's time
on a core is carried to a run by the ratio of the two probes
(:func:`testbed.calibration.restart.carried`).
"""

from __future__ import annotations

import os
import time

LOADAVG = "/proc/loadavg"
#: Sched statistics of one thread: on-CPU ns, ns runnable waiting for a core, slices.
SCHEDSTAT = "/proc/{pid}/task/{tid}/schedstat"


def runnable_besides_me() -> int | None:
    """Runnable tasks on the machine now, not counting this process (None: unknown)."""
    try:
        with open(LOADAVG, encoding="ascii") as fh:
            running = fh.read().split()[3].split("/")[0]
        return max(int(running) - 1, 0)
    except (OSError, IndexError, ValueError):
        return None


def sched_ns(pid: int) -> tuple[int, int] | None:
    """(ns on a core, ns runnable waiting for one) summed over the live threads of
    process ``pid`` (None: no such statistics)."""
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return None
    on_cpu = waiting = 0
    seen = False
    for tid in tids:
        try:
            with open(SCHEDSTAT.format(pid=pid, tid=tid), encoding="ascii") as fh:
                fields = fh.read().split()
            on_cpu, waiting = on_cpu + int(fields[0]), waiting + int(fields[1])
            seen = True
        except (OSError, IndexError, ValueError):
            continue
    return (on_cpu, waiting) if seen else None


def cpu_stretch(on_cpu_ns: int, waiting_ns: int) -> float | None:
    """How much longer CPU-bound work took than alone on a core: (on-CPU + waiting) /
    on-CPU (None when nothing ran)."""
    if on_cpu_ns <= 0:
        return None
    return (on_cpu_ns + max(waiting_ns, 0)) / on_cpu_ns


#: How often the supervisor times its core probe while it watches a worker (seconds).
PROBE_EVERY_S = 0.2
#: The probe's memory traffic: a copy of 4 MiB, past the private caches of a core.
_PROBE_BUFFER = bytearray(1 << 22)


def _probe_work() -> float:
    """A fixed slice of what a restart's import does: bytecode, small-object and dict
    traffic, float arithmetic, and a copy through memory."""
    acc, book = 0.0, {}
    items = list(range(400))
    for rnd in range(15):
        for i in items:
            acc += (i * 0.5 + rnd) % 7.0
            if i % 5 == rnd % 5:
                book[i] = acc
        book = {k: v for k, v in book.items() if v > rnd}
    return acc + len(book) + len(bytes(_PROBE_BUFFER))


def core_probe_ms() -> float:
    """The CPU time of the calling thread doing :func:`_probe_work` once, in ms: how
    slow the core it ran on was just now (waiting for a core is not counted)."""
    start = time.thread_time_ns()
    _probe_work()
    return (time.thread_time_ns() - start) / 1e6
