"""The one registry of named random streams: every draw of every run comes from here.

A run has one seed. Each purpose (failure times of a replication, an HPO trial's
configuration, the batch order of a real training run, …) gets its own
``numpy.random.SeedSequence(seed, spawn_key=(PURPOSES[purpose], *key))``. The purpose's
number comes first in every spawn key and numbers are unique across the whole
registry, so no two purposes can ever share a stream, whatever their keys (the
simulator's replication 12 and the HPO sampler used to collide when each package kept
its own table). There is no global RNG.

:func:`stream` is the simulator's form (one generator per replication, purpose and
index); the step-by-step SimPy engine and the fast exact path ask for the same streams
in the same order, so they see the same failure times. :class:`KeyedUniforms` gives
rows that depend on their index only (trial ``i`` samples the same configuration under
every scheduler: common random numbers).
"""

from __future__ import annotations

import numpy as np

#: Fixed numbers of the purposes (part of every seed derivation: never renumber, never
#: reuse). Grouped by who draws: 1–19 a simulated replication, 20–29 an HPO run, 30–49
#: real runs, 50– derived seeds.
PURPOSES: dict[str, int] = {
    # a simulated job, per replication
    "failures": 1, "causes": 2, "nodes": 3, "bursts": 4, "lifecycle": 5, "repairs": 6,
    "diagnosis": 7, "selection": 8, "costs": 9, "classes": 10, "idle": 11,
    "regeneration": 12,
    # an HPO run (simulated or real)
    "hpo.sampler": 21, "hpo.failures": 22, "hpo.objective": 23, "hpo.tpe": 24,
    "hpo.trial_seed": 25, "hpo.bracket": 26,
    # real training runs (real_runs/)
    "run.data": 31, "run.shuffle": 32, "run.init": 33, "run.python": 34,
    "run.numpy_global": 35, "run.framework": 36, "run.kills": 37, "run.damage": 38,
    "run.ckpt_payload": 39,
    "precision.weights": 41, "precision.batches": 42, "precision.rounding_train": 43,
    "precision.rounding_test": 44, "precision.split": 45, "trial.split": 46,
    "trial.epoch_order": 47, "precision.bootstrap": 48, "precision.permutation": 49,
    # seeds derived for other runs
    "sweep.point": 51,
}
#: Rows drawn at once by :class:`KeyedUniforms` (one SeedSequence per block).
BLOCK = 4096


def seed_sequence(seed: int, purpose: str, *key: int) -> np.random.SeedSequence:
    """The seed sequence of ``purpose`` (and its key) under run seed ``seed``."""
    return np.random.SeedSequence(int(seed), spawn_key=(PURPOSES[purpose], *map(int, key)))


def generator(seed: int, purpose: str, *key: int) -> np.random.Generator:
    """A generator for ``purpose`` (and its key) under run seed ``seed``."""
    return np.random.Generator(np.random.PCG64(seed_sequence(seed, purpose, *key)))


def stream(seed: int, replication: int, purpose: str, index: int = 0) -> np.random.Generator:
    """The generator for ``purpose`` of a simulated ``replication`` under run seed ``seed``."""
    return generator(seed, purpose, replication, index)


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
