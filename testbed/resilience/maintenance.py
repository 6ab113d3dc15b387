"""Planned maintenance windows as planned stops.

Window ``k`` opens at ``first + k·every`` and lasts ``duration``. A window is a *planned*
stop, distinct from a failure: a job that runs when it approaches writes a checkpoint
of everything computed so far, ending exactly when the window opens, and resumes from
it when the window closes — no work is lost, and the stop costs only that checkpoint
and the window (no detection, requeue or load). A job that is down anyway (restarting,
waiting) simply waits for the window to close before it starts again.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Windows:
    """Maintenance windows every ``every_s`` of ``duration_s``, the first at ``first_s``."""

    every_s: float
    duration_s: float
    first_s: float

    def _index(self, t: float) -> int:
        """Index of the last window opening at or before ``t`` (−1 before the first)."""
        if t < self.first_s:
            return -1
        return int(math.floor((t - self.first_s) / self.every_s))

    def opens_s(self, k: int) -> float:
        return self.first_s + k * self.every_s

    def open_until(self, t: float) -> float | None:
        """The end of the window open at ``t``, or None."""
        k = self._index(t)
        if k >= 0 and t < self.opens_s(k) + self.duration_s:
            return self.opens_s(k) + self.duration_s
        return None

    def blocked_until(self, t: float, ckpt_s: float) -> float | None:
        """The end of the window whose planned stop (``ckpt_s`` before it opens) has
        begun at ``t``: a job must not start computing then. None when free."""
        end = self.open_until(t)
        if end is not None:
            return end
        k = self._index(t + ckpt_s)
        if k >= 0 and self.opens_s(k) - ckpt_s <= t < self.opens_s(k) + self.duration_s:
            return self.opens_s(k) + self.duration_s
        return None

    def next_stop_s(self, t: float, ckpt_s: float) -> tuple[float, float]:
        """(time the next planned stop begins after ``t``, end of its window)."""
        k = max(0, self._index(t + ckpt_s) + 1)
        while self.opens_s(k) - ckpt_s <= t:
            k += 1
        return self.opens_s(k) - ckpt_s, self.opens_s(k) + self.duration_s
