"""Named random streams: one ``SeedSequence`` per run, spawned per replication and purpose.

Every draw in a simulation comes from ``stream(seed, replication, purpose)``; the
step-by-step SimPy engine and the fast exact path ask for the same streams in the same
order, so they see the same failure times. There is no global RNG.
"""

from __future__ import annotations

import numpy as np

#: Fixed numbers for the stream purposes (part of the seed derivation: never renumber).
PURPOSES = {"failures": 1, "causes": 2, "nodes": 3, "bursts": 4, "lifecycle": 5,
            "repairs": 6, "diagnosis": 7, "selection": 8, "costs": 9, "classes": 10,
            "idle": 11}


def stream(seed: int, replication: int, purpose: str, index: int = 0) -> np.random.Generator:
    """The generator for ``purpose`` of ``replication`` under run seed ``seed``."""
    ss = np.random.SeedSequence(int(seed), spawn_key=(int(replication), PURPOSES[purpose],
                                                      int(index)))
    return np.random.Generator(np.random.PCG64(ss))
