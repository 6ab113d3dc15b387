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
"""

from __future__ import annotations

import os

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
