"""Start-up of ``testbed simulate`` and ``testbed hpo simulate`` (target ≤ 0.3 s).

Measured as the CPU time (user + system) of the whole command on a tiny input — a
one-hour job, a one-trial sweep — so that the figure is the command's imports and
set-up (the CLI imports only the command asked for; a command imports only what its
input needs: no SciPy, SimPy, numba or oracle for a job given as compute time). The
best of five runs: other processes share the machine.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys

import pytest

from tests.conftest import REPO
from tests.targets import at_most

TINY_JOB = """name: tiny
workload: {compute_time: 1h}
failures: {mtbf: 24h}
checkpoint: {policy: none, restart: 0s}
simulation: {replications: 1}
"""
TINY_SWEEP = """name: tiny
cluster: {nodes: 1, gpus_per_node: 1}
hpo: {search: grid, space: {epochs: [1]}, epoch_time: 1s}
"""


def _cpu_s(args: list[str], runs: int = 5) -> float:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    best = float("inf")
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run([sys.executable, "-m", "testbed", *args], cwd=REPO, env=env,
                       check=True, stdout=subprocess.DEVNULL)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        best = min(best, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return best


@pytest.mark.parametrize("command, text", [(["simulate"], TINY_JOB),
                                           (["hpo", "simulate"], TINY_SWEEP)],
                         ids=["simulate", "hpo-simulate"])
def test_bench_command_starts_in_0_3_s(benchmark, tmp_path, command, text):
    path = tmp_path / "tiny.yaml"
    path.write_text(text)
    out: dict = {}
    benchmark.pedantic(lambda: out.update(cpu=_cpu_s([*command, str(path)])), rounds=1,
                       iterations=1)
    benchmark.extra_info["cpu_s"] = out["cpu"]
    print(f"testbed {' '.join(command)}: {out['cpu']:.3f} s CPU")
    at_most(benchmark, out["cpu"], 0.3, f"testbed {' '.join(command)} start-up (CPU s)")
