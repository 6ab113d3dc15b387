"""Volumetric (3-D) CNNs built by code: CosmoFlow and a 3-D U-Net.

CosmoFlow follows ParaDL's ``COSMOFLOW.net`` layer list: a 4-channel 3-D input, seven
convolution + ReLU blocks (16, 32, 64, 128, 256, 256, 128 filters; kernels 3,3,3,3,2,2,2;
no padding; stride 2 on the third), a 2x2x2 average pool after each of the first six,
then FC 2048, FC 256, FC 4 with ReLUs. At 4x512x512x512 it reproduces that file's
shapes exactly. Smaller inputs cannot take all six pools, so a pool is kept only when
the convolutions after it still fit (at 128³ the network pools after the first three
blocks, as the original CosmoFlow of Mathuriya et al., SC'18, does); the first FC layer
then spans whatever spatial extent is left.

The 3-D U-Net is Çiçek et al., MICCAI 2016: four resolution levels with two 3x3x3
convolution + BN + ReLU per level (``base, 2·base`` filters at the top, doubling per
level), 2x2x2 max pooling down, 2x2x2 transposed convolution up, skip connections by
channel concatenation and a final 1x1x1 convolution to the classes. Convolutions are
padded ("same"), so every spatial size divisible by 2^(levels−1) works.
"""

from __future__ import annotations

from testbed.model.ir import Model
from testbed.model.zoo._graph import GraphBuilder, InputTooSmallError

COSMOFLOW_SHAPE = (4, 128, 128, 128)
UNET3D_SHAPE = (1, 128, 128, 128)

#: (filters, kernel, stride, followed by a pool) per CosmoFlow convolution block.
COSMOFLOW_CONVS = ((16, 3, 1, True), (32, 3, 1, True), (64, 3, 2, True), (128, 3, 1, True),
                   (256, 2, 1, True), (256, 2, 1, True), (128, 2, 1, False))
COSMOFLOW_FCS = (2048, 256)


def _conv_out(size: int, kernel: int, stride: int) -> int:
    return (size - kernel) // stride + 1


def _convs_fit(size: int, convs) -> bool:
    for _, kernel, stride, _ in convs:
        size = _conv_out(size, kernel, stride)
        if size < 1:
            return False
    return True


def cosmoflow(input_shape: tuple[int, ...] = COSMOFLOW_SHAPE, outputs: int = 4,
              pools: tuple[int, ...] | None = None) -> Model:
    """CosmoFlow (see the module docstring for the layout and the pooling rule).

    ``pools`` lists the blocks (1-6) followed by an average pool; ``None`` chooses them
    from the input size (every pool after which the remaining convolutions still fit).
    The automatic choice changes the architecture at a few sizes, where forward MACs can
    drop although the input grew; fix ``pools`` to compare sizes on one architecture.
    """
    if pools is not None and any(not 1 <= i < len(COSMOFLOW_CONVS) for i in pools):
        raise ValueError(f"pools must name blocks 1..{len(COSMOFLOW_CONVS) - 1}, got {pools}")
    g = GraphBuilder("cosmoflow", input_shape)
    h = g.last
    for i, (filters, kernel, stride, pooled) in enumerate(COSMOFLOW_CONVS, start=1):
        h = g.conv(f"conv{i}", h, filters, kernel, stride=stride, bias=True)
        h = g.elementwise(f"relu{i}", h, "relu")
        rest = COSMOFLOW_CONVS[i:]
        if pools is not None:
            pooled = i in pools
        else:
            pooled = pooled and all(s // 2 >= 1 and _convs_fit(s // 2, rest)
                                    for s in g.shape(h)[1:])
        if pooled:
            h = g.pool(f"pool{i}", h, "avgpool", 2, stride=2)
    for j, features in enumerate(COSMOFLOW_FCS, start=1):
        h = g.fc(f"fc{j}", h, features)
        h = g.elementwise(f"fc{j}.relu", h, "relu")
    g.fc(f"fc{len(COSMOFLOW_FCS) + 1}", h, outputs)
    return g.build()


def unet3d(input_shape: tuple[int, ...] = UNET3D_SHAPE, classes: int = 3,
           base_filters: int = 32, levels: int = 4) -> Model:
    """3-D U-Net (Çiçek et al. 2016) with ``levels`` resolution levels."""
    if levels < 2:
        raise ValueError("a U-Net needs at least 2 levels")
    factor = 2 ** (levels - 1)
    if any(d % factor for d in input_shape[1:]):
        raise InputTooSmallError(
            f"unet3d with {levels} levels needs every spatial size divisible by {factor}, "
            f"got {'x'.join(str(d) for d in input_shape)}", field="input_shape")
    g = GraphBuilder("unet3d", input_shape)

    def double_conv(prefix: str, src: str, first: int, second: int) -> str:
        h = src
        for j, filters in enumerate((first, second), start=1):
            h = g.conv(f"{prefix}.conv{j}", h, filters, 3, padding=1)
            h = g.bn(f"{prefix}.bn{j}", h)
            h = g.elementwise(f"{prefix}.relu{j}", h, "relu")
        return h

    skips: list[str] = []
    h = g.last
    for level in range(levels):
        filters = base_filters * 2 ** level
        if level:
            h = g.pool(f"down{level}.pool", h, "maxpool", 2, stride=2)
        h = double_conv(f"enc{level}", h, filters, 2 * filters)
        skips.append(h)
    for level in range(levels - 2, -1, -1):
        h = g.deconv(f"up{level}.upconv", h, g.shape(h)[0], 2, stride=2)
        h = g.concat(f"up{level}.concat", h, skips[level])
        filters = 2 * base_filters * 2 ** level
        h = double_conv(f"dec{level}", h, filters, filters)
    g.conv("head", h, classes, 1, bias=True)
    return g.build()
