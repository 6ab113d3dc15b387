"""ImageNet CNNs built by code: ResNet-50/152, VGG16 and AlexNet (torchvision layouts).

Every builder takes the per-sample input shape ``(C, *spatial)`` (1, 2 or 3 spatial
dimensions) and returns a :class:`~testbed.model.ir.Model` whose shapes follow PyTorch's
arithmetic (``floor`` output sizes, ``ceil_mode=False`` pooling). At 3x224x224 they give
torchvision's parameter counts: ResNet-50 25,557,032, ResNet-152 60,192,808, VGG16
138,357,544, AlexNet 61,100,840.
"""

from __future__ import annotations

from testbed.model.ir import Model
from testbed.model.zoo._graph import GraphBuilder

IMAGENET_SHAPE = (3, 224, 224)

#: Bottleneck blocks per stage (ResNet "v1.5": the stride sits on the 3x3 convolution).
RESNET_STAGES = {"resnet50": (3, 4, 6, 3), "resnet101": (3, 4, 23, 3),
                 "resnet152": (3, 8, 36, 3)}
#: VGG16 ("configuration D"): filters per convolution, "M" for a 2x2 max pool.
VGG16_CFG = (64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M",
             512, 512, 512, "M")


def resnet(depth_name: str, input_shape: tuple[int, ...] = IMAGENET_SHAPE,
           classes: int = 1000) -> Model:
    """Bottleneck ResNet (torchvision v1.5) with projection shortcuts as conv+BN layers."""
    stages = RESNET_STAGES[depth_name]
    g = GraphBuilder(depth_name, input_shape)
    h = g.conv("conv1", g.last, 64, 7, stride=2, padding=3)
    h = g.bn("bn1", h)
    h = g.elementwise("relu", h, "relu")
    h = g.pool("maxpool", h, "maxpool", 3, stride=2, padding=1)
    for stage, blocks in enumerate(stages, start=1):
        width = 64 * 2 ** (stage - 1)
        for block in range(blocks):
            stride = 2 if stage > 1 and block == 0 else 1
            h = _bottleneck(g, f"layer{stage}.{block}", h, width, stride)
    h = g.adaptive_avgpool("avgpool", h, 1)
    g.fc("fc", h, classes)
    return g.build()


def _bottleneck(g: GraphBuilder, prefix: str, src: str, width: int, stride: int) -> str:
    out_channels = 4 * width
    h = g.conv(f"{prefix}.conv1", src, width, 1)
    h = g.bn(f"{prefix}.bn1", h)
    h = g.elementwise(f"{prefix}.relu1", h, "relu")
    h = g.conv(f"{prefix}.conv2", h, width, 3, stride=stride, padding=1)
    h = g.bn(f"{prefix}.bn2", h)
    h = g.elementwise(f"{prefix}.relu2", h, "relu")
    h = g.conv(f"{prefix}.conv3", h, out_channels, 1)
    h = g.bn(f"{prefix}.bn3", h)
    shortcut = src
    if stride != 1 or g.shape(src)[0] != out_channels:
        shortcut = g.conv(f"{prefix}.downsample.0", src, out_channels, 1, stride=stride)
        shortcut = g.bn(f"{prefix}.downsample.1", shortcut)
    h = g.add(f"{prefix}.add", h, shortcut)
    return g.elementwise(f"{prefix}.relu3", h, "relu")


def resnet50(input_shape: tuple[int, ...] = IMAGENET_SHAPE, classes: int = 1000) -> Model:
    return resnet("resnet50", input_shape, classes)


def resnet152(input_shape: tuple[int, ...] = IMAGENET_SHAPE, classes: int = 1000) -> Model:
    return resnet("resnet152", input_shape, classes)


def vgg16(input_shape: tuple[int, ...] = IMAGENET_SHAPE, classes: int = 1000) -> Model:
    """VGG16 with conv biases, adaptive 7x7 average pool and the torchvision classifier
    (FC 25088→4096, ReLU, dropout, FC 4096→4096, ReLU, dropout, FC 4096→classes)."""
    g = GraphBuilder("vgg16", input_shape)
    h = g.last
    conv_i = pool_i = 0
    for item in VGG16_CFG:
        if isinstance(item, str):          # "M": a max pool
            pool_i += 1
            h = g.pool(f"features.pool{pool_i}", h, "maxpool", 2, stride=2)
        else:
            conv_i += 1
            h = g.conv(f"features.conv{conv_i}", h, item, 3, padding=1, bias=True)
            h = g.elementwise(f"features.relu{conv_i}", h, "relu")
    h = g.adaptive_avgpool("avgpool", h, 7)
    h = g.fc("classifier.fc1", h, 4096)
    h = g.elementwise("classifier.relu1", h, "relu")
    h = g.elementwise("classifier.dropout1", h, "dropout")
    h = g.fc("classifier.fc2", h, 4096)
    h = g.elementwise("classifier.relu2", h, "relu")
    h = g.elementwise("classifier.dropout2", h, "dropout")
    g.fc("classifier.fc3", h, classes)
    return g.build()


def alexnet(input_shape: tuple[int, ...] = IMAGENET_SHAPE, classes: int = 1000) -> Model:
    """AlexNet, torchvision variant: 64/192/384/256/256 filters, adaptive 6x6 average
    pool, dropout before the first two FC layers, FC 9216→4096→4096→classes."""
    g = GraphBuilder("alexnet", input_shape)
    h = g.conv("features.conv1", g.last, 64, 11, stride=4, padding=2, bias=True)
    h = g.elementwise("features.relu1", h, "relu")
    h = g.pool("features.pool1", h, "maxpool", 3, stride=2)
    h = g.conv("features.conv2", h, 192, 5, padding=2, bias=True)
    h = g.elementwise("features.relu2", h, "relu")
    h = g.pool("features.pool2", h, "maxpool", 3, stride=2)
    for i, filters in enumerate((384, 256, 256), start=3):
        h = g.conv(f"features.conv{i}", h, filters, 3, padding=1, bias=True)
        h = g.elementwise(f"features.relu{i}", h, "relu")
    h = g.pool("features.pool5", h, "maxpool", 3, stride=2)
    h = g.adaptive_avgpool("avgpool", h, 6)
    h = g.elementwise("classifier.dropout1", h, "dropout")
    h = g.fc("classifier.fc1", h, 4096)
    h = g.elementwise("classifier.relu1", h, "relu")
    h = g.elementwise("classifier.dropout2", h, "dropout")
    h = g.fc("classifier.fc2", h, 4096)
    h = g.elementwise("classifier.relu2", h, "relu")
    g.fc("classifier.fc3", h, classes)
    return g.build()
