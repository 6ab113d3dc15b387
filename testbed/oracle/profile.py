"""Per-model quantities the oracle reuses across predictions (computed once per model).

For every layer: its share of the model's forward+backward time, which strategies can
split it, and the sizes the communication and memory models need. ParaDL's own compute
estimate (``paradl_cost``) is kept next to ours so the compatibility mode can use it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from testbed.model.ir import INPLACE_KINDS, WEIGHTED_KINDS, Layer, Model

#: What PyTorch's autograd saves for backward, by layer kind (checked against
#: ``torch.autograd.graph.saved_tensors_hooks`` in tests/oracle/test_saved_tensors.py):
#: convolution, linear, batch norm and pooling save their input; ReLU saves its output;
#: dropout its mask; addition and concatenation nothing; a global (1×1) average pool
#: nothing (it is a mean).
SAVES_INPUT = ("conv", "deconv", "fc", "bn", "maxpool", "avgpool")
SAVES_OUTPUT = ("relu",)
#: Dropout saves a mask of its output's size (bool on CUDA, the value type on the CPU).
SAVES_MASK = ("dropout",)
#: Layers that write into their (first) input's buffer in torchvision's models:
#: ``ReLU(inplace=True)`` and the residual ``out += identity``.
ALIASING_KINDS = ("relu", "add")
#: Max pooling also saves the argmax indices as int64.
INDEX_BYTES = 8


def paradl_cost(layer: Layer) -> float:
    """ParaDL's per-layer compute estimate: 2 × forward + |w| (see abci-paradl README).

    Forward: conv 2·C·F·ΠK·ΠY, fully connected C·F·ΠK, batch norm 4|x|, ReLU and add |y|,
    pooling C·F·ΠK·ΠY (channels squared, as ParaDL writes it), anything else 0.
    """
    kernel = math.prod(layer.w[2:]) if len(layer.w) > 2 else 1
    out_spatial = math.prod(layer.y[1:]) if len(layer.y) > 1 else 1
    c, f = layer.in_channels, layer.out_channels
    if layer.kind in ("conv", "deconv"):
        fwd = 2 * c * f * kernel * out_spatial
    elif layer.kind == "fc":
        fwd = c * f * kernel
    elif layer.kind == "bn":
        fwd = 4 * layer.x_elems
    elif layer.kind in ("relu", "add"):
        fwd = layer.y_elems
    elif layer.kind in ("maxpool", "avgpool"):
        fwd = c * f * kernel * out_spatial
    else:
        fwd = 0
    return 2 * fwd + layer.w_elems


def testbed_cost(layer: Layer) -> float:
    """Our per-layer work estimate: forward FLOPs plus a backward of twice the forward
    for layers with weights (input and weight gradients) and once for the rest."""
    fwd = layer.forward_flops
    return fwd * (3.0 if layer.kind in WEIGHTED_KINDS else 2.0)


@dataclass(frozen=True)
class ModelStats:
    """Arrays over layers (numpy, float64) plus scalar totals."""

    model: Model
    share_testbed: np.ndarray      # fraction of fwd+bwd time per layer (measured, else FLOPs)
    share_paradl: np.ndarray       # fraction per layer (ParaDL's estimate)
    x_elems: np.ndarray
    y_elems: np.ndarray
    w_elems: np.ndarray            # ParaDL |w|
    params: np.ndarray             # trainable parameters per layer
    weighted: np.ndarray           # bool: conv/deconv/fc
    inplace: np.ndarray            # bool: relu/bn
    spatial: np.ndarray            # bool: output has spatial extent > 1
    in_channels: np.ndarray
    out_channels: np.ndarray
    forward_flops: float
    parameters: int
    saved_elems: np.ndarray        # per layer: elements of its buffers kept for backward
    saved_elems_copy: np.ndarray   # the same without in-place ReLU/add
    saved_input_elems: float       # elements of the network input kept for backward
    saved_fixed_bytes: np.ndarray  # per layer: precision-independent bytes (pool indices)


_CACHE: dict[int, ModelStats] = {}


def model_stats(model: Model) -> ModelStats:
    """Cached :class:`ModelStats` for a model object."""
    hit = _CACHE.get(id(model))
    if hit is not None and hit.model is model:
        return hit
    layers = model.layers
    tb = np.array([testbed_cost(lyr) for lyr in layers], dtype=float)
    pd = np.array([paradl_cost(lyr) for lyr in layers], dtype=float)
    measured = np.array([lyr.profiled_s or 0.0 for lyr in layers], dtype=float)
    if (measured > 0).sum() > 1:
        # per-layer measured times (a profiled model): they are the shares themselves
        tb = measured
    saved, saved_input, fixed = saved_buffers(model)
    saved_copy = saved_buffers(model, inplace=False)[0]
    stats = ModelStats(
        model=model,
        share_testbed=tb / tb.sum() if tb.sum() > 0 else np.full(len(layers), 1 / len(layers)),
        share_paradl=pd / pd.sum() if pd.sum() > 0 else np.full(len(layers), 1 / len(layers)),
        x_elems=np.array([lyr.x_elems for lyr in layers], dtype=float),
        y_elems=np.array([lyr.y_elems for lyr in layers], dtype=float),
        w_elems=np.array([lyr.w_elems for lyr in layers], dtype=float),
        params=np.array([lyr.params for lyr in layers], dtype=float),
        weighted=np.array([lyr.kind in WEIGHTED_KINDS for lyr in layers]),
        inplace=np.array([lyr.kind in INPLACE_KINDS for lyr in layers]),
        spatial=np.array([len(lyr.y) > 1 and math.prod(lyr.y[1:]) > 1 for lyr in layers]),
        in_channels=np.array([lyr.in_channels for lyr in layers], dtype=float),
        out_channels=np.array([lyr.out_channels for lyr in layers], dtype=float),
        forward_flops=float(model.forward_flops),
        parameters=model.parameters,
        saved_elems=saved, saved_elems_copy=saved_copy, saved_input_elems=saved_input,
        saved_fixed_bytes=fixed,
    )
    if len(_CACHE) > 256:
        _CACHE.clear()
    _CACHE[id(model)] = stats
    return stats


def _producers(model: Model) -> list[list[int]]:
    """Indices of the layers feeding each layer (-1: the network input)."""
    index = {layer.name: i for i, layer in enumerate(model.layers)}
    out = []
    for i, layer in enumerate(model.layers):
        if layer.inputs:
            out.append([index.get(name, -1) for name in layer.inputs])
        else:
            out.append([i - 1])
    return out


def _saves_input(layer: Layer) -> bool:
    if layer.kind == "avgpool":
        return math.prod(layer.y[1:]) > 1 if len(layer.y) > 1 else False
    return layer.kind in SAVES_INPUT


def saved_buffers(model: Model, inplace: bool = True) -> tuple[np.ndarray, float, np.ndarray]:
    """Activation memory PyTorch keeps for backward, per sample: for each layer the
    elements of the buffer it owns if any later layer saves that buffer, the network
    input's elements if saved, and fixed bytes (max-pool indices).

    Buffers are tracked through aliasing: with ``inplace`` a ReLU and a residual add
    write into their input's buffer (torchvision's ``inplace=True`` and
    ``out += identity``), so saving their output saves the producer's buffer."""
    producers = _producers(model)
    owner: list[int] = []                       # buffer owner of each layer's output
    for i, layer in enumerate(model.layers):
        src = producers[i][0]
        aliases = inplace and layer.kind in ALIASING_KINDS and src >= 0
        owner.append(owner[src] if aliases else i)
    saved = np.zeros(len(model.layers), dtype=bool)
    input_saved = False
    fixed = np.zeros(len(model.layers), dtype=float)
    masks = np.zeros(len(model.layers), dtype=float)
    for i, layer in enumerate(model.layers):
        if _saves_input(layer):
            for src in producers[i][:1]:
                if src < 0:
                    input_saved = True
                else:
                    saved[owner[src]] = True
        if layer.kind in SAVES_OUTPUT:
            saved[owner[i]] = True
        if layer.kind in SAVES_MASK:
            masks[i] = layer.y_elems
        if layer.kind == "maxpool":
            fixed[i] = layer.y_elems * INDEX_BYTES
    y = np.array([lyr.y_elems for lyr in model.layers], dtype=float)
    first = float(model.layers[0].x_elems) if model.layers else 0.0
    return np.where(saved, y, 0.0) + masks, (first if input_saved else 0.0), fixed
