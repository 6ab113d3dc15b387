"""The compiled inlined loop equals the pure reference, replication for replication.

:mod:`simulators.fast_kernel` runs :func:`simulators.fast.run_simple`'s loop under
numba over arrays of the same draws; its seeding reproduces numpy's SeedSequence and
PCG64. Both are checked exactly: the generators' states and draws against numpy's for
many keys, every field of every :class:`RepResult` against the reference on random
scenarios of the cases it covers (spares or none, per-cause repairs, job-level and
per-node MTBFs, stationary and fresh starts, one checkpoint level or none, work lost
or kept), and the run limits.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simulators.fast import is_simple, run_simple
from simulators.fast_kernel import batch_runner, covered, fast_streams
from simulators.run import replicate
from testbed.app.resolve import resolve
from testbed.errors import RunawayError
from testbed.resilience.spec import RunLimits
from testbed.scenario.schema import load_scenario, scenario_from_dict
from testbed.streams import PURPOSES, stream


@given(st.integers(0, 2**64 - 1), st.integers(0, 2**40), st.sampled_from(sorted(PURPOSES)),
       st.integers(0, 3))
@settings(max_examples=300, deadline=None)
def test_streams_start_where_numpy_starts_them(seed, rep, purpose, index):
    streams = fast_streams()
    assert streams is not None
    ours = streams.get(seed, rep, purpose, index)
    theirs = stream(seed, rep, purpose, index)
    assert ours.bit_generator.state == theirs.bit_generator.state
    assert (ours.random(4) == theirs.random(4)).all()


@st.composite
def simple_scenarios(draw):
    work_h = draw(st.floats(2.0, 300.0))
    nodes = draw(st.integers(1, 64))
    keep = draw(st.booleans())
    policy = "none" if keep else draw(st.sampled_from(["none", "fixed", "daly", "young"]))
    ck: dict = {"policy": policy, "restart": draw(st.floats(0.0, 900.0))}
    if policy != "none":
        ck["cost"] = draw(st.floats(1.0, 600.0))
        if draw(st.booleans()):
            ck["persist"] = draw(st.floats(0.0, 600.0))
    if policy == "fixed":
        ck["interval"] = draw(st.floats(600.0, 6 * 3600.0))
    key = draw(st.sampled_from(["mtbf", "node_mtbf"]))
    # runs stay short: a job that loses everything at a failure needs an MTBF near its work
    low = work_h / 3 if policy == "none" and not keep else work_h / 40
    mtbf_h = draw(st.floats(max(0.5, low), max(1.0, 4 * work_h)))
    dist = "exponential" if key == "node_mtbf" else draw(
        st.sampled_from(["exponential", "weibull", "lognormal"]))
    fail: dict = {key: f"{mtbf_h * (nodes if key == 'node_mtbf' else 1)}h",
                  "distribution": dist, "detect": draw(st.floats(0.0, 600.0)),
                  "restart": draw(st.floats(0.0, 600.0)),
                  "start": draw(st.sampled_from(["stationary", "fresh"])),
                  "exposure": draw(st.sampled_from(["in_use", "running"]))}
    if dist == "weibull":
        fail["shape"] = draw(st.floats(0.6, 1.8))
    if dist == "lognormal":
        fail["sigma"] = draw(st.floats(0.3, 1.5))
    if keep:
        fail["lose_work"] = False
    if draw(st.booleans()):
        fail["causes"] = [{"name": f"c{i}", "weight": draw(st.floats(0.1, 5.0)),
                           "repair": draw(st.floats(0.0, mtbf_h * 3600)),
                           "detect": draw(st.floats(0.0, 300.0)),
                           "restart": draw(st.floats(0.0, 300.0)),
                           "job_induced": draw(st.booleans())} for i in range(3)]
    cluster: dict = {"nodes": nodes}
    if draw(st.booleans()):
        cluster["spares"] = draw(st.integers(0, 4))
        cluster["repair"] = draw(st.floats(0.0, mtbf_h * 3600))
    return {"workload": {"compute_time": f"{work_h}h"}, "cluster": cluster,
            "failures": fail, "checkpoint": ck}, draw(st.integers(0, 2**32 - 1))


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(simple_scenarios())
def test_the_compiled_loop_equals_the_reference(case):
    doc, seed = case
    spec = resolve(scenario_from_dict(doc))
    assert is_simple(spec) and covered(spec)
    runner = batch_runner(spec, 10_000)
    assert runner is not None
    for rep in range(3):
        assert runner(seed, rep) == run_simple(spec, seed, rep)


def test_the_reference_case_is_equal_and_replicate_uses_the_compiled_loop():
    spec = resolve(load_scenario("scenarios/llama3-405b.yaml"))
    fast = replicate(spec, 200, 405)          # ≥ MIN_REPLICATIONS: compiled
    assert fast == [run_simple(spec, 405, rep) for rep in range(200)]
    assert np.mean([r.failures for r in fast]) > 400


def test_runaway_limits_are_raised_as_the_reference_raises_them():
    # the resolver refuses a job that expects more failures than the cap; the engines
    # still stop one that draws more than it (here: about 110 expected, cap 50)
    spec = resolve(scenario_from_dict({
        "workload": {"compute_time": "100h"}, "failures": {"mtbf": "1h"},
        "checkpoint": {"policy": "fixed", "interval": "10min", "cost": 10,
                       "restart": "1min"}}))
    spec = dataclasses.replace(spec, limits=RunLimits(max_failures=50))
    runner = batch_runner(spec, 1000)
    assert runner is not None
    with pytest.raises(RunawayError) as compiled:
        runner(1, 0)
    with pytest.raises(RunawayError) as reference:
        run_simple(spec, 1, 0)
    assert str(compiled.value) == str(reference.value)
