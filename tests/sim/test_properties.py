"""Determinism of the event log and hypothesis properties of the simulated runs."""

from __future__ import annotations

import io
import math

from hypothesis import given, settings
from hypothesis import strategies as st

from simulators.engine import run_simpy
from simulators.fast import run_fast
from simulators.run import replicate
from testbed.app.resolve import resolve
from testbed.events import EVENT_KINDS, read_events, write_events
from testbed.scenario.schema import scenario_from_dict

BUSY = {"name": "busy", "workload": {"steps": 3000, "step_time": 20},   # ~8 failures expected
        "cluster": {"nodes": 4, "spares": 1, "repair": "3h"},
        "failures": {"node_mtbf": "8h", "detect": 30, "restart": 60,
                     "causes": [{"name": "gpu", "weight": 3, "repair": "5h"},
                                {"name": "software", "weight": 1, "repair": 0}],
                     "bursts": {"probability": 0.3, "size": 2, "window": "10min"},
                     "maintenance": {"every": "1d", "duration": "1h"}},
        "checkpoint": {"policy": "daly", "cost": 40, "persist": 60, "restart": 90}}


def _log(seed: int) -> bytes:
    records: list[dict] = []
    run_simpy(resolve(scenario_from_dict(BUSY)), seed, 0, records)
    buf = io.StringIO()
    write_events(records, buf)
    return buf.getvalue().encode()


def test_same_seed_gives_byte_identical_event_log():
    a, b = _log(11), _log(11)
    assert a == b
    assert a != _log(12)
    events = read_events(io.StringIO(a.decode()))
    assert {e["event"] for e in events} <= set(EVENT_KINDS)
    assert events[0]["event"] == "job_start" and events[-1]["event"] == "job_end"
    times = [e["t_s"] for e in events]
    assert times == sorted(times)
    assert any(e["event"] == "failure" for e in events)


@st.composite
def cases(draw):
    work = draw(st.floats(3600.0, 50 * 3600.0))
    mtbf = draw(st.floats(work / 3, 3 * work))
    # segments (interval + cost) well below the MTBF: a narrow lognormal or Weibull
    # would otherwise never let a longer segment through
    doc = {"workload": {"compute_time": work},
           "failures": {"mtbf": mtbf, "distribution": draw(st.sampled_from(
               ["exponential", "weibull", "lognormal"]))},
           "checkpoint": {"policy": draw(st.sampled_from(["young", "daly", "fixed"])),
                          "cost": draw(st.floats(1.0, min(600.0, mtbf / 4))),
                          "restart": draw(st.floats(0.0, 1200.0))}}
    if doc["failures"]["distribution"] == "weibull":
        doc["failures"]["shape"] = draw(st.floats(0.6, 1.5))
    if doc["failures"]["distribution"] == "lognormal":
        doc["failures"]["sigma"] = draw(st.floats(0.3, 1.2))
    if doc["checkpoint"]["policy"] == "fixed":
        doc["checkpoint"]["interval"] = draw(st.floats(600.0, max(600.0, min(4 * 3600.0,
                                                                          mtbf / 2))))
    if draw(st.booleans()):
        doc["cluster"] = {"nodes": 2, "spares": draw(st.integers(0, 2)),
                          "repair": draw(st.floats(0.0, min(4 * 3600.0, mtbf)))}
    return doc, draw(st.integers(0, 10**9))


@settings(max_examples=60, deadline=None)
@given(cases())
def test_time_is_conserved_and_ettr_in_unit_interval(case):
    doc, seed = case
    spec = resolve(scenario_from_dict(doc))
    r = run_fast(spec, seed, 0)
    parts = r.useful_s + r.checkpoint_s + r.lost_s + r.restart_s + r.waiting_s
    assert math.isclose(parts, r.wall_s, rel_tol=1e-12)
    assert min(r.checkpoint_s, r.lost_s, r.restart_s, r.waiting_s) >= 0
    assert 0 < r.ettr <= 1
    assert r.useful_s == spec.plan.work_s


@settings(max_examples=15, deadline=None)
@given(st.floats(1.0, 600.0), st.floats(0.0, 1200.0), st.floats(2 * 3600.0, 48 * 3600.0),
       st.floats(1.5, 4.0), st.integers(0, 10**6))
def test_more_frequent_failures_never_shorten_expected_wall_time(cost, restart, mtbf, factor,
                                                                  seed):
    # fixed interval and common random numbers: exponential gaps scale with the MTBF
    def mean_wall(m):
        doc = {"workload": {"compute_time": "100h"}, "failures": {"mtbf": m},
               "checkpoint": {"policy": "fixed", "interval": "1h", "cost": cost,
                              "restart": restart}}
        res = replicate(resolve(scenario_from_dict(doc)), 150, seed)
        return sum(r.wall_s for r in res) / len(res)
    assert mean_wall(mtbf / factor) >= mean_wall(mtbf)


def test_fast_path_is_deterministic_per_seed():
    spec = resolve(scenario_from_dict(BUSY))
    assert replicate(spec, 5, 3) == replicate(spec, 5, 3)
    assert replicate(spec, 5, 3) != replicate(spec, 5, 4)
