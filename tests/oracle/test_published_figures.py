"""The oracle against published figures that no one here wrote (issue 10).

Training throughput: ResNet-50 v1.5 images/s per GPU within 15 %.
* V100 and A100 — NVIDIA DeepLearningExamples, PyTorch/Classification/ConvNets/
  resnet50v1.5/README.md, "Training performance" tables (pytorch-21.03 NGC container),
  batch sizes from PyTorch/Classification/ConvNets/configs.yml (V100 FP32 112, AMP 256;
  A100 256). The profiles' efficiencies are derived from the DGX-1 16GB and DGX A100
  tables (their comments say how), so those rows check the model end to end (curve,
  optimizer step, gradient all-reduce, 1 vs 8 GPUs); the DGX-1 32GB table is held out.
* H100 — MLPerf Training v3.0, NVIDIA DGX H100, MXNet ResNet-50
  (mlcommons/training_results_v3.0, NVIDIA/results/dgxh100_ngc23.04_mxnet/resnet and
  .../dgxh100_n8_ngc23.04_mxnet/resnet, steady-state ``tracked_stats`` throughput).

Collectives: nccl-tests all-reduce bus bandwidth, large messages, within 15 %.
* A100, 8 GPUs in one node: 232.54 GB/s (NVIDIA/nccl-tests#175).
* A100, two DGX A100 (8 x HDR 200 Gb/s): "we measure 192GB/s AllReduce BusBW"
  (NVIDIA/nccl#812, an NVIDIA engineer).
* H100, 8 GPUs: ring ~370 GB/s, NVLink SHARP ~480 GB/s (NVIDIA/nccl-tests#212, NVIDIA).
* H100, two nodes: "For NDR @ 400Gbps you should see 46-48GB/s per NIC"
  (NVIDIA/nccl-tests#290, NVIDIA): 8 NICs, 47 GB/s each.
* H200, 8 GPUs: 475 GB/s peak (NVIDIA/nccl-tests#272).
"""

from __future__ import annotations

import pytest

from testbed.oracle import predict
from testbed.oracle.collectives import Fabric, bus_factor
from testbed.systems.profile import load_system

TOLERANCE = 0.15

# (system, precision, batch per GPU, GPUs, published images/s per GPU, source)
THROUGHPUT = [
    ("abci-v100", "fp32", 112, 1, 367.0, "DLE DGX-1 16GB FP32, 1 GPU"),
    ("abci-v100", "fp32", 112, 8, 2855 / 8, "DLE DGX-1 16GB FP32, 8 GPUs"),
    ("abci-v100", "fp16", 256, 1, 1200.0, "DLE DGX-1 16GB AMP, 1 GPU"),
    ("abci-v100", "fp16", 256, 8, 8322 / 8, "DLE DGX-1 16GB AMP, 8 GPUs"),
    ("a100-cluster", "tf32", 256, 1, 938.0, "DLE DGX A100 TF32, 1 GPU"),
    ("a100-cluster", "tf32", 256, 8, 7248 / 8, "DLE DGX A100 TF32, 8 GPUs"),
    ("a100-cluster", "bf16", 256, 1, 2470.0, "DLE DGX A100 mixed, 1 GPU"),
    ("a100-cluster", "bf16", 256, 8, 16621 / 8, "DLE DGX A100 mixed, 8 GPUs"),
    ("h100-cluster", "bf16", 400, 8, 56000 / 8, "MLPerf v3.0 DGX H100, 8 GPUs"),
    ("h100-cluster", "bf16", 50, 64, 294700 / 64, "MLPerf v3.0 8 x DGX H100, 64 GPUs"),
]
HELD_OUT = [
    ("abci-v100", "fp32", 112, 1, 356.0, "DLE DGX-1 32GB FP32, 1 GPU"),
    ("abci-v100", "fp32", 112, 8, 2766 / 8, "DLE DGX-1 32GB FP32, 8 GPUs"),
    ("abci-v100", "fp16", 256, 1, 1156.0, "DLE DGX-1 32GB AMP, 1 GPU"),
    pytest.param("abci-v100", "fp16", 256, 8, 8056 / 8, "DLE DGX-1 32GB AMP, 8 GPUs",
                 marks=pytest.mark.xfail(strict=True, reason=(
                     "DLE's mixed-precision tables lose 13-16 % per GPU from 1 to 8 GPUs "
                     "(data loading, not communication); the oracle predicts +18 % here"))),
]


def images_per_gpu(system, precision, batch, gpus) -> float:
    e = predict(system, "resnet50", "serial" if gpus == 1 else "data", gpus, batch * gpus,
                precision=precision)
    assert e.feasible, e.reason
    return e.samples_per_s / gpus


@pytest.mark.parametrize("system,precision,batch,gpus,published,source", THROUGHPUT + HELD_OUT,
                         ids=[row[-1] if isinstance(row, tuple) else row.values[-1]
                              for row in THROUGHPUT + HELD_OUT])
def test_resnet50_training_throughput(system, precision, batch, gpus, published, source):
    got = images_per_gpu(system, precision, batch, gpus)
    assert got == pytest.approx(published, rel=TOLERANCE), source


# (system, GPUs, published bus bandwidth GB/s, algorithm forced or None, source)
BUSBW = [
    ("a100-cluster", 8, 232.54, None, "nccl-tests#175: 8 x A100"),
    ("a100-cluster", 16, 192.0, None, "nccl#812: 2 x DGX A100, 8 x HDR"),
    ("h100-cluster", 8, 480.0, None, "nccl-tests#212: 8 x H100 with NVLink SHARP"),
    ("h100-cluster", 8, 370.0, "ring", "nccl-tests#212: 8 x H100, NCCL_ALGO=RING"),
    ("h100-cluster", 16, 8 * 47.0, "ring", "nccl-tests#290: 2 nodes, 8 x NDR at 46-48 GB/s"),
    ("h200-cluster", 8, 475.0, None, "nccl-tests#272: 8 x H200"),
    ("h200-cluster", 16, 8 * 47.0, "ring", "nccl-tests#290 (same NDR rails)"),
]


@pytest.mark.parametrize("system,gpus,published,algorithm,source", BUSBW,
                         ids=[row[-1] for row in BUSBW])
def test_allreduce_bus_bandwidth(system, gpus, published, algorithm, source):
    s = load_system(system)
    fabric = Fabric.from_spec(s.network, s.node.gpus_per_node)
    nbytes = 8 * 2**30
    if algorithm is None:
        time_s = fabric.allreduce(nbytes, gpus).time_s
    else:
        time_s = min(p.time_s(nbytes) for p in fabric.plans("allreduce", gpus)
                     if p.algorithm == algorithm)
    busbw = nbytes / time_s * bus_factor("allreduce", gpus) / 1e9
    assert busbw == pytest.approx(published, rel=TOLERANCE), source


def test_multi_node_is_not_one_nic():
    """Issue 10: two DGX A100 nodes came out at ~21 GB/s with one ring per node."""
    s = load_system("a100-cluster")
    fabric = Fabric.from_spec(s.network, 8)
    busbw = 2**30 / fabric.allreduce(2**30, 16).time_s * bus_factor("allreduce", 16) / 1e9
    assert busbw > 150


def test_small_batches_cost_what_they_cost():
    """One sample per GPU is far less efficient than 256 (the curve and the floor)."""
    one = images_per_gpu("a100-cluster", "bf16", 1, 1)
    big = images_per_gpu("a100-cluster", "bf16", 256, 1)
    assert one < 0.1 * big
    assert images_per_gpu("h100-cluster", "bf16", 16, 1) < 0.5 * images_per_gpu(
        "h100-cluster", "bf16", 256, 1)


def test_measured_time_scales_to_other_precisions():
    """ABCI's calibration measured fp32; fp16 follows the profile's ratio of sustained
    rates (V100 mixed precision about 3x fp32, as DeepLearningExamples publishes)."""
    fp32 = images_per_gpu("abci-v100", "fp32", 112, 1)
    fp16 = images_per_gpu("abci-v100", "fp16", 256, 1)
    assert fp16 / fp32 == pytest.approx(1200 / 367, rel=TOLERANCE)
