"""Communication of one strategy: total seconds plus one record per kind of traffic."""

from __future__ import annotations

from dataclasses import dataclass

from testbed.oracle.collectives import CollectiveCost


@dataclass(frozen=True)
class Traffic:
    """One kind of traffic in an iteration (``count`` collectives of one phase)."""

    phase: str
    time_s: float
    algorithm: str
    tier: str
    count: int
    protocol: str = "Simple"

    def to_dict(self) -> dict:
        return {"phase": self.phase, "time_s": self.time_s, "algorithm": self.algorithm,
                "protocol": self.protocol, "tier": self.tier, "count": self.count}


@dataclass(frozen=True)
class Comm:
    """Seconds of communication and the traffic records behind them (in order)."""

    time_s: float = 0.0
    records: tuple[Traffic, ...] = ()

    def __add__(self, other: Comm) -> Comm:
        return Comm(self.time_s + other.time_s, self.records + other.records)


NO_COMM = Comm()


def collective(phase: str, cost: CollectiveCost, count: int = 1) -> Comm:
    """``count`` identical collectives of one phase (no record when they cost nothing)."""
    t = cost.time_s * count
    if t <= 0:
        return Comm(t)
    return Comm(t, (Traffic(phase, t, cost.algorithm, cost.tier, count, cost.protocol),))
