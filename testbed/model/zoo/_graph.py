"""Shape-tracking graph builder used by every zoo model.

Each method appends one :class:`~testbed.model.ir.Layer`, computes its output shape
with the framework arithmetic (``floor((H + 2p - k) / s) + 1`` for convolution and
pooling, ``(H - 1) s - 2p + k`` for transposed convolution) and returns the new
layer's name, which later layers pass as their producer. A layer whose producer is the
layer just before it keeps ``inputs=()`` (the IR's convention); any other edge (skip
connection, residual add, concat) is written out in ``inputs``. The builder is
dimension-generic: the number of spatial dimensions comes from the input shape, so the
same code builds 1-D, 2-D and 3-D networks.
"""

from __future__ import annotations

from testbed.errors import InputError
from testbed.model.ir import Layer, Model

#: Producer name that stands for the model input.
INPUT = "<input>"


class InputTooSmallError(InputError):
    """The input's spatial size is too small (or not divisible enough) for a network."""


def _tuple(value: int | tuple[int, ...], dims: int) -> tuple[int, ...]:
    return tuple(value) if isinstance(value, tuple) else (value,) * dims


class GraphBuilder:
    """Builds a :class:`Model` layer by layer while tracking every tensor's shape."""

    def __init__(self, model_name: str, input_shape: tuple[int, ...]) -> None:
        if len(input_shape) < 2:
            raise InputError(f"{model_name} needs an input shape C x spatial... "
                             f"(e.g. 3x224x224), got {_fmt(input_shape)}",
                             field="input_shape")
        if any(d <= 0 for d in input_shape):
            raise InputError(f"input shape {_fmt(input_shape)} must be positive",
                             field="input_shape")
        self.model_name = model_name
        self.input_shape = tuple(input_shape)
        self.dims = len(input_shape) - 1
        self.layers: list[Layer] = []
        self._shapes: dict[str, tuple[int, ...]] = {INPUT: self.input_shape}

    # -- bookkeeping -----------------------------------------------------------------
    @property
    def last(self) -> str:
        """Name of the most recently added layer (the model input before any layer)."""
        return self.layers[-1].name if self.layers else INPUT

    def shape(self, name: str) -> tuple[int, ...]:
        return self._shapes[name]

    def _edges(self, sources: tuple[str, ...]) -> tuple[str, ...]:
        if len(sources) == 1 and sources[0] == self.last:
            return ()
        if INPUT in sources:
            raise ValueError("only the first layer may read the model input implicitly")
        return sources

    def _append(self, layer: Layer) -> str:
        if layer.name in self._shapes:
            raise ValueError(f"duplicate layer name {layer.name!r}")
        self.layers.append(layer)
        self._shapes[layer.name] = layer.y
        return layer.name

    def _too_small(self, name: str, x: tuple[int, ...], why: str) -> InputTooSmallError:
        return InputTooSmallError(
            f"input {_fmt(self.input_shape)} is too small for {self.model_name}: "
            f"layer {name} gets {_fmt(x)} ({why})", field="input_shape")

    def _window_out(self, name: str, x: tuple[int, ...], k, s, p) -> tuple[int, ...]:
        out = tuple((h + 2 * pp - kk) // ss + 1 for h, kk, ss, pp in zip(x[1:], k, s, p, strict=True))
        if any(o < 1 for o in out):
            raise self._too_small(name, x, f"kernel {_fmt(k)} does not fit")
        return out

    # -- layers ----------------------------------------------------------------------
    def conv(self, name: str, src: str, filters: int, kernel, stride=1, padding=0,
             bias: bool = False) -> str:
        x = self.shape(src)
        k, s, p = (_tuple(v, self.dims) for v in (kernel, stride, padding))
        y = (filters, *self._window_out(name, x, k, s, p))
        return self._append(Layer(name=name, kind="conv", x=x, w=(x[0], filters, *k), y=y,
                                  stride=s, padding=p, extra_params=filters if bias else 0,
                                  inputs=self._edges((src,))))

    def deconv(self, name: str, src: str, filters: int, kernel, stride=1, padding=0,
               bias: bool = True) -> str:
        x = self.shape(src)
        k, s, p = (_tuple(v, self.dims) for v in (kernel, stride, padding))
        out = tuple((h - 1) * ss - 2 * pp + kk for h, kk, ss, pp in zip(x[1:], k, s, p, strict=True))
        if any(o < 1 for o in out):
            raise self._too_small(name, x, "transposed convolution output is empty")
        return self._append(Layer(name=name, kind="deconv", x=x, w=(x[0], filters, *k),
                                  y=(filters, *out), stride=s, padding=p,
                                  extra_params=filters if bias else 0,
                                  inputs=self._edges((src,))))

    def pool(self, name: str, src: str, kind: str, kernel, stride=None, padding=0) -> str:
        x = self.shape(src)
        k = _tuple(kernel, self.dims)
        s = _tuple(stride, self.dims) if stride is not None else k
        p = _tuple(padding, self.dims)
        y = (x[0], *self._window_out(name, x, k, s, p))
        return self._append(Layer(name=name, kind=kind, x=x, w=(0, 0, *k), y=y, stride=s,
                                  padding=p, inputs=self._edges((src,))))

    def adaptive_avgpool(self, name: str, src: str, output) -> str:
        """Adaptive average pooling (PyTorch semantics) to a fixed output size, recorded
        as an average pool whose kernel is the largest window PyTorch uses (the whole
        input for output 1)."""
        x = self.shape(src)
        out = _tuple(output, self.dims)
        k = tuple(max(-(-(i + 1) * h // o) - (i * h // o) for i in range(o))
                  for h, o in zip(x[1:], out, strict=True))
        s = tuple(max(h // o, 1) for h, o in zip(x[1:], out, strict=True))
        return self._append(Layer(name=name, kind="avgpool", x=x, w=(0, 0, *k), y=(x[0], *out),
                                  stride=s, inputs=self._edges((src,))))

    def bn(self, name: str, src: str) -> str:
        x = self.shape(src)
        return self._append(Layer(name=name, kind="bn", x=x, w=(), y=x, extra_params=2 * x[0],
                                  inputs=self._edges((src,))))

    def elementwise(self, name: str, src: str, kind: str) -> str:
        """ReLU or dropout: same shape in and out, no weights."""
        x = self.shape(src)
        return self._append(Layer(name=name, kind=kind, x=x, w=(), y=x,
                                  inputs=self._edges((src,))))

    def fc(self, name: str, src: str, features: int, bias: bool = True) -> str:
        """Fully connected layer; over a ``C x spatial`` input its weight is
        ``(C, F, *spatial)`` (a flatten is implied) and the output ``F x 1 x ...``."""
        x = self.shape(src)
        return self._append(Layer(name=name, kind="fc", x=x, w=(x[0], features, *x[1:]),
                                  y=(features, *(1,) * self.dims),
                                  extra_params=features if bias else 0,
                                  inputs=self._edges((src,))))

    def add(self, name: str, a: str, b: str) -> str:
        xa, xb = self.shape(a), self.shape(b)
        if xa != xb:
            raise ValueError(f"{name}: cannot add {_fmt(xa)} and {_fmt(xb)}")
        return self._append(Layer(name=name, kind="add", x=xa, w=(), y=xa, inputs=(a, b)))

    def concat(self, name: str, a: str, b: str) -> str:
        """Channel concatenation; ``x`` and ``y`` are the concatenated shape."""
        xa, xb = self.shape(a), self.shape(b)
        if xa[1:] != xb[1:]:
            raise ValueError(f"{name}: cannot concat {_fmt(xa)} and {_fmt(xb)}")
        y = (xa[0] + xb[0], *xa[1:])
        return self._append(Layer(name=name, kind="concat", x=y, w=(), y=y, inputs=(a, b)))

    def build(self, **kw) -> Model:
        return Model(name=self.model_name, input_shape=self.input_shape,
                     layers=tuple(self.layers), **kw)


def _fmt(shape) -> str:
    return "x".join(str(d) for d in shape)
