"""Alpha-beta collectives: exact formulas and invariants."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from testbed.oracle.collectives import Fabric
from testbed.systems import load_system


@pytest.fixture(scope="module")
def fabric():
    s = load_system("abci-v100")
    return Fabric.from_spec(s.network, s.node.gpus_per_node, nominal=True)


def test_ring_allreduce_formula(fabric):
    m = 100e6
    cost = fabric.ring_allreduce(m, 16)
    assert cost.tier == "ib-leaf"
    assert cost.time_s == pytest.approx(2 * 15 * (40.3e-6 + m / 16 / 12.5e9))


def test_tier_choice_by_span(fabric):
    assert fabric.ring_allreduce(1e6, 4).tier == "nvlink"
    assert fabric.ring_allreduce(1e6, 68).tier == "ib-leaf"
    assert fabric.ring_allreduce(1e6, 100).tier == "ib-rack"
    assert fabric.ring_allreduce(1e6, 1024).tier == "ib-spine"
    # 8 ranks one per node (stride 4) span 29 GPUs: InfiniBand, not NVLink
    assert fabric.ring_allreduce(1e6, 8, stride=4).tier == "ib-leaf"


def test_tree_wins_small_messages_at_scale(fabric):
    # latency-bound: 2·log2(N) steps beat 2(p-1) ring steps
    assert fabric.allreduce(64e3, 512).algorithm == "tree"
    # bandwidth-bound inside a rack: the ring's (p-1)/p beats the tree's 2m
    assert fabric.allreduce(500e6, 16).algorithm == "ring"


def test_oversubscription_slows_trees_beyond_a_rack(fabric):
    inside = fabric.tree_allreduce(100e6, 128)
    across = fabric.tree_allreduce(100e6, 256)
    assert across.time_s > 2.5 * inside.time_s


def test_allgather_formula(fabric):
    total = 64e6
    assert fabric.allgather(total, 4).time_s == pytest.approx(3 * (9e-6 + total / 4 / 50e9))


def test_vectorised_sums_match_scalar(fabric):
    sizes = np.array([1e3, 1e5, 1e7, 5e8, 0.0])
    for n in (2, 4, 16, 256):
        assert fabric.allreduce_sum(sizes, n) == pytest.approx(
            sum(fabric.allreduce(s, n).time_s for s in sizes))
        assert fabric.allgather_sum(sizes, n) == pytest.approx(
            sum(fabric.allgather(s, n).time_s for s in sizes))


@settings(max_examples=200, deadline=None)
@given(m=st.floats(1.0, 1e10), n=st.integers(2, 4096), factor=st.floats(1.0, 10.0))
def test_allreduce_monotone_in_bytes(fabric, m, n, factor):
    assert fabric.allreduce(m * factor, n).time_s >= fabric.allreduce(m, n).time_s


@settings(max_examples=200, deadline=None)
@given(m=st.floats(1.0, 1e10), n=st.integers(2, 4096))
def test_allreduce_is_the_cheaper_algorithm(fabric, m, n):
    best = fabric.allreduce(m, n).time_s
    assert best == min(fabric.ring_allreduce(m, n).time_s, fabric.tree_allreduce(m, n).time_s)
    assert best > 0 and math.isfinite(best)
