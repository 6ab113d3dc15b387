"""GPUs, cores and memory of a cluster's nodes, and first-fit placement of trials.

A trial holds ``gpus`` GPUs, ``cores`` cores and ``memory`` bytes, all on one node.
Placement is first fit: the lowest-numbered node that is up and has room, and there
the lowest-numbered free GPUs — deterministic, and what a PyCOMPSs-style runtime
does when it walks its workers in order. A retry that must go to *another* worker
passes the slots it failed on in ``avoid``.

Global GPU slot ``s`` is GPU ``s % gpus_per_node`` of node ``s // gpus_per_node``;
slots are the rows of the Gantt chart. Every operation is O(log nodes) in the usual
case (a heap of nodes that have free GPUs), never a scan of the whole cluster.
"""

from __future__ import annotations

import heapq
from collections.abc import Collection
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Shape:
    """What one trial needs on one node."""

    gpus: int
    cores: int = 1
    memory_bytes: int = 0


@dataclass(frozen=True, slots=True)
class Alloc:
    """Where a trial runs: a node and its GPUs there (global slot numbers)."""

    node: int
    slots: tuple[int, ...]
    cores: int
    memory_bytes: int


class Cluster:
    """Free resources per node; nodes can go down (failure) and come back (repair)."""

    def __init__(self, nodes: int, gpus_per_node: int, cores_per_node: int | None = None,
                 memory_per_node_bytes: int | None = None) -> None:
        self.nodes = nodes
        self.gpus_per_node = gpus_per_node
        self.cores_per_node = cores_per_node
        self.memory_per_node_bytes = memory_per_node_bytes
        self._free_gpus = [list(range(n * gpus_per_node, (n + 1) * gpus_per_node))
                           for n in range(nodes)]
        self._free_cores = [cores_per_node if cores_per_node is not None else 1 << 62] * nodes
        self._free_mem = [memory_per_node_bytes if memory_per_node_bytes is not None
                          else 1 << 62] * nodes
        self._up = [True] * nodes
        self._heap = list(range(nodes))      # nodes that may have room (lazy)
        self._in_heap = [True] * nodes
        self.free_gpus = nodes * gpus_per_node
        self.total_gpus = nodes * gpus_per_node

    # ------------------------------------------------------------------ queries

    def is_up(self, node: int) -> bool:
        return self._up[node]

    def _has_room(self, n: int) -> bool:
        return self._up[n] and bool(self._free_gpus[n])

    def _fits(self, n: int, shape: Shape, avoid: Collection[int]) -> bool:
        if not self._up[n] or self._free_cores[n] < shape.cores:
            return False
        if self._free_mem[n] < shape.memory_bytes:
            return False
        free = self._free_gpus[n]
        if len(free) < shape.gpus:
            return False
        if avoid and shape.gpus:
            return sum(1 for s in free if s not in avoid) >= shape.gpus
        return True

    def could_ever_fit(self, shape: Shape, avoid: Collection[int] = ()) -> bool:
        """Whether some node, empty and up, could hold ``shape`` away from ``avoid``."""
        for n in range(self.nodes):
            slots = range(n * self.gpus_per_node, (n + 1) * self.gpus_per_node)
            if sum(1 for s in slots if s not in avoid) >= shape.gpus:
                return True
        return False

    # ------------------------------------------------------------------ placement

    def allocate(self, shape: Shape, avoid: Collection[int] = ()) -> Alloc | None:
        """First-fit placement, or None when no node has room now."""
        if shape.gpus > self.free_gpus:
            return None
        if shape.gpus == 0:     # CPU-only trials: rare, a plain scan
            for n in range(self.nodes):
                if self._fits(n, shape, avoid):
                    return self._take_on(n, shape, avoid)
            return None
        skipped = []
        found = None
        heap = self._heap
        while heap:
            n = heap[0]
            if not self._has_room(n):
                heapq.heappop(heap)
                self._in_heap[n] = False
                continue
            if self._fits(n, shape, avoid):
                found = n
                break
            skipped.append(heapq.heappop(heap))
        for n in skipped:
            heapq.heappush(heap, n)
        if found is None:
            return None
        return self._take_on(found, shape, avoid)

    def _take_on(self, n: int, shape: Shape, avoid: Collection[int]) -> Alloc:
        free = self._free_gpus[n]
        if avoid:
            slots = tuple(sorted(s for s in free if s not in avoid)[:shape.gpus])
        else:
            slots = tuple(heapq.heappop(free) for _ in range(shape.gpus))
        if avoid:
            for s in slots:
                free.remove(s)
            heapq.heapify(free)
        self._free_cores[n] -= shape.cores
        self._free_mem[n] -= shape.memory_bytes
        self.free_gpus -= len(slots)
        return Alloc(n, slots, shape.cores, shape.memory_bytes)

    def take(self, alloc: Alloc) -> bool:
        """Take exactly ``alloc`` again (a retry on the same worker); False if it is gone."""
        n = alloc.node
        free = self._free_gpus[n]
        if (not self._up[n] or self._free_cores[n] < alloc.cores
                or self._free_mem[n] < alloc.memory_bytes
                or any(s not in free for s in alloc.slots)):
            return False
        for s in alloc.slots:
            free.remove(s)
        heapq.heapify(free)
        self._free_cores[n] -= alloc.cores
        self._free_mem[n] -= alloc.memory_bytes
        self.free_gpus -= len(alloc.slots)
        return True

    def release(self, alloc: Alloc) -> None:
        n = alloc.node
        for s in alloc.slots:
            heapq.heappush(self._free_gpus[n], s)
        self._free_cores[n] += alloc.cores
        self._free_mem[n] += alloc.memory_bytes
        if self._up[n]:
            self.free_gpus += len(alloc.slots)
        if not self._in_heap[n]:
            heapq.heappush(self._heap, n)
            self._in_heap[n] = True

    # ------------------------------------------------------------------ failures

    def node_down(self, n: int) -> None:
        """Take node ``n`` out (its trials must be released by the caller first)."""
        if self._up[n]:
            self._up[n] = False
            self.free_gpus -= len(self._free_gpus[n])

    def node_up(self, n: int) -> None:
        if not self._up[n]:
            self._up[n] = True
            self.free_gpus += len(self._free_gpus[n])
            if not self._in_heap[n]:
                heapq.heappush(self._heap, n)
                self._in_heap[n] = True
