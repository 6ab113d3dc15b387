"""The tensors of a model's training state, from its layer IR, split among writers.

A data-parallel checkpoint of a model trained with SGD + momentum holds, per layer:
convolution and fully-connected weights (and biases), batch-norm γ, β and the running
mean and variance, and one momentum slot per trainable tensor. :func:`state_shapes`
lists them in layer order; :func:`shard` gives writer ``i`` of ``n`` its share
(largest tensors first, each to the least-loaded writer — the balance a sharded
checkpoint such as ``torch.distributed.checkpoint`` aims at); :func:`payload` fills
them with float32 values drawn from the run's ``run.ckpt_payload`` stream (trained
weights are as incompressible as random ones in fp32; zeros would flatter compressed
formats).
"""

from __future__ import annotations

import numpy as np

from testbed.streams import generator

Shape = tuple[int, ...]


def state_shapes(model_ir) -> list[tuple[str, Shape]]:
    """(name, shape) of every tensor of the training state (module doc)."""
    out: list[tuple[str, Shape]] = []
    for layer in model_ir.layers:
        key = layer.name
        trainable: list[tuple[str, Shape]] = []
        if layer.kind == "conv":
            trainable.append((f"{key}.weight", (layer.y[0], layer.x[0] // layer.groups,
                                                *layer.kernel)))
            if layer.extra_params > 0:
                trainable.append((f"{key}.bias", (layer.y[0],)))
        elif layer.kind == "fc":
            trainable.append((f"{key}.weight", (layer.y[0], int(np.prod(layer.x)))))
            if layer.extra_params > 0:
                trainable.append((f"{key}.bias", (layer.y[0],)))
        elif layer.kind == "bn":
            channels = layer.x[0]
            trainable += [(f"{key}.weight", (channels,)), (f"{key}.bias", (channels,))]
            out += [(f"{key}.running_mean", (channels,)), (f"{key}.running_var", (channels,))]
        out += trainable
        out += [(f"optimizer.{name}.momentum", shape) for name, shape in trainable]
    return out


def tensor_bytes(shape: Shape) -> int:
    return 4 * int(np.prod(shape))


def shard(shapes: list[tuple[str, Shape]], index: int, writers: int) -> list[tuple[str, Shape]]:
    """Writer ``index``'s share of ``shapes`` among ``writers`` (module doc)."""
    if not 0 <= index < writers:
        raise ValueError(f"writer {index} of {writers}")
    loads = [0] * writers
    mine = []
    for name, shape in sorted(shapes, key=lambda s: (-tensor_bytes(s[1]), s[0])):
        target = min(range(writers), key=lambda w: (loads[w], w))
        loads[target] += tensor_bytes(shape)
        if target == index:
            mine.append((name, shape))
    return mine


def payload(shapes: list[tuple[str, Shape]], seed: int, index: int) -> dict[str, np.ndarray]:
    """float32 arrays of those shapes, from writer ``index``'s payload stream."""
    rng = generator(seed, "run.ckpt_payload", index + 1)
    return {name: (0.02 * rng.standard_normal(shape, dtype=np.float32)) for name, shape in shapes}
