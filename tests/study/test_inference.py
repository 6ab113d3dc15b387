"""Bootstrap intervals and paired tests of the precision study (testbed.precision.inference):
closed forms, invariants (hypothesis) and the coverage the intervals promise."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from testbed.precision.inference import (
    Interval,
    bootstrap_mean,
    paired_test,
    within_margin,
)


def test_constant_scores_have_a_degenerate_interval():
    iv = bootstrap_mean(np.ones((3, 40)), np.arange(40), resamples=200)
    assert iv == Interval(1.0, 1.0, 1.0)


def test_identical_runs_differ_by_nothing_with_p_one():
    a = (np.arange(60) % 3 == 0).astype(float).reshape(1, 60)
    test = paired_test(a, a, np.arange(60), resamples=200, permutations=200)
    assert test.difference == Interval(0.0, 0.0, 0.0) and test.p_value == 1.0


def test_exact_sign_flip_p_value():
    """Five blocks each one item better, five untouched: of the 2⁵ sign patterns of the
    non-zero blocks only the two all-equal ones reach |T| = 5, so p = 2/32 exactly."""
    b = np.zeros((1, 100))
    a = b.copy()
    a[0, [0, 10, 20, 30, 40]] = 1.0
    blocks = np.repeat(np.arange(10), 10)
    test = paired_test(a, b, blocks, resamples=300)
    assert test.p_value == pytest.approx(2 / 32)
    assert test.blocks == 10 and test.seeds == 1
    assert test.difference.mean == pytest.approx(0.05)


def test_a_fixed_baseline_pairs_with_every_seed():
    runs = np.array([[1, 1, 0, 1], [1, 0, 0, 1]], dtype=float)
    baseline = np.array([0, 1, 0, 0], dtype=float)
    test = paired_test(runs, baseline, np.arange(4), resamples=200, permutations=200)
    assert test.difference.mean == pytest.approx(((3 - 1) + (2 - 1)) / 8)
    assert test.seeds == 2


@settings(max_examples=30, deadline=None)
@given(data=st.data(), seeds=st.integers(1, 4), items=st.integers(2, 30))
def test_interval_holds_the_mean_and_difference_is_antisymmetric(data, seeds, items):
    a = np.array(data.draw(st.lists(st.sampled_from([0.0, 1.0]), min_size=seeds * items,
                                    max_size=seeds * items))).reshape(seeds, items)
    b = np.array(data.draw(st.lists(st.sampled_from([0.0, 1.0]), min_size=seeds * items,
                                    max_size=seeds * items))).reshape(seeds, items)
    blocks = np.arange(items) // 2
    iv = bootstrap_mean(a, blocks, resamples=100)
    assert iv.low <= iv.mean <= iv.high and 0.0 <= iv.low and iv.high <= 1.0
    ab = paired_test(a, b, blocks, resamples=100, permutations=100)
    ba = paired_test(b, a, blocks, resamples=100, permutations=100)
    assert ab.difference.mean == pytest.approx(-ba.difference.mean)
    assert ab.p_value == pytest.approx(ba.p_value)
    assert 0.0 < ab.p_value <= 1.0


def test_same_seed_same_interval_and_another_seed_another():
    rng = np.random.default_rng(0)
    scores = (rng.random((3, 80)) < 0.6).astype(float)
    one = bootstrap_mean(scores, np.arange(80), seed=4, resamples=300)
    assert one == bootstrap_mean(scores, np.arange(80), seed=4, resamples=300)
    assert one != bootstrap_mean(scores, np.arange(80), seed=5, resamples=300)


def test_intervals_cover_the_true_accuracy_about_95_percent_of_the_time():
    """200 test sets of 120 Bernoulli(0.7) items: the 95% interval should hold 0.7 in
    about 190 of them (binomial: 183…197 covers 99% of outcomes; percentile intervals run
    a little short on small samples, so 175 is the floor)."""
    rng = np.random.default_rng(20250101)
    covered = 0
    for trial in range(200):
        items = (rng.random(120) < 0.7).astype(float)
        iv = bootstrap_mean(items, np.arange(120), seed=trial, resamples=400)
        covered += iv.low <= 0.7 <= iv.high
    assert 175 <= covered <= 199


@pytest.mark.parametrize("low, high, verdict", [(-1.0, 1.0, "supported"),
                                               (-3.0, -2.5, "contradicted"),
                                               (-2.5, 0.5, "undecided"),
                                               (-2.0, 0.0, "undecided")])
def test_within_margin_reads_the_interval(low, high, verdict):
    assert within_margin(Interval((low + high) / 2, low, high), 2.0) == verdict
