"""Speed of the HPO simulator (targets from the issue: ASHA over 10,000 trials on
1,024 GPUs in < 1 s on one core, 100,000 trials in < 10 s)."""

from __future__ import annotations

import time

from simulators.hpo.engine import simulate_hpo
from testbed.hpo.plan import build_plan
from testbed.scenario.schema import scenario_from_dict
from tests.targets import at_most


def _asha(n: int):
    return build_plan(scenario_from_dict({
        "cluster": {"nodes": 128, "gpus_per_node": 8},
        "hpo": {"search": "random", "n_trials": n, "scheduler": "asha", "epoch_time": "30s",
                "space": {"lr": {"low": 1e-4, "high": 1e-1, "log": True},
                          "optimizer": ["adam", "sgd", "rmsprop"],
                          "batch_size": [32, 64, 128, 256]},
                "rungs": {"min_epochs": 1, "max_epochs": 81, "reduction_factor": 3}}}))


def _timed(benchmark, n: int):
    start = time.process_time()
    run = benchmark.pedantic(lambda: simulate_hpo(_asha(n)), rounds=1, iterations=1)
    cpu_s = time.process_time() - start
    benchmark.extra_info["cpu_s"] = cpu_s
    return run, cpu_s


def test_bench_asha_10k_trials_1024_gpus(benchmark):
    run, cpu_s = _timed(benchmark, 10_000)
    at_most(benchmark, cpu_s, 1.0, "ASHA, 10,000 trials on 1,024 GPUs (CPU s)")
    assert run.summary.trials == 10_000 and run.summary.trials_completed == 10_000


def test_bench_asha_100k_trials_1024_gpus(benchmark):
    run, cpu_s = _timed(benchmark, 100_000)
    at_most(benchmark, cpu_s, 10.0, "ASHA, 100,000 trials on 1,024 GPUs (CPU s)")
    assert run.summary.trials == 100_000
