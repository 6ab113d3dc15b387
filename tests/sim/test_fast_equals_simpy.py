"""The fast exact path equals the step-by-step SimPy engine for the same seed.

Equality is exact for every discrete outcome (failures, their causes, checkpoints
committed) and holds to float round-off (relative 1e-9) for times: the SimPy engine
adds step times one at a time while the fast path multiplies.
"""

from __future__ import annotations

import math

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simulators.engine import run_simpy
from simulators.fast import run_fast
from testbed.resolve import resolve
from testbed.scenario import scenario_from_dict

REL = 1e-9


def _close(a: float, b: float, scale: float) -> bool:
    return math.isclose(a, b, rel_tol=REL, abs_tol=REL * scale)


def assert_same(spec, seed: int, rep: int) -> None:
    fast = run_fast(spec, seed, rep)
    slow, _ = run_simpy(spec, seed, rep)
    assert fast.failures == slow.failures
    assert fast.checkpoints == slow.checkpoints
    assert fast.by_cause == slow.by_cause
    scale = slow.wall_s
    for field in ("wall_s", "useful_s", "checkpoint_s", "lost_s", "restart_s", "waiting_s"):
        assert _close(getattr(fast, field), getattr(slow, field), scale), (
            field, getattr(fast, field), getattr(slow, field))


@st.composite
def small_scenarios(draw):
    stepped = draw(st.booleans())
    doc: dict = {"name": "prop"}
    if stepped:
        steps, step_s = draw(st.integers(1, 400)), draw(st.floats(1.0, 120.0))
        doc["workload"] = {"steps": steps, "step_time": step_s}
        work_s = steps * step_s
    else:
        work_s = draw(st.floats(600.0, 40 * 3600.0))
        doc["workload"] = {"compute_time": work_s}
    policy = draw(st.sampled_from(["none", "fixed", "young", "daly", "multilevel"]
                                  if work_s <= 6 * 3600 else ["fixed", "young", "daly",
                                                              "multilevel"]))
    ck: dict = {"policy": policy, "restart": draw(st.floats(0.0, 900.0))}
    if policy == "multilevel":
        ck["levels"] = [
            {"name": "local", "cost": draw(st.floats(1.0, 60.0)),
             "restart": draw(st.floats(0.0, 300.0)), "every": 1},
            {"name": "pfs", "cost": draw(st.floats(30.0, 600.0)),
             "restart": draw(st.floats(0.0, 900.0)), "every": draw(st.sampled_from([1, 2, 3, 5]))},
        ]
        ck.pop("restart")
    elif policy != "none":
        ck["cost"] = draw(st.floats(1.0, 900.0))
        if draw(st.booleans()):
            ck["persist"] = draw(st.floats(0.0, 600.0))
    if policy == "fixed":
        ck["interval"] = draw(st.floats(300.0, 3 * 3600.0))
    if policy == "daly":
        ck["daly_order"] = draw(st.sampled_from(["first", "higher", "exact"]))
    doc["checkpoint"] = ck
    nodes = draw(st.integers(1, 8))
    cluster: dict = {"nodes": nodes}
    if draw(st.booleans()):
        cluster["spares"] = draw(st.integers(0, 2))
        cluster["repair"] = draw(st.floats(60.0, 10 * 3600.0))
    doc["cluster"] = cluster
    dist = draw(st.sampled_from(["exponential", "weibull", "lognormal"]))
    fail: dict = {"distribution": dist, "detect": draw(st.floats(0.0, 300.0)),
                  "restart": draw(st.floats(0.0, 300.0))}
    key = draw(st.sampled_from(["mtbf", "node_mtbf"]))
    # job MTBF between half and three times the work, so that runs stay short
    mtbf = draw(st.floats(max(600.0, work_s / 2), max(1200.0, 3 * work_s)))
    fail[key] = mtbf * (nodes if key == "node_mtbf" else 1)
    if "repair" in cluster:   # repairs shorter than the job MTBF keep runs short
        cluster["repair"] = min(cluster["repair"], mtbf)
    if dist == "weibull":
        fail["shape"] = draw(st.floats(0.6, 1.6))
    if dist == "lognormal":
        fail["sigma"] = draw(st.floats(0.3, 1.5))
    if draw(st.booleans()):
        survives = [["local", "pfs"], ["pfs"], []] if policy == "multilevel" else [None, None, []]
        fail["causes"] = [
            {"name": f"c{i}", "weight": draw(st.floats(0.1, 5.0)),
             "detect": draw(st.floats(0.0, 200.0)), "restart": draw(st.floats(0.0, 600.0)),
             "repair": min(draw(st.floats(0.0, 8 * 3600.0)), mtbf),
             **({"survives": survives[i]} if survives[i] is not None else {})}
            for i in range(3)]
    if draw(st.booleans()):
        fail["bursts"] = {"probability": draw(st.floats(0.05, 1.0)),
                          "size": draw(st.integers(1, min(3, nodes))),
                          "window": draw(st.floats(1.0, 1800.0))}
    if draw(st.booleans()):
        every = draw(st.floats(4 * 3600.0, 48 * 3600.0))
        fail["maintenance"] = {"every": every, "duration": draw(st.floats(60.0, every / 4))}
    doc["failures"] = fail
    return doc, draw(st.integers(0, 2**32 - 1))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(small_scenarios())
def test_fast_path_equals_simpy_engine(case):
    doc, seed = case
    spec = resolve(scenario_from_dict(doc))
    for rep in range(2):
        assert_same(spec, seed, rep)


def test_equal_on_published_daly_case():
    from testbed.scenario import load_scenario
    spec = resolve(load_scenario("scenarios/daly-6h.yaml"))
    for rep in range(5):
        assert_same(spec, 1, rep)
