"""Layer-level intermediate representation of a CNN, in 1-D, 2-D and 3-D.

A :class:`Model` is an ordered list of :class:`Layer` records, each with per-sample
input, weight and output shapes — exactly what an analytical cost model needs (ParaDL
works on the same information). Shapes are per sample: ``x = (C, *spatial)``,
``y = (F, *spatial)``, ``w = (C, F, *kernel)`` for convolutions and fully connected
layers (ParaDL's ``C×F×K×K`` order; a fully connected layer over a ``C×H×W`` input has
``w = (C, F, H, W)``), ``w = (0, 0, *kernel)`` for pooling (kernel only, no weights) and
``w = ()`` for layers without a weight tensor. Biases and batch-norm scale/shift are
counted separately in ``extra_params`` so that ``prod(w)`` stays ParaDL's ``|w|``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cached_property

#: Layer kinds the IR knows. ``deconv`` is a transposed convolution (3-D U-Net decoder).
LAYER_KINDS = ("conv", "deconv", "fc", "maxpool", "avgpool", "bn", "relu", "add",
               "dropout", "concat")

#: Kinds whose weights are a real tensor (split by filter/channel parallelism).
WEIGHTED_KINDS = ("conv", "deconv", "fc")
#: Kinds that can run in place (their input buffer is reused for the output).
INPLACE_KINDS = ("relu", "bn")


def prod(dims) -> int:
    """Product of a shape's dimensions (1 for an empty shape)."""
    return math.prod(dims) if dims else 1


@dataclass(frozen=True)
class Layer:
    """One layer with per-sample shapes.

    ``profiled_s`` is a measured forward+backward time per sample (ParaDL ``.net_sc``
    files put the whole model's time on the first layer). ``inputs`` names the layers
    whose outputs feed this one (empty: the previous layer, or the model input).
    """

    name: str
    kind: str
    x: tuple[int, ...]
    w: tuple[int, ...]
    y: tuple[int, ...]
    stride: tuple[int, ...] = ()
    padding: tuple[int, ...] = ()
    groups: int = 1
    extra_params: int = 0
    inputs: tuple[str, ...] = ()
    profiled_s: float | None = None

    def __post_init__(self) -> None:
        if self.kind not in LAYER_KINDS:
            raise ValueError(f"unknown layer kind {self.kind!r}")

    # -- sizes (elements per sample) -------------------------------------------------
    @property
    def x_elems(self) -> int:
        """Input elements per sample, |x|."""
        return prod(self.x)

    @property
    def y_elems(self) -> int:
        """Output elements per sample, |y|."""
        return prod(self.y)

    @property
    def w_elems(self) -> int:
        """ParaDL's |w|: the product of the weight dims (0 when any dim is 0)."""
        return prod(self.w) if self.w else 0

    @property
    def weight_params(self) -> int:
        """Trainable weights of the main tensor (conv/deconv/fc), else 0."""
        return self.w_elems if self.kind in WEIGHTED_KINDS else 0

    @property
    def params(self) -> int:
        """All trainable parameters: weights, biases, batch-norm scale and shift."""
        return self.weight_params + self.extra_params

    @property
    def spatial_dims(self) -> int:
        """1, 2 or 3 for a 1-D/2-D/3-D layer (0 for a flat vector)."""
        return max(len(self.y) - 1, 0)

    @property
    def kernel(self) -> tuple[int, ...]:
        """Spatial kernel extent (conv, deconv, pooling); () otherwise."""
        if self.kind in ("conv", "deconv", "maxpool", "avgpool") and len(self.w) > 2:
            return tuple(self.w[2:])
        return ()

    @property
    def in_channels(self) -> int:
        return self.x[0] if self.x else 0

    @property
    def out_channels(self) -> int:
        return self.y[0] if self.y else 0

    @property
    def forward_macs(self) -> int:
        """Multiply-accumulates of the forward pass per sample (conv, deconv, fc; else 0)."""
        if self.kind == "conv":
            return self.w_elems // max(self.groups, 1) * prod(self.y[1:])
        if self.kind == "deconv":
            return self.w_elems // max(self.groups, 1) * prod(self.x[1:])
        if self.kind == "fc":
            return self.w_elems
        return 0

    @property
    def forward_flops(self) -> int:
        """Floating-point operations of the forward pass per sample (2 per MAC, plus
        element-wise work: bias, batch norm ≈ 4/element, ReLU/add/dropout 1/element,
        pooling one op per window element)."""
        flops = 2 * self.forward_macs
        if self.kind in ("conv", "deconv", "fc") and self.extra_params:
            flops += self.y_elems  # bias add
        elif self.kind == "bn":
            flops += 4 * self.y_elems
        elif self.kind in ("relu", "add", "dropout"):
            flops += self.y_elems
        elif self.kind in ("maxpool", "avgpool"):
            flops += self.y_elems * prod(self.kernel)
        return flops


@dataclass(frozen=True)
class Model:
    """An ordered CNN: the layers in execution order plus the per-sample input shape."""

    name: str
    input_shape: tuple[int, ...]
    layers: tuple[Layer, ...]
    source: str = field(default="zoo", compare=False)

    @cached_property
    def parameters(self) -> int:
        """Trainable parameters (weights, biases, batch-norm affine)."""
        return sum(layer.params for layer in self.layers)

    @cached_property
    def weight_elements(self) -> int:
        """ParaDL's Σ|w| (products of the ``w`` dims, pooling and BN rows included)."""
        return sum(layer.w_elems for layer in self.layers)

    @cached_property
    def forward_macs(self) -> int:
        """Forward multiply-accumulates per sample."""
        return sum(layer.forward_macs for layer in self.layers)

    @cached_property
    def forward_flops(self) -> int:
        return sum(layer.forward_flops for layer in self.layers)

    @cached_property
    def activation_elements_per_sample(self) -> int:
        """Σ|y| over all layers: every activation one sample produces in a forward pass."""
        return sum(layer.y_elems for layer in self.layers)

    @property
    def spatial_dims(self) -> int:
        return max(len(self.input_shape) - 1, 0)

    @cached_property
    def profiled_s_per_sample(self) -> float | None:
        """Measured forward+backward seconds per sample, if the source carried one."""
        times = [layer.profiled_s for layer in self.layers if layer.profiled_s]
        return sum(times) if times else None

    def summary(self) -> dict:
        """Headline numbers for ``testbed model info``."""
        return {
            "name": self.name,
            "input_shape": "x".join(str(d) for d in self.input_shape),
            "layers": len(self.layers),
            "parameters": self.parameters,
            "forward_macs": self.forward_macs,
            "forward_flops": self.forward_flops,
            "activation_elements_per_sample": self.activation_elements_per_sample,
            "weight_elements": self.weight_elements,
        }
