"""The checkpoint plan of a job: how its work is cut into segments and which level saves each.

Segment ``i`` (1-based, ``i ≤ n_segments``) holds ``interval_s`` of compute, the last
one the remainder; checkpoint ``i`` follows segment ``i`` and commits the work up to
it. The last checkpoint makes the final state durable and ends the job. With several
levels, checkpoint ``i`` is written at the highest level whose ``every`` divides ``i``
(the final one at the highest level). The plan is data: the engines decide what a
failure does to it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import combinations


@dataclass(frozen=True)
class CkptLevel:
    """A checkpoint level: blocking cost, load time on restart, taken every ``every`` checkpoints."""

    name: str
    cost_s: float
    load_s: float
    every: int = 1


@dataclass(frozen=True)
class JobPlan:
    """Work, checkpoint interval and levels of one job."""

    work_s: float
    interval_s: float
    n_segments: int
    last_s: float
    levels: tuple[CkptLevel, ...]
    persist_s: float = 0.0
    restart_load_s: float = 0.0      # load time when nothing can be recovered (policy none)
    step_s: float | None = None      # stepped mode: seconds per training step
    interval_steps: int | None = None
    last_steps: int | None = None

    @classmethod
    def build(cls, work_s: float, interval_s: float | None, levels: tuple[CkptLevel, ...],
              *, persist_s: float = 0.0, restart_load_s: float = 0.0,
              step_s: float | None = None, steps: int | None = None) -> JobPlan:
        """Cut ``work_s`` (or ``steps`` of ``step_s``) into segments of ``interval_s``.

        ``interval_s=None`` or no levels: one segment, no checkpoint at all.
        In stepped mode the interval is rounded to a whole number of steps (at least 1).
        """
        if not levels or interval_s is None:
            interval_s = work_s
            levels = ()
        if step_s is not None:
            steps = steps if steps is not None else max(1, round(work_s / step_s))
            k = min(steps, max(1, round(interval_s / step_s)))
            n = -(-steps // k)
            last = steps - (n - 1) * k
            return cls(work_s=steps * step_s, interval_s=k * step_s, n_segments=n,
                       last_s=last * step_s, levels=levels, persist_s=persist_s,
                       restart_load_s=restart_load_s, step_s=step_s, interval_steps=k,
                       last_steps=last)
        interval_s = min(interval_s, work_s)
        full = math.floor(work_s / interval_s + 1e-9)
        rest = work_s - full * interval_s
        if rest <= 1e-9 * work_s:
            n, last_s = full, interval_s
        else:
            n, last_s = full + 1, rest
        return cls(work_s=work_s, interval_s=interval_s, n_segments=n, last_s=last_s,
                   levels=levels, persist_s=persist_s, restart_load_s=restart_load_s)

    @property
    def checkpoints(self) -> bool:
        return bool(self.levels)

    def segment_s(self, i: int) -> float:
        """Compute seconds of segment ``i`` (1-based)."""
        return self.last_s if i == self.n_segments else self.interval_s

    def segment_steps(self, i: int) -> int:
        """Training steps of segment ``i`` (stepped mode)."""
        steps = self.last_steps if i == self.n_segments else self.interval_steps
        if steps is None:
            raise ValueError("segment_steps needs a plan built in stepped mode (step_s)")
        return steps

    def steps_at(self, idx: int) -> int:
        """Training steps committed by checkpoint ``idx`` (stepped mode)."""
        if idx >= self.n_segments:
            return (self.n_segments - 1) * self.segment_steps(1) + self.segment_steps(
                self.n_segments)
        return idx * self.segment_steps(1)

    def work_at(self, idx: int) -> float:
        """Committed compute after checkpoint ``idx``."""
        return self.work_s if idx >= self.n_segments else idx * self.interval_s

    def level_of(self, idx: int) -> int:
        """Index into ``levels`` of the level checkpoint ``idx`` is written at."""
        top = len(self.levels) - 1
        if idx >= self.n_segments:
            return top
        for li in range(top, 0, -1):
            if idx % self.levels[li].every == 0:
                return li
        return 0

    def cost_of(self, idx: int) -> float:
        return self.levels[self.level_of(idx)].cost_s

    def load_of(self, idx: int) -> float:
        """Load time when restarting from checkpoint ``idx`` (0: from the beginning)."""
        if not self.levels:
            return self.restart_load_s
        if idx == 0:
            return self.levels[-1].load_s
        return self.levels[self.level_of(idx)].load_s

    def rollback(self, committed: int, survives: frozenset[str] | None) -> int:
        """Latest committed checkpoint index whose level survives a failure (0 = start)."""
        if survives is None or not self.levels:
            return committed
        if not any(level.name in survives for level in self.levels):
            return 0
        floor = 0                   # a checkpoint known to survive (0: the start)
        top = self.levels[-1]
        if top.name in survives:    # every multiple of the top level's ``every`` is top
            floor = committed if len(self.levels) == 1 or committed >= self.n_segments \
                else committed - committed % top.every
        i = committed
        while i > floor and self.levels[self.level_of(i)].name not in survives:
            i -= 1
        return i

    @property
    def stop_ckpt_s(self) -> float:
        """Cost of the checkpoint a planned stop writes: the top level, blocking and
        background parts together (0 without checkpoints: a planned stop then loses the
        job's progress)."""
        if not self.levels:
            return 0.0
        return self.levels[-1].cost_s + self.persist_s

    @property
    def top_level(self) -> str | None:
        return self.levels[-1].name if self.levels else None

    def level_counts(self) -> list[int]:
        """How many of the checkpoints 1 … n are written at each level, in closed form:
        checkpoint ``i`` < n goes to the highest level whose ``every`` divides it (level
        0 takes the rest) and the last one to the top level. Counted by
        inclusion–exclusion over the higher levels' ``every`` (a handful of levels), so
        a plan of 10¹⁵ segments answers at once."""
        n, levels = self.n_segments, self.levels
        counts = [0] * len(levels)
        if not levels:
            return counts
        below = n - 1                          # checkpoints before the final one
        taken = 0
        for li in range(len(levels) - 1, 0, -1):
            higher = [lv.every for lv in levels[li + 1:]]
            mine = 0
            for r in range(len(higher) + 1):
                for subset in combinations(higher, r):
                    mine += (-1) ** r * (below // math.lcm(levels[li].every, *subset))
            counts[li] = mine
            taken += mine
        counts[0] = below - taken
        counts[-1] += 1
        return counts

    def failure_free_s(self) -> float:
        """Wall time without failures: work plus every checkpoint (with async stalls),
        in closed form over the segments (see :meth:`level_counts`)."""
        if not self.levels:
            return self.work_s
        total = self.work_s + sum(count * level.cost_s for count, level
                                  in zip(self.level_counts(), self.levels, strict=True))
        if self.persist_s:
            n = self.n_segments
            stalls = max(0.0, self.persist_s - self.interval_s) * max(n - 2, 0)
            if n >= 2:
                stalls += max(0.0, self.persist_s - self.last_s)
            total += stalls + self.persist_s      # the last persist has no segment after it
        return total
