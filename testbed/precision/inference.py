"""Confidence intervals and paired tests for a study that shares seeds and a test set.

A precision study scores every (precision, seed) network on the same test items, so
its data are arrays ``scores[seed, item]`` (1/0 for a correct forecast, or an absolute
error) and the comparison of two precisions is *paired*: same seed (same initial
weights and batches), same item. Two sources of chance remain — which seeds were
drawn and which items the test set holds — and both are resampled:

* :func:`bootstrap_mean` — a two-level bootstrap: seeds with replacement, then test
  *blocks* with replacement (a block is an item, or for a time series a whole year of
  months, so that months of one season stay together: a block bootstrap, Künsch
  1989); the percentile interval of the mean over ``resamples`` draws;
* :func:`paired_test` — the mean paired difference ``a − b`` with the same two-level
  bootstrap interval, and a two-sided sign-flip permutation test on the per-block sums
  of the seed-averaged differences (exchangeable under "no difference"): exact over
  every sign pattern when there are few blocks (ten test years: 1,024 patterns), else
  ``(1 + #{|T*| ≥ |T|}) / (1 + permutations)`` over random ones;
* :func:`within_margin` — the non-inferiority reading of an interval (Wellek 2010):
  a change whose whole interval lies above ``−margin`` is *supported* as within the
  margin, one whose whole interval lies below ``−margin`` *contradicts* it, anything
  else is *undecided*.

Random draws come from the run's ``precision.bootstrap`` and ``precision.permutation``
streams (:mod:`testbed.streams`), so a rerun gives the same intervals.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from testbed.stats import CONFIDENCE
from testbed.streams import generator

#: Bootstrap resamples and permutations of a full study.
RESAMPLES, PERMUTATIONS = 2000, 5000


@dataclass(frozen=True)
class Interval:
    """A mean and its percentile bootstrap interval (``CONFIDENCE``, two-sided)."""

    mean: float
    low: float
    high: float

    def to_dict(self) -> dict:
        return asdict(self)

    def scaled(self, factor: float) -> Interval:
        return Interval(self.mean * factor, self.low * factor, self.high * factor)


@dataclass(frozen=True)
class PairedTest:
    """``a − b`` over the same seeds and items: its interval and permutation p-value."""

    difference: Interval
    p_value: float
    blocks: int
    seeds: int

    def to_dict(self) -> dict:
        return {"difference": self.difference.to_dict(), "p_value": self.p_value,
                "blocks": self.blocks, "seeds": self.seeds}


def _check(scores: np.ndarray, blocks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    arr = np.asarray(scores, dtype=np.float64)
    if arr.ndim == 1:
        arr = arr[None, :]
    labels = np.asarray(blocks)
    if arr.ndim != 2 or arr.shape[1] != labels.shape[0] or arr.size == 0:
        raise ValueError(f"scores must be seeds × items with one block label per item, got "
                         f"{arr.shape} and {labels.shape}")
    return arr, np.unique(labels, return_inverse=True)[1]


def _block_sums(arr: np.ndarray, index: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per seed and block: the sum of the scores, and the items per block."""
    n_blocks = int(index.max()) + 1
    sums = np.zeros((arr.shape[0], n_blocks))
    for s in range(arr.shape[0]):
        sums[s] = np.bincount(index, weights=arr[s], minlength=n_blocks)
    return sums, np.bincount(index, minlength=n_blocks).astype(np.float64)


def _resampled_means(sums: np.ndarray, sizes: np.ndarray, resamples: int,
                     rng: np.random.Generator) -> np.ndarray:
    seeds, blocks = sums.shape
    pick_s = rng.integers(0, seeds, size=(resamples, seeds))
    pick_b = rng.integers(0, blocks, size=(resamples, blocks))
    out = np.empty(resamples)
    for r in range(resamples):
        chosen = sums[pick_s[r]][:, pick_b[r]]
        out[r] = chosen.sum() / (seeds * sizes[pick_b[r]].sum())
    return out


def _interval(point: float, draws: np.ndarray) -> Interval:
    tail = 100 * (1 - CONFIDENCE) / 2
    low, high = np.percentile(draws, [tail, 100 - tail])
    return Interval(float(point), float(min(low, point)), float(max(high, point)))


def bootstrap_mean(scores, blocks, *, seed: int = 0, key: int = 0,
                   resamples: int = RESAMPLES) -> Interval:
    """The mean of ``scores[seed, item]`` and its two-level bootstrap interval."""
    arr, index = _check(scores, blocks)
    sums, sizes = _block_sums(arr, index)
    rng = generator(seed, "precision.bootstrap", key)
    return _interval(float(arr.mean()), _resampled_means(sums, sizes, resamples, rng))


def paired_test(a, b, blocks, *, seed: int = 0, key: int = 0, resamples: int = RESAMPLES,
                permutations: int = PERMUTATIONS) -> PairedTest:
    """Paired ``a − b`` (same seeds, same items): interval and sign-flip p-value."""
    arr_a, index = _check(a, blocks)
    arr_b, _ = _check(b, blocks)
    if arr_b.shape[1] != arr_a.shape[1]:
        raise ValueError(f"paired scores must share items: {arr_a.shape} and {arr_b.shape}")
    if arr_b.shape[0] == 1 and arr_a.shape[0] > 1:     # a fixed baseline: every seed alike
        arr_b = np.repeat(arr_b, arr_a.shape[0], axis=0)
    if arr_a.shape != arr_b.shape:
        raise ValueError(f"paired scores must share seeds: {arr_a.shape} and {arr_b.shape}")
    diff = arr_a - arr_b
    sums, sizes = _block_sums(diff, index)
    rng = generator(seed, "precision.bootstrap", key)
    interval = _interval(float(diff.mean()), _resampled_means(sums, sizes, resamples, rng))
    per_block = sums.mean(axis=0)
    return PairedTest(interval, _sign_flip_p(per_block, permutations, seed, key),
                      int(per_block.size), int(arr_a.shape[0]))


def _sign_flip_p(per_block: np.ndarray, permutations: int, seed: int, key: int) -> float:
    """Two-sided p of the sum of ``per_block`` under random signs: exact over all 2ᴮ sign
    patterns when that is no more than ``permutations``, else Monte Carlo."""
    observed = abs(float(per_block.sum()))
    if observed == 0:
        return 1.0
    tol = 1e-12 * max(1.0, observed)
    if 2 ** per_block.size <= permutations:
        patterns = ((np.arange(2 ** per_block.size)[:, None] >> np.arange(per_block.size))
                    & 1) * 2.0 - 1.0
        return float(np.mean(np.abs(patterns @ per_block) >= observed - tol))
    flips = generator(seed, "precision.permutation", key).choice(
        np.array([-1.0, 1.0]), size=(permutations, per_block.size))
    extreme = int(np.count_nonzero(np.abs(flips @ per_block) >= observed - tol))
    return (1 + extreme) / (1 + permutations)


def within_margin(change: Interval, margin: float) -> str:
    """``supported`` / ``contradicted`` / ``undecided``: is the change above ``−margin``?"""
    if change.low > -margin:
        return "supported"
    if change.high < -margin:
        return "contradicted"
    return "undecided"
