"""Performance targets (pytest-benchmark): the fast path and the SimPy engine's event rate."""

from __future__ import annotations

import time

from simulators.engine import run_simpy
from simulators.run import simulate
from testbed.resolve import resolve
from testbed.scenario import load_scenario, scenario_from_dict


def test_bench_llama3_1000_replications_fast_path(benchmark):
    spec = resolve(load_scenario("scenarios/llama3-405b.yaml"))
    start = time.process_time()
    summary = benchmark.pedantic(simulate, args=(spec, 1000, 405), rounds=1, iterations=1)
    cpu_s = time.process_time() - start
    benchmark.extra_info["cpu_s"] = cpu_s
    assert cpu_s < 10.0
    assert summary.stats.replications == 1000
    # about 54 d / 3.1 h ≈ 420 interruptions plus those during the extra wall time
    assert 420 < summary.stats.failures.mean < 540
    assert 0.8 < summary.stats.ettr.mean < 0.95


def test_bench_simpy_engine_events_per_second(benchmark):
    doc = {"workload": {"steps": 200000, "step_time": 10},
           "failures": {"mtbf": "3h"},
           "checkpoint": {"policy": "daly", "cost": 30, "restart": "10min"}}
    spec = resolve(scenario_from_dict(doc))
    out = {}

    def run():
        t0 = time.process_time()
        out["result"], out["events"] = run_simpy(spec, 1, 0)
        out["cpu_s"] = time.process_time() - t0

    benchmark.pedantic(run, rounds=1, iterations=1)
    rate = out["events"] / out["cpu_s"]
    benchmark.extra_info["events"] = out["events"]
    benchmark.extra_info["events_per_s"] = rate
    print(f"SimPy engine: {out['events']} events in {out['cpu_s']:.2f} s CPU = {rate:,.0f} events/s")
    assert out["events"] > 200000 and rate > 10_000
