"""Seeded draws and failure clocks of the cluster's state machine (see ops.py).

:class:`Buffer` hands out block draws of one generator one at a time (in a fixed
order, so two engines that ask in the same order get the same numbers);
:class:`Durations` does it for a fixed-or-drawn duration; :class:`Clock` is a group's
failure clock, advancing at a rate that changes with the job's phase and membership.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from testbed.resilience.distributions import Drawn, Interarrival
from testbed.streams import stream

INF = math.inf
#: Draws per block.
BLOCK = 256


class Buffer:
    """Block draws from one generator, handed out one at a time (in a fixed order).

    ``rng`` may be the generator or the key ``(seed, rep, purpose, index)`` of a
    :func:`~testbed.streams.stream`, made on the first draw: a replication pays only
    for the streams it draws from (making one costs about 50 µs, the whole of a short
    replication's cost when a dozen are made and never used)."""

    __slots__ = ("rng", "fn", "buf", "key")

    def __init__(self, rng: np.random.Generator | tuple[int, int, str, int],
                 fn: Callable[[np.random.Generator, int], np.ndarray]) -> None:
        self.rng: np.random.Generator | None = None
        self.key: tuple[int, int, str, int] | None = None
        if isinstance(rng, tuple):
            self.key = rng
        else:
            self.rng = rng
        self.fn = fn
        self.buf: list[float] = []

    def next(self) -> float:
        if not self.buf:
            if self.rng is None:
                assert self.key is not None        # one of the two is given
                self.rng = stream(*self.key)
            self.buf = self.fn(self.rng, BLOCK).tolist()[::-1]
        return self.buf.pop()


class LazyStream:
    """A :func:`~testbed.streams.stream` made when first asked for (``get()``)."""

    __slots__ = ("key", "rng")

    def __init__(self, seed: int, rep: int, purpose: str, index: int = 0) -> None:
        self.key = (seed, rep, purpose, index)
        self.rng: np.random.Generator | None = None

    def get(self) -> np.random.Generator:
        if self.rng is None:
            self.rng = stream(*self.key)
        return self.rng


class Durations:
    """Block draws of a :class:`Drawn` duration from its own stream (none when fixed)."""

    __slots__ = ("fixed", "buf")

    def __init__(self, drawn: Drawn, seed: int, rep: int, purpose: str, index: int) -> None:
        self.fixed = drawn.mean_s if drawn.is_fixed else None
        if self.fixed is None:
            dist = Interarrival(drawn.kind, drawn.mean_s, drawn.shape, drawn.sigma)
            self.buf = Buffer((seed, rep, purpose, index), lambda g, n: dist.draw(g, n))

    def next(self) -> float:
        return self.fixed if self.fixed is not None else self.buf.next()


class Clock:
    """A group's failure clock: reads ``value`` at ``t_ref`` and advances at ``rate``."""

    __slots__ = ("value", "t_ref", "rate")

    def __init__(self) -> None:
        self.value, self.t_ref, self.rate = 0.0, 0.0, 0.0

    def set(self, t: float, rate: float) -> None:
        if rate != self.rate or t != self.t_ref:
            self.value += self.rate * (t - self.t_ref)
            self.t_ref = t
            self.rate = rate

    def now(self, t: float) -> float:
        return self.value + self.rate * (t - self.t_ref)

    def time_of(self, key: float) -> float:
        if self.rate <= 0.0:
            return INF
        return self.t_ref + (key - self.value) / self.rate
