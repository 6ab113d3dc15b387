"""The default mode does not copy ParaDL's known errors."""

from __future__ import annotations

import pytest

from testbed.model.netfile import load_net
from testbed.model.registry import get_model
from testbed.oracle import Request, estimate, predict
from testbed.systems.profile import load_system


def test_filter_memory_not_divided_twice(paradl_inputs):
    net = load_net(paradl_inputs / "RESNET50_ImageNet_profall.net_sc").model
    system = load_system("abci-v100")
    serial = estimate(Request(model=net, system=system, strategy="serial", gpus=1, global_batch=16))
    flt = estimate(Request(model=net, system=system, strategy="filter", gpus=16, global_batch=16))
    # every GPU still holds the whole batch's activations; only weights are split
    assert flt.memory_breakdown_bytes["activations"] == serial.memory_breakdown_bytes["activations"]
    assert flt.memory_breakdown_bytes["weights"] < serial.memory_breakdown_bytes["weights"] / 4
    paradl = estimate(Request(model=net, system=system, strategy="filter", gpus=16,
                              global_batch=16, mode="paradl"))
    assert paradl.memory_per_gpu_bytes < flt.memory_per_gpu_bytes / 16


def test_halo_scales_with_channels_and_face():
    system = load_system("abci-v100")
    small = get_model("resnet50", (3, 224, 224))
    big = get_model("resnet50", (3, 448, 448))

    def halo(model, mode):
        e = estimate(Request(model=model, system=system, strategy="spatial", gpus=4,
                             global_batch=256, mode=mode))
        return sum(c["time_s"] for c in e.collectives if c["phase"] == "halo_exchange")

    # twice the width and height: the exchanged face (and so the bandwidth part) doubles
    assert halo(big, "testbed") > 1.5 * halo(small, "testbed")
    # ParaDL leaves channels out, so its halo is far smaller
    assert halo(small, "paradl") < halo(small, "testbed") / 4


def test_data_spatial_memory_is_checked():
    e = predict("abci-v100", "vgg16", "ds", 8, 2048, group_size=4)
    assert not e.feasible and "per GPU" in e.reason


def test_projection_shortcuts_present(paradl_inputs):
    zoo = get_model("resnet50")
    net = load_net(paradl_inputs / "RESNET50_ImageNet_profall.net_sc").model
    shortcut_convs = [lyr for lyr in zoo.layers if "downsample" in lyr.name and lyr.kind == "conv"]
    assert len(shortcut_convs) == 4
    assert zoo.parameters == 25_557_032
    assert net.weight_elements == 22_734_016


@pytest.mark.parametrize("strategy", ["serial", "data", "spatial", "filter", "channel",
                                      "pipeline", "df", "ds"])
def test_every_strategy_checks_memory(strategy):
    gpus = 1 if strategy == "serial" else 8
    e = predict("abci-v100", "vgg16", strategy, gpus, 8192, group_size=4)
    assert not e.feasible
    assert e.reason
