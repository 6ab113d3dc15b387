"""ParaDL compatibility: published ParaDL outputs (seconds per epoch of 1,280,000
samples on ABCI) reproduced within 1% from the ParaDL input files."""

from __future__ import annotations

import pytest

from testbed.model.netfile import load_mask, load_net
from testbed.oracle import Request, estimate
from testbed.systems.profile import load_system


@pytest.fixture(scope="module")
def resnet(paradl_inputs):
    return load_net(paradl_inputs / "RESNET50_ImageNet_profall.net_sc").model


def paradl(model, **kw):
    return estimate(Request(model=model, system=load_system("abci-v100"), mode="paradl", **kw))


def test_serial_resnet50_epoch(resnet):
    e = paradl(resnet, strategy="serial", gpus=1, global_batch=64)
    assert e.compute_epoch_s == pytest.approx(3992.96, rel=0.01)


def test_data_parallel_p2(resnet):
    e = paradl(resnet, strategy="data", gpus=2, global_batch=128)
    assert e.compute_epoch_s == pytest.approx(1996.48, rel=0.01)
    assert e.communication_epoch_s == pytest.approx(18.367, rel=0.01)


def test_data_parallel_p1024(resnet):
    e = paradl(resnet, strategy="data", gpus=1024, global_batch=65536)
    assert e.compute_epoch_s == pytest.approx(3.899, rel=0.01)


def test_filter_p64_with_mask(resnet, paradl_inputs):
    mask = load_mask(paradl_inputs / "filter_resnet.lc", resnet)
    e = paradl(resnet, strategy="filter", gpus=64, global_batch=64, mask=mask)
    assert e.compute_epoch_s == pytest.approx(262.16, rel=0.01)


def test_memory_resnet50_64_samples(resnet):
    e = paradl(resnet, strategy="serial", gpus=1, global_batch=64)
    assert e.memory_per_gpu_bytes == 15_434_845_696


def test_paradl_mode_uses_ring_only(resnet):
    e = paradl(resnet, strategy="data", gpus=1024, global_batch=65536)
    assert {c["algorithm"] for c in e.collectives} == {"ring"}


def test_vgg_weights_from_file(paradl_inputs):
    vgg = load_net(paradl_inputs / "VGG_ImageNet_profall.net_sc").model
    e = paradl(vgg, strategy="data", gpus=2, global_batch=64)
    # one ring all-reduce of Σ|w|·4 bytes per iteration over NVLink (50 GB/s, 9 µs)
    expected = 2 * (9e-6 + 169_801_408 * 4 / 2 / 50e9)
    assert e.communication_s == pytest.approx(expected, rel=1e-9)
