"""Performance targets (pytest-benchmark): one prediction < 1 ms; a full ResNet-50
sweep (all strategies, p = 1…4096, three batch sizes) < 1 s."""

from __future__ import annotations

import time

from testbed.model.registry import get_model
from testbed.oracle import Request, estimate
from testbed.oracle.sweep import sweep
from testbed.systems.profile import load_system
from tests.targets import at_most, mean_s


def _per_call_s(fn, *args, calls: int = 50, **kwargs) -> float:
    """Mean seconds of ``calls`` calls (the timing when benchmarks are disabled)."""
    start = time.perf_counter()
    for _ in range(calls):
        fn(*args, **kwargs)
    return (time.perf_counter() - start) / calls


def test_bench_one_prediction(benchmark):
    model, system = get_model("resnet50"), load_system("abci-v100")
    req = Request(model=model, system=system, strategy="ds", gpus=256, global_batch=4096,
                  group_size=4)
    estimate(req)  # warm the per-model caches, as any second call would
    result = benchmark(estimate, req)
    assert result.feasible
    at_most(benchmark, mean_s(benchmark, _per_call_s(estimate, req)), 1e-3, "one prediction")


def test_bench_full_sweep(benchmark):
    model, system = get_model("resnet50"), load_system("abci-v100")
    result = benchmark.pedantic(sweep, args=(model, system, (256, 2048, 16384)),
                                kwargs={"max_gpus": 4096}, rounds=3, iterations=1)
    assert len(result.estimates) > 240  # 8 strategies x up to 13 GPU counts x 3 batches
    at_most(benchmark, mean_s(benchmark, _per_call_s(sweep, model, system, (256, 2048, 16384),
                                                     max_gpus=4096, calls=1)), 1.0,
            "full ResNet-50 sweep")
