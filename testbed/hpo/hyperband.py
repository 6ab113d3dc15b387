"""Hyperband brackets and synchronous successive halving, pure decision logic.

Li et al., "Hyperband: A Novel Bandit-Based Approach to Hyperparameter Optimization",
JMLR 18 (2018), Algorithm 1: with R = max/min epochs and η the reduction factor,
s_max = ⌊log_η R⌋ and bracket s (s = s_max … 0) starts n = ⌈(s_max+1)/(s+1) · η^s⌉
trials at r = R·η^(−s); rung i runs ⌊n·η^(−i)⌋ trials for r·η^i and keeps the best
1/η. For R = 81, η = 3 the brackets are (81 trials at 1 epoch, 34 at 3, 15 at 9, 8 at
27, 5 at 81) — the paper's Table 1.

Brackets run synchronously inside (a rung is ranked when all its trials are done)
and side by side across: a free worker takes the next job of the oldest bracket that
has one, and the next bracket opens when every open one is waiting for results, so
workers do not idle while a rung waits for its stragglers.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

from testbed.scenario.hpo import Bracket, brackets, trials_per_iteration


class _Open:
    """A running bracket: its current rung, jobs not yet handed out, results."""

    def __init__(self, bracket: Bracket, size: int) -> None:
        self.bracket = bracket
        self.rung = 0
        self.size = size                     # trials in the current rung
        self.new = size                      # rung-0 trials still to create
        self.pending: deque[tuple[int, int, int]] = deque()
        self.outstanding = size
        self.results: list[tuple[float, int]] = []
        self.members: list[int] = []


class Hyperband:
    """Synchronous Hyperband over iterations of brackets, up to ``n_trials`` trials."""

    def __init__(self, min_epochs: int, max_epochs: int, eta: int, n_trials: int | None,
                 mode: str = "min") -> None:
        self.brackets = brackets(min_epochs, max_epochs, eta)
        self.eta = eta
        self.max_epochs = max_epochs
        self.sign = 1.0 if mode == "min" else -1.0
        self.n_trials = n_trials if n_trials is not None else trials_per_iteration(self.brackets)
        self.created = 0
        self.opened = 0                      # brackets opened so far (over iterations)
        self.open: list[_Open] = []
        self.where: dict[int, _Open] = {}
        self.closed = False

    def _open_next(self) -> _Open | None:
        left = self.n_trials - self.created - sum(b.new for b in self.open)
        if self.closed or left <= 0:
            return None
        b = self.brackets[self.opened % len(self.brackets)]
        self.opened += 1
        ob = _Open(b, min(b.n, left))
        self.open.append(ob)
        return ob

    def next_job(self, new_trial: Callable[[], int | None]) -> tuple[int, int, int] | None:
        """(trial, from_epoch, to_epoch) of the next job, or None (wait for results)."""
        while True:
            for ob in self.open:
                if ob.pending:
                    return ob.pending.popleft()
                if ob.new and not self.closed:
                    trial = new_trial()
                    if trial is None:
                        self.closed = True
                        break
                    ob.new -= 1
                    self.created += 1
                    ob.members.append(trial)
                    self.where[trial] = ob
                    return trial, 0, ob.bracket.epochs[0]
            if self._open_next() is None:
                return None

    def close(self) -> None:
        """No new trials from now on (cancel_successors)."""
        self.closed = True
        for ob in self.open:
            ob.outstanding -= ob.new
            ob.size -= ob.new
            ob.new = 0

    def record(self, trial: int, epoch: int, value: float | None) -> tuple[bool, list[int]]:
        """A rung job ended (value None: the trial failed). Returns (the trial is
        complete, trials stopped because their rung was ranked)."""
        ob = self.where[trial]
        if value is not None:
            ob.results.append((self.sign * value, trial))
        ob.outstanding -= 1
        complete = epoch == ob.bracket.epochs[-1]
        if ob.outstanding > 0:
            return complete, []
        return complete, self._rank(ob)

    def _rank(self, ob: _Open) -> list[int]:
        """Rung complete: promote the best ⌊size/η⌋, stop the rest."""
        ranked = sorted(ob.results)
        epochs = ob.bracket.epochs
        if ob.rung == len(epochs) - 1:
            self.open.remove(ob)
            return []
        keep = ob.size // self.eta
        promoted = [t for _, t in ranked[:keep]]
        stopped = [t for _, t in ranked[keep:]]
        ob.rung += 1
        ob.size = len(promoted)
        ob.outstanding = len(promoted)
        ob.results = []
        for t in promoted:
            ob.pending.append((t, epochs[ob.rung - 1], epochs[ob.rung]))
        if not promoted:
            self.open.remove(ob)
        return stopped
