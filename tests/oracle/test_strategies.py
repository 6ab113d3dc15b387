"""Per-strategy behaviour: structural limits, pipeline schedules, overlap, breakdown."""

from __future__ import annotations

import pytest

from testbed.errors import InputError, UnknownNameError
from testbed.oracle import STRATEGIES, predict
from tests.conftest import each


def test_every_strategy_gives_a_breakdown():
    for strategy in each(STRATEGIES):
        gpus = 1 if strategy == "serial" else 8
        e = predict("abci-v100", "resnet50", strategy, gpus, 64, group_size=4)
        assert e.feasible, (strategy, e.reason)
        parts = (e.compute_s + e.bubble_s + e.communication_s + e.io_s + e.overhead_s)
        assert e.time_per_iteration_s == pytest.approx(parts)
        assert sum(e.phases_s.values()) == pytest.approx(e.time_per_iteration_s)
        assert e.memory_per_gpu_bytes == sum(e.memory_breakdown_bytes.values())


@pytest.mark.parametrize("strategy,gpus,batch,group", [
    ("data", 32, 4096, None), ("spatial", 4, 4096, None), ("spatial", 8, 4096, None),
    ("filter", 4, 256, None), ("channel", 4, 256, None), ("ds", 16, 4096, 4),
    ("df", 16, 1024, 4)])
def test_the_overlapped_all_reduce_never_exposes_more_than_it_takes(strategy, gpus, batch,
                                                                     group):
    """Gradient buckets wait for the backward of this GPU's share of each sample: a
    spatial slice or a filter split runs every layer as a smaller batch would, so the
    exposed all-reduce is at most the all-reduce itself (the per-layer backward of whole
    samples made a 4-GPU spatial ResNet-50 on H100 wait 257 ms for 10 ms of traffic)."""
    e = predict("h100-cluster", "resnet50", strategy, gpus, batch, group_size=group,
                precision="bf16")
    assert e.feasible, e.reason
    assert e.phases_s["gradient_allreduce"] <= e.communication_total_s * (1 + 1e-9)
    backward = e.phases_s["backward"]
    assert 0 < backward < e.compute_s


@pytest.mark.parametrize("strategy,gpus,batch,group,needle", [
    ("data", 128, 64, None, "global batch"),
    ("filter", 128, 64, None, "filters"),
    ("channel", 8, 64, None, "channels"),
    ("spatial", 256, 64, None, "rows"),
    ("df", 6, 64, 4, "multiple of the group size"),
    ("ds", 64, 8, 4, "groups > global batch"),
    ("pipeline", 512, 1024, None, "layers"),
    ("serial", 2, 64, None, "1 GPU"),
])
def test_structural_limits(strategy, gpus, batch, group, needle):
    model = "alexnet" if strategy == "channel" else "resnet50"
    if strategy == "channel":
        gpus = 512  # AlexNet's narrowest split input has 64 channels
    e = predict("abci-v100", model, strategy, gpus, batch, group_size=group)
    assert not e.feasible
    assert needle in e.reason
    assert e.time_per_iteration_s is None


def test_pipeline_bubble_and_schedules():
    common = dict(strategy="pipeline", gpus=8, global_batch=256, micro_batches=32)
    gpipe = predict("a100-cluster", "resnet50", schedule="gpipe", **common)
    ofob = predict("a100-cluster", "resnet50", schedule="1f1b", **common)
    # both schedules: (m + p - 1) slots of the slowest stage, p - 1 of them idle; the
    # optimizer step of the stage's parameters runs once after the last slot
    slot = gpipe.bubble_s / 7
    update = gpipe.compute_s - 32 * slot
    assert 0 <= update <= gpipe.compute_model["optimizer_s"]
    assert ofob.time_per_iteration_s == pytest.approx(gpipe.time_per_iteration_s)
    # 1F1B stashes at most p micro-batches, GPipe all m
    assert ofob.memory_breakdown_bytes["activations"] == pytest.approx(
        gpipe.memory_breakdown_bytes["activations"] * 8 / 32, rel=1e-6)
    # more, smaller micro-batches shrink the bubble until the host's launches bind: on
    # the A100 profile's default stack (PyTorch eager) an 8-sample slot of a 1/8 stage
    # is already host-bound, so halving it again barely helps
    more = predict("a100-cluster", "resnet50", "pipeline", 8, 256, micro_batches=64)
    assert more.bubble_s > 0.9 * ofob.bubble_s
    few = predict("h100-cluster", "resnet50", "pipeline", 8, 4096, micro_batches=32)
    many = predict("h100-cluster", "resnet50", "pipeline", 8, 4096, micro_batches=64)
    assert many.bubble_s < few.bubble_s


def test_overlap_hides_allreduce():
    """Buckets all-reduced under backward hide most of the all-reduce on a low-latency
    network; the last bucket stays exposed. On ABCI's NCCL 2.3 rings, whose 510 steps
    across 64 nodes cost tens of ms each time, five buckets pay that latency five
    times: bucketing costs more than it hides there (ChainerMN did one all-reduce)."""
    kw = dict(strategy="data", gpus=256, global_batch=256 * 32, precision="bf16")
    plain = predict("a100-cluster", "resnet50", overlap=False, **kw)
    hidden = predict("a100-cluster", "resnet50", overlap=True, **kw)
    assert hidden.communication_s < plain.communication_s
    assert hidden.communication_s > 0
    assert hidden.time_per_iteration_s < plain.time_per_iteration_s
    one = predict("abci-v100", "resnet50", "data", 256, 8192, overlap=False)
    buckets = predict("abci-v100", "resnet50", "data", 256, 8192, overlap=True,
                      software="pytorch")
    assert buckets.communication_total_s > 2 * one.communication_total_s


def test_optimizer_state_in_memory():
    sgd = predict("abci-v100", "resnet50", "data", 8, 64, optimizer="sgd")
    adam = predict("abci-v100", "resnet50", "data", 8, 64, optimizer="adam")
    assert sgd.memory_breakdown_bytes["optimizer"] == 0
    assert adam.memory_breakdown_bytes["optimizer"] == 25_557_032 * 8
    assert adam.state_bytes == 25_557_032 * 4 * 3


def test_flops_based_compute_without_calibration():
    """A profile without the per-layer data (no SM count) keeps the FLOP-based curve:
    a step on b samples takes s·(b + b½) + optimizer, s = 3·forward FLOPs / (peak ·
    efficiency of the curve)."""
    from testbed.model.registry import get_model
    from testbed.systems.profile import CurvePoint, load_system
    model = get_model("resnet50")
    h100 = load_system("h100-cluster")
    gpu = h100.gpu.model_copy(update={"sm_count": None, "compute_curves": {
        "default": {"bf16": CurvePoint(efficiency=0.189, half_batch=30.8)}}})
    legacy = h100.model_copy(update={"gpu": gpu})
    e = predict(legacy, model, "serial", 1, 32, precision="bf16")
    s = model.forward_flops * 3 / (989.4e12 * 0.189)
    optimizer = model.parameters * (2 * (2 + 4 + 4) + 2) / 3350e9
    assert e.compute_model["s_per_sample"] == pytest.approx(s)
    assert e.compute_s == pytest.approx(s * (32 + 30.8) + optimizer)


def test_bad_inputs_raise_typed_errors():
    with pytest.raises(UnknownNameError):
        predict("abci-v100", "resnet50", "dataa", 4, 64)
    with pytest.raises(UnknownNameError):
        predict("abci-v999", "resnet50", "data", 4, 64)
    with pytest.raises(UnknownNameError):
        predict("abci-v100", "resnet51", "data", 4, 64)
    with pytest.raises(InputError):
        predict("abci-v100", "resnet50", "data", 0, 64)
    with pytest.raises(InputError):
        predict("abci-v100", "resnet50", "data", 4, -1)


def test_more_gpus_than_the_system_has():
    e = predict("abci-v100", "resnet50", "data", 8192, 65536)
    assert not e.feasible and "GPUs" in e.reason


def test_per_layer_measured_times_drive_the_split():
    """A model profiled per layer: the split fraction of filter parallelism comes from
    the measured layer times, not from FLOPs."""
    from dataclasses import replace

    from testbed.model.ir import Model
    from testbed.model.registry import get_model
    from testbed.oracle import Request, estimate
    from testbed.systems.profile import load_system

    base = get_model("alexnet")
    # pretend the (unsplit) first conv took 90% of the time
    layers = tuple(replace(lyr, profiled_s=(9e-3 if i == 0 else 1e-3 / (len(base.layers) - 1)))
                   for i, lyr in enumerate(base.layers))
    model = Model(name="alexnet-profiled", input_shape=base.input_shape, layers=layers)
    mask = tuple(i != 0 and lyr.kind in ("conv", "fc") for i, lyr in enumerate(layers))
    e = estimate(Request(model=model, system=load_system("h100-cluster"), strategy="filter",
                         gpus=8, global_batch=8, mask=mask))
    split = sum(lyr.profiled_s for lyr, m in zip(layers, mask, strict=True) if m) / 10e-3
    # the work that grows with the samples is split by the measured layer times; the
    # fill (half-batch) and optimizer step come on top
    assert e.compute_s - e.compute_model["fixed_s"] == pytest.approx(
        8 * 10e-3 * (split / 8 + 1 - split))
    assert e.compute_model["fixed_s"] >= 10e-3 * e.compute_model["half_batch"]
