"""ParaDL ``.net`` import/export through the registry: Σ|w| of the published files,
round trips of every zoo model, and one-line errors for malformed files."""

from __future__ import annotations

import pytest

from testbed.errors import InputError, ScenarioError
from testbed.model.netfile import export_net, parse_net
from testbed.model.registry import get_model, list_models
from tests.conftest import each


@pytest.mark.parametrize(("filename", "weights"), [
    ("RESNET50_ImageNet_profall.net_sc", 22_734_016),
    ("VGG_ImageNet_profall.net_sc", 169_801_408),
])
def test_paradl_files_weight_elements(paradl_dir, filename, weights):
    model = get_model(str(paradl_dir / filename))
    assert model.weight_elements == weights
    assert model.input_shape == (3, 226, 226)


def test_paradl_files_differ_from_true_networks(paradl_dir):
    paradl = get_model(str(paradl_dir / "RESNET50_ImageNet_profall.net_sc"))
    true = get_model("resnet50", (3, 226, 226))
    # ParaDL's ResNet-50 has no projection shortcuts: 4 fewer convolutions.
    assert sum(ly.kind == "conv" for ly in true.layers) - sum(
        ly.kind == "conv" for ly in paradl.layers) == 4
    assert paradl.profiled_s_per_sample == pytest.approx(0.003119502)


@pytest.mark.parametrize("filename", ["ALEXNET_ImageNet.net", "COSMOFLOW.net",
                                      "COSMOFLOW.net_256", "ALEXNET_ImageNet_profall.net_sc"])
def test_every_paradl_file_loads(paradl_dir, filename):
    model = get_model(str(paradl_dir / filename))
    assert model.layers and model.weight_elements > 0


def test_net_path_rejects_a_different_input_shape(paradl_dir):
    from testbed.errors import InputError
    with pytest.raises(InputError, match="fixes the input shape"):
        get_model(str(paradl_dir / "COSMOFLOW.net"), "4x128x128x128")


@pytest.mark.parametrize("name", ["resnet50", "resnet152", "vgg16", "alexnet", "cosmoflow",
                                  "unet3d"])
def test_export_import_round_trip(name):
    model = get_model(name)
    back = parse_net(export_net(model), f"{name}.net").model
    assert len(back.layers) == len(model.layers)
    assert back.input_shape == model.input_shape
    for ours, theirs in zip(each(model.layers), back.layers, strict=True):
        assert ours.kind == theirs.kind
        assert (ours.x, ours.y) == (theirs.x, theirs.y), ours.name
        if ours.kind in ("conv", "deconv", "fc", "maxpool", "avgpool"):
            assert ours.w == theirs.w, ours.name
    assert back.weight_elements == model.weight_elements
    assert back.forward_macs == model.forward_macs


def test_paradl_file_round_trip(paradl_dir):
    model = get_model(str(paradl_dir / "VGG_ImageNet_profall.net_sc"))
    back = parse_net(export_net(model), "vgg.net").model
    assert [(ly.x, ly.w, ly.y) for ly in back.layers] == [(ly.x, ly.w, ly.y) for ly in model.layers]
    assert back.profiled_s_per_sample == pytest.approx(model.profiled_s_per_sample)


@pytest.mark.parametrize(("body", "line", "what"), [
    ("CONV_1|3x8x8|3x4x3x3|4x6x6\nRELU|4x6x6|4x4x0x0|4xsixx6\n", 3, "cannot read shape"),
    ("CONV_1|3x8x8|3x4x3x3\n", 2, "needs name|x|w|y"),
    ("WIBBLE_1|3x8x8|3x4x3x3|4x6x6\n", 2, "unknown layer type"),
    ("CONV_1|3x8x8|3x4x3x3|4x6x6|soon\n", 2, "cannot read time"),
    ("CONV_1|3x8x8|3x-4x3x3|4x6x6\n", 2, "negative dimension"),
])
def test_malformed_lines_name_file_and_line(tmp_path, body, line, what):
    path = tmp_path / "broken.net"
    path.write_text("Model|Broken\n" + body)
    with pytest.raises(ScenarioError) as info:
        get_model(str(path))
    message = str(info.value)
    assert f"{path}:{line}" in message and what in message
    assert "\n" not in message


def test_missing_net_file(tmp_path):
    with pytest.raises(InputError, match="no such file"):
        get_model(str(tmp_path / "absent.net_sc"))


def test_list_models_is_canonical():
    """The code-built CNNs come first (the real-run harness models follow them)."""
    assert list_models()[:6] == ["resnet50", "resnet152", "vgg16", "alexnet", "cosmoflow",
                                 "unet3d"]
    assert len(set(list_models())) == len(list_models())
