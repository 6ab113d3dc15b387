"""Model zoo: CNNs built by code at any input size (see :mod:`testbed.model.registry`)."""

from testbed.model.zoo._graph import GraphBuilder, InputTooSmallError
from testbed.model.zoo.consistency import shape_problems
from testbed.model.zoo.imagenet import alexnet, resnet50, resnet152, vgg16
from testbed.model.zoo.volumetric import cosmoflow, unet3d

__all__ = ["GraphBuilder", "InputTooSmallError", "alexnet", "cosmoflow", "resnet50",
           "resnet152", "shape_problems", "unet3d", "vgg16"]
