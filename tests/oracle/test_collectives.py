"""Collective cost models: exact formulas, the algorithm choice a tuner makes, and
invariants (published bus bandwidths are in test_published_figures.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from testbed.oracle import nccl
from testbed.oracle.collectives import TREE_DERATE, Fabric, Plan, bus_factor
from testbed.systems.profile import load_system

GiB = 2**30


def fabric_of(name: str, **kw) -> Fabric:
    return Fabric.of(load_system(name), **kw)


@pytest.fixture(scope="module")
def paradl():
    s = load_system("abci-v100")
    return Fabric.from_spec(s.network, s.node.gpus_per_node, nominal=True,
                            algorithms=("ring",), model="links")


@pytest.fixture(scope="module")
def a100():
    return fabric_of("a100-cluster")


def test_paradl_ring_formula_is_exact(paradl):
    m = 100e6
    cost = paradl.allreduce(m, 16)
    assert cost.tier == "ib-leaf" and cost.algorithm == "ring"
    assert cost.time_s == 2 * 15 * (40.3e-6 + m / 16 / 12.5e9)
    assert paradl.allgather(64e6, 4).time_s == 3 * (9e-6 + 64e6 / 4 / 50e9)


def test_tier_choice_by_span(paradl):
    assert paradl.allreduce(1e6, 4).tier == "nvlink"
    assert paradl.allreduce(1e6, 68).tier == "ib-leaf"
    assert paradl.allreduce(1e6, 100).tier == "ib-rack"
    assert paradl.allreduce(1e6, 1024).tier == "ib-spine"
    # 8 ranks one per node (stride 4) span 29 GPUs: InfiniBand, not NVLink
    assert paradl.allreduce(1e6, 8, stride=4).tier == "ib-leaf"


def test_ring_uses_one_channel_per_nic(a100):
    """Across 8 DGX A100 nodes the Simple ring runs at 8 NICs x 25 GB/s x 0.96, not one
    NIC; its latency is NCCL's tuner formula: base 8.4 us, 2(n-1) - 2·nodes intra-node
    steps at max(3.4 us, 3 x the AMD host's 2 us network post), 2·nodes network steps at
    14 us, times the Ampere ring plateau 1.4 once each channel's share passes 64 B."""
    n, m = 64, 8 * GiB
    cost = a100.allreduce(m, n)
    assert cost.algorithm == "ring" and cost.protocol == "Simple"
    latency = (8.4 + (2 * 63 - 16) * 6.0 + 16 * 14.0) * 1e-6 * 1.4
    expected = latency + 2 * (n - 1) / n * m / (8 * 25e9 * 0.96)
    assert cost.time_s == pytest.approx(expected, rel=1e-12)
    # one rank per node reaches only its own rail
    assert a100.ring_Bps(a100.placement(8, stride=8))[0] == pytest.approx(25e9 * 0.96)


def test_tree_for_small_messages_ring_for_large(a100):
    """NCCL's tuner: trees have log-depth latency but less bandwidth (2S per node and
    the 0.92 derate), so they win small messages and lose large ones; across 64 nodes a
    ring's 1,022 steps cost ~11 ms, so it wins only at several GiB. Protocols follow
    size: LL for the smallest, LL128 in the middle (and for rings up to ~16 GiB, where
    Simple's 1,022 network-posting steps still cost more than LL128's 8 % of bandwidth),
    Simple for the largest."""
    assert a100.allreduce(64e3, 512).algorithm == "tree"
    assert a100.allreduce(64 * GiB, 512).algorithm == "ring"
    assert [a100.allreduce(s, 512).protocol for s in (2**12, 2**28, 2**36)] == [
        "LL", "LL128", "Simple"]
    sizes = [2**k for k in range(10, 38)]
    algos = [a100.allreduce(s, 512).algorithm for s in sizes]
    switch = algos.index("ring")
    assert set(algos[:switch]) == {"tree"} and set(algos[switch:]) == {"ring"}


def test_tree_bandwidth_formula(a100):
    place = a100.placement(64)
    plans = {p.protocol: p for p in a100.plans("allreduce", 64) if p.algorithm == "tree"}
    simple = TREE_DERATE * min(300e9 * 0.775 / 2, 8 * 25e9 * 0.96 / 2)
    assert 1 / plans["Simple"].s_per_byte == pytest.approx(simple)
    assert 1 / plans["LL128"].s_per_byte == pytest.approx(simple * 120 / 128)
    # tuning.cc: 2((ranks per node - 1) intra + log2(nodes) inter) steps; a tree step of
    # the Simple protocol is 28 us on NVLink and on the network
    assert plans["Simple"].latency_s == pytest.approx(2 * (7 * 28e-6 + 3 * 28e-6))
    assert place.nodes == 8 and place.ranks_per_node == 8


def test_library_version_limits_algorithms():
    """NCCL 2.3 (ABCI, January 2020) had rings only; trees arrived in 2.4, NVLS in 2.17."""
    abci = load_system("abci-v100")
    assert abci.network.algorithms() == ("ring",)
    f = Fabric.from_spec(abci.network, 4)
    assert {f.allreduce(s, n).algorithm for s in (1e3, 1e9) for n in (8, 1024)} == {"ring"}
    newer = abci.network.model_copy(update={"library": "nccl-2.4"})
    assert newer.algorithms() == ("ring", "tree")
    h100 = load_system("h100-cluster").network
    assert h100.algorithms() == ("ring", "tree", "nvls")
    assert h100.model_copy(update={"library": "nccl-2.16"}).algorithms() == ("ring", "tree")
    assert h100.model_copy(update={"nvls": False}).algorithms() == ("ring", "tree")


def test_nvls_only_inside_a_node():
    h100 = fabric_of("h100-cluster")
    assert h100.allreduce(GiB, 8).algorithm == "nvls"
    assert h100.allreduce(GiB, 16).algorithm != "nvls"


def test_rack_taper_is_smooth_and_only_for_crossing_traffic(paradl):
    """A rank-ordered ring leaves each group of m nodes on one link: with 34 nodes below
    ABCI's 1:3 spine the uplinks carry it easily, so crossing racks costs latency only,
    with no step in bandwidth; with 2-node groups the taper binds (3/2)."""
    abci = load_system("abci-v100")
    f = Fabric.from_spec(abci.network, 4)
    per_byte = [f.plans("allreduce", n)[0].s_per_byte for n in (128, 136, 140, 256, 1024)]
    assert max(per_byte) / min(per_byte) < 1.01
    tiny = abci.network.model_copy(update={"tiers": tuple(
        t.model_copy(update={"span_gpus": s}) for t, s in
        zip(abci.network.tiers, (4, 6, 8, 4352), strict=True))})
    g = Fabric.from_spec(tiny, 4)
    assert g.taper(g.placement(64), 1.0) == pytest.approx(1.5)


@pytest.mark.parametrize("op,factor", [("allreduce", 2 * 7 / 8), ("allgather", 7 / 8),
                                       ("reducescatter", 7 / 8), ("broadcast", 1.0)])
def test_bus_factor_is_nccl_tests_definition(op, factor):
    assert bus_factor(op, 8) == pytest.approx(factor)


def test_vectorised_sums_match_scalar(a100):
    sizes = np.array([1e3, 1e5, 1e7, 5e8, 0.0])
    for n in (2, 4, 16, 256):
        assert a100.allreduce_sum(sizes, n) == pytest.approx(
            sum(a100.allreduce(s, n).time_s for s in sizes))
        assert a100.allgather_sum(sizes, n) == pytest.approx(
            sum(a100.allgather(s, n).time_s for s in sizes))


@settings(max_examples=200, deadline=None)
@given(m=st.floats(1.0, 1e10), n=st.integers(2, 4096), factor=st.floats(1.0, 10.0),
       system=st.sampled_from(["abci-v100", "a100-cluster", "h100-cluster"]))
def test_allreduce_monotone_in_bytes(m, n, factor, system):
    f = fabric_of(system)
    assert f.allreduce(m * factor, n).time_s >= f.allreduce(m, n).time_s


@settings(max_examples=200, deadline=None)
@given(m=st.floats(1.0, 1e10), n=st.integers(2, 4096))
def test_allreduce_is_the_cheapest_plan(a100, m, n):
    best = a100.allreduce(m, n).time_s
    assert best == min(a100.plan_time(p, "allreduce", m, n, 1)
                       for p in a100.plans("allreduce", n))
    assert best > 0 and math.isfinite(best)


def test_tree_chunk_pipeline_fill(a100):
    """A tree forwards whole steps across the network (the proxy posts a step once its
    lines are written), so the first chunk crosses all 2·depth network stages before
    the pipeline is full: ``(stages − 1) × chunk × channels`` more bytes at the tree's
    rate. On 2 DGX A100 (16 channels, LL128 steps of 576,000 data bytes) a 16 MiB
    all-reduce pays one extra 9.2 MB; a message under 16 chunks pays its whole size
    twice (one chunk per channel crosses up and down)."""
    (plan,) = [p for p in a100.plans("allreduce", 16)
               if (p.algorithm, p.protocol) == ("tree", "LL128")]
    assert plan.channels == 16 and plan.fill_hops == 2
    chunk = nccl.step_payload_bytes("LL128")
    assert chunk == 614_400 * 120 / 128
    for size in (16 * 2**20, 2**20):
        spb = plan.s_per_byte / nccl.tree_correction("LL128", size)
        fill = min(size, 16 * chunk) * spb
        assert plan.time_s(size) == pytest.approx(plan.latency_s + size * spb + fill)
    # 64 nodes: 12 network stages, the fill dominates mid sizes
    place = a100.placement(512)
    deep = [p for p in a100.plans("allreduce", 512) if p.algorithm == "tree"]
    assert {p.fill_hops for p in deep if p.protocol != "Simple"} == {12}
    assert place.nodes == 64


def test_channels_dropped_for_small_messages():
    """enqueue.cc keeps a channel only while every thread has its threshold of bytes
    (LL 8 x ranks on a ring, LL128 8, Simple 64, x 512-640 threads): below that the
    bandwidth term runs on fewer channels; above it nothing changes."""
    plan = Plan(0.0, 1e-9, "ring", "net", "LL", channels=16,
                channel_bytes=nccl.channel_bytes("ring", "LL", 16))
    per_channel = 512 * 8 * 16
    assert plan.channel_bytes == per_channel
    full = 16 * per_channel
    assert plan.time_s(full) == pytest.approx(full * 1e-9)
    assert plan.time_s(4 * per_channel) == pytest.approx(4 * per_channel * 1e-9 * 16 / 4)
    assert plan.time_s(per_channel / 2) == pytest.approx(per_channel / 2 * 1e-9 * 16)
    sizes = np.array([per_channel / 2, 4 * per_channel, full, 2 * full])
    assert np.allclose(plan.times_s(sizes), [plan.time_s(s) for s in sizes])


def test_tree_simple_chunks_shrink_with_depth():
    """enqueue.cc halves a Simple tree's 512 KiB chunk while the message has fewer than
    8, 4 and 1 chunks per pipeline stage, down to 128, 64 and 32 KiB."""
    sizes = np.array([2.0**30, 64 * 2**20, 2**20, 2**18])
    chunks = nccl.tree_chunk_bytes("Simple", sizes, 16, 8)
    assert chunks[0] == 512 * 1024
    assert chunks[1] == 131072          # 64 MiB / (16 x 512 KiB) = 8 < 64 -> 128 KiB
    assert chunks[2] == 32768           # down to the last floor
    assert chunks[3] == 2**18 / 16      # never more than the channel's share
