"""Cost models of the collectives that parallel training uses, NCCL-style.

A :class:`Fabric` is the network seen by one prediction. Participants are ``n`` ranks
placed ``stride`` GPUs apart on consecutive GPUs (nodes filled first): ``r`` ranks per
node on ``N`` nodes. Every algorithm's time is affine in the message size S
(``latency + S · seconds_per_byte``), so the cheapest one — what NCCL's tuner picks —
is chosen per size, and trees win small messages while rings win large ones.

Bandwidths (B, one direction, calibrated efficiencies applied):

* inside a node: the first tier (NVLink/NVSwitch) per GPU;
* leaving a node: one ring (channel) per NIC, so a node injects
  ``NICs used × NIC rate`` (Jeaugey, "NCCL 2.0", GTC 2017; NVIDIA/nccl#812 measures
  192 GB/s all-reduce bus bandwidth on two DGX A100 with 8 × 200 Gb/s NICs).

Algorithms (nccl-tests' definitions of S; α = per-step latency of the tier spanned):

* ring all-reduce ``2(n−1)ᾱ + 2(n−1)/n · S/B_ring``, B_ring = min(B_intra, B_node)
  (Thakur et al. 2005), ᾱ the mean hop latency along the ring (r − 1 NVLink hops and
  one network hop per node); all-gather / reduce-scatter ``(n−1)α + (n−1)/n · S/B_ring``
  with S the gathered size; broadcast (pipelined chain) ``(n−1)α + S/B_ring``;
* tree all-reduce (double binary tree across nodes, chains inside; NCCL ≥ 2.4):
  ``2(⌈log2 N⌉α_net + (r−1)α_intra) + S/B_tree``. Each node of a double binary tree
  sends and receives 2S (S on two nodes) across the network and a chain moves 2S over
  NVLink, so B_tree = TREE_DERATE · min(B_intra/2, B_node/k), k = 1 on two nodes else 2;
* NVLS all-reduce inside one NVSwitch node (NCCL ≥ 2.17, ``nvls: true``):
  ``2α_intra + S/B_nvls``, B_nvls = ``nvls_efficiency`` × NVLink line rate;
* an oversubscribed tier slows only the traffic that crosses it: a rank-ordered ring
  leaves each group of m nodes on one link, a tree on about two, so the taper is
  ``max(1, o/m)`` (ring) and ``max(1, 2o/m)`` (tree) — smooth in m, not a step.

Every algorithm runs in each of NCCL's protocols (:mod:`testbed.oracle.nccl`: LL, LL128,
Simple), with the protocol's own bandwidth factor and per-step latency: a tier's
``latency_us`` is the latency of one Simple ring step on it (NCCL's tuner: 3.4 µs over
NVLink, 14 µs across the network; ParaDL's measured constants on ABCI), and the other
(algorithm, protocol) pairs scale it by the tuner's ratios; the tuner's base latency,
the CPU's network post overhead, the ring's plateau factor and the tree's size
correction come on top; across nodes, the channels NCCL drops for small messages and a
tree's chunk-pipeline fill (:class:`Plan`) come on top of the tuner's α–β. The cheapest
(algorithm, protocol) runs, as NCCL's tuner decides.

ParaDL's rules (``links`` model) keep one ring at the spanned tier's bandwidth and its
formulas exactly: ring all-reduce ``2(n−1)(α + S/n/B)``, all-gather
``(n−1)(α + S/n/B)``.

On a profile calibrated from records, a tier whose collectives the micro-benchmarks
of the profile's backend measured (:class:`FittedLink`, built by
:func:`testbed.oracle.fitted.fitted_links`) runs the measured law instead: the ring
formula above with the fitted α per step and the fitted bus bandwidth — what the
library achieved there, whatever algorithm it chose — and no modelled alternative.
An operation without its own fit on that tier takes the tier's all-reduce α–β (same
links); the fit at the nearest process count is used, and an oversubscribed tier
beyond the measured placement still slows it by the taper ratio.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np

from testbed.oracle import nccl
from testbed.systems.profile import NetworkSpec, SystemProfile

#: NCCL's tuning model derates tree bus bandwidth to 0.92 of what the links allow
#: (src/graph/tuning.cc, NCCL 2.4 – 2.19: ``busBw = min(busBw * .92, …)`` for trees).
TREE_DERATE = 0.92
#: An intra-node tier at least this fast (GB/s per GPU, one direction) is NVLink: NCCL
#: takes its NVLink latencies (PCIe 4.0 x16 moves at most 32 GB/s).
NVLINK_MIN_GBPS = 40.0
#: Bus-bandwidth factor of each operation (nccl-tests doc/PERFORMANCE.md):
#: busbw = algbw × factor(n).
OPS = ("allreduce", "allgather", "reducescatter", "broadcast")


def bus_factor(op: str, n: int) -> float:
    """nccl-tests' bus-bandwidth factor: 2(n−1)/n all-reduce, (n−1)/n all-gather and
    reduce-scatter, 1 broadcast."""
    if op == "allreduce":
        return 2 * (n - 1) / n
    if op in ("allgather", "reducescatter"):
        return (n - 1) / n
    return 1.0


@dataclass(frozen=True)
class FittedLink:
    """The α–β a collective micro-benchmark measured on one tier (see the module doc)."""

    op: str
    tier: str
    processes: int
    alpha_s: float
    bandwidth_Bps: float
    backend: str = ""


@dataclass(frozen=True)
class Link:
    """Latency and achieved bandwidth of one tier."""

    name: str
    span_gpus: int
    alpha_s: float
    bandwidth_Bps: float
    oversubscription: float = 1.0
    efficiency: float = 1.0


@dataclass(frozen=True)
class CollectiveCost:
    """Time of one collective and the algorithm/tier (and protocol) that gave it."""

    time_s: float
    algorithm: str
    tier: str
    protocol: str = "Simple"


@dataclass(frozen=True)
class Plan:
    """One algorithm and protocol for one collective shape (see :meth:`times_s`):

        time = latency_s + bytes × s_per_byte × channels / channels used / correction
               + (fill_hops − 1) × chunk × channels × s_per_byte

    — the tuner's α–β, with the channels NCCL actually runs at that size (it drops
    channels while a message gives each thread too little work), NCCL's tree factor by
    size (``tree_corrected``), and the fill and drain of a chunked pipeline: a tree
    forwards whole chunks from stage to stage (``fill_hops`` stages, a chunk of ``chunk``
    bytes per channel), so the first chunk crosses every stage before the pipeline is
    full. Rings pay their steps in ``latency_s`` and need no fill term (each of their
    2(n − 1) steps moves one chunk, which the bandwidth term already counts)."""

    latency_s: float
    s_per_byte: float
    algorithm: str
    tier: str
    protocol: str = "Simple"
    tree_corrected: bool = False
    #: channels of the algorithm and the bytes each needs before NCCL runs it (0: ignore)
    channels: int = 0
    channel_bytes: float = 0.0
    #: store-and-forward stages of a chunked pipeline and its depth (NCCL's tree depth)
    fill_hops: int = 0
    tree_depth: int = 0

    def time_s(self, nbytes: float) -> float:
        return float(self.times_s(np.asarray([float(nbytes)]))[0])

    def times_s(self, sizes_bytes: np.ndarray) -> np.ndarray:
        """The plan's time at every size (vectorised; see the class doc)."""
        sizes = np.asarray(sizes_bytes, dtype=float)
        spb = np.full_like(sizes, self.s_per_byte)
        if self.tree_corrected:
            table = np.asarray(nccl.TREE_CORRECTION[self.protocol])
            index = np.floor(np.log2(np.maximum(sizes, 64.0) / 64.0)).astype(int)
            spb = spb / np.where(index < len(table), table[np.minimum(index, len(table) - 1)],
                                 1.0)
        t = self.latency_s + sizes * spb
        if self.channels > 1 and self.channel_bytes > 0:
            used = np.clip(np.floor(sizes / self.channel_bytes), 1, self.channels)
            t = t + sizes * spb * (self.channels / used - 1.0)
        if self.fill_hops > 1:
            chunk = nccl.tree_chunk_bytes(self.protocol, sizes, max(self.channels, 1),
                                          self.tree_depth)
            t = t + (self.fill_hops - 1) * chunk * max(self.channels, 1) * spb
        return t


@dataclass(frozen=True)
class Placement:
    """Where ``n`` ranks ``stride`` GPUs apart land: ranks per node, nodes, span."""

    ranks_per_node: int
    nodes: int
    span_gpus: int


@dataclass(frozen=True)
class Fabric:
    """The network of a system with calibrated efficiencies applied."""

    links: tuple[Link, ...]
    gpus_per_node: int
    halo: Link | None = None
    algorithms: tuple[str, ...] = ("ring", "tree")
    model: Literal["nccl", "links"] = "nccl"
    nics_per_node: int = 1
    nic_Bps: float = 0.0            # nominal; the spanned tier's efficiency applies
    nvls_Bps: float | None = None
    fitted: tuple[FittedLink, ...] = ()
    #: NCCL's tuner inputs: the library version, GPU generation, CPU vendor, the
    #: intra-node link kind and whether LL128 may run (see :mod:`testbed.oracle.nccl`)
    version: tuple[int, int] | None = (2, 18)
    generation: str = "ampere"
    cpu_vendor: str = "intel"
    intra_hw: str = "nvlink"
    ll128: bool = True

    @classmethod
    def from_spec(cls, spec: NetworkSpec, gpus_per_node: int,
                  efficiency: dict[str, float] | None = None, nominal: bool = False,
                  algorithms: tuple[str, ...] | None = None,
                  model: Literal["nccl", "links"] = "nccl",
                  fitted: tuple[FittedLink, ...] = (), compute_capability: float | None = None,
                  cpu_vendor: str = "intel") -> Fabric:
        """Build from a profile; ``efficiency`` maps tier names to calibrated factors
        (``"*"`` applies to every tier); ``nominal`` ignores all efficiencies;
        ``algorithms`` overrides the library's; ``links`` is ParaDL's one-ring model;
        ``fitted`` are measured α–β per tier (ignored by ``nominal`` and ``links``);
        ``compute_capability`` and ``cpu_vendor`` pick NCCL's per-generation and
        per-CPU constants."""
        efficiency = efficiency or {}
        links = []
        for tier in spec.tiers:
            eff = 1.0 if nominal else efficiency.get(tier.name, efficiency.get("*", tier.efficiency))
            links.append(Link(tier.name, tier.span_gpus, tier.alpha_s,
                              tier.bandwidth_GBps * 1e9 * eff, tier.oversubscription, eff))
        halo = None
        if spec.halo is not None:
            halo = Link("halo", 0, spec.halo.latency_us * 1e-6, spec.halo.bandwidth_GBps * 1e9)
        beyond = [t for t in spec.tiers if t.span_gpus > gpus_per_node]
        nic_GBps = spec.nic_GBps or (beyond[0].bandwidth_GBps if beyond else
                                     spec.tiers[-1].bandwidth_GBps)
        nvls = None
        if "nvls" in spec.algorithms():
            nvls = spec.nvls_efficiency * spec.tiers[0].bandwidth_GBps * 1e9
        if nominal or model == "links":
            fitted = ()
        intra_hw = "nvlink" if spec.tiers[0].bandwidth_GBps >= NVLINK_MIN_GBPS else "pci"
        return cls(tuple(links), gpus_per_node, halo, tuple(algorithms or spec.algorithms()),
                   model, spec.nics_per_node or 1, nic_GBps * 1e9, nvls, tuple(fitted),
                   version=spec.version(), generation=nccl.generation(compute_capability),
                   cpu_vendor=cpu_vendor, intra_hw=intra_hw,
                   ll128=spec.ll128 and intra_hw == "nvlink")

    @classmethod
    def of(cls, system: SystemProfile, **kw) -> Fabric:
        """The fabric of a system profile (its GPU generation and CPU vendor passed on)."""
        return cls.from_spec(system.network, system.node.gpus_per_node,
                             compute_capability=system.gpu.compute_capability,
                             cpu_vendor=system.node.cpu_vendor, **kw)

    def link_for(self, span_gpus: int) -> Link:
        for link in self.links:
            if span_gpus <= link.span_gpus:
                return link
        return self.links[-1]

    @property
    def intra(self) -> Link:
        return self.links[0]

    def span(self, n: int, stride: int = 1) -> int:
        return (n - 1) * stride + 1

    def placement(self, n: int, stride: int = 1) -> Placement:
        per_node = max(1, min(n, self.gpus_per_node // max(stride, 1)))
        return Placement(per_node, math.ceil(n / per_node), self.span(n, stride))

    # -- bandwidths -------------------------------------------------------------------
    def nics_used(self, place: Placement) -> int:
        """NICs a node's ranks can reach (one rail per ``gpus_per_node / NICs`` GPUs)."""
        return min(self.nics_per_node, max(1, math.ceil(
            place.ranks_per_node * self.nics_per_node / self.gpus_per_node)))

    def node_Bps(self, place: Placement) -> float:  # noqa: N802 - unit suffix
        """Injection bandwidth of one node: the NICs its ranks can reach, at the spanned
        tier's efficiency."""
        return self.nics_used(place) * self.nic_Bps * self.link_for(place.span_gpus).efficiency

    def net_channels(self, place: Placement) -> int:
        """Channels NCCL runs across nodes: :data:`nccl.CHANNELS_PER_NIC` per NIC used."""
        return nccl.CHANNELS_PER_NIC * self.nics_used(place)

    def taper(self, place: Placement, edges_per_group: float) -> float:
        """Slowdown from oversubscribed tiers for traffic leaving ``edges_per_group``
        times a node's bandwidth per group of nodes below the taper."""
        worst = 1.0
        node_gap = max(1, math.ceil(place.span_gpus / max(place.nodes, 1) / self.gpus_per_node))
        for i, link in enumerate(self.links):
            below = self.links[i - 1].span_gpus if i else 0
            if link.oversubscription <= 1.0 or place.span_gpus <= below:
                continue
            group_nodes = max(1, below // self.gpus_per_node // node_gap)
            members = min(place.nodes, group_nodes)
            worst = max(worst, link.oversubscription * edges_per_group / members)
        return worst

    def ring_Bps(self, place: Placement) -> tuple[float, Link]:  # noqa: N802
        """Ring bus bandwidth and the tier whose per-step latency it pays."""
        if self.model == "links":
            link = self.link_for(place.span_gpus)
            return link.bandwidth_Bps, link
        if place.nodes <= 1:
            return self.intra.bandwidth_Bps, self.intra
        intra = self.intra.bandwidth_Bps if place.ranks_per_node > 1 else math.inf
        bw = min(intra, self.node_Bps(place)) / self.taper(place, 1.0)
        return bw, self.link_for(place.span_gpus)

    def ring_hop_s(self, place: Placement, link: Link) -> float:
        """Mean latency of one ring step. A chunk travels the ring hop by hop, so the
        steps' latencies add along it: of every r consecutive hops r − 1 stay on the
        node's NVLink and one crosses the network (ParaDL's rule: every step at the
        spanned tier's latency)."""
        if self.model == "links" or place.nodes <= 1:
            return link.alpha_s
        r = place.ranks_per_node
        return ((r - 1) * self.intra.alpha_s + link.alpha_s) / r

    def fitted_for(self, op: str, tier: str, n: int) -> FittedLink | None:
        """The measured α–β of ``op`` on ``tier`` (else of its all-reduce) at the process
        count nearest ``n``; None when the tier was not measured."""
        for want in (op, "allreduce"):
            hits = [f for f in self.fitted if f.op == want and f.tier == tier]
            if hits:
                return min(hits, key=lambda f: (abs(f.processes - n), f.processes))
        return None

    # -- plans ------------------------------------------------------------------------
    def plans(self, op: str, n: int, stride: int = 1) -> list[Plan]:
        """Every (algorithm, protocol) the library may run for ``op`` among ``n`` ranks
        (the measured ring alone on a fitted tier; one Simple ring under ParaDL's rules)."""
        place = self.placement(n, stride)
        bw, link = self.ring_Bps(place)
        steps = {"allreduce": 2 * (n - 1), "broadcast": n - 1}.get(op, n - 1)
        fit = self.fitted_for(op, link.name, n) if self.fitted else None
        if fit is not None:
            taper = self.taper(place, 1.0) / self.taper(self.placement(fit.processes), 1.0)
            return [Plan(steps * fit.alpha_s, bus_factor(op, n) * max(taper, 1.0)
                         / fit.bandwidth_Bps, "ring", link.name)]
        if self.model != "nccl" or self.version is None:
            # ParaDL's rules, and libraries without NCCL's protocols (MPI, gloo): one
            # ring at the tiers' α–β
            return [Plan(steps * self.ring_hop_s(place, link), bus_factor(op, n) / bw, "ring",
                         link.name)]
        out = self._rings(op, n, place, bw, link)
        if op == "allreduce":
            out += self._tree(place) + self._nvls(place)
        return out

    def protocols(self) -> tuple[str, ...]:
        """The protocols this library version (and system) may run."""
        return tuple(p for p in nccl.PROTOCOLS if nccl.available(self.version, p)
                     and (p != "LL128" or self.ll128))

    def step_s(self, link: Link, hw: str, algorithm: str, protocol: str) -> float:
        """Per-step latency of ``algorithm`` in ``protocol`` on ``link``: the profile's
        latency of a Simple ring step on that tier, times NCCL's tuner ratio of this
        (algorithm, protocol) to a Simple ring step on the same hardware."""
        ref = nccl.HW_LAT_US[hw]["ring"]["Simple"]
        return link.alpha_s * nccl.HW_LAT_US[hw][algorithm][protocol] / ref

    def _rings(self, op: str, n: int, place: Placement, bw: float, link: Link) -> list[Plan]:
        """NCCL's ring in every protocol (see :mod:`testbed.oracle.nccl`)."""
        nodes = place.nodes
        steps = {"allreduce": 2 * (n - 1), "broadcast": n}.get(op, n - 1)
        inter = {"allreduce": 2 * nodes, "broadcast": nodes}.get(op, nodes - 1)
        if nodes <= 1:
            inter = 0
        out = []
        for proto in self.protocols():
            intra_s = self.step_s(self.intra, self.intra_hw, "ring", proto)
            if nodes > 1:
                posts = nccl.SIMPLE_NET_OVERHEAD_POSTS if proto == "Simple" else 1
                intra_s = max(intra_s, nccl.NET_OVERHEAD_US[self.cpu_vendor] * posts * 1e-6)
            inter_s = self.step_s(link, "net", "ring", proto) if nodes > 1 else 0.0
            lat = (nccl.BASE_LAT_US["ring"][proto] * 1e-6 + (steps - inter) * intra_s
                   + inter * inter_s)
            factor = 1.0
            if proto == "LL":
                many = nodes > 1 or op == "allreduce"
                factor = nccl.RING_LL_FACTOR["allreduce" if many else "other"]
            elif proto == "LL128":
                factor = (nccl.LL128_FACTOR if place.ranks_per_node >= 2
                          else nccl.LL128_FACTOR_SINGLE_RANK)
            pbw = bw * factor
            if proto == "LL":
                pbw = min(pbw, nccl.ll_max_Bps(nodes, self._gen_or_cpu(nodes), self.cpu_vendor)
                          / self.taper(place, 1.0))
            channels = self.net_channels(place) if nodes > 1 else 0
            out.append(Plan(lat, bus_factor(op, n) / pbw, "ring", link.name, proto,
                            channels=channels,
                            channel_bytes=nccl.channel_bytes("ring", proto, n)))
        return out

    def _gen_or_cpu(self, nodes: int) -> str:
        return self.generation if nodes <= 1 else self.cpu_vendor

    def plateau(self, op: str, nbytes: float, n: int, stride: int = 1) -> float:
        """NCCL's ring plateau factor on the latency of a multi-node Simple all-reduce
        whose every channel's share per rank is at least 64 bytes (1 otherwise)."""
        place = self.placement(n, stride)
        channels = nccl.CHANNELS_PER_NIC * self.nics_per_node
        if (self.model == "nccl" and self.version is not None and op == "allreduce"
                and place.nodes > 1
                and nbytes / (channels * n) >= nccl.PLATEAU_BYTES_PER_RANK_CHANNEL):
            return nccl.RING_PLATEAU[self.generation]
        return 1.0

    def _tree(self, place: Placement) -> list[Plan]:
        if "tree" not in self.algorithms or place.nodes <= 1:
            return []
        net = self.link_for(place.span_gpus)
        chain = self.intra.bandwidth_Bps / 2 if place.ranks_per_node > 1 else math.inf
        across = self.node_Bps(place) / (1 if place.nodes == 2 else 2)
        bw = TREE_DERATE * min(chain, across) / self.taper(place, 2.0)
        depth = int(math.floor(math.log2(place.nodes)))
        out = []
        for proto in self.protocols():
            intra = self.step_s(self.intra, self.intra_hw, "tree", proto)
            inter = self.step_s(net, "net", "tree", proto)
            lat = (nccl.BASE_LAT_US["tree"][proto] * 1e-6
                   + 2 * ((place.ranks_per_node - 1) * intra + depth * inter))
            pbw = bw
            if proto == "LL":
                pbw = min(bw * nccl.TREE_LL_FACTOR,
                          nccl.ll_max_Bps(place.nodes, self.cpu_vendor, self.cpu_vendor))
            elif proto == "LL128":
                pbw = bw * nccl.TREE_LL128_FACTOR["net"]
            # a chunk crosses the network stage by stage (the proxy sends whole steps); a
            # Simple chunk also waits for every NVLink hop of the chain, LL and LL128
            # forward line by line there
            tree_depth = place.ranks_per_node - 1 + max(depth, 1)
            hops = 2 * (tree_depth if proto == "Simple" else max(depth, 1))
            out.append(Plan(lat, 1.0 / pbw, "tree", net.name, proto, tree_corrected=True,
                            channels=self.net_channels(place),
                            channel_bytes=nccl.channel_bytes("tree", proto, place.nodes
                                                             * place.ranks_per_node),
                            fill_hops=hops, tree_depth=tree_depth))
        return out

    def _nvls(self, place: Placement) -> list[Plan]:
        if self.nvls_Bps is None or place.nodes > 1 or place.ranks_per_node <= 1:
            return []
        lat = self.step_s(self.intra, "nvlink", "nvls", "Simple")
        return [Plan(lat, 1.0 / self.nvls_Bps, "nvls", self.intra.name)]

    def plan_time(self, plan: Plan, op: str, nbytes: float, n: int, stride: int) -> float:
        t = plan.time_s(nbytes)
        if plan.algorithm == "ring" and plan.protocol == "Simple" and self.model == "nccl" \
                and not self.fitted_for(op, plan.tier, n):
            t += plan.latency_s * (self.plateau(op, nbytes, n, stride) - 1.0)
        return t

    def cost(self, op: str, nbytes: float, n: int, stride: int = 1) -> CollectiveCost:
        """The cheapest algorithm for one ``op`` of ``nbytes`` (nccl-tests' size)."""
        if n <= 1 or nbytes <= 0:
            return CollectiveCost(0.0, "none", self.link_for(self.span(n, stride)).name)
        if self.model == "links":
            return self._links_cost(op, nbytes, n, stride)
        timed = [(self.plan_time(p, op, nbytes, n, stride), p) for p in self.plans(op, n, stride)]
        t, best = min(timed, key=lambda tp: tp[0])
        return CollectiveCost(t, best.algorithm, best.tier, best.protocol)

    def _links_cost(self, op: str, nbytes: float, n: int, stride: int) -> CollectiveCost:
        """ParaDL's formulas, evaluated as ParaDL writes them (bit-for-bit)."""
        link = self.link_for(self.span(n, stride))
        a, bw = link.alpha_s, link.bandwidth_Bps
        if op == "allreduce":
            t = 2 * (n - 1) * (a + nbytes / n / bw)
        elif op == "broadcast":
            t = (n - 1) * a + nbytes / bw
        else:
            t = (n - 1) * (a + nbytes / n / bw)
        return CollectiveCost(t, "ring", link.name)

    # -- the collectives training uses -------------------------------------------------
    def allreduce(self, nbytes: float, n: int, stride: int = 1) -> CollectiveCost:
        """All-reduce of ``nbytes`` per rank among ``n`` ranks, algorithm chosen by cost."""
        return self.cost("allreduce", nbytes, n, stride)

    def allgather(self, total_bytes: float, n: int, stride: int = 1) -> CollectiveCost:
        """All-gather producing ``total_bytes`` on every rank (each owns 1/n)."""
        return self.cost("allgather", total_bytes, n, stride)

    def reduce_scatter(self, total_bytes: float, n: int, stride: int = 1) -> CollectiveCost:
        """Reduce-scatter of a ``total_bytes`` buffer (each rank keeps 1/n)."""
        return self.cost("reducescatter", total_bytes, n, stride)

    def broadcast(self, nbytes: float, n: int, stride: int = 1) -> CollectiveCost:
        return self.cost("broadcast", nbytes, n, stride)

    def _sum(self, op: str, sizes_bytes: np.ndarray, n: int, stride: int) -> float:
        """Total time of one ``op`` per entry of ``sizes_bytes``, each choosing its
        algorithm (vectorised: every plan is affine in the size)."""
        if n <= 1 or len(sizes_bytes) == 0:
            return 0.0
        if self.model == "links":
            return float(sum(self._links_cost(op, float(s), n, stride).time_s
                             for s in sizes_bytes if s > 0))
        times = []
        for p in self.plans(op, n, stride):
            t = p.times_s(sizes_bytes)
            if p.algorithm == "ring" and p.protocol == "Simple" and self.model == "nccl" \
                    and self.version is not None and not self.fitted:
                place = self.placement(n, stride)
                channels = nccl.CHANNELS_PER_NIC * self.nics_per_node
                if op == "allreduce" and place.nodes > 1:
                    plateau = np.where(sizes_bytes / (channels * n)
                                       >= nccl.PLATEAU_BYTES_PER_RANK_CHANNEL,
                                       nccl.RING_PLATEAU[self.generation], 1.0)
                    t = t + p.latency_s * (plateau - 1.0)
            times.append(t)
        best = np.minimum.reduce(times) if len(times) > 1 else times[0]
        return float(np.where(sizes_bytes > 0, best, 0.0).sum())

    def allreduce_sum(self, sizes_bytes: np.ndarray, n: int, stride: int = 1) -> float:
        return self._sum("allreduce", sizes_bytes, n, stride)

    def allgather_sum(self, sizes_bytes: np.ndarray, n: int, stride: int = 1) -> float:
        return self._sum("allgather", sizes_bytes, n, stride)

    def p2p(self, nbytes: float, distance_gpus: int = 1) -> CollectiveCost:
        """One message between two GPUs ``distance_gpus`` apart (one NIC across nodes)."""
        link = self.link_for(distance_gpus + 1)
        if nbytes <= 0:
            return CollectiveCost(0.0, "none", link.name)
        fit = self.fitted_for("p2p", link.name, 2) if self.fitted else None
        if fit is not None:
            return CollectiveCost(fit.alpha_s + nbytes / fit.bandwidth_Bps, "p2p", link.name)
        bw = link.bandwidth_Bps
        if self.model == "nccl" and distance_gpus + 1 > self.gpus_per_node:
            bw = self.nic_Bps * link.efficiency
        return CollectiveCost(link.alpha_s + nbytes / bw, "p2p", link.name)
