"""Distributed runs on 2 CPU processes: torch.distributed (gloo) group checkpoint-restart
surviving a rank kill, the mpi4py collective benchmark, Chainer data parallelism."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import numpy as np
import pytest

from real_runs.ddp import RankKill, supervise_group
from real_runs.env import child_env
from real_runs.harness import RunConfig
from real_runs.mpibench import fit_latency_bandwidth
from testbed.measurements import read_records

pytestmark = [pytest.mark.frameworks, pytest.mark.timeout(300)]

needs_mpi = pytest.mark.skipif(shutil.which("mpirun") is None, reason="needs OpenMPI mpirun")


def test_gloo_group_survives_a_rank_kill(tmp_path):
    cfg = RunConfig(framework="torch", model="mlp", seed=4, steps=12, checkpoint_every=4,
                    width=16, batch_size=8)
    reference = supervise_group(cfg, None, [])
    assert reference["ranks_agree"] and reference["kills"] == 0
    # rank 1 is killed after step 6 (checkpoint 4 committed): the whole group is torn
    # down and restarts from step 4, each rank restoring its own RNG state
    run = supervise_group(cfg, tmp_path / "ckpt", [RankKill(1, 6)])
    assert run["killed_ranks"] == [1] and run["restarts"] == 1
    assert run["loads"] == [4]
    assert run["ranks_agree"]
    assert run["losses"] == reference["losses"]
    assert run["final_params_sha256"] == reference["final_params_sha256"]
    # the group checkpoint holds every rank's own RNG state
    newest = sorted((tmp_path / "ckpt").glob("step-*"))[-1]
    names = {p.name for p in newest.iterdir()}
    assert {"model.pt", "rank0.pt", "rank1.pt", "rank0.json", "rank1.json"} <= names
    import torch
    rng0 = torch.load(newest / "rank0.pt", weights_only=True)["cpu_rng"]
    rng1 = torch.load(newest / "rank1.pt", weights_only=True)["cpu_rng"]
    assert not torch.equal(rng0, rng1)


def _mpirun(np_: int, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(["mpirun", "--oversubscribe", "-np", str(np_), sys.executable, "-m",
                           *args], capture_output=True, text=True, env=child_env(),
                          timeout=timeout)


@needs_mpi
def test_mpi_collective_benchmark(tmp_path):
    out = tmp_path / "m.jsonl"
    proc = _mpirun(2, "real_runs.mpibench", "--sizes", "4,1024,65536,1048576", "--repeats",
                   "5", "--out", str(out))
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    records = [r for _, r in read_records(out)]
    assert len(records) == 8 and {r.kind for r in records} == {"collective"}
    assert {r.op for r in records} == {"allreduce", "allgather"}
    assert all(r.backend == "mpi" and r.processes == 2 for r in records)
    assert all(r.env.world_size == 2 and r.env.framework == "mpi4py" for r in records)
    for op in ("allreduce", "allgather"):
        rows = [r for r in report["rows"] if r["op"] == op]
        assert [r["message_bytes"] for r in rows] == [4, 1024, 65536, 1048576]
        assert rows[-1]["time_s"] > rows[0]["time_s"]      # 1 MiB costs more than 4 B
        fit = report["fit"][op]
        assert 0 < fit["latency_s"] < 1e-2 and fit["bw_Bps"] > 1e6


def test_latency_bandwidth_fit_recovers_a_hockney_model():
    sizes = [4 * 4**k for k in range(10)]
    times = [3e-6 + n / 5e9 for n in sizes]
    fit = fit_latency_bandwidth(sizes, times)
    assert fit["latency_s"] == pytest.approx(3e-6, rel=1e-9)
    assert fit["bw_Bps"] == pytest.approx(5e9, rel=1e-9)


@needs_mpi
def test_chainer_data_parallel_matches_serial():
    proc = _mpirun(2, "real_runs.chainer_mpi", "--steps", "10", "--seed", "2")
    assert proc.returncode == 0, proc.stderr[-2000:]
    parallel = json.loads(proc.stdout.strip().splitlines()[-1])
    assert parallel["replicas_identical"]
    assert [r["rank"] for r in parallel["ranks"]] == [0, 1]
    serial_proc = subprocess.run([sys.executable, "-m", "real_runs.chainer_mpi", "--steps", "10",
                                  "--seed", "2", "--serial"], capture_output=True, text=True,
                                 env=child_env(), timeout=120)
    assert serial_proc.returncode == 0, serial_proc.stderr[-2000:]
    serial = json.loads(serial_proc.stdout.strip().splitlines()[-1])["ranks"][0]
    par = parallel["ranks"][0]
    # averaging two half-batch gradients equals the full-batch gradient up to rounding
    np.testing.assert_allclose(par["losses"], serial["losses"], rtol=1e-5)
    for name, values in serial["params"].items():
        np.testing.assert_allclose(par["params"][name], values, rtol=1e-4, atol=1e-6)
    assert par["losses"][-1] < par["losses"][0]
