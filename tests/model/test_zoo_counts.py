"""Published parameter and MAC counts of the code-built models (torchvision at 224x224)."""

from __future__ import annotations

import pytest

from testbed.model.registry import get_model, list_models
from testbed.model.zoo import shape_problems
from tests.conftest import each

IMAGENET = (3, 224, 224)


@pytest.mark.parametrize(("name", "params"), [
    ("resnet50", 25_557_032), ("resnet152", 60_192_808), ("vgg16", 138_357_544),
    ("alexnet", 61_100_840),
])
def test_parameters_match_torchvision(name, params):
    assert get_model(name, IMAGENET).parameters == params


@pytest.mark.parametrize(("name", "gmacs"), [("resnet50", 4.089), ("vgg16", 15.47)])
def test_forward_macs_within_half_percent(name, gmacs):
    macs = get_model(name, IMAGENET).forward_macs
    assert macs == pytest.approx(gmacs * 1e9, rel=0.005)


def test_forward_macs_are_conv_and_fc_sums():
    model = get_model("resnet50")
    by_hand = sum(ly.forward_macs for ly in model.layers if ly.kind in ("conv", "deconv", "fc"))
    assert model.forward_macs == by_hand
    # ResNet-50: conv1 is 118,013,952 MACs (3*64*49*112*112), the FC 2,048,000.
    conv1 = model.layers[0]
    assert conv1.forward_macs == 3 * 64 * 49 * 112 * 112
    assert model.layers[-1].forward_macs == 2048 * 1000


def test_resnet_layer_structure():
    m50 = get_model("resnet50")
    kinds = [ly.kind for ly in m50.layers]
    # 1 stem conv + 16 blocks x 3 convs + 4 projection shortcuts.
    assert kinds.count("conv") == 1 + 16 * 3 + 4
    assert kinds.count("add") == 16 and kinds.count("bn") == kinds.count("conv")
    stride2 = [ly.name for ly in m50.layers if ly.kind == "conv" and ly.stride == (2, 2)]
    assert "layer2.0.conv2" in stride2 and "layer2.0.conv1" not in stride2  # v1.5
    assert m50.layers[-1].x == (2048, 1, 1) and m50.layers[-1].y == (1000, 1, 1)
    m152 = get_model("resnet152")
    assert sum(ly.kind == "add" for ly in m152.layers) == 3 + 8 + 36 + 3


def test_vgg_and_alexnet_classifiers():
    vgg = get_model("vgg16")
    fcs = [ly for ly in vgg.layers if ly.kind == "fc"]
    assert [ly.w for ly in fcs] == [(512, 4096, 7, 7), (4096, 4096, 1, 1), (4096, 1000, 1, 1)]
    assert sum(ly.kind == "dropout" for ly in vgg.layers) == 2
    alex = get_model("alexnet")
    assert [ly.out_channels for ly in alex.layers if ly.kind == "conv"] == [64, 192, 384, 256, 256]
    assert [ly.w_elems for ly in alex.layers if ly.kind == "fc"] == [9216 * 4096, 4096 * 4096,
                                                                   4096 * 1000]
    pool = next(ly for ly in alex.layers if ly.name == "avgpool")
    assert pool.x == (256, 6, 6) and pool.y == (256, 6, 6) and pool.kernel == (1, 1)


def test_adaptive_pool_kernel_covers_input():
    m = get_model("resnet50", (3, 112, 112))
    pool = next(ly for ly in m.layers if ly.name == "avgpool")
    assert pool.x == (2048, 4, 4) and pool.kernel == (4, 4) and pool.y == (2048, 1, 1)
    # PyTorch's windows for 9 → 6 all have 2 elements; for 13 → 6 they have 3.
    for side, features, kernel in ((320, 9, 2), (448, 13, 3)):
        alex = get_model("alexnet", (3, side, side))
        pool = next(ly for ly in alex.layers if ly.name == "avgpool")
        assert pool.x == (256, features, features) and pool.y == (256, 6, 6)
        assert pool.kernel == (kernel, kernel)


def test_resnet50_at_226_follows_pytorch_not_paradl(paradl_dir):
    # At 226x226 conv1 gives 113; PyTorch's padded max pool then gives 57 (ParaDL's file,
    # which pools without padding, says 56) and the last stage 8x8 (ParaDL: 7x7).
    from testbed.model.netfile import load_net
    m = get_model("resnet50", (3, 226, 226))
    ref = load_net(paradl_dir / "RESNET50_ImageNet_profall.net_sc").model
    assert m.layers[0].y == ref.layers[0].y == (64, 113, 113)
    assert next(ly for ly in m.layers if ly.kind == "maxpool").y == (64, 57, 57)
    assert next(ly for ly in ref.layers if ly.kind == "maxpool").y == (64, 56, 56)
    assert next(ly for ly in m.layers if ly.name == "avgpool").x == (2048, 8, 8)
    assert m.parameters == 25_557_032  # the adaptive pool keeps the FC size fixed


def test_cosmoflow_at_512_reproduces_paradl_file(paradl_dir):
    from testbed.model.netfile import load_net
    ref = load_net(paradl_dir / "COSMOFLOW.net").model
    built = get_model("cosmoflow", (4, 512, 512, 512))
    assert [ly.kind for ly in built.layers] == [ly.kind for ly in ref.layers]
    for ours, theirs in zip(each(built.layers), ref.layers, strict=True):
        assert (ours.x, ours.y) == (theirs.x, theirs.y), ours.name
        if ours.kind in ("conv", "fc", "avgpool"):
            assert ours.w == theirs.w, ours.name
    assert built.weight_elements == ref.weight_elements == 2_128_064


def test_cosmoflow_at_128_pools_after_three_blocks():
    m = get_model("cosmoflow", (4, 128, 128, 128))
    assert [ly.name for ly in m.layers if ly.kind == "avgpool"] == ["pool1", "pool2", "pool3"]
    assert m.layers[-1].y == (4, 1, 1, 1)
    assert not shape_problems(m)


def test_unet3d_structure():
    m = get_model("unet3d", (1, 64, 64, 64))
    convs = [ly for ly in m.layers if ly.kind == "conv"]
    assert len(convs) == 4 * 2 + 3 * 2 + 1
    assert max(ly.out_channels for ly in convs) == 512  # 32 base filters, 4 levels
    concats = [ly for ly in m.layers if ly.kind == "concat"]
    assert [ly.y[0] for ly in concats] == [512 + 256, 256 + 128, 128 + 64]
    deconvs = [ly for ly in m.layers if ly.kind == "deconv"]
    assert [ly.y[1:] for ly in deconvs] == [(16, 16, 16), (32, 32, 32), (64, 64, 64)]
    assert m.layers[-1].y == (3, 64, 64, 64) and m.layers[-1].kernel == (1, 1, 1)
    # Parameter count by hand: convs (no bias, BN affine), deconvs with bias, head with bias.
    def conv(c, f, k=27):
        return c * f * k
    expected = (conv(1, 32) + conv(32, 64) + conv(64, 64) + conv(64, 128) + conv(128, 128)
                + conv(128, 256) + conv(256, 256) + conv(256, 512)
                + 2 * (32 + 64 + 64 + 128 + 128 + 256 + 256 + 512)
                + 512 * 512 * 8 + 512 + conv(768, 256) + conv(256, 256) + 4 * 256
                + 256 * 256 * 8 + 256 + conv(384, 128) + conv(128, 128) + 4 * 128
                + 128 * 128 * 8 + 128 + conv(192, 64) + conv(64, 64) + 4 * 64
                + 64 * 3 + 3)
    assert m.parameters == expected


def test_unet_options():
    from testbed.model.zoo import unet3d
    m = unet3d((4, 32, 32, 32), classes=5, base_filters=16, levels=3)
    assert m.layers[-1].y == (5, 32, 32, 32)
    assert max(ly.out_channels for ly in m.layers if ly.kind == "conv") == 16 * 2 * 4


@pytest.mark.parametrize("name", ["resnet50", "resnet152", "vgg16", "alexnet", "cosmoflow",
                                  "unet3d"])
def test_every_zoo_model_is_shape_consistent(name):
    assert name in list_models()
    assert shape_problems(get_model(name)) == []


def test_dimension_generic_builders():
    one_d = get_model("resnet50", (3, 224))
    assert one_d.layers[0].w == (3, 64, 7) and one_d.spatial_dims == 1
    three_d = get_model("resnet50", (3, 32, 32, 32))
    assert three_d.layers[0].w == (3, 64, 7, 7, 7)
    for m in (one_d, three_d):
        assert not shape_problems(m)
    # Only the kernel volume changes the parameter count.
    conv_w = sum(ly.w_elems for ly in one_d.layers if ly.kind == "conv")
    assert one_d.parameters - conv_w == get_model("resnet50").parameters - sum(
        ly.w_elems for ly in get_model("resnet50").layers if ly.kind == "conv")


def test_bench_build_resnet50(benchmark):
    model = benchmark(get_model, "resnet50", (3, 224, 224))
    assert model.parameters == 25_557_032


def test_bench_build_resnet152(benchmark):
    model = benchmark(get_model, "resnet152", (3, 224, 224))
    assert len(model.layers) == 514
