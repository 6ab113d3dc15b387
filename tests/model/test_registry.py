"""Registry lookups: aliases, did-you-mean, input shapes."""

from __future__ import annotations

import pytest

from testbed.errors import InputError, UnknownNameError
from testbed.model.registry import canonical_name, get_model
from testbed.model.zoo import InputTooSmallError


@pytest.mark.parametrize(("alias", "name"), [
    ("resnet-50", "resnet50"), ("ResNet50", "resnet50"), ("RESNET_152", "resnet152"),
    ("vgg", "vgg16"), ("VGG-16", "vgg16"), ("AlexNet", "alexnet"), ("CosmoFlow", "cosmoflow"),
    ("3d-unet", "unet3d"), ("U-Net", "unet3d"), ("unet_3d", "unet3d"),
])
def test_aliases(alias, name):
    assert canonical_name(alias) == name
    assert get_model(alias).name == name


def test_unknown_name_suggests():
    with pytest.raises(UnknownNameError, match="did you mean 'resnet50'"):
        get_model("resnet5")
    with pytest.raises(UnknownNameError, match="unknown model 'inception'"):
        get_model("inception")


@pytest.mark.parametrize("shape", ["3x224", "3x112x112", (3, 226, 226), "3×64×64×64"])
def test_shapes_as_text_or_tuple(shape):
    assert get_model("resnet50", shape).layers[-1].y[0] == 1000


@pytest.mark.parametrize("shape", ["3xax224", "0x224x224", "3x-1x4", (3, 0, 2), (3.5, 2)])
def test_bad_shapes(shape):
    with pytest.raises(InputError):
        get_model("resnet50", shape)


@pytest.mark.parametrize(("name", "shape"), [
    ("alexnet", "3x32x32"), ("vgg16", "3x16x16"), ("cosmoflow", "4x16x16x16"),
    ("unet3d", "1x36x36x36"), ("resnet50", "3"),
])
def test_too_small_or_ill_fitting_inputs(name, shape):
    with pytest.raises(InputError) as info:
        get_model(name, shape)
    assert "\n" not in str(info.value)


def test_too_small_is_its_own_error_type():
    with pytest.raises(InputTooSmallError, match="too small for vgg16"):
        get_model("vgg16", "3x31x31")
    assert get_model("vgg16", "3x32x32").layers[-1].y == (1000, 1, 1)


def test_paths_versus_names(tmp_path, monkeypatch, paradl_dir):
    import shutil
    monkeypatch.chdir(tmp_path)
    (tmp_path / "vgg16").write_text("not a net file\n")
    assert get_model("vgg16").name == "vgg16"  # a bare word is a zoo name
    shutil.copy(paradl_dir / "ALEXNET_ImageNet.net", tmp_path / "alex.model")
    assert get_model("./alex.model").name == "AlexNet"  # a path to a file is loaded
