"""Grid parsing, overrides, seeds and the store's guarantees, unit by unit."""

from __future__ import annotations

import sqlite3

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from testbed.app.results_db import Store
from testbed.app.sweep import plan_sweep
from testbed.app.sweep.grid import apply_overrides, expand, parse_axis, parse_grid, split_path
from testbed.app.sweep.points import canonical_json, point_seed
from testbed.errors import InputError


def test_axis_values_read_as_yaml():
    a = parse_axis("checkpoint.interval=10min, 1h ,3600")
    assert a.key == "checkpoint.interval"
    assert a.values == ("10min", "1h", 3600)
    assert parse_axis("failures.bursts.probability=0.5").values == (0.5,)


@pytest.mark.parametrize("bad", ["nokey", "=1,2", "a.b=", "a.b=1,,2", "a..b=1", "a.b=1,1",
                                 "a b=1", "a.b=[1"])
def test_bad_axes_are_input_errors(bad):
    with pytest.raises(InputError) as info:
        parse_axis(bad)
    assert info.value.format().startswith("--grid")


def test_duplicate_key_and_cross_product_order():
    with pytest.raises(InputError):
        parse_grid(["a.b=1", "a.b=2"])
    pts = expand(parse_grid(["x=1,2", "y=a,b,c"]))
    assert pts == [{"x": 1, "y": "a"}, {"x": 1, "y": "b"}, {"x": 1, "y": "c"},
                   {"x": 2, "y": "a"}, {"x": 2, "y": "b"}, {"x": 2, "y": "c"}]
    assert expand([]) == [{}]


def test_overrides_create_paths_and_index_lists():
    base = {"checkpoint": {"levels": [{"cost": 1}, {"cost": 2}]}}
    out = apply_overrides(base, {"checkpoint.levels[1].cost": 5, "failures.bursts.size": 3})
    assert out["checkpoint"]["levels"][1]["cost"] == 5
    assert out["failures"] == {"bursts": {"size": 3}}
    assert base["checkpoint"]["levels"][1]["cost"] == 2       # the base is not touched
    assert split_path("a.b[2].c") == ["a", "b", 2, "c"]
    with pytest.raises(InputError):
        apply_overrides(base, {"checkpoint.levels[5].cost": 1})


@settings(max_examples=50, deadline=None)
@given(seed=st.integers(0, 2**32), a=st.binary(min_size=32, max_size=32),
       b=st.binary(min_size=32, max_size=32))
def test_point_seeds_are_stable_distinct_and_fit_sqlite(seed, a, b):
    s1 = point_seed(seed, a.hex())
    assert s1 == point_seed(seed, a.hex())
    assert 0 <= s1 < 2**63
    if a[:16] != b[:16]:
        assert s1 != point_seed(seed, b.hex())
    assert point_seed(seed, a.hex(), common=True) == seed
    assert canonical_json({"b": 1.0, "a": [1, 2]}) == '{"a":[1,2],"b":1.0}'


def test_plan_validates_every_point_and_names_the_grid_option(sweep_scenario):
    with pytest.raises(InputError) as info:
        plan_sweep(sweep_scenario, ["checkpoint.interval=10min,5 parsecs"])
    msg = info.value.format()
    assert msg.startswith("--grid checkpoint.interval=5 parsecs: checkpoint.interval:")
    with pytest.raises(InputError) as info:
        plan_sweep(sweep_scenario, ["checkpoint.intervall=1h"])
    assert "did you mean 'interval'" in info.value.format()
    with pytest.raises(InputError):
        plan_sweep(sweep_scenario, ["checkpoint.interval=1h,60min"])   # same point twice


def test_same_values_in_other_units_are_the_same_scenario(sweep_scenario):
    a = plan_sweep(sweep_scenario, ["checkpoint.interval=1h"]).points[0]
    b = plan_sweep(sweep_scenario, ["checkpoint.interval=3600"]).points[0]
    assert a.scenario_hash == b.scenario_hash


def test_store_refuses_duplicates_and_rolls_back_half_points(tmp_path):
    db = tmp_path / "s.db"
    rows = [(r, 10.0, 8.0, 1.0, 0.5, 0.5, 0.0, 1, 2, 0.8, 0.01) for r in range(3)]
    with Store(db) as store:
        assert store.db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        kw = dict(point_key="k1", scenario_hash="h", seed=1, engine="fast", code_version="v",
                  elapsed_s=0.1, worker="w")
        assert store.record_point(rows=rows, **kw)
        assert not store.record_point(rows=rows, **kw)               # already there
        bad = rows[:2] + [(1, *rows[2][1:])]                          # duplicate replication
        with pytest.raises(sqlite3.IntegrityError):
            store.record_point(rows=bad, **{**kw, "point_key": "k2"})
        assert store.count_rows() == 3
        assert store.finished_keys() == {"k1"}


def test_store_errors_are_input_errors(tmp_path):
    with pytest.raises(InputError):
        Store(tmp_path / "missing.db", create=False)
    junk = tmp_path / "junk.db"
    junk.write_text("not a database at all" * 100)
    with pytest.raises(InputError):
        Store(junk, create=False)


def test_grid_on_interval_and_mtbf_implies_fixed_policy_and_job_mtbf():
    from testbed.app.sweep.grid import apply_implications
    base = {"failures": {"node_mtbf": "60d"}, "checkpoint": {"policy": "daly"}}
    keys = {"checkpoint.interval": "1h", "failures.mtbf": "3h"}
    out = apply_implications(apply_overrides(base, keys), keys)
    assert out == {"failures": {"mtbf": "3h"}, "checkpoint": {"policy": "fixed",
                                                              "interval": "1h"}}
    keys = {"checkpoint.interval": "1h", "checkpoint.policy": "young"}
    out = apply_implications(apply_overrides(base, keys), keys)
    assert out["checkpoint"]["policy"] == "young"      # an explicit policy wins


def test_the_issue_example_sweep_plans_on_the_quickstart():
    from tests.whatif.conftest import REPO
    plan = plan_sweep(REPO / "scenarios" / "quickstart.yaml",
                      ["checkpoint.interval=10min,30min,1h", "failures.mtbf=3h,6h"],
                      replications=5)
    assert len(plan.points) == 6
    assert {round(f.job_mtbf_s) for f in plan.facts} == {3 * 3600, 6 * 3600}
    assert all(f.policy == "fixed" for f in plan.facts)


def test_a_write_after_an_interrupted_begin_ends_the_transaction_left_open(tmp_path):
    """A signal that lands between a BEGIN and its guard (the fresh-clone failure of a
    SIGTERMed sweep: 'cannot start a transaction within a transaction' at its release)
    leaves a transaction open; the next write rolls it back first, so the interrupted
    sweep still releases its claims and exits as interrupted."""
    store = Store(tmp_path / "s.db")
    assert store.claim(["a", "b"], "me", alive=lambda _owner: True) == {"a", "b"}
    store.db.execute("BEGIN IMMEDIATE")                 # what the interrupt left open
    store.db.execute("DELETE FROM claims WHERE point_key='a'")   # and half done
    store.release("me")
    assert not store.db.in_transaction
    assert store.db.execute("SELECT COUNT(*) FROM claims").fetchone() == (0,)
    assert store.claim(["a"], "other", alive=lambda _owner: True) == {"a"}
