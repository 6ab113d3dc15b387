"""Import and export of ParaDL's ``.net`` model files and ``.lc`` layer masks.

``.net`` format (one record per line, ``|``-separated)::

    Dataset|ImageNet
    Input|1280000x3x226x226          # dataset size x per-sample shape
    Model|ResNet50
    CONV_1|3x226x226|3x64x7x7|64x113x113|0.003119502   # name|x|w|y[|t]
    # comment lines start with '#'

The layer kind comes from the name's prefix (CONV, FC, BNORM, RELU, MPOOL, APOOL, ADD,
DROPOUT, CONCAT, DECONV). ``t`` is a profiled forward+backward time per sample; ParaDL's
``*_profall.net_sc`` files put the whole model's time on the first layer. ``.lc`` files
are 0/1 masks (``0 CONV_1 |1`` or ``CONV_1|1``), one line per layer, marking the layers a
strategy parallelises.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path

from testbed.errors import ScenarioError
from testbed.io.read import read_text
from testbed.model.ir import Layer, Model

_PREFIX_KIND = (
    ("DECONV", "deconv"), ("CONV", "conv"), ("FC", "fc"), ("BNORM", "bn"), ("BN", "bn"),
    ("RELU", "relu"), ("MPOOL", "maxpool"), ("MAXPOOL", "maxpool"), ("APOOL", "avgpool"),
    ("AVGPOOL", "avgpool"), ("ADD", "add"), ("DROPOUT", "dropout"), ("CONCAT", "concat"),
)
_KIND_PREFIX = {"conv": "CONV", "deconv": "DECONV", "fc": "FC", "bn": "BNORM", "relu": "RELU",
                "maxpool": "MPOOL", "avgpool": "APOOL", "add": "ADD", "dropout": "DROPOUT",
                "concat": "CONCAT"}


@dataclass(frozen=True)
class NetFile:
    """A parsed ``.net`` file: the model plus the header fields."""

    model: Model
    dataset: str | None
    dataset_samples: int | None


def _kind_of(name: str) -> str | None:
    upper = name.upper()
    for prefix, kind in _PREFIX_KIND:
        if upper.startswith(prefix):
            return kind
    return None


def _shape(text: str, path: str, line_no: int, field: str) -> tuple[int, ...]:
    text = text.strip()
    text = re.sub(r"^[xwy]:", "", text)
    try:
        dims = tuple(int(d) for d in text.lower().replace("×", "x").split("x"))
    except ValueError:
        raise ScenarioError(f"cannot read shape {text!r}", source=path, line=line_no,
                            field=field) from None
    if any(d < 0 for d in dims):
        raise ScenarioError(f"negative dimension in {text!r}", source=path, line=line_no,
                            field=field)
    return dims


#: Layer kinds whose ``w`` is ``in × out × kernel`` (the others carry pseudo-weights).
_WEIGHTED = ("conv", "deconv", "fc")
#: Layer kinds that keep the channel count.
_SAME_CHANNELS = ("bn", "relu", "maxpool", "avgpool", "dropout")


def _check_layer(kind: str, head: str, x: tuple[int, ...], w: tuple[int, ...],
                 y: tuple[int, ...], path: str, line_no: int) -> None:
    """Shapes a layer of this kind can have: positive activations, weights that connect
    the input's channels to the output's, as many spatial dimensions in and out."""
    def bad(message: str, part: str) -> ScenarioError:
        return ScenarioError(message, source=path, line=line_no, field=f"{head}.{part}")
    for part, dims in (("x", x), ("y", y)):
        if not dims or any(d <= 0 for d in dims):
            raise bad(f"{part} shape {'x'.join(map(str, dims)) or '(empty)'} needs positive "
                      "dimensions (channels x spatial...)", part)
    if len(x) != len(y) and kind not in ("fc",):
        raise bad(f"input {len(x) - 1}-D and output {len(y) - 1}-D do not match", "y")
    if kind in _WEIGHTED:
        if len(w) < 2 or any(d <= 0 for d in w):
            raise bad("weights must be in x out x kernel... with positive dimensions", "w")
        if w[0] != x[0] or w[1] != y[0]:
            raise bad(f"weights {'x'.join(map(str, w))} do not connect {x[0]} input to "
                      f"{y[0]} output channels", "w")
    elif kind in _SAME_CHANNELS and x[0] != y[0]:
        raise bad(f"a {kind} layer keeps its channels: {x[0]} in, {y[0]} out", "y")


def parse_net(text: str, path: str = "<net>") -> NetFile:
    """Parse the text of a ``.net`` file; errors name the file, line and field."""
    dataset = None
    samples = None
    input_shape: tuple[int, ...] | None = None
    name = Path(path).name.split(".")[0]
    layers: list[Layer] = []
    for line_no, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        fields = [f.strip() for f in line.split("|")]
        head = fields[0]
        if head == "Dataset":
            dataset = fields[1] if len(fields) > 1 else None
            continue
        if head == "Model":
            name = fields[1] if len(fields) > 1 and fields[1] else name
            continue
        if head == "Input":
            if len(fields) < 2:
                raise ScenarioError("Input line needs a shape", source=path, line=line_no,
                                    field="Input")
            dims = _shape(fields[1], path, line_no, "Input")
            if len(dims) < 2 or any(d <= 0 for d in dims):
                raise ScenarioError(f"Input shape {fields[1]!r} must be N x C x spatial...",
                                    source=path, line=line_no, field="Input")
            samples, input_shape = dims[0], dims[1:]
            continue
        kind = _kind_of(head)
        if kind is None:
            raise ScenarioError(f"unknown layer type in name {head!r}", source=path,
                                line=line_no, field="layer")
        if len(fields) not in (4, 5):
            raise ScenarioError(f"layer {head!r} needs name|x|w|y[|t], got {len(fields)} fields",
                                source=path, line=line_no, field=head)
        x = _shape(fields[1], path, line_no, f"{head}.x")
        w = _shape(fields[2], path, line_no, f"{head}.w")
        y = _shape(fields[3], path, line_no, f"{head}.y")
        t = None
        if len(fields) == 5 and fields[4]:
            try:
                t = float(fields[4])
            except ValueError:
                raise ScenarioError(f"cannot read time {fields[4]!r}", source=path,
                                    line=line_no, field=f"{head}.t") from None
            if not math.isfinite(t) or t < 0:
                raise ScenarioError(f"time must be a finite number >= 0, got {fields[4]!r}",
                                    source=path, line=line_no, field=f"{head}.t")
        _check_layer(kind, head, x, w, y, path, line_no)
        layers.append(Layer(name=head, kind=kind, x=x, w=w, y=y, profiled_s=t or None))
    if not layers:
        raise ScenarioError("no layers found", source=path, field="layers")
    if input_shape is None:
        input_shape = layers[0].x
    return NetFile(model=Model(name=name, input_shape=input_shape, layers=tuple(layers),
                               source=str(path)),
                   dataset=dataset, dataset_samples=samples)


def load_net(path: str | Path) -> NetFile:
    """Read a ``.net`` file through the input boundary."""
    return parse_net(read_text(path), str(path))


def _dims(shape: tuple[int, ...]) -> str:
    return "x".join(str(d) for d in shape)


def export_net(model: Model, dataset: str = "ImageNet", dataset_samples: int = 1280000) -> str:
    """Write a model in ``.net`` format (ParaDL conventions: BN/ReLU rows carry ``CxC``
    pseudo-weights with zero kernel, pooling rows ``0x0xK``)."""
    lines = [f"Dataset|{dataset}", f"Input|{dataset_samples}x{_dims(model.input_shape)}",
             f"Model|{model.name}"]
    zeros = (0,) * model.spatial_dims
    for layer in model.layers:
        if layer.kind in ("conv", "deconv", "fc", "maxpool", "avgpool"):
            w = layer.w
        else:
            w = (layer.in_channels, layer.out_channels) + zeros
        name = layer.name if layer.name.upper().startswith(_KIND_PREFIX[layer.kind]) \
            else f"{_KIND_PREFIX[layer.kind]}_{layer.name}"
        t = layer.profiled_s if layer.profiled_s is not None else 0
        lines.append(f"{name}|{_dims(layer.x)}|{_dims(w)}|{_dims(layer.y)}|{t:g}")
    return "\n".join(lines) + "\n"


def load_mask(path: str | Path, model: Model) -> tuple[bool, ...]:
    """Read a ``.lc`` 0/1 layer mask and check it matches the model's layers."""
    p = Path(path)
    text = read_text(p)
    flags: list[bool] = []
    for line_no, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        value = line.rsplit("|", 1)[-1].strip() if "|" in line else ""
        if value not in ("0", "1"):
            raise ScenarioError(f"mask value must be 0 or 1, got {value!r}", source=str(p),
                                line=line_no, field="mask")
        flags.append(value == "1")
    if len(flags) != len(model.layers):
        raise ScenarioError(f"mask has {len(flags)} entries but model {model.name} has "
                            f"{len(model.layers)} layers", source=str(p), field="mask")
    return tuple(flags)
