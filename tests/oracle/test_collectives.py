"""Collective cost models: exact formulas, the algorithm choice a tuner makes, and
invariants (published bus bandwidths are in test_published_figures.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from testbed.oracle.collectives import TREE_DERATE, Fabric, bus_factor
from testbed.systems.profile import load_system

GiB = 2**30


def fabric_of(name: str, **kw) -> Fabric:
    s = load_system(name)
    return Fabric.from_spec(s.network, s.node.gpus_per_node, **kw)


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
    """Across 8 DGX A100 nodes the ring runs at 8 NICs x 25 GB/s x 0.96, not one NIC."""
    n, m = 64, 8 * GiB
    cost = a100.allreduce(m, n)
    assert cost.algorithm == "ring"
    hop = (7 * 3e-6 + 6e-6) / 8                      # 7 NVLink hops and one IB hop per node
    expected = 2 * (n - 1) * hop + 2 * (n - 1) / n * m / (8 * 25e9 * 0.96)
    assert cost.time_s == pytest.approx(expected, rel=1e-12)
    # one rank per node reaches only its own rail
    assert a100.ring_Bps(a100.placement(8, stride=8))[0] == pytest.approx(25e9 * 0.96)


def test_tree_for_small_messages_ring_for_large(a100):
    """NCCL's tuner: trees have log-depth latency but less bandwidth (2S per node and
    the 0.92 derate), so they win small messages and lose large ones."""
    assert a100.allreduce(64e3, 512).algorithm == "tree"
    assert a100.allreduce(8 * GiB, 512).algorithm == "ring"
    sizes = [2**k for k in range(10, 34)]
    algos = [a100.allreduce(s, 512).algorithm for s in sizes]
    switch = algos.index("ring")
    assert set(algos[:switch]) == {"tree"} and set(algos[switch:]) == {"ring"}


def test_tree_bandwidth_formula(a100):
    place = a100.placement(64)
    plan = [p for p in a100.plans("allreduce", 64) if p.algorithm == "tree"][0]
    assert 1 / plan.s_per_byte == pytest.approx(
        TREE_DERATE * min(300e9 * 0.775 / 2, 8 * 25e9 * 0.96 / 2))
    assert plan.latency_s == pytest.approx(2 * (3 * 6e-6 + 7 * 3e-6))
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
    assert best == min(p.time_s(m) for p in a100.plans("allreduce", n))
    assert best > 0 and math.isfinite(best)
