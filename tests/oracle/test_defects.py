"""The ten defects of issue 18, one test each (each fails on the oracle before it)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from testbed.calibration.abci_csv import holdout, read_measurements
from testbed.oracle import predict
from testbed.oracle.collectives import Fabric, bus_factor
from testbed.systems.profile import load_system
from tests.conftest import each
from tests.oracle.figures import FIGURES, accuracy_table, ratio, split

MiB = 2**20


def per_gpu(system, gpus, batch, precision="bf16", software=None, **kw):
    e = predict(system, "resnet50", "serial" if gpus == 1 else "data", gpus, batch * gpus,
                precision=precision, software=software, **kw)
    assert e.feasible, e.reason
    return e.samples_per_s / gpus


def test_1_no_copied_launch_floor_and_one_stack_for_a100_and_h100():
    """1,024 A100s at batch 35: on a graph-launched stack (CUDA graphs, as the published
    large runs) no per-layer floor caps the step (the old A100 profile's copied 179 µs
    per layer gave 1.14 M img/s); H100 / A100 per GPU on the same graph-launched stack
    is about 2 (published runs ~1.9), not 3.5; on the default PyTorch eager stack both
    nodes' data loaders bind first (16 and 14 cores per GPU), so H100 gains less."""
    total = per_gpu("a100-cluster", 1024, 35, software="mxnet") * 1024
    assert total > 1.8e6
    h = per_gpu("h100-cluster", 8, 256, software="mxnet")
    a = per_gpu("a100-cluster", 8, 256, software="mxnet")
    assert 1.6 < h / a < 2.5, h / a
    assert 1.0 < per_gpu("h100-cluster", 8, 256) / per_gpu("a100-cluster", 8, 256) < h / a


def test_2_the_software_stack_matters():
    """A100 AMP x 8: PyTorch eager and a fused, graph-launched stack differ (published
    figures for this hardware span 16,600-26,700 img/s); the request names the stack."""
    eager = per_gpu("a100-cluster", 8, 256) * 8
    fused = per_gpu("a100-cluster", 8, 256, software="mxnet") * 8
    assert fused > 1.1 * eager
    assert per_gpu("a100-cluster", 8, 256, software="torch") * 8 == pytest.approx(eager)


def test_3_gpus_of_one_node_lose_to_their_shared_cpus():
    """Eight GPUs of one node share its CPU cores for decoding: a DGX-1 (40 cores)
    gives each GPU 5 where one GPU had 8, so its AMP rate drops (published: 1,200 →
    1,040 img/s per GPU, and 1,156 → 1,007 on the held-out 32 GB table)."""
    one = per_gpu("dgx1-v100", 1, 256, precision="fp16")
    eight = per_gpu("dgx1-v100", 8, 256, precision="fp16")
    assert eight < 0.92 * one
    e = predict("dgx1-v100", "resnet50", "data", 8, 2048, precision="fp16")
    assert e.io_s > 0 and e.decode_s > e.compute_s


def test_4_scaling_loses_to_the_network():
    """From 8 A100s at 256 per GPU to 1,024 at 35 per GPU the published large runs lose
    23-32 % per GPU (the oracle lost ~9 %). Now the step pays the small batch (tile
    waves), the all-reduce NVIDIA's MLPerf MXNet runs after backward across nodes (one
    fused tensor, not hidden) and the wait for the slowest of 1,024 GPUs. At a fixed
    batch, communication and the wait grow with the GPUs while compute stays."""
    def rate(gpus, batch):
        e = predict("a100-cluster", "resnet50", "data", gpus, gpus * batch, precision="fp16",
                    software="mxnet")
        return e, e.samples_per_s / gpus

    e8, base = rate(8, 256)
    e1k, big = rate(1024, 35)
    assert 0.68 <= big / base <= 0.80, big / base
    e8s, _ = rate(8, 35)
    assert e1k.compute_s == pytest.approx(e8s.compute_s)
    assert e1k.communication_s > 1.5 * e8s.communication_s > 0
    assert e1k.phases_s["sync_wait"] > 2 * e8s.phases_s["sync_wait"] > 0
    # the after-backward all-reduce is all exposed across nodes, half hidden inside one
    assert e1k.communication_s == pytest.approx(e1k.communication_total_s)
    assert e8s.communication_s < 0.6 * e8s.communication_total_s


def test_5_small_batches_follow_the_layers():
    """Below the batches anything was fitted on, the per-layer model (tile waves, the
    host's launches) follows the held-out V100 inference table from batch 2 to 256
    within 15 % (the old two-point curve gave 0.66 at batch 16)."""
    rows = [(f, f.predicted()) for f in FIGURES if f.data_set == "dle-pytorch-rn50-v100-infer"]
    assert len(rows) == 16
    for f, p in each(rows):
        assert ratio(p, f.published) >= 0.85, (f.name, p, f.published)


def test_6_mid_size_all_reduce_pays_latency_and_pipeline():
    """16-64 MiB across 2-4 nodes: NCCL's per-step protocol latencies, the channels it
    drops for small messages and a tree's chunk pipeline (a chunk crosses every network
    stage before the pipeline is full) keep the bus bandwidth well under its
    large-message value (the old α-β model reached 78-87 % of it at 16 MiB, the first
    issue-18 model 68 %); the held-out nccl-tests#119 mean over 1-128 MiB on 3 nodes and
    nccl#1469's 64 MiB on 16 H100 nodes are within 10 %."""
    fabric = Fabric.of(load_system("a100-cluster"))
    peak = 2**33 / fabric.allreduce(2**33, 16).time_s * bus_factor("allreduce", 16) / 1e9
    for n in (16, 32):
        for size in (16 * MiB, 64 * MiB):
            busbw = size / fabric.allreduce(size, n).time_s * bus_factor("allreduce", n) / 1e9
            assert busbw < 0.85 * peak, (n, size, busbw, peak)
    two_node_16 = 16 * MiB / fabric.allreduce(16 * MiB, 16).time_s * bus_factor("allreduce", 16)
    assert two_node_16 / 1e9 < 0.65 * peak
    for data_set, kind in (("nccl-tests-119-a100-3node", "mean_busbw_GBps"),
                           ("nccl-1469-h100-16node", "busbw_GBps")):
        fig = next(f for f in FIGURES if f.data_set == data_set and f.kind == kind)
        assert ratio(fig.predicted(), fig.published) >= 0.9, fig.name


def test_7_collective_and_predict_share_the_calibrated_network(cli):
    """102 MB on 4 ABCI GPUs: ``oracle collective`` gave the nominal 3.1 ms while
    ``oracle predict`` applied the fitted efficiency (7.1 ms); now one path."""
    e = predict("abci-v100", "resnet50", "data", 4, 256)
    (grad,) = e.collectives
    nbytes = 25_557_032 * 4
    r = cli("oracle", "collective", "--system", "abci-v100", "--op", "allreduce",
            "--bytes", str(nbytes), "--gpus", "4", "--model", "resnet50", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["time_s"] == pytest.approx(grad["time_s"], rel=1e-9)
    r = cli("oracle", "collective", "--system", "abci-v100", "--op", "allreduce",
            "--bytes", str(nbytes), "--gpus", "4", "--json")
    out = json.loads(r.stdout)
    assert out["time_s"] > 1.5 * nbytes * 1.5 / 50e9 and "fitted" in out["basis"]


def test_8_per_iteration_reads_get_the_job_share():
    """A dataset read from the parallel file system every iteration gets the job's share
    of it, as staging does: halving ``pfs_job_share`` doubles both."""
    base = load_system("h100-cluster")
    half = base.model_copy(update={"storage": base.storage.model_copy(
        update={"pfs_job_share": base.storage.pfs_job_share / 2})})
    kw = dict(strategy="data", gpus=4096, global_batch=4096 * 32, epoch_samples=120_000_000,
              input_precision="fp16")
    a, b = predict(base, "resnet50", **kw), predict(half, "resnet50", **kw)
    assert a.input_source == "pfs"
    assert b.input_read_s == pytest.approx(2 * a.input_read_s)
    assert b.staging_s == pytest.approx(2 * a.staging_s)
    nodes, storage = 512, base.storage
    per_node = min(storage.pfs_per_node_Bps,
                   storage.pfs_read_bandwidth_Bps * storage.pfs_job_share / nodes)
    assert a.input_read_s == pytest.approx(8 * 32 * 3 * 224 * 224 * 2 / per_node)


def test_9_readme_accuracy_is_what_the_tests_print():
    """The README's accuracy statements are the ones these tests print: its oracle
    section quotes the summary lines of :func:`tests.oracle.figures.accuracy_table` —
    "fitted (in sample): N figures, median ratio M, worst W" and the same for "held
    out" — and they must equal what the figures give today (the README text of issue
    18 carries them; the old README claimed "within 3 %" where the test printed +10.5 %)."""
    readme = Path(__file__).resolve().parents[2] / "README.md"
    text = readme.read_text() if readme.exists() else ""
    fitted, held = split()
    for title, figures in (("fitted (in sample)", fitted), ("held out", held)):
        summary = accuracy_table(title, [(f, f.predicted()) for f in figures]).splitlines()[0]
        assert summary in text, f"README.md does not say: {summary}"


def test_10_abci_extrapolation_keeps_growing_communication(abci_csv):
    """ABCI from ≤16 GPUs to 1,024: the fit on ≤8-GPU runs predicts every 16-GPU run of
    ResNet-50 and VGG16 (all strategies) within 10 % on average, and beyond the
    calibrated range communication keeps growing with the ring's steps across the
    spine (NCCL 2.3's Volta plateau, ParaDL's measured step latencies): ds on 1,024
    GPUs is clearly slower than on 16 (the old oracle: 1.15x; its worst held-out row
    was ds at 1,024 GPUs, predicted far too fast)."""
    system = load_system("abci-v100")
    held = holdout(read_measurements(abci_csv), system.model_copy(update={"calibration": None}))
    rows = [r for r in held["rows"] if r["model"] in ("resnet50", "vgg16")]
    assert len(rows) >= 5 and np.mean([r["accuracy"] for r in rows]) >= 0.9
    ds16 = predict(system, "resnet50", "ds", 16, 256, group_size=4)
    ds1k = predict(system, "resnet50", "ds", 1024, 16384, group_size=4)
    assert ds1k.time_per_iteration_s > 1.18 * ds16.time_per_iteration_s
