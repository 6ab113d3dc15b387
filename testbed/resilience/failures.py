"""Failure arrivals of one replication: a time-ordered stream the engines consume.

:meth:`FailureModel.events` is a stream that does not depend on what the job is doing
(the HPO simulator consumes it for its nodes). The training-job engines instead run the
node lifecycle of :mod:`testbed.resilience.ops`, where failures depend on the job's
phase (``exposure``, ``idle_rate_factor``, job-induced causes) — see its docstring; the
fields here describe the failure process both use.

Arrival models:

* job level (``mtbf``): a renewal process with the given inter-arrival distribution;
* node level (``node_mtbf``): one renewal process per node, superposed. For the
  exponential distribution the superposition is a Poisson process of rate
  nodes / node_mtbf, drawn directly (the same law, far cheaper); for Weibull and
  lognormal each node keeps its own clock — started stationary by default (its first
  failure from the equilibrium residual life, :meth:`Interarrival.equilibrium`), or new
  at time 0 with ``start="fresh"`` — and a replaced node's successor starts new at the
  failure time;
* a trace: recorded failures replayed as they are.

On top: a cause per failure (from the cause mix), correlated bursts (a failure brings
``burst_size`` more, uniformly within ``burst_window_s``, with ``burst_probability``)
and planned maintenance windows (every node unavailable until the window ends).
"""

from __future__ import annotations

import bisect
import heapq
import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from typing import NamedTuple

from testbed.resilience.causes import ResolvedCause
from testbed.resilience.distributions import Interarrival
from testbed.streams import stream

BLOCK = 256
#: ``Failure.cause`` of a planned maintenance window.
MAINTENANCE = -1


class Failure(NamedTuple):
    """One interruption: at ``t_s`` node ``node`` fails with cause index ``cause``.

    ``repair_s`` is how long the node is away; ``until_s`` (maintenance only) when the
    window ends. A maintenance window has ``cause == MAINTENANCE`` and ``node == -1``.
    """

    t_s: float
    node: int
    cause: int
    repair_s: float
    until_s: float


@dataclass(frozen=True)
class TraceFailure:
    """A recorded failure: time, node, cause index and repair duration."""

    t_s: float
    node: int
    cause: int
    repair_s: float


@dataclass(frozen=True)
class FailureModel:
    """Everything that decides when failures strike and what they cost."""

    nodes: int
    causes: tuple[ResolvedCause, ...]
    interarrival: Interarrival | None = None
    per_node: bool = False
    trace: tuple[TraceFailure, ...] | None = None
    burst_probability: float = 0.0
    burst_size: int = 0
    burst_window_s: float = 0.0
    maintenance_every_s: float | None = None
    maintenance_duration_s: float = 0.0
    maintenance_first_s: float | None = None
    #: ``stationary``: every renewal clock starts in equilibrium; ``fresh``: new at t = 0
    start: str = "stationary"
    #: ``in_use``: causes strike as described in ops; ``running``: only while the job runs
    exposure: str = "in_use"
    #: hazard of a node not in use relative to one in use (0: its clock stops)
    idle_rate_factor: float = 0.0
    #: False: a failure loses no work (AIReSim-compatible; no checkpoints needed)
    lose_work: bool = True

    @property
    def job_mtbf_s(self) -> float:
        """Mean time between primary failures of the whole job (∞ without failures)."""
        if self.trace is not None:
            if len(self.trace) < 2:
                return float("inf")
            gap = (self.trace[-1].t_s - self.trace[0].t_s) / (len(self.trace) - 1)
            if gap > 0:
                return gap
            # every failure at one instant: the rate over [0, that instant], or none at all
            last = self.trace[-1].t_s
            return last / len(self.trace) if last > 0 else float("inf")
        if self.interarrival is None:
            return float("inf")
        mean = self.interarrival.mean_s / (self.nodes if self.per_node else 1)
        return mean / (1.0 + self.burst_probability * self.burst_size)

    @property
    def has_failures(self) -> bool:
        return self.interarrival is not None or bool(self.trace) or (
            self.maintenance_every_s is not None)

    # ------------------------------------------------------------------ drawing

    def _primary(self, seed: int, rep: int) -> Iterator[tuple[float, int]]:
        """(time, node) of primary failures, in time order."""
        if self.trace is not None:
            for rec in self.trace:
                yield rec.t_s, rec.node
            return
        if self.interarrival is None:
            return
        rng = stream(seed, rep, "failures")
        if not self.per_node or self.interarrival.kind == "exponential":
            dist = self.interarrival.scaled(1.0 / self.nodes) if self.per_node \
                else self.interarrival
            rng_nodes = stream(seed, rep, "nodes")
            t = 0.0
            while True:
                gaps = dist.draw(rng, BLOCK).tolist()
                nodes = rng_nodes.integers(0, self.nodes, BLOCK).tolist()
                for gap, node in zip(gaps, nodes, strict=True):
                    t += gap
                    yield t, node
        # one renewal clock per node; gaps drawn in the order they are needed
        first = (self.interarrival.equilibrium(rng, self.nodes) if self.start == "stationary"
                 else self.interarrival.draw(rng, self.nodes)).tolist()
        heap = [(g, n) for n, g in enumerate(first)]
        heapq.heapify(heap)
        buffer: list[float] = []
        while True:
            t, node = heap[0]
            yield t, node
            if not buffer:
                buffer = self.interarrival.draw(rng, BLOCK).tolist()[::-1]
            heapq.heapreplace(heap, (t + buffer.pop(), node))

    def _cause_picker(self, seed: int, rep: int):
        if len(self.causes) <= 1:
            return lambda: 0
        cum = list(itertools.accumulate(c.probability for c in self.causes))
        cum[-1] = 1.0
        rng = stream(seed, rep, "causes")
        buf: list[float] = []

        def pick() -> int:
            nonlocal buf
            if not buf:
                buf = rng.random(BLOCK).tolist()[::-1]
            return bisect.bisect_right(cum, buf.pop())
        return pick

    def events(self, seed: int, rep: int) -> Iterator[Failure]:
        """The replication's interruptions in time order (endless unless a trace)."""
        primary = self._primary(seed, rep)
        if self.trace is not None:
            for rec in self.trace:
                yield Failure(rec.t_s, rec.node, rec.cause, rec.repair_s, rec.t_s)
            return
        pick = self._cause_picker(seed, rep)
        repairs = [c.repair_s for c in self.causes]
        if not self.burst_probability and self.maintenance_every_s is None:
            for t, node in primary:
                c = pick()
                yield Failure(t, node, c, repairs[c], t)
            return
        yield from self._merged(primary, pick, repairs, seed, rep)

    def _merged(self, primary, pick, repairs, seed, rep) -> Iterator[Failure]:
        """Primary failures merged with burst followers and maintenance windows."""
        rng_b = stream(seed, rep, "bursts")
        rng_nodes = stream(seed, rep, "nodes", 1)
        order = itertools.count()
        heap: list[tuple[float, int, int, int]] = []   # (t, order, kind, node)
        nxt = next(primary, None)
        if nxt is not None:
            heapq.heappush(heap, (nxt[0], next(order), 0, nxt[1]))
        every_s = self.maintenance_every_s
        if every_s is not None:
            first = self.maintenance_first_s if self.maintenance_first_s is not None \
                else every_s
            heapq.heappush(heap, (first, next(order), 2, -1))
        while heap:
            t, _, kind, node = heapq.heappop(heap)
            if kind == 2:
                yield Failure(t, -1, MAINTENANCE, 0.0, t + self.maintenance_duration_s)
                if every_s is not None:          # kind 2 exists only when it is set
                    heapq.heappush(heap, (t + every_s, next(order), 2, -1))
                continue
            c = pick()
            yield Failure(t, node, c, repairs[c], t)
            if kind == 0:
                if self.burst_probability and rng_b.random() < self.burst_probability:
                    offsets = rng_b.uniform(0.0, self.burst_window_s, self.burst_size).tolist()
                    nodes = rng_nodes.integers(0, self.nodes, self.burst_size).tolist()
                    for off, n in zip(offsets, nodes, strict=True):
                        heapq.heappush(heap, (t + off, next(order), 1, n))
                nxt = next(primary, None)
                if nxt is not None:
                    heapq.heappush(heap, (nxt[0], next(order), 0, nxt[1]))
