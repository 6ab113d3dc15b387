"""Alpha-beta cost models of the collectives that parallel training uses.

A :class:`Fabric` is the network seen by one prediction: per-tier latency ``alpha_s``
and achieved bandwidth. Participants are ``n`` ranks placed ``stride`` GPUs apart on
consecutive GPUs (nodes filled first), so a collective spans ``(n-1)*stride+1`` GPUs
and runs on the smallest tier that covers that span; its bandwidth is the tier's
(the slowest link a ring or tree must cross).

Formulas (m = bytes per rank, β = 1/bandwidth):

* ring all-reduce: ``2(n-1)(α + m/n·β)`` (reduce-scatter then all-gather, one chunk
  per step; Thakur et al. 2005, as in ParaDL);
* tree all-reduce (NCCL's double binary tree, pipelined): ``2(⌈log2 N⌉·α_out +
  (r-1)·α_in) + 2m·β'`` over N nodes with r ranks each, where β' includes the uplink
  oversubscription when the tree spans more than one rack — trees send across the whole
  machine at once, rings cross a rack boundary on only a couple of links;
* NCCL chooses the algorithm by comparing its own predicted times; we do the same;
* all-gather / reduce-scatter (ring): ``(n-1)(α + m/n·β)`` with m the gathered size;
* point-to-point: ``α + m·β``; halo exchange: two neighbours per split dimension.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from testbed.systems import NetworkSpec


@dataclass(frozen=True)
class Link:
    """Latency and achieved bandwidth of one tier."""

    name: str
    span_gpus: int
    alpha_s: float
    bandwidth_Bps: float
    oversubscription: float = 1.0


@dataclass(frozen=True)
class CollectiveCost:
    """Time of one collective and the algorithm/tier that gave it."""

    time_s: float
    algorithm: str
    tier: str


@dataclass(frozen=True)
class Fabric:
    """The network of a system with calibrated efficiencies applied."""

    links: tuple[Link, ...]
    gpus_per_node: int
    halo: Link | None = None
    algorithms: tuple[str, ...] = ("ring", "tree")

    @classmethod
    def from_spec(cls, spec: NetworkSpec, gpus_per_node: int,
                  efficiency: dict[str, float] | None = None, nominal: bool = False) -> Fabric:
        """Build from a profile; ``efficiency`` maps tier names to calibrated factors
        (``"*"`` applies to every tier); ``nominal`` ignores all efficiencies."""
        efficiency = efficiency or {}
        links = []
        for tier in spec.tiers:
            eff = 1.0 if nominal else efficiency.get(tier.name, efficiency.get("*", tier.efficiency))
            links.append(Link(tier.name, tier.span_gpus, tier.alpha_s,
                              tier.bandwidth_GBps * 1e9 * eff, tier.oversubscription))
        halo = None
        if spec.halo is not None:
            halo = Link("halo", 0, spec.halo.latency_us * 1e-6, spec.halo.bandwidth_GBps * 1e9)
        return cls(tuple(links), gpus_per_node, halo, tuple(spec.allreduce_algorithms))

    def link_for(self, span_gpus: int) -> Link:
        for link in self.links:
            if span_gpus <= link.span_gpus:
                return link
        return self.links[-1]

    @property
    def intra(self) -> Link:
        return self.links[0]

    def _tree_bandwidth(self, span_gpus: int, link: Link) -> float:
        """Achieved bandwidth of a machine-wide pattern: tapered by every
        oversubscribed tier it has to cross."""
        taper = 1.0
        for other in self.links:
            if other.oversubscription > 1.0 and span_gpus > self._below(other):
                taper = max(taper, other.oversubscription)
        return link.bandwidth_Bps / taper

    def _below(self, link: Link) -> int:
        idx = self.links.index(link)
        return self.links[idx - 1].span_gpus if idx > 0 else 0

    # -- collectives ------------------------------------------------------------------
    def span(self, n: int, stride: int = 1) -> int:
        return (n - 1) * stride + 1

    def ring_allreduce(self, nbytes: float, n: int, stride: int = 1) -> CollectiveCost:
        link = self.link_for(self.span(n, stride))
        if n <= 1 or nbytes <= 0:
            return CollectiveCost(0.0, "none", link.name)
        t = 2 * (n - 1) * (link.alpha_s + nbytes / n / link.bandwidth_Bps)
        return CollectiveCost(t, "ring", link.name)

    def tree_allreduce(self, nbytes: float, n: int, stride: int = 1) -> CollectiveCost:
        span = self.span(n, stride)
        link = self.link_for(span)
        if n <= 1 or nbytes <= 0:
            return CollectiveCost(0.0, "none", link.name)
        per_node = max(1, min(n, self.gpus_per_node // max(stride, 1)))
        nodes = math.ceil(n / per_node)
        if nodes <= 1:
            latency = 2 * (n - 1) * link.alpha_s
            bw = link.bandwidth_Bps
        else:
            latency = 2 * (math.ceil(math.log2(nodes)) * link.alpha_s
                           + (per_node - 1) * self.intra.alpha_s)
            bw = self._tree_bandwidth(span, link)
        return CollectiveCost(latency + 2 * nbytes / bw, "tree", link.name)

    def allreduce(self, nbytes: float, n: int, stride: int = 1) -> CollectiveCost:
        """All-reduce of ``nbytes`` per rank among ``n`` ranks, algorithm chosen by cost."""
        best = None
        for algo in self.algorithms:
            cost = (self.ring_allreduce if algo == "ring" else self.tree_allreduce)(nbytes, n, stride)
            if best is None or cost.time_s < best.time_s:
                best = cost
        return best if best is not None else CollectiveCost(0.0, "none", "")

    def allreduce_sum(self, sizes_bytes: np.ndarray, n: int, stride: int = 1) -> float:
        """Total time of one all-reduce per entry of ``sizes_bytes`` (each choosing its
        algorithm), vectorised for per-layer collectives."""
        if n <= 1 or len(sizes_bytes) == 0:
            return 0.0
        tree = self.tree_allreduce(1.0, n, stride)
        link = self.link_for(self.span(n, stride))
        ring_t = 2 * (n - 1) * (link.alpha_s + sizes_bytes / n / link.bandwidth_Bps)
        best = ring_t if "ring" in self.algorithms else np.full(len(sizes_bytes), np.inf)
        if "tree" in self.algorithms:
            # tree: fixed latency + 2·m/bw'; recover both from two evaluations
            t1 = tree.time_s
            t2 = self.tree_allreduce(2.0, n, stride).time_s
            per_byte = t2 - t1
            tree_t = (t1 - per_byte) + sizes_bytes * per_byte
            best = np.minimum(best, tree_t)
        return float(np.where(sizes_bytes > 0, best, 0.0).sum())

    def allgather_sum(self, sizes_bytes: np.ndarray, n: int, stride: int = 1) -> float:
        """Total time of one ring all-gather per entry of ``sizes_bytes``."""
        if n <= 1 or len(sizes_bytes) == 0:
            return 0.0
        link = self.link_for(self.span(n, stride))
        count = int((sizes_bytes > 0).sum())
        return (n - 1) * (count * link.alpha_s + float(sizes_bytes.sum()) / n / link.bandwidth_Bps)

    def allgather(self, total_bytes: float, n: int, stride: int = 1) -> CollectiveCost:
        """Ring all-gather producing ``total_bytes`` on every rank (each owns 1/n)."""
        link = self.link_for(self.span(n, stride))
        if n <= 1 or total_bytes <= 0:
            return CollectiveCost(0.0, "none", link.name)
        t = (n - 1) * (link.alpha_s + total_bytes / n / link.bandwidth_Bps)
        return CollectiveCost(t, "ring", link.name)

    def reduce_scatter(self, total_bytes: float, n: int, stride: int = 1) -> CollectiveCost:
        """Ring reduce-scatter of a ``total_bytes`` buffer (each rank keeps 1/n)."""
        cost = self.allgather(total_bytes, n, stride)
        return CollectiveCost(cost.time_s, cost.algorithm, cost.tier)

    def p2p(self, nbytes: float, distance_gpus: int = 1) -> CollectiveCost:
        """One message between two GPUs ``distance_gpus`` apart."""
        link = self.link_for(distance_gpus + 1)
        if nbytes <= 0:
            return CollectiveCost(0.0, "none", link.name)
        return CollectiveCost(link.alpha_s + nbytes / link.bandwidth_Bps, "p2p", link.name)

    def halo_exchange(self, bytes_per_neighbour: float, neighbours: int,
                      group: int) -> CollectiveCost:
        """Exchange with ``neighbours`` neighbours inside a group of ``group`` GPUs, one
        after another (as MPI send/recv pairs); uses the halo channel when the system
        defines one, else the tier spanning the group."""
        link = self.halo or self.link_for(group)
        if neighbours <= 0 or bytes_per_neighbour <= 0:
            return CollectiveCost(0.0, "none", link.name)
        t = neighbours * (link.alpha_s + bytes_per_neighbour / link.bandwidth_Bps)
        return CollectiveCost(t, "halo", link.name)
