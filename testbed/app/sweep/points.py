"""Sweep points: canonical hashes and deterministic seeds.

A point is one scenario (the base file with the grid's overrides applied) simulated
with ``replications`` replications. Its identity is the SHA-256 of a canonical JSON
text of the *validated* scenario (units already converted, so ``60min`` and ``1h``
are the same point), the replication count, the engine and the point seed.

Seeds: the point seed comes from one ``numpy.random.SeedSequence`` whose entropy is
the scenario's base seed and whose spawn key is the point's scenario hash, so a point
keeps its seed when the grid gains or loses other points or is reordered, and the
same scenario written two ways (``1h``, ``3600``) is the same point.
Replication ``r`` of a point uses the simulator's named streams of
``(point seed, r)``. With ``common=True`` every point uses the base seed itself
(common random numbers: points then differ only by their parameters, which makes
comparisons across a grid much less noisy, and a one-point sweep equals
``testbed simulate``).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

import numpy as np

from testbed.io.canonical import dumps
from testbed.streams import seed_sequence


def canonical_json(value: Any) -> str:
    """Sorted keys, no whitespace, floats as Python prints them: same data, same text."""
    return dumps(value)


def sha256_hex(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def scenario_hash(scenario) -> str:
    """Hash of a validated scenario's content (not its file name or line numbers)."""
    data = scenario.model_dump(mode="json", exclude={"source", "lines"})
    return sha256_hex(canonical_json(data))


def point_seed(base_seed: int, scenario_hash_hex: str, *, common: bool = False) -> int:
    """The point's seed (63 bits, fits an SQLite integer); see the module docstring."""
    if common:
        return int(base_seed)
    digest = bytes.fromhex(scenario_hash_hex)
    key = tuple(int.from_bytes(digest[i:i + 4], "big") for i in range(0, 16, 4))
    words = seed_sequence(base_seed, "sweep.point", *key).generate_state(2, np.uint32)
    return (int(words[0]) << 31) | (int(words[1]) >> 1)


@dataclass(frozen=True)
class Point:
    """One planned point of a sweep."""

    index: int
    overrides: dict[str, Any]
    scenario_hash: str
    seed: int
    replications: int
    engine: str

    @property
    def key(self) -> str:
        """The point's identity in the results store."""
        return sha256_hex(canonical_json({"scenario": self.scenario_hash, "seed": self.seed,
                                          "replications": self.replications,
                                          "engine": self.engine}))[:32]
