"""The models the real-run harnesses train, built from the layer IR.

The PyTorch, TensorFlow/Keras and Chainer back ends of ``real_runs`` do not describe
these networks themselves: they interpret the :class:`~testbed.model.ir.Model` built
here, layer by layer, so the oracle and every framework train the same architecture
(same layers, shapes and parameter counts — tested against each framework).

* ``mlp``: ``depth`` fully connected hidden layers of ``width`` units (ReLU, dropout
  after the first), then a classifier.
* ``cnn``: ``depth`` stages of 3x3 convolution (with bias), ReLU and 2x2 max pooling,
  the last stage ``width`` channels and each earlier one half the next; dropout and a
  classifier over the flattened features.
* ``resnetmini`` (the harness's ``resnet``): a 3x3 stem of ``width // 2`` channels
  with batch norm, ``depth`` basic residual blocks at that width, global average
  pooling, dropout and a classifier.
* ``resnet18cifar``: the CIFAR variant of ResNet-18 (He et al. 2016, §4.2 style 3x3
  stem, no max pool): four stages of ``depth`` basic blocks (2 → ResNet-18) with
  ``width``, 2·``width``, 4·``width`` and 8·``width`` channels, strides 1, 2, 2, 2,
  1x1 projection shortcuts where the shape changes. At width 64 and 3x32x32 inputs it
  has 11,173,962 parameters for 10 classes.

Options are per model (:data:`DEFAULTS`); a model built with other than its default
options is named ``<name>-w<width>-d<depth>-i<CxHxW>`` (only the options that differ),
so calibration keys and oracle lookups tell variants apart.
"""

from __future__ import annotations

from dataclasses import dataclass

from testbed.errors import InputError, UnknownNameError
from testbed.model.ir import Model
from testbed.model.zoo._graph import GraphBuilder
from testbed.units import did_you_mean

#: Classes of the harness's generated classification task.
CLASSES = 10


@dataclass(frozen=True)
class HarnessDefaults:
    """Default size options of one harness model."""

    width: int
    depth: int
    input_shape: tuple[int, ...]


#: Zoo name -> default options. The harness's own names map onto these (HARNESS_NAMES).
DEFAULTS = {
    "mlp": HarnessDefaults(width=32, depth=2, input_shape=(1, 8, 8)),
    "cnn": HarnessDefaults(width=32, depth=2, input_shape=(1, 8, 8)),
    "resnetmini": HarnessDefaults(width=32, depth=2, input_shape=(1, 8, 8)),
    "resnet18cifar": HarnessDefaults(width=64, depth=2, input_shape=(3, 32, 32)),
}
#: Model names the real-run harness accepts -> zoo name.
HARNESS_NAMES = {"mlp": "mlp", "cnn": "cnn", "resnet": "resnetmini",
                 "resnet18": "resnet18cifar"}


def zoo_name(name: str) -> str:
    """The zoo name of a harness model name (``resnet`` → ``resnetmini``)."""
    if name in DEFAULTS:
        return name
    if name in HARNESS_NAMES:
        return HARNESS_NAMES[name]
    known = sorted(set(HARNESS_NAMES) | set(DEFAULTS))
    raise UnknownNameError(f"unknown harness model {name!r}{did_you_mean(name, known)}; "
                           f"known: {', '.join(known)}", field="model")


#: Largest width and depth of a harness model: harness models are small models trained on
#: a CPU or one GPU (a ResNet-1001 has 333 blocks); beyond these a typo is likelier than
#: a wish, and building the layer graph alone would take seconds.
MAX_WIDTH = 65_536
MAX_DEPTH = 1_000


def resolve_options(name: str, width: int | None = None, depth: int | None = None,
                    input_shape: tuple[int, ...] | None = None) -> HarnessDefaults:
    """The options of a model with ``None`` filled from its defaults, checked."""
    base = DEFAULTS[zoo_name(name)]
    opts = HarnessDefaults(width=base.width if width is None else int(width),
                           depth=base.depth if depth is None else int(depth),
                           input_shape=base.input_shape if input_shape is None
                           else tuple(int(d) for d in input_shape))
    if not 0 < opts.width <= MAX_WIDTH:
        raise InputError(f"must be an integer in 1…{MAX_WIDTH:,}, got {opts.width}",
                         field="width")
    if not 0 < opts.depth <= MAX_DEPTH:
        raise InputError(f"must be an integer in 1…{MAX_DEPTH:,}, got {opts.depth}",
                         field="depth")
    if len(opts.input_shape) != 3 or any(d <= 0 for d in opts.input_shape):
        raise InputError(f"input shape {opts.input_shape!r} must be C x H x W, positive",
                         field="input_shape")
    return opts


def model_key(name: str, width: int | None = None, depth: int | None = None,
              input_shape: tuple[int, ...] | None = None) -> str:
    """The IR name of a variant: the zoo name, plus the options that differ from its
    defaults (``cnn-w64``, ``mlp-d3-i3x32x32``)."""
    zoo = zoo_name(name)
    base = DEFAULTS[zoo]
    opts = resolve_options(name, width, depth, input_shape)
    parts = [zoo]
    if opts.width != base.width:
        parts.append(f"w{opts.width}")
    if opts.depth != base.depth:
        parts.append(f"d{opts.depth}")
    if opts.input_shape != base.input_shape:
        parts.append("i" + "x".join(map(str, opts.input_shape)))
    return "-".join(parts)


def harness_model(name: str, width: int | None = None, depth: int | None = None,
                  input_shape: tuple[int, ...] | None = None) -> Model:
    """The IR of harness model ``name`` with its size options (defaults where None)."""
    zoo = zoo_name(name)
    opts = resolve_options(zoo, width, depth, input_shape)
    key = model_key(zoo, width, depth, input_shape)
    build = {"mlp": _mlp, "cnn": _cnn, "resnetmini": _resnet_mini,
             "resnet18cifar": _resnet18}[zoo]
    return build(GraphBuilder(key, opts.input_shape), opts)


def _mlp(g: GraphBuilder, o: HarnessDefaults) -> Model:
    h = g.fc("fc1", g.last, o.width)
    h = g.elementwise("relu1", h, "relu")
    h = g.elementwise("dropout", h, "dropout")
    for i in range(2, o.depth + 1):
        h = g.fc(f"fc{i}", h, o.width)
        h = g.elementwise(f"relu{i}", h, "relu")
    g.fc("classifier", h, CLASSES)
    return g.build()


def _cnn(g: GraphBuilder, o: HarnessDefaults) -> Model:
    h = g.last
    for i in range(o.depth):
        channels = max(o.width // 2 ** (o.depth - 1 - i), 1)
        h = g.conv(f"conv{i + 1}", h, channels, 3, padding=1, bias=True)
        h = g.elementwise(f"relu{i + 1}", h, "relu")
        h = g.pool(f"pool{i + 1}", h, "maxpool", 2)
    h = g.elementwise("dropout", h, "dropout")
    g.fc("classifier", h, CLASSES)
    return g.build()


def _basic_block(g: GraphBuilder, prefix: str, src: str, channels: int, stride: int) -> str:
    h = g.conv(f"{prefix}.conv1", src, channels, 3, stride=stride, padding=1)
    h = g.bn(f"{prefix}.bn1", h)
    h = g.elementwise(f"{prefix}.relu1", h, "relu")
    h = g.conv(f"{prefix}.conv2", h, channels, 3, padding=1)
    h = g.bn(f"{prefix}.bn2", h)
    shortcut = src
    if stride != 1 or g.shape(src)[0] != channels:
        shortcut = g.conv(f"{prefix}.shortcut", src, channels, 1, stride=stride)
        shortcut = g.bn(f"{prefix}.shortcut_bn", shortcut)
    h = g.add(f"{prefix}.add", h, shortcut)
    return g.elementwise(f"{prefix}.relu2", h, "relu")


def _resnet_mini(g: GraphBuilder, o: HarnessDefaults) -> Model:
    c = max(o.width // 2, 2)
    h = g.conv("stem", g.last, c, 3, padding=1)
    h = g.bn("stem_bn", h)
    h = g.elementwise("stem_relu", h, "relu")
    for i in range(o.depth):
        h = _basic_block(g, f"block{i + 1}", h, c, 1)
    h = g.adaptive_avgpool("avgpool", h, 1)
    h = g.elementwise("dropout", h, "dropout")
    g.fc("classifier", h, CLASSES)
    return g.build()


def _resnet18(g: GraphBuilder, o: HarnessDefaults) -> Model:
    h = g.conv("stem", g.last, o.width, 3, padding=1)
    h = g.bn("stem_bn", h)
    h = g.elementwise("stem_relu", h, "relu")
    for stage in range(4):
        channels = o.width * 2 ** stage
        for block in range(o.depth):
            stride = 2 if stage > 0 and block == 0 else 1
            h = _basic_block(g, f"layer{stage + 1}.{block}", h, channels, stride)
    h = g.adaptive_avgpool("avgpool", h, 1)
    g.fc("classifier", h, CLASSES)
    return g.build()


def mlp(input_shape: tuple[int, ...] = DEFAULTS["mlp"].input_shape) -> Model:
    """Registry builder: the harness MLP at its default width and depth."""
    return harness_model("mlp", input_shape=input_shape)


def cnn(input_shape: tuple[int, ...] = DEFAULTS["cnn"].input_shape) -> Model:
    """Registry builder: the harness CNN at its default width and depth."""
    return harness_model("cnn", input_shape=input_shape)


def resnetmini(input_shape: tuple[int, ...] = DEFAULTS["resnetmini"].input_shape) -> Model:
    """Registry builder: the harness's small residual CNN (``--model resnet``)."""
    return harness_model("resnetmini", input_shape=input_shape)


def resnet18cifar(input_shape: tuple[int, ...] = DEFAULTS["resnet18cifar"].input_shape
                  ) -> Model:
    """Registry builder: CIFAR-style ResNet-18 (width 64)."""
    return harness_model("resnet18cifar", input_shape=input_shape)
