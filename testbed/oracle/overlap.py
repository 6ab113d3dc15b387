"""Gradient buckets all-reduced while backward runs (issue 18).

PyTorch DDP (Li et al., "PyTorch Distributed", VLDB 2020, §3.2.3 and §4) and Horovod
pack gradients into buckets in the reverse order of the layers — the order backward
produces them — and launch a bucket's all-reduce as soon as its last gradient is ready;
the all-reduces run one after another on the communication stream. DDP's buckets hold
``bucket_cap_mb = 25`` MB, the first one ``1`` MB (``_DEFAULT_FIRST_BUCKET_BYTES``) so
that communication starts early. So, with ``ready_k`` the time backward produces the
last gradient of bucket ``k`` and ``t_k`` its all-reduce:

    start_k = max(ready_k, end_{k−1}),   end_k = start_k + t_k

and what the step waits for after backward ends is ``max(0, end_last − backward_s)``:
the last bucket (the first layers' gradients, ready only when backward is done), and
every bucket whose all-reduce is slower than the backward it overlaps (the slowest
tier sets ``t_k``). :func:`bucketed` computes it from per-layer backward times — the
per-layer model's (:mod:`testbed.oracle.kernels`), or each layer's share of the
backward pass on profiles without it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

#: 10^6 bytes, the unit of ``bucket_MB`` (DDP's ``bucket_cap_mb`` is MiB-free "MB").
MB = 1e6


@dataclass(frozen=True)
class Buckets:
    """The gradient all-reduce of one step as buckets overlapped with backward."""

    sizes_bytes: tuple[float, ...]
    times_s: tuple[float, ...]
    ready_s: tuple[float, ...]
    backward_s: float
    exposed_s: float

    @property
    def total_s(self) -> float:
        return float(sum(self.times_s))


def bucket_layers(grad_bytes: np.ndarray, bucket_bytes: float, first_bytes: float
                  ) -> list[list[int]]:
    """Layer indices of each bucket, filled from the last layer backwards: a bucket
    closes when adding the next layer's gradients would pass its cap (a layer larger
    than the cap fills a bucket of its own); the first bucket's cap is ``first_bytes``."""
    out: list[list[int]] = []
    current: list[int] = []
    size, cap = 0.0, first_bytes
    for i in range(len(grad_bytes) - 1, -1, -1):
        nbytes = float(grad_bytes[i])
        if nbytes <= 0:
            continue
        if current and size + nbytes > cap:
            out.append(current)
            current, size, cap = [], 0.0, bucket_bytes
        current.append(i)
        size += nbytes
    if current:
        out.append(current)
    return out


def bucketed(grad_bytes: np.ndarray, backward_done_s: np.ndarray, backward_s: float,
             allreduce_s: Callable[[float], float], bucket_bytes: float,
             first_bytes: float) -> Buckets:
    """Buckets of the per-layer gradients ``grad_bytes`` whose layers finish backward
    at ``backward_done_s`` (seconds after backward starts), each all-reduced in
    ``allreduce_s(bytes)`` (see the module doc)."""
    groups = bucket_layers(grad_bytes, bucket_bytes, first_bytes)
    sizes, times, ready = [], [], []
    end = 0.0
    for layers in groups:
        nbytes = float(sum(grad_bytes[i] for i in layers))
        t = allreduce_s(nbytes)
        r = float(backward_done_s[layers[-1]])       # its earliest layer finishes last
        end = max(r, end) + t
        sizes.append(nbytes)
        times.append(t)
        ready.append(r)
    return Buckets(tuple(sizes), tuple(times), tuple(ready), backward_s,
                   max(0.0, end - backward_s))
