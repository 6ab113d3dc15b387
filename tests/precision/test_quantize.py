"""k-bit quantisation: error bounds, idempotence, nested grids, and stochastic rounding
unbiased and reproducible."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from testbed.errors import InputError
from testbed.precision import dequantize, fit_scale, quantize, quantize_values

VALUES = st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False)
DATA = arrays(np.float64, st.tuples(st.integers(1, 40), st.integers(1, 4)), elements=VALUES)
#: Data whose steps stay in float64's normal range (|x| ≥ 1e-200 or 0): with subnormal
#: steps, span / (2ᵏ − 1) is inexact and the grids are no longer nested.
NORMAL_DATA = arrays(np.float64, st.tuples(st.integers(1, 40), st.integers(1, 4)),
                     elements=VALUES.filter(lambda v: v == 0 or abs(v) >= 1e-200))
BITS = st.integers(2, 16)
MODES = st.sampled_from(["nearest", "truncate", "stochastic"])
#: Float slack on the bounds: the read-back value low + c·step is itself rounded.
SLACK = 1e-9


def seed(n: int = 0) -> np.random.SeedSequence:
    return np.random.SeedSequence(n)


@settings(max_examples=300, deadline=None)
@given(DATA, BITS, st.booleans(), MODES)
def test_error_within_a_step_and_half_a_step_with_rounding(x, k, per_feature, mode):
    scale = fit_scale(x, k, per_feature=per_feature)
    err = np.abs(quantize_values(x, k, rounding=mode, seed=seed(), scale=scale) - x)
    step = np.broadcast_to(scale.step, x.shape)
    slack = SLACK * (step + np.abs(x))
    if mode == "nearest":
        assert np.all(err <= step / 2 + slack)
    else:
        assert np.all(err < step + slack)


@settings(max_examples=300, deadline=None)
@given(DATA, BITS, st.booleans(), MODES)
def test_quantising_twice_is_quantising_once(x, k, per_feature, mode):
    """With the same scale, read-back values are levels and stay put (every mode); with
    the scale refitted to them, they move by float rounding only."""
    scale = fit_scale(x, k, per_feature=per_feature)
    codes = quantize(x, scale, rounding=mode, seed=seed(1))
    again = quantize(dequantize(codes, scale), scale, rounding=mode, seed=seed(2))
    np.testing.assert_array_equal(again, codes)
    once = dequantize(codes, scale)
    twice = quantize_values(once, k, per_feature=per_feature)
    np.testing.assert_allclose(twice, once, rtol=1e-12, atol=1e-9 * float(np.max(scale.step)))


@settings(max_examples=300, deadline=None)
@given(NORMAL_DATA, st.sampled_from([(2, 4), (2, 8), (4, 8), (8, 16), (3, 6), (5, 15), (4, 16)]),
       st.sampled_from(["nearest", "truncate"]))
def test_error_never_grows_with_k_on_nested_grids(x, kj, mode):
    """The k-bit levels are a subset of the j-bit ones when k divides j (2ᵏ−1 divides
    2ʲ−1), so the error at every value is no larger; the half-step bound halves (or
    better) with every extra bit."""
    k, j = kj
    ek = np.abs(quantize_values(x, k, rounding=mode) - x)
    ej = np.abs(quantize_values(x, j, rounding=mode) - x)
    span = np.ptp(x, axis=0)
    assert np.all(ej <= ek + SLACK * (span + np.abs(x)))
    steps = [fit_scale(x, b).step for b in range(2, 17)]
    assert all(np.all(b <= a) for a, b in zip(steps, steps[1:], strict=False))


def test_error_is_not_monotone_in_k_off_nested_grids():
    """Why the property above is stated for k | j: 1/3 is a 2-bit level but not a 3-bit one."""
    x = np.array([0.0, 1 / 3, 1.0])
    assert np.max(np.abs(quantize_values(x, 2) - x)) < 1e-15
    assert np.max(np.abs(quantize_values(x, 3) - x)) > 0.04


@settings(max_examples=60, deadline=None)
@given(st.floats(0.0, 1.0), st.integers(2, 10), st.integers(0, 2 ** 32))
def test_stochastic_rounding_is_unbiased(fraction, k, entropy):
    """The mean of N stochastic roundings of x is x within 5 standard errors (σ ≤ step/2);
    truncation of the same values is caught being biased whenever its bias exceeds that."""
    n = 20_000
    scale = fit_scale(np.array([0.0, 1.0]), k)
    x = np.full(n, float(np.clip(fraction, 0.0, 1.0)))
    got = dequantize(quantize(x, scale, rounding="stochastic",
                              seed=np.random.SeedSequence(entropy)), scale)
    tolerance = 5 * float(scale.step) / 2 / np.sqrt(n)
    assert abs(got.mean() - x[0]) <= tolerance
    truncated = quantize_values(x, k, rounding="truncate", scale=scale)
    bias = x[0] - truncated[0]
    if bias > 2 * tolerance:
        assert abs(truncated.mean() - x[0]) > tolerance


def test_stochastic_rounding_reproducible_for_a_seed():
    x = np.random.default_rng(7).uniform(-3, 3, size=(500, 3))
    scale = fit_scale(x, 4)
    a = quantize(x, scale, rounding="stochastic", seed=np.random.SeedSequence(42))
    b = quantize(x, scale, rounding="stochastic", seed=np.random.SeedSequence(42))
    c = quantize(x, scale, rounding="stochastic", seed=np.random.SeedSequence(43))
    np.testing.assert_array_equal(a, b)
    assert np.any(a != c)
    with pytest.raises(InputError, match="seed"):
        quantize(x, scale, rounding="stochastic")


def test_known_levels_clipping_and_constant_features():
    """int2 on [0, 3]: levels 0, 1, 2, 3; test values outside the fitted range clip to it;
    a constant feature is stored exactly."""
    scale = fit_scale(np.array([[0.0, 5.0], [3.0, 5.0]]), 2)
    assert scale.step.tolist() == [1.0, 1.0] and scale.levels == 3
    x = np.array([[1.4, 5.0], [1.6, 5.0], [-7.0, 5.0], [9.0, 5.0], [2.5, 5.0]])
    assert quantize(x, scale).tolist() == [[1, 0], [2, 0], [0, 0], [3, 0], [2, 0]]
    assert dequantize(quantize(x, scale, rounding="truncate"), scale)[:, 0].tolist() == \
        [1.0, 1.0, 0.0, 3.0, 2.0]
    assert quantize(np.zeros((3, 1)), fit_scale(np.ones((2, 1)), 16)).dtype == np.uint16
    glob = fit_scale(np.array([[0.0, 10.0], [1.0, 20.0]]), 2, per_feature=False)
    assert glob.low.shape == () and float(glob.step) == 20.0 / 3


@pytest.mark.parametrize("bad", [1, 17, 0, -3, 2.5])
def test_bits_outside_2_to_16_refused(bad):
    with pytest.raises(InputError, match="2…16"):
        fit_scale(np.ones(3), bad)


def test_non_finite_data_refused():
    with pytest.raises(InputError, match="non-finite"):
        fit_scale(np.array([1.0, np.nan]), 8)
