"""Activation memory: the oracle's per-layer accounting against what PyTorch's autograd
actually keeps for backward.

Each zoo model is executed layer by layer with real torch ops on the CPU, the way
torchvision writes them (``ReLU(inplace=True)``, the residual ``out += identity``,
dropout in training mode), inside ``torch.autograd.graph.saved_tensors_hooks``. Every
saved tensor that is not a parameter is counted once per storage, at two batch sizes;
the difference per sample (per-channel batch-norm statistics do not grow with the
batch) must match the oracle's saved-activation bytes within 5 % (issue 10).
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional

from testbed.model.registry import get_model  # noqa: E402
from testbed.oracle.profile import model_stats  # noqa: E402

BATCHES = (2, 3)
SHAPES = {"resnet50": (3, 64, 64), "vgg16": (3, 64, 64), "alexnet": (3, 127, 127)}


def _weights(layer):
    w = torch.randn(*(layer.w[1], layer.w[0], *layer.w[2:])) * 0.01
    return w.requires_grad_()


def _run(model, batch: int) -> dict:
    """Execute the IR with torch ops; returns the tensors by layer name."""
    out: dict = {}
    x = torch.randn(batch, *model.input_shape, requires_grad=True)
    prev = x
    params = []
    for layer in model.layers:
        srcs = [out[n] for n in layer.inputs] if layer.inputs else [prev]
        h = srcs[0]
        k = layer.kind
        if k == "conv":
            w = _weights(layer)
            params.append(w)
            h = F.conv2d(h, w, stride=layer.stride, padding=layer.padding)
        elif k == "fc":
            w = torch.randn(layer.w[1], layer.x_elems).mul_(0.01).requires_grad_()
            b = torch.zeros(layer.w[1], requires_grad=True)
            params += [w, b]
            h = F.linear(h.flatten(1), w, b).view(batch, layer.w[1], *([1] * (len(layer.y) - 1)))
        elif k == "bn":
            g = torch.ones(layer.x[0], requires_grad=True)
            b = torch.zeros(layer.x[0], requires_grad=True)
            params += [g, b]
            h = F.batch_norm(h, None, None, g, b, training=True)
        elif k == "relu":
            h = F.relu(h, inplace=True)
        elif k == "maxpool":
            h = F.max_pool2d(h, layer.kernel, layer.stride, layer.padding)
        elif k == "avgpool":
            h = F.adaptive_avg_pool2d(h, layer.y[1:])
        elif k == "dropout":
            h = F.dropout(h, 0.5, training=True)
        elif k == "add":
            h = h.add_(srcs[1])
        else:
            raise AssertionError(f"layer kind {k} not executed")
        out[layer.name] = h
        prev = h
    out["<params>"] = params
    return out


def _saved_bytes(model, batch: int) -> int:
    storages: dict[int, int] = {}
    with torch.autograd.graph.saved_tensors_hooks(
            lambda t: storages.__setitem__(t.untyped_storage().data_ptr(),
                                           t.untyped_storage().nbytes()) or t, lambda t: t):
        out = _run(model, batch)
    params = {p.untyped_storage().data_ptr() for p in out["<params>"]}
    return sum(n for ptr, n in storages.items() if ptr not in params)


def measured_bytes_per_sample(model) -> float:
    small, large = BATCHES
    return (_saved_bytes(model, large) - _saved_bytes(model, small)) / (large - small)


def oracle_bytes_per_sample(model, value_bytes: int = 4) -> float:
    st = model_stats(model)
    return float((st.saved_elems.sum() + st.saved_input_elems) * value_bytes
                 + st.saved_fixed_bytes.sum())


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_saved_activations_match_pytorch(name):
    model = get_model(name, SHAPES[name])
    measured = measured_bytes_per_sample(model)
    predicted = oracle_bytes_per_sample(model)
    assert predicted == pytest.approx(measured, rel=0.05), (name, predicted, measured)


def test_oracle_memory_uses_the_same_accounting():
    """The estimate's activation bytes for one sample are exactly these bytes."""
    from testbed.oracle import predict
    model = get_model("resnet50", SHAPES["resnet50"])
    e = predict("a100-cluster", model, "serial", 1, 1, precision="fp32")
    assert e.memory_breakdown_bytes["activations"] == pytest.approx(
        oracle_bytes_per_sample(model), rel=1e-9)
