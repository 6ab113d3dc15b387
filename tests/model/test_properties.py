"""Hypothesis properties of the zoo over random valid input sizes."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from testbed.model.registry import get_model
from testbed.model.zoo import InputTooSmallError, shape_problems

#: Smallest square input each 2-D model accepts, and the property test's upper bound.
MIN_SIDE = {"resnet50": 1, "resnet152": 1, "vgg16": 32, "alexnet": 63}
SETTINGS = settings(max_examples=25, deadline=None)


@SETTINGS
@given(name=st.sampled_from(sorted(MIN_SIDE)), data=st.data())
def test_shapes_chain_and_params_fixed(name, data):
    h = data.draw(st.integers(MIN_SIDE[name], 400), label="h")
    w = data.draw(st.integers(MIN_SIDE[name], 400), label="w")
    channels = data.draw(st.sampled_from([1, 3, 4]), label="channels")
    model = get_model(name, (channels, h, w))
    assert shape_problems(model) == []
    reference = get_model(name, (channels, 224, 224))
    # Adaptive pooling keeps the classifier's size: parameters do not depend on input size.
    assert model.parameters == reference.parameters


@SETTINGS
@given(name=st.sampled_from(sorted(MIN_SIDE)), data=st.data())
def test_macs_grow_with_input_size(name, data):
    side = data.draw(st.integers(MIN_SIDE[name], 300), label="side")
    grow = data.draw(st.integers(1, 64), label="grow")
    small = get_model(name, (3, side, side))
    large = get_model(name, (3, side + grow, side + grow))
    assert large.forward_macs >= small.forward_macs
    assert large.activation_elements_per_sample >= small.activation_elements_per_sample


@SETTINGS
@given(side=st.integers(48, 160), depth=st.integers(48, 160))
def test_cosmoflow_any_volume(side, depth):
    model = get_model("cosmoflow", (4, side, side, depth))
    assert shape_problems(model) == []
    assert model.layers[-1].y == (4, 1, 1, 1)
    convs = [ly for ly in model.layers if ly.kind == "conv"]
    assert [ly.out_channels for ly in convs] == [16, 32, 64, 128, 256, 256, 128]
    # Convolutions' weights are input-independent; only the first FC spans the remainder.
    fc1 = next(ly for ly in model.layers if ly.kind == "fc")
    assert model.parameters - fc1.params == get_model("cosmoflow").parameters - next(
        ly for ly in get_model("cosmoflow").layers if ly.kind == "fc").params


@SETTINGS
@given(a=st.integers(1, 12), b=st.integers(1, 12), c=st.integers(1, 12),
       classes=st.integers(1, 8))
def test_unet_any_multiple_of_eight(a, b, c, classes):
    from testbed.model.zoo import unet3d
    model = unet3d((2, 8 * a, 8 * b, 8 * c), classes=classes)
    assert shape_problems(model) == []
    assert model.layers[-1].y == (classes, 8 * a, 8 * b, 8 * c)
    # Fully convolutional: parameters fixed, MACs proportional to the voxel count.
    ref = unet3d((2, 8, 8, 8), classes=classes)
    assert model.parameters == ref.parameters
    assert model.forward_macs == ref.forward_macs * a * b * c


@SETTINGS
@given(pools=st.sampled_from([(1,), (1, 2), (1, 2, 3), (1, 2, 3, 4)]), data=st.data())
def test_cosmoflow_macs_grow_on_a_fixed_architecture(pools, data):
    from testbed.model.zoo import cosmoflow
    # Smallest cube each pooling choice accepts (found by the builder's own arithmetic).
    smallest = {1: 32, 2: 58, 3: 106, 4: 170}[len(pools)]
    side = data.draw(st.integers(smallest, smallest + 150), label="side")
    grow = data.draw(st.integers(1, 40), label="grow")
    with pytest.raises(InputTooSmallError):
        cosmoflow((4, smallest - 1, smallest - 1, smallest - 1), pools=pools)
    small = cosmoflow((4, side, side, side), pools=pools)
    large = cosmoflow((4, side + grow, side + grow, side + grow), pools=pools)
    assert large.forward_macs >= small.forward_macs


def test_cosmoflow_automatic_pools_can_lower_macs():
    # Documented behaviour: one more pool fits at 32³ than at 31³, so the MACs drop.
    from testbed.model.zoo import cosmoflow
    assert cosmoflow((4, 32, 32, 32)).forward_macs < cosmoflow((4, 31, 31, 31)).forward_macs
    assert (cosmoflow((4, 33, 33, 33), pools=(1,)).forward_macs
            > cosmoflow((4, 32, 32, 32), pools=(1,)).forward_macs)
