"""The schedulers behind one small protocol (:class:`Scheduler`) that the controller drives.

* ``fifo`` — every trial queued at the start in submission order (PyCOMPSs' FIFO);
* ``longest_first`` — the same trials, longest expected run first (LPT list
  scheduling; ties in submission order);
* ``asha`` — promotion ASHA (:class:`~testbed.hpo.asha.Asha`, ``promotion: pause``): a
  free worker promotes or starts a trial; or stopping ASHA (``promotion: stop``,
  :mod:`testbed.hpo.stopping`), as Syne Tune and Ray Tune run it;
* ``hyperband`` — synchronous Hyperband (:class:`~testbed.hpo.hyperband.Hyperband`,
  ``pause``) or asynchronous Hyperband with stopping rungs (``stop``).

A scheduler hands out jobs ``(trial, from_epoch, to_epoch)``; the controller places
them. ``static`` schedulers give all their jobs up front (so the controller can
back-fill trials of other shapes); dynamic ones are asked one job at a time.
``stopping`` schedulers also judge a running trial at its ``milestones`` (``decide``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

from testbed.hpo.asha import Asha, rung_levels
from testbed.hpo.hyperband import Hyperband

Job = tuple[int, int, int]


class Scheduler(Protocol):
    """What the controller asks of a scheduler (see the module docstring)."""

    static: bool
    stopping: bool

    def next_job(self, new_trial: Callable[[], int | None]) -> Job | None: ...

    def record(self, trial: int, epoch: int, value: float | None
               ) -> tuple[bool, list[int]]: ...

    def dead(self, trial: int) -> list[int]: ...

    def close(self) -> None: ...

    def milestones(self, trial: int) -> tuple[int, ...]: ...

    def decide(self, trial: int, epoch: int, value: float | None) -> bool: ...


class _NoMilestones:
    """Schedulers that never judge a running trial (every job runs to its target)."""

    stopping = False

    def milestones(self, trial: int) -> tuple[int, ...]:
        return ()

    def decide(self, trial: int, epoch: int, value: float | None) -> bool:
        return True


class Static(_NoMilestones):
    """fifo / longest_first: a fixed list of full-budget jobs."""

    static = True

    def __init__(self, jobs: Sequence[Job]) -> None:
        self.jobs = list(jobs)

    def next_job(self, new_trial: Callable[[], int | None]) -> Job | None:
        return None

    def record(self, trial: int, epoch: int, value: float | None) -> tuple[bool, list[int]]:
        return True, []

    def dead(self, trial: int) -> list[int]:
        return []

    def close(self) -> None:
        pass


class AshaScheduler(_NoMilestones):
    """ASHA: promote if possible, else start a new trial at the lowest rung."""

    static = False

    def __init__(self, min_epochs: int, max_epochs: int, eta: int, mode: str) -> None:
        self.asha = Asha(rung_levels(min_epochs, max_epochs, eta), eta, mode)
        self.closed = False

    def next_job(self, new_trial: Callable[[], int | None]) -> Job | None:
        job = self.asha.promotion()
        if job is not None:
            return job
        if self.closed:
            return None
        trial = new_trial()
        if trial is None:
            self.closed = True
            return None
        return trial, 0, self.asha.levels[0]

    def record(self, trial: int, epoch: int, value: float | None) -> tuple[bool, list[int]]:
        return self.asha.record(trial, epoch, value), []

    def dead(self, trial: int) -> list[int]:
        return []

    def close(self) -> None:
        self.closed = True


class HyperbandScheduler(_NoMilestones):
    """Synchronous Hyperband (brackets side by side)."""

    static = False

    def __init__(self, min_epochs: int, max_epochs: int, eta: int, n_trials: int | None,
                 mode: str) -> None:
        self.hb = Hyperband(min_epochs, max_epochs, eta, n_trials, mode)

    def next_job(self, new_trial: Callable[[], int | None]) -> Job | None:
        return self.hb.next_job(new_trial)

    def record(self, trial: int, epoch: int, value: float | None) -> tuple[bool, list[int]]:
        return self.hb.record(trial, epoch, value)

    def dead(self, trial: int) -> list[int]:
        if trial not in self.hb.where:
            return []
        return self.hb.record(trial, -1, None)[1]

    def close(self) -> None:
        self.hb.close()
