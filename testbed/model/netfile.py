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

Parsing is linear and bounded: a file of more than :data:`MAX_LAYERS` layers is
refused before any layer is built (a count of its lines), dimensions are checked digit
by digit before conversion (:data:`MAX_DIM`), and shapes and layer checks are memoised,
so a file at the input size limit answers in about a second. Export refuses a dataset
or model name that would inject a line or a field into the file.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path

from testbed.errors import InputError, ScenarioError
from testbed.io.read import read_text
from testbed.model.ir import Layer, Model

#: Most layers a ``.net`` file may describe: five times the deepest published networks
#: (ResNet-1001 is about 3,000 ParaDL layers, a 96-block GPT-3 about 1,000).
MAX_LAYERS = 20_000
#: Largest dimension of a shape (an activation side, a channel count): 2³¹.
MAX_DIM = 2**31

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


_KIND_RE = re.compile("|".join(prefix for prefix, _ in _PREFIX_KIND), re.IGNORECASE)
_KINDS = {prefix: kind for prefix, kind in _PREFIX_KIND}


def _kind_of(name: str) -> str | None:
    m = _KIND_RE.match(name)
    return _KINDS[m.group(0).upper()] if m else None


_SHAPES: dict[str, tuple[int, ...] | str] = {}


def _dims(text: str) -> tuple[int, ...] | str:
    """The dimensions of a shape text, or why it cannot be read (memoised: the shapes
    of a network repeat)."""
    got = _SHAPES.get(text)
    if got is not None:
        return got
    body = re.sub(r"^[xwy]:", "", text.strip()).lower().replace("×", "x")
    parts = body.split("x")
    out: tuple[int, ...] | str
    if not all(p.strip().lstrip("-").isdigit() for p in parts):
        out = f"cannot read shape {body[:40]!r}"
    elif any(len(p.strip().lstrip("-0")) > len(str(MAX_DIM)) for p in parts):
        out = f"a dimension of shape {body[:40]!r} is larger than {MAX_DIM:,}"
    else:
        dims = tuple(int(p) for p in parts)
        if any(d < 0 for d in dims):
            out = f"negative dimension in {body[:40]!r}"
        elif any(d > MAX_DIM for d in dims):
            out = f"a dimension of shape {body[:40]!r} is larger than {MAX_DIM:,}"
        else:
            out = dims
    if len(_SHAPES) < 100_000:
        _SHAPES[text] = out
    return out


def _shape(text: str, path: str, line_no: int, field: str) -> tuple[int, ...]:
    dims = _dims(text)
    if isinstance(dims, str):
        raise ScenarioError(dims, source=path, line=line_no, field=field)
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


def _count_layers(lines: list[str], path: str) -> None:
    """Refuse, before building any layer, a file of more than :data:`MAX_LAYERS`."""
    if len(lines) <= MAX_LAYERS + 3:
        return
    seen = 0
    for line_no, raw in enumerate(lines, start=1):
        line = raw.strip()
        if line and not line.startswith(("#", "Dataset|", "Input|", "Model|")):
            seen += 1
            if seen > MAX_LAYERS:
                raise ScenarioError(f"holds more than {MAX_LAYERS:,} layers (the deepest "
                                    "published networks have a few thousand)", source=path,
                                    line=line_no, field="layers")


def _header(head: str, fields: list[str], path: str, line_no: int, state: dict) -> None:
    """A ``Dataset|``, ``Model|`` or ``Input|`` line."""
    if head == "Dataset":
        state["dataset"] = fields[1] if len(fields) > 1 else None
    elif head == "Model":
        if len(fields) > 1 and fields[1]:
            state["name"] = fields[1]
    else:
        if len(fields) < 2:
            raise ScenarioError("Input line needs a shape", source=path, line=line_no,
                                field="Input")
        dims = _shape(fields[1], path, line_no, "Input")
        if len(dims) < 2 or any(d <= 0 for d in dims):
            raise ScenarioError(f"Input shape {fields[1]!r} must be N x C x spatial...",
                                source=path, line=line_no, field="Input")
        state["samples"], state["input_shape"] = dims[0], dims[1:]


def _layer(fields: list[str], path: str, line_no: int, checked: set) -> Layer:
    """One layer line (``name|x|w|y[|t]``), its shapes checked once per distinct kind
    and shapes."""
    head = fields[0]
    kind = _kind_of(head)
    if kind is None:
        raise ScenarioError(f"unknown layer type in name {head[:60]!r}", source=path,
                            line=line_no, field="layer")
    if len(fields) not in (4, 5):
        raise ScenarioError(f"layer {head[:60]!r} needs name|x|w|y[|t], got {len(fields)} "
                            "fields", source=path, line=line_no, field=head)
    x = _shape(fields[1], path, line_no, f"{head}.x")
    w = _shape(fields[2], path, line_no, f"{head}.w")
    y = _shape(fields[3], path, line_no, f"{head}.y")
    t = None
    if len(fields) == 5 and fields[4]:
        try:
            t = float(fields[4]) if len(fields[4]) <= 40 else math.nan
        except ValueError:
            raise ScenarioError(f"cannot read time {fields[4][:40]!r}", source=path,
                                line=line_no, field=f"{head}.t") from None
        if not math.isfinite(t) or t < 0:
            raise ScenarioError(f"time must be a finite number >= 0, got {fields[4][:40]!r}",
                                source=path, line=line_no, field=f"{head}.t")
    key = (kind, x, w, y)
    if key not in checked:
        _check_layer(kind, head, x, w, y, path, line_no)
        checked.add(key)
    return Layer(name=head, kind=kind, x=x, w=w, y=y, profiled_s=t or None)


def parse_net(text: str, path: str = "<net>") -> NetFile:
    """Parse the text of a ``.net`` file; errors name the file, line and field."""
    lines = text.splitlines()
    _count_layers(lines, path)
    state: dict = {"dataset": None, "samples": None, "input_shape": None,
                   "name": Path(path).name.split(".")[0]}
    layers: list[Layer] = []
    checked: set = set()
    for line_no, raw in enumerate(lines, start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        fields = [f.strip() for f in line.split("|")]
        if fields[0] in ("Dataset", "Model", "Input"):
            _header(fields[0], fields, path, line_no, state)
        else:
            layers.append(_layer(fields, path, line_no, checked))
    if not layers:
        raise ScenarioError("no layers found", source=path, field="layers")
    input_shape = state["input_shape"] or layers[0].x
    return NetFile(model=Model(name=state["name"], input_shape=input_shape,
                               layers=tuple(layers), source=str(path)),
                   dataset=state["dataset"], dataset_samples=state["samples"])


def load_net(path: str | Path) -> NetFile:
    """Read a ``.net`` file through the input boundary."""
    return parse_net(read_text(path), str(path))


def _text(shape: tuple[int, ...]) -> str:
    return "x".join(str(d) for d in shape)


def check_net_name(value: str, field: str) -> str:
    """A name written into a ``.net`` header field: one line, no ``|`` (a line break or
    a separator would inject a record into the file), at most 200 characters."""
    if not value or len(value) > 200 or "|" in value or value.startswith("#") or \
            any(ord(ch) < 32 or ord(ch) == 127 for ch in value):
        raise InputError(f"{value[:60]!r} cannot be a .net header field: give one line of "
                         "at most 200 characters without '|', line breaks or control "
                         "characters", source=field)
    return value


def export_net(model: Model, dataset: str = "ImageNet", dataset_samples: int = 1280000) -> str:
    """Write a model in ``.net`` format (ParaDL conventions: BN/ReLU rows carry ``CxC``
    pseudo-weights with zero kernel, pooling rows ``0x0xK``)."""
    check_net_name(dataset, "--dataset")
    check_net_name(model.name, "model name")
    lines = [f"Dataset|{dataset}", f"Input|{dataset_samples}x{_text(model.input_shape)}",
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
        lines.append(f"{name}|{_text(layer.x)}|{_text(w)}|{_text(layer.y)}|{t:g}")
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
