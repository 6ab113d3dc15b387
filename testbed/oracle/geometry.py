"""Shapes of a spatial split: the GPU grid, halo sizes and the rows-per-GPU limit.

They depend only on the model's shapes, the split layers and the part count, so they
are cached per model object.
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np

from testbed.model.ir import Layer, Model

#: Cached results by (model id, split mask bytes, parts, what); the model object is kept
#: beside the result so a recycled id never returns another model's geometry.
_CACHE: dict[tuple, tuple[Model, object]] = {}
_CACHE_LIMIT = 4096


def grid(parts: int, dims: int) -> tuple[int, ...]:
    """Near-balanced factorisation of ``parts`` over ``dims`` spatial dimensions."""
    if dims <= 1:
        return (parts,)
    factors = [1] * dims
    remaining = parts
    prime = 2
    primes = []
    while remaining > 1:
        while remaining % prime == 0:
            primes.append(prime)
            remaining //= prime
        prime += 1
    for f in sorted(primes, reverse=True):
        i = int(np.argmin(factors))
        factors[i] *= f
    return tuple(sorted(factors))


def _cached(model: Model, key: tuple, compute):
    full = (id(model), *key)
    hit = _CACHE.get(full)
    if hit is not None and hit[0] is model:
        return hit[1]
    value = compute()
    if len(_CACHE) > _CACHE_LIMIT:
        _CACHE.clear()
    _CACHE[full] = (model, value)
    return value


def _layer_factors(layer: Layer, parts: int) -> list[int]:
    """GPUs along each spatial dimension of ``layer``'s input (largest dims first)."""
    spatial = layer.x[1:]
    split = sorted(grid(parts, len(spatial)), reverse=True)
    order = sorted(range(len(spatial)), key=lambda d: -spatial[d])
    factors = [1] * len(spatial)
    for dim, g in zip(order, split, strict=False):
        factors[dim] = g
    return factors


def _layer_halo(layer: Layer, parts: int, face: Literal["full", "paradl"]) -> tuple[int, float]:
    kernel = layer.kernel
    if not kernel or max(kernel) <= 1 or len(layer.x) < 2:
        return 0, 0.0
    factors = _layer_factors(layer, parts)
    local = [math.ceil(s / f) for s, f in zip(layer.x[1:], factors, strict=True)]
    exchanges, elems = 0, 0.0
    for d, f in enumerate(factors):
        if f <= 1:
            continue
        halo = kernel[min(d, len(kernel) - 1)] // 2
        if face == "paradl":
            # ParaDL's halo: width x halo rows only (no channels, no height)
            elems += halo * (local[-1] if len(local) > 1 else 1)
        else:
            elems += layer.in_channels * halo * (math.prod(local) // local[d])
        exchanges += 1
    return exchanges, elems


def halo_geometry(model: Model, split: np.ndarray, parts: int,
                  face: Literal["full", "paradl"]) -> tuple[int, float]:
    """(number of per-dimension exchanges, halo elements per sample per neighbour summed
    over them) of the split layers with a kernel wider than 1."""
    def compute() -> tuple[int, float]:
        exchanges, elems = 0, 0.0
        for i in np.flatnonzero(split):
            n, e = _layer_halo(model.layers[i], parts, face)
            exchanges += n
            elems += e
        return exchanges, elems
    return _cached(model, (split.tobytes(), parts, face), compute)


def spatial_limit(model: Model, split: np.ndarray, parts: int) -> str | None:
    """Why a spatial split into ``parts`` cannot run (a split dimension with fewer rows
    than GPUs), or None."""
    def compute() -> str | None:
        for i in np.flatnonzero(split):
            layer = model.layers[i]
            spatial = layer.y[1:]
            if not spatial:
                continue
            need = sorted(grid(parts, len(spatial)), reverse=True)
            for g, s in zip(need, sorted(spatial, reverse=True), strict=False):
                if g > s:
                    return (f"spatial split into {parts} parts needs {g} rows but layer "
                            f"{layer.name} has {'x'.join(map(str, spatial))}")
        return None
    return _cached(model, (split.tobytes(), parts, "limit"), compute)
