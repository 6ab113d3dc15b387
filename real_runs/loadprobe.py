"""How many tasks compete for the cores right now: the running count of
``/proc/loadavg`` (its fourth field, ``running/total``), read by the supervisor while a
restart is under way.

A restart is a framework import and a model build — CPU-bound, single-threaded work —
so its wall time is its CPU time stretched by the tasks it shares the cores with; the
one-minute load average lags a restart of a few seconds by far too much to tell. The
count includes the reader itself (running while it reads), which is left out: what is
recorded is the runnable tasks besides the supervisor — the restarting worker and
whatever else the machine runs. Reading the file costs microseconds and takes no core
from the worker. Off Linux there is no such file and nothing is recorded.
"""

from __future__ import annotations

LOADAVG = "/proc/loadavg"


def runnable_besides_me() -> int | None:
    """Runnable tasks on the machine now, not counting this process (None: unknown)."""
    try:
        with open(LOADAVG, encoding="ascii") as fh:
            running = fh.read().split()[3].split("/")[0]
        return max(int(running) - 1, 0)
    except (OSError, IndexError, ValueError):
        return None
