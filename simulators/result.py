"""The outcome of one simulated replication, where the wall time went."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RepResult:
    """One replication: wall time and its breakdown, failures and checkpoints.

    ``useful_s`` is the job's failure-free compute, ``checkpoint_s`` the time spent on
    checkpoints that committed (blocking part, stalls behind a background persist, and
    the final persist), ``restart_s`` detection + requeue + load, ``waiting_s`` waiting
    for repaired or spare nodes and for maintenance to end, and ``lost_s`` the rest:
    compute rolled back and checkpoints cut short. They sum to ``wall_s``.
    """

    wall_s: float
    useful_s: float
    checkpoint_s: float
    lost_s: float
    restart_s: float
    waiting_s: float
    failures: int
    checkpoints: int
    by_cause: tuple[int, ...]

    @property
    def ettr(self) -> float:
        """Effective training time ratio: useful compute / wall time."""
        return self.useful_s / self.wall_s


def make_result(wall_s: float, work_s: float, ckpt_s: float, restart_s: float, wait_s: float,
                failures: int, checkpoints: int, by_cause: list[int]) -> RepResult:
    """Close the books: lost time is what the other categories do not explain."""
    lost = wall_s - work_s - ckpt_s - restart_s - wait_s
    if lost < 0 and lost > -1e-9 * max(wall_s, 1.0):
        lost = 0.0
    return RepResult(wall_s=wall_s, useful_s=work_s, checkpoint_s=ckpt_s, lost_s=lost,
                     restart_s=restart_s, waiting_s=wait_s, failures=failures,
                     checkpoints=checkpoints, by_cause=tuple(by_cause))
