"""The real HPO driver's clock: one process's monotonic clock, continued across resumes.

Durations come from **one** clock per process, never from a difference of two
processes' clocks:

* the driver's time is ``offset_s + (time.monotonic() − its start)`` — the driver's own
  monotonic clock, which a wall-clock step (NTP, a changed date) never moves;
* a worker reports each record as seconds since *it* received the attempt, on *its*
  monotonic clock (:mod:`real_runs.hpo.worker`); the driver places it at the time it
  submitted the attempt plus that delta. On one machine ``CLOCK_MONOTONIC`` is
  system-wide, but under MPI the workers may be on other nodes, whose monotonic clocks
  count from their own boots: per-process deltas are right there too, at the cost of
  the submit-to-receipt latency (microseconds on a local pool, a message on MPI);
* a resumed sweep is a new driver process, perhaps on another node or after a
  reboot, so no monotonic reading of the lost driver means anything to it. The wall
  clock is the only one both share: the store records the wall time of each commit
  (:mod:`testbed.app.hpo.state_db`), and the rerun continues the sweep's time at
  ``t_last + (wall_now − wall_last)`` (never less than ``t_last``). The gap it
  estimates is marked in the trace as an outage (``sweep_resumed``), which the summary
  and the replay take out; inside a session the wall clock is never read for times.
"""

from __future__ import annotations

import time


class MonotonicClock:
    """The driver's :class:`~testbed.hpo.protocols.Clock` (see the module docstring)."""

    __slots__ = ("offset_s", "_mono0")

    def __init__(self, offset_s: float = 0.0) -> None:
        self.offset_s = float(offset_s)
        self._mono0 = time.monotonic()

    def now(self) -> float:
        return self.offset_s + (time.monotonic() - self._mono0)


def wall_s() -> float:
    """The wall clock, for the store's commit stamps only (see the module docstring)."""
    return time.time()


def resumed_at_s(last_t_s: float, last_wall_s: float | None) -> float:
    """Where a resumed sweep's time continues: the last commit's time plus the wall time
    since it (no less than the last commit's time; the last commit's time itself when
    the store has no wall stamp)."""
    if last_wall_s is None:
        return last_t_s
    return last_t_s + max(0.0, wall_s() - last_wall_s)
