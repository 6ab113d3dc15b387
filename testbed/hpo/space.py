"""Search spaces: grid points in row-major order and seeded random configurations.

A space maps each hyperparameter to a list of values or to a :class:`Range`. The grid
enumerates lists in row-major order of the keys as written (the last key varies
fastest), so trial ``i`` of the issue's 27-trial grid has epochs 20, 50, 100, 20, …
Random search draws every key from one keyed stream (:mod:`testbed.streams`):
trial ``i``'s configuration does not depend on how many trials there are.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from testbed.scenario.hpo import Range, grid_point
from testbed.streams import KeyedUniforms


def _plain(value: Any) -> Any:
    return value.item() if isinstance(value, np.generic) else value


__all__ = ["from_unit", "grid", "grid_point", "random_configs"]


def grid(space: Mapping[str, Sequence], n: int | None = None) -> list[dict[str, Any]]:
    """The first ``n`` (default all) grid points, in order."""
    keys = list(space)
    points: Iterator[tuple[Any, ...]] = itertools.product(*(space[k] for k in keys))
    if n is not None:
        points = itertools.islice(points, n)
    return [dict(zip(keys, p, strict=True)) for p in points]


def from_unit(spec: Sequence | Range, u: float) -> Any:
    """The value of one key for a uniform draw ``u`` in [0, 1)."""
    if not isinstance(spec, Range):
        return _plain(spec[min(int(u * len(spec)), len(spec) - 1)])
    if spec.type == "int":
        lo, hi = math.ceil(spec.low), math.floor(spec.high)
        if spec.log:
            x = math.exp(math.log(lo) + u * (math.log(hi + 1) - math.log(lo)))
            return int(min(max(math.floor(x), lo), hi))
        return int(min(lo + math.floor(u * (hi - lo + 1)), hi))
    if spec.log:
        return float(math.exp(math.log(spec.low) + u * (math.log(spec.high) - math.log(spec.low))))
    return float(spec.low + u * (spec.high - spec.low))


def random_configs(space: Mapping[str, Sequence | Range], n: int, seed: int
                   ) -> list[dict[str, Any]]:
    """``n`` configurations drawn from the keyed ``sampler`` stream of ``seed``."""
    keys = list(space)
    u = KeyedUniforms(seed, "hpo.sampler", len(keys)).rows(n)
    return [{k: from_unit(space[k], float(u[i, j])) for j, k in enumerate(keys)}
            for i in range(n)]
