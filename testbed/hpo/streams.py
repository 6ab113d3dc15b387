"""Named, keyed random streams of an HPO run: row ``i`` of a purpose is the same
whatever order the rows are asked for in, so trial ``i`` samples the same
configuration, fails the same way and learns the same curve under every scheduler
(common random numbers), and the run is exactly reproducible for a seed.

Rows come in blocks of :data:`BLOCK` from ``SeedSequence(seed, spawn_key=(HPO,
purpose, block))``; there is no global RNG.
"""

from __future__ import annotations

import numpy as np

#: Root of the HPO spawn keys (distinct from :mod:`testbed.resilience.streams`).
HPO = 12
#: Fixed numbers for the purposes (part of the seed derivation: never renumber).
PURPOSES = {"sampler": 1, "failures": 2, "objective": 3, "tpe": 4, "trial_seed": 5}
#: Rows drawn at once (one SeedSequence per block keeps 100,000 trials cheap).
BLOCK = 4096


def generator(seed: int, purpose: str, *key: int) -> np.random.Generator:
    """A generator for ``purpose`` (and an optional extra key) under ``seed``."""
    ss = np.random.SeedSequence(int(seed), spawn_key=(HPO, PURPOSES[purpose], *map(int, key)))
    return np.random.Generator(np.random.PCG64(ss))


class KeyedUniforms:
    """Uniforms on [0, 1): ``row(i)`` has ``width`` values that depend on i only."""

    def __init__(self, seed: int, purpose: str, width: int) -> None:
        self.seed = int(seed)
        self.purpose = purpose
        self.width = int(width)
        self._blocks: dict[int, np.ndarray] = {}

    def _block(self, b: int) -> np.ndarray:
        block = self._blocks.get(b)
        if block is None:
            block = generator(self.seed, self.purpose, b).random((BLOCK, self.width))
            self._blocks[b] = block
        return block

    def row(self, i: int) -> np.ndarray:
        return self._block(i // BLOCK)[i % BLOCK]

    def rows(self, n: int) -> np.ndarray:
        """Rows 0 … n−1 as one array."""
        if n <= 0:
            return np.empty((0, self.width))
        return np.concatenate([self._block(b) for b in range((n - 1) // BLOCK + 1)])[:n]
