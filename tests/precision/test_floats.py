"""Float formats: the IEEE rounding bounds, idempotence, nesting, and bfloat16 bit for bit
against ml_dtypes (the bfloat16 type TensorFlow and JAX use)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from testbed.precision import (
    bfloat16_bits,
    from_bfloat16_bits,
    to_bfloat16,
    to_float16,
    to_float32,
    truncate_mantissa,
)
from testbed.precision.floats import (
    BFLOAT16_MAX,
    BFLOAT16_UNIT_ROUNDOFF,
    FLOAT16_MAX,
    FLOAT16_MIN_NORMAL,
    FLOAT16_UNIT_ROUNDOFF,
)

FLOATS = st.floats(allow_nan=False, allow_infinity=False, width=64)
#: float16 normal range, both signs.
FP16_NORMAL = st.floats(FLOAT16_MIN_NORMAL, FLOAT16_MAX).map(float) | \
    st.floats(-FLOAT16_MAX, -FLOAT16_MIN_NORMAL).map(float)
#: float32 normal range that stays below bfloat16's largest finite value.
BF16_NORMAL = st.floats(2.0 ** -126, BFLOAT16_MAX) | st.floats(-BFLOAT16_MAX, -(2.0 ** -126))


def rel_error(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    return np.abs(y - x) / np.abs(x)


@settings(max_examples=300, deadline=None)
@given(arrays(np.float64, st.integers(1, 50), elements=FP16_NORMAL))
def test_float16_relative_error_at_most_unit_roundoff(x):
    """IEEE binary16 round-to-nearest: |fl(x) − x| ≤ 2⁻¹¹·|x| in the normal range
    (Higham, Accuracy and Stability of Numerical Algorithms, 2nd ed., Thm 2.2)."""
    assert np.all(rel_error(x, to_float16(x)) <= FLOAT16_UNIT_ROUNDOFF)


@settings(max_examples=300, deadline=None)
@given(arrays(np.float64, st.integers(1, 50), elements=BF16_NORMAL))
def test_bfloat16_relative_error_at_most_unit_roundoff(x):
    """bfloat16 has 8 significant bits: relative error ≤ 2⁻⁸ (plus the float32 step's
    2⁻²⁴ from the double rounding)."""
    assert np.all(rel_error(x, to_bfloat16(x)) <= BFLOAT16_UNIT_ROUNDOFF * (1 + 2.0 ** -15))


@settings(max_examples=200, deadline=None)
@given(arrays(np.float64, st.integers(1, 50), elements=FLOATS))
def test_rounding_twice_is_rounding_once(x):
    for fn in (to_float32, to_float16, to_bfloat16):
        once = fn(x)
        np.testing.assert_array_equal(fn(once), once)


@settings(max_examples=200, deadline=None)
@given(arrays(np.float64, st.integers(1, 50), elements=FP16_NORMAL))
def test_finer_format_never_errs_more(x):
    """float16 and bfloat16 values are float32 values, so rounding to float32 (nearest)
    is never further from x than rounding to either."""
    e32 = np.abs(to_float32(x) - x)
    assert np.all(e32 <= np.abs(to_float16(x) - x))
    assert np.all(e32 <= np.abs(to_bfloat16(x) - x))


def test_float16_overflow_and_exact_values():
    """65504 is the largest binary16; 65520 is the tie that rounds to infinity."""
    out = to_float16([65504.0, 65519.0, 65520.0, -1e6, 1.0, 0.5, 2048.0, 2049.0])
    assert out.tolist() == [65504.0, 65504.0, np.inf, -np.inf, 1.0, 0.5, 2048.0, 2048.0]


def test_bfloat16_known_patterns():
    """1.0 = 0x3F80, π → 0x4049 (3.140625), ties to even: 1 + 2⁻⁸ → 1.0, 1 + 3·2⁻⁸ →
    1 + 2⁻⁶; the largest finite value is 0x7F7F."""
    bits = bfloat16_bits([1.0, np.pi, 1 + 2.0 ** -8, 1 + 3 * 2.0 ** -8, -2.0, BFLOAT16_MAX,
                          np.inf, np.nan])
    assert [int(b) for b in bits[:7]] == [0x3F80, 0x4049, 0x3F80, 0x3F82, 0xC000, 0x7F7F,
                                          0x7F80]
    assert np.isnan(from_bfloat16_bits(bits[7:]))[0]


@settings(max_examples=300, deadline=None)
@given(arrays(np.float32, st.integers(1, 64),
              elements=st.floats(width=32, allow_nan=True, allow_infinity=True)))
def test_bfloat16_matches_ml_dtypes_bit_for_bit(x):
    ml_dtypes = pytest.importorskip("ml_dtypes")
    ours = bfloat16_bits(x)
    theirs = x.astype(ml_dtypes.bfloat16).view(np.uint16)
    nan = np.isnan(x)
    np.testing.assert_array_equal(ours[~nan], theirs[~nan])
    assert np.all(np.isnan(from_bfloat16_bits(ours[nan])))


@settings(max_examples=300, deadline=None)
@given(arrays(np.float64, st.integers(1, 30), elements=FLOATS), st.integers(0, 52))
def test_mantissa_truncation_bounds_idempotence_and_monotone_error(x, m):
    """Truncation to m bits: toward zero, relative error < 2⁻ᵐ for normal values,
    idempotent, and never more error with more bits kept (the grids are nested)."""
    t = truncate_mantissa(x, m)
    np.testing.assert_array_equal(truncate_mantissa(t, m), t)
    assert np.all(np.abs(t) <= np.abs(x))
    normal = np.abs(x) >= np.finfo(np.float64).tiny
    assert np.all(rel_error(x[normal], t[normal]) < 2.0 ** -m)
    if m < 52:
        assert np.all(np.abs(truncate_mantissa(x, m + 1) - x) <= np.abs(t - x))


def test_mantissa_truncation_keeps_non_finite_and_checks_bits():
    out = truncate_mantissa([np.nan, np.inf, -np.inf, 1.75], 0)
    assert np.isnan(out[0]) and out[1] == np.inf and out[2] == -np.inf and out[3] == 1.0
    with pytest.raises(ValueError):
        truncate_mantissa([1.0], 53)
