"""Where the epochs and checkpoints of one attempt fall in time (pure arithmetic).

An attempt trains a trial from epoch ``a`` (its last checkpoint, 0 for a fresh start)
to epoch ``b``. It costs

    startup_s + (restore_s if a > 0) + Σ_{e=a+1..b} epoch_s(e) + |K| · checkpoint_s

where K, the checkpoints it writes, are the epochs ``e`` in (a, b] with
``e % every == 0`` (``checkpoint_every_epochs``) below the trial's full budget, plus
``b`` itself when the attempt ends in a pause (an ASHA/Hyperband rung below the top),
which always checkpoints so that a promotion can resume. Nothing is written after the
final epoch (there is nothing left to resume).

A failure ``τ`` seconds into the attempt keeps the newest checkpoint *committed
before* τ; a failure at the instant epoch ``e`` ends strikes before ``e``'s checkpoint
is committed. The time lost is τ minus the time spent on the epochs (and checkpoints)
that the kept checkpoint preserves.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class TrialCost:
    """Cost of one trial: seconds per epoch (one value, or one per epoch) and overheads."""

    epoch_s: float | tuple[float, ...]
    startup_s: float = 0.0
    restore_s: float = 0.0
    checkpoint_s: float = 0.0
    cumulative_s: tuple[float, ...] | None = None   # prefix sums of a per-epoch epoch_s

    @classmethod
    def make(cls, epoch_s: float | tuple[float, ...], startup_s: float = 0.0,
             restore_s: float = 0.0, checkpoint_s: float = 0.0) -> TrialCost:
        if isinstance(epoch_s, tuple):
            cum = [0.0]
            for x in epoch_s:
                cum.append(cum[-1] + x)
            return cls(epoch_s, startup_s, restore_s, checkpoint_s, tuple(cum))
        return cls(float(epoch_s), startup_s, restore_s, checkpoint_s, None)

    def epoch_time(self, e: int) -> float:
        """Seconds of epoch ``e`` (1-based); past a measured list, its last value."""
        per = self.epoch_s
        if not isinstance(per, tuple):
            return per
        return per[min(e, len(per)) - 1]

    def span_s(self, a: int, b: int) -> float:
        """Seconds of epochs a+1 … b."""
        if b <= a:
            return 0.0
        per = self.epoch_s
        if not isinstance(per, tuple):
            return (b - a) * per
        cum = self.cumulative_s
        assert cum is not None          # make() keeps the prefix sums of a per-epoch cost
        n = len(cum) - 1
        if b <= n:
            return cum[b] - cum[a]
        head = cum[n] - cum[min(a, n)]
        return head + (b - max(a, n)) * per[-1]


class Attempt:
    """The timeline of one attempt from epoch ``a`` to ``b`` of a trial of ``top`` epochs."""

    __slots__ = ("cost", "a", "b", "top", "every", "startup_s", "lead_s", "duration_s")

    def __init__(self, cost: TrialCost, a: int, b: int, top: int, every: int | None,
                 startup_s: float | None = None) -> None:
        self.cost = cost
        self.a, self.b, self.top, self.every = a, b, top, every
        self.startup_s = cost.startup_s if startup_s is None else startup_s
        self.lead_s = self.startup_s + (cost.restore_s if a > 0 else 0.0)
        self.duration_s = (self.lead_s + cost.span_s(a, b)
                           + self.checkpoints_upto(b) * cost.checkpoint_s)

    def checkpoints_upto(self, y: int) -> int:
        """How many of this attempt's checkpoints are at epochs <= y."""
        a, b, every = self.a, self.b, self.every
        y = min(y, b)
        if y <= a:
            return 0
        count = 0
        if every:
            last = min(y, self.top - 1)
            if last > a:
                count = last // every - a // every
        if b < self.top and y >= b and not (every and b % every == 0):
            count += 1       # the pause checkpoint
        return count

    def checkpoint_epochs(self) -> list[int]:
        out = []
        if self.every:
            first = (self.a // self.every + 1) * self.every
            out = list(range(first, min(self.b, self.top - 1) + 1, self.every))
        if self.b < self.top and (not out or out[-1] != self.b):
            out.append(self.b)
        return out

    def offset_at_progress(self, x: float) -> float:
        """Seconds into the attempt when training reaches ``x`` epochs (a < x <= b)."""
        e = math.ceil(x)
        done = e - 1
        base = (self.lead_s + self.cost.span_s(self.a, done)
                + self.checkpoints_upto(done) * self.cost.checkpoint_s)
        return base + (x - done) * self.cost.epoch_time(e)

    def commit_offset(self, c: int) -> float:
        return self.offset_at_progress(c) + self.cost.checkpoint_s

    def progress_at(self, tau: float) -> float:
        """Epochs trained by ``tau`` seconds into the attempt (fractional; a linear walk,
        used only when a failure strikes)."""
        t = self.lead_s
        if tau <= t:
            return float(self.a)
        ckpts = set(self.checkpoint_epochs())
        for e in range(self.a + 1, self.b + 1):
            length = self.cost.epoch_time(e)
            if tau < t + length:
                return e - 1 + (tau - t) / length
            t += length + (self.cost.checkpoint_s if e in ckpts else 0.0)
            if tau < t:
                return float(e)
        return float(self.b)

    def resume_epoch(self, tau: float) -> int:
        """The newest checkpoint committed strictly before ``tau`` (else ``a``)."""
        ckpts = self.checkpoint_epochs()
        commits = [self.commit_offset(c) for c in ckpts]
        i = bisect.bisect_left(commits, tau)
        return ckpts[i - 1] if i else self.a

    def kept_s(self, resume: int) -> float:
        """Seconds of this attempt's work preserved by the checkpoint at ``resume``."""
        if resume <= self.a:
            return 0.0
        return (self.cost.span_s(self.a, resume)
                + self.checkpoints_upto(resume) * self.cost.checkpoint_s)
