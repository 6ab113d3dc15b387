"""What the HPO controller needs from its engine: a sampler and a clock.

The controller (:mod:`testbed.hpo.controller`) makes every decision of a sweep; the two
engines that drive it differ only in where configurations come from and what time it
is, so each of those is a small protocol with a simulated and a real implementation
behind it (Syne Tune's simulator back end does the same with its clock):

* :class:`Sampler` — ``config(i)`` proposes trial ``i``'s configuration and
  ``observe(i, value)`` tells it the trial's first result (``None``: it failed). The
  plan's fixed list (grid, random) and Optuna's TPE implement it
  (:mod:`simulators.hpo.tpe`).
* :class:`Clock` — ``now()`` is the sweep's time in seconds since it began.
  :class:`SimClock` is moved by the simulator from event to event (and by the real
  driver while it replays a recorded history); the real driver's clock reads one
  process's monotonic clock (:mod:`testbed.app.hpo.clock`), so a wall-clock step
  (NTP, a leap second, a changed time zone) never moves the sweep's time.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable


@runtime_checkable
class Sampler(Protocol):
    """Proposes configurations and learns from results (see the module docstring)."""

    def config(self, index: int) -> Mapping[str, Any]: ...

    def observe(self, index: int, value: float | None) -> None: ...


@runtime_checkable
class Clock(Protocol):
    """The sweep's time: seconds since it began, never decreasing."""

    def now(self) -> float: ...


class SimClock:
    """A clock the engine moves: ``set(t)`` to the time of the event it applies."""

    __slots__ = ("t_s",)

    def __init__(self, t_s: float = 0.0) -> None:
        self.t_s = float(t_s)

    def now(self) -> float:
        return self.t_s

    def set(self, t_s: float) -> None:
        """Move the clock to ``t_s`` (the engine's event time)."""
        self.t_s = t_s
