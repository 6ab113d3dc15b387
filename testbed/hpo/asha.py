"""Asynchronous successive halving (ASHA): rungs and promotions, pure decision logic.

Li et al., "A System for Massively Parallel Hyperparameter Tuning", MLSys 2020,
Algorithm 2: rungs at ``r·η^k`` epochs (``r`` = min_epochs, ``η`` = reduction
factor) up to the full budget R (the top rung is R itself when R is not r·η^k).
Whenever a worker is free, ``get_job`` looks from the highest rung down for a trial
in the top ⌊n_k/η⌋ of rung k that has not been promoted yet, and promotes the best
such trial to rung k+1; when there is none it starts a new trial at rung 0.

Each rung keeps its top ⌊n/η⌋ results in one heap and the rest in another, and the
unpromoted members of the top set in a third, so recording a result and finding a
promotion are O(log n) — no rung is sorted again on every decision (a sort per
decision makes 10,000 trials take minutes).
"""

from __future__ import annotations

import heapq


def rung_levels(min_epochs: int, max_epochs: int, eta: int) -> tuple[int, ...]:
    """Epochs of each rung: min·η^k below max, then max."""
    levels = []
    r = min_epochs
    while r < max_epochs:
        levels.append(r)
        r *= eta
    levels.append(max_epochs)
    return tuple(levels)


class Rung:
    """Results of one rung; lower ``key`` is better (ties: lower trial index)."""

    __slots__ = ("eta", "n", "_top", "_rest", "_cand", "in_top", "promoted")

    def __init__(self, eta: int) -> None:
        self.eta = eta
        self.n = 0
        self._top: list[tuple[float, int]] = []    # (-key, -trial): worst of the top first
        self._rest: list[tuple[float, int]] = []   # (key, trial): best of the rest first
        self._cand: list[tuple[float, int]] = []   # unpromoted top members (lazy)
        self.in_top: set[int] = set()
        self.promoted: set[int] = set()

    def add(self, key: float, trial: int) -> None:
        """Record ``trial``'s result at this rung."""
        self.n += 1
        if self._top and (key, trial) < (-self._top[0][0], -self._top[0][1]):
            heapq.heappush(self._top, (-key, -trial))
            self._enter(key, trial)
        else:
            heapq.heappush(self._rest, (key, trial))
        want = self.n // self.eta
        while len(self._top) > want:
            k, t = heapq.heappop(self._top)
            self.in_top.discard(-t)
            heapq.heappush(self._rest, (-k, -t))
        while len(self._top) < want and self._rest:
            k, t = heapq.heappop(self._rest)
            heapq.heappush(self._top, (-k, -t))
            self._enter(k, t)

    def _enter(self, key: float, trial: int) -> None:
        self.in_top.add(trial)
        if trial not in self.promoted:
            heapq.heappush(self._cand, (key, trial))

    def best_promotable(self) -> int | None:
        """The best trial in the top ⌊n/η⌋ not yet promoted, or None."""
        cand = self._cand
        while cand:
            _, trial = cand[0]
            if trial in self.in_top and trial not in self.promoted:
                return trial
            heapq.heappop(cand)
        return None

    def promote(self, trial: int) -> None:
        self.promoted.add(trial)


class Asha:
    """ASHA's bookkeeping: rung results and the next job (promotion or new trial)."""

    def __init__(self, levels: tuple[int, ...], eta: int, mode: str = "min") -> None:
        self.levels = levels
        self.eta = eta
        self.sign = 1.0 if mode == "min" else -1.0
        self.rungs = [Rung(eta) for _ in levels[:-1]]
        self.rung_of = {e: k for k, e in enumerate(levels)}

    def record(self, trial: int, epoch: int, value: float | None) -> bool:
        """A trial finished rung ``epoch`` with ``value``; True when it is complete
        (reached the top rung). A trial without a value is never promoted."""
        k = self.rung_of[epoch]
        if k == len(self.levels) - 1:
            return True
        if value is not None:
            self.rungs[k].add(self.sign * value, trial)
        return False

    def promotion(self) -> tuple[int, int, int] | None:
        """(trial, from_epoch, to_epoch) of the promotion ASHA makes now, if any."""
        for k in range(len(self.rungs) - 1, -1, -1):
            trial = self.rungs[k].best_promotable()
            if trial is not None:
                self.rungs[k].promote(trial)
                return trial, self.levels[k], self.levels[k + 1]
        return None
