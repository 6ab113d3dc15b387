"""Stopping ASHA and asynchronous Hyperband with stopping rungs (``promotion: stop``).

Promotion ASHA (:mod:`testbed.hpo.asha`, ``promotion: pause``; Li et al., MLSys 2020,
Algorithm 2) *pauses* every trial at each rung and later *promotes* the best to the
next one. Syne Tune (``HyperbandScheduler(type="stopping")``) and Ray Tune
(``ASHAScheduler`` / ``AsyncHyperBandScheduler``) run by default the *stopping*
variant, implemented here:

* every trial starts with the full budget (``max_epochs``) and keeps its worker;
* when it reaches a rung level r_k < max it reports its value there, and it goes on
  unless the value is worse than the 1/η quantile of the values other trials reported
  at that rung before it (Ray: ``cur_rew < nanpercentile(recorded, (1 − 1/η)·100)`` in
  its maximising sign; Syne Tune's ``StoppingRungSystem`` the same cutoff); the first
  trial at a rung always goes on, and a trial is judged once per rung (a retried trial
  passes the rungs it has already been judged at);
* a stopped trial is never resumed; no pause checkpoint is written at a rung.

The quantile is numpy's default (linear interpolation between order statistics at
position q·(n − 1)), kept in a sorted list per rung so that each decision is
O(log n) plus an insertion.

Hyperband with ``promotion: stop`` is asynchronous Hyperband (Li et al. 2020, §3.2;
Syne Tune's ``brackets > 1``; Ray's ``AsyncHyperBandScheduler(brackets=…)``): the
brackets of one Hyperband iteration (:func:`testbed.scenario.hpo.brackets`), each a
stopping ASHA whose lowest rung is its bracket's first resource; a new trial joins a
bracket drawn from its own seeded stream (``hpo.bracket``) with probability
proportional to the trials synchronous Hyperband gives that bracket (Syne Tune: "a
distribution inspired by the synchronous Hyperband case").
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable

from testbed.hpo.asha import rung_levels
from testbed.scenario.hpo import brackets
from testbed.streams import KeyedUniforms

Job = tuple[int, int, int]


def quantile(sorted_values: list[float], q: float) -> float:
    """The ``q`` quantile of ascending ``sorted_values`` (numpy's linear method)."""
    pos = q * (len(sorted_values) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    frac = pos - lo
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * frac


class StopRung:
    """Values reported at one rung (lower key is better) and who reported them."""

    __slots__ = ("eta", "values", "judged")

    def __init__(self, eta: int) -> None:
        self.eta = eta
        self.values: list[float] = []
        self.judged: set[int] = set()

    def decide(self, trial: int, key: float | None) -> bool:
        """Whether ``trial`` goes on past this rung (and record its value)."""
        if trial in self.judged:
            return True
        self.judged.add(trial)
        if key is None:              # nothing reported: Ray and Syne Tune let it go on
            return True
        goes_on = not self.values or key <= quantile(self.values, 1.0 / self.eta)
        bisect.insort(self.values, key)
        return goes_on


class StoppingScheduler:
    """Stopping ASHA (one bracket) or asynchronous Hyperband (``hyperband=True``)."""

    static = False
    stopping = True

    def __init__(self, min_epochs: int, max_epochs: int, eta: int, mode: str, *,
                 hyperband: bool = False, seed: int = 0) -> None:
        self.max_epochs = max_epochs
        self.sign = 1.0 if mode == "min" else -1.0
        if hyperband:
            levels = [b.epochs[:-1] for b in brackets(min_epochs, max_epochs, eta)]
            weights = [float(b.n) for b in brackets(min_epochs, max_epochs, eta)]
        else:
            levels = [rung_levels(min_epochs, max_epochs, eta)[:-1]]
            weights = [1.0]
        self.levels = [tuple(x) for x in levels]
        self.rungs = [{e: StopRung(eta) for e in lv} for lv in self.levels]
        total = sum(weights)
        acc, self.cum = 0.0, []
        for w in weights:
            acc += w / total
            self.cum.append(acc)
        self.cum[-1] = 1.0
        self.draws = KeyedUniforms(seed, "hpo.bracket", 1) if len(levels) > 1 else None
        self.bracket_of: dict[int, int] = {}
        self.closed = False

    def bracket(self, trial: int) -> int:
        """The bracket of ``trial`` (drawn once, from the trial's own uniform)."""
        b = self.bracket_of.get(trial)
        if b is None:
            b = 0 if self.draws is None else bisect.bisect_right(
                self.cum, float(self.draws.row(trial)[0]))
            b = min(b, len(self.levels) - 1)
            self.bracket_of[trial] = b
        return b

    def milestones(self, trial: int) -> tuple[int, ...]:
        """The rung levels (below the full budget) at which ``trial`` is judged."""
        return self.levels[self.bracket(trial)]

    def decide(self, trial: int, epoch: int, value: float | None) -> bool:
        """``trial`` reported ``value`` at rung ``epoch``: does it go on?"""
        rung = self.rungs[self.bracket(trial)][epoch]
        return rung.decide(trial, None if value is None else self.sign * value)

    def next_job(self, new_trial: Callable[[], int | None]) -> Job | None:
        """A new trial with the full budget (stopping ASHA never promotes)."""
        if self.closed:
            return None
        trial = new_trial()
        if trial is None:
            self.closed = True
            return None
        self.bracket(trial)
        return trial, 0, self.max_epochs

    def record(self, trial: int, epoch: int, value: float | None) -> tuple[bool, list[int]]:
        return True, []

    def dead(self, trial: int) -> list[int]:
        return []

    def close(self) -> None:
        self.closed = True
