"""The one registry of random streams: numbers unique, no two purposes share a stream."""

from __future__ import annotations

import itertools

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from testbed.streams import PURPOSES, KeyedUniforms, generator, stream


def test_purpose_numbers_are_unique():
    assert len(set(PURPOSES.values())) == len(PURPOSES)


def test_the_old_collision_is_gone():
    """The simulator's replication 12 and the HPO sampler used to draw the same numbers
    (spawn keys (12, 1, 0) in two registries)."""
    sim = stream(7, 12, "failures").random(8)
    hpo = generator(7, "hpo.sampler", 0).random(8)
    assert not np.array_equal(sim, hpo)


@given(seed=st.integers(0, 2**32 - 1), key=st.integers(0, 2**16))
def test_no_two_purposes_share_a_stream(seed, key):
    first = {p: generator(seed, p, key).integers(2**63) for p in PURPOSES}
    assert len(set(first.values())) == len(PURPOSES)


def test_keyed_rows_do_not_depend_on_the_order_they_are_asked_for():
    a = KeyedUniforms(3, "hpo.sampler", 2)
    b = KeyedUniforms(3, "hpo.sampler", 2)
    rows = [a.row(i) for i in (5000, 1, 4097)]
    assert all(np.array_equal(r, b.rows(5001)[i]) for r, i in zip(rows, (5000, 1, 4097),
                                                                    strict=True))
    assert len(list(itertools.islice(b.rows(3), 3))) == 3
