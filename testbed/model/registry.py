"""Look models up by name: the code-built zoo, or a ParaDL ``.net`` file by path.

``get_model("resnet50", (3, 112, 112))`` builds the true network at that input size;
``get_model("path/RESNET50_ImageNet_profall.net_sc")`` loads ParaDL's description,
which differs from the true network (no projection shortcuts, 226x226 input) — both
are kept on purpose. Names are forgiving: case, ``-``, ``_`` and spaces are ignored and
common aliases (``vgg``, ``resnet-50``, ``3d-unet``) resolve.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from testbed.errors import InputError, UnknownNameError
from testbed.model.ir import Model
from testbed.model.netfile import load_net
from testbed.model.zoo import alexnet, cosmoflow, resnet50, resnet152, unet3d, vgg16
from testbed.model.zoo.harness import cnn, mlp, resnet18cifar, resnetmini
from testbed.units import did_you_mean, parse_shape

#: Canonical name → (builder, default per-sample input shape, one-line description).
MODELS: dict[str, tuple[Callable[..., Model], tuple[int, ...], str]] = {
    "resnet50": (resnet50, (3, 224, 224), "ResNet-50 v1.5 (torchvision), bottleneck blocks"),
    "resnet152": (resnet152, (3, 224, 224), "ResNet-152 v1.5 (torchvision)"),
    "vgg16": (vgg16, (3, 224, 224), "VGG16 with biases and the torchvision classifier"),
    "alexnet": (alexnet, (3, 224, 224), "AlexNet, torchvision variant (64/192/384/256/256)"),
    "cosmoflow": (cosmoflow, (4, 128, 128, 128), "CosmoFlow 3-D CNN (ParaDL layer list)"),
    "unet3d": (unet3d, (1, 128, 128, 128), "3-D U-Net (Çiçek et al. 2016), 4 levels"),
    "mlp": (mlp, (1, 8, 8), "real-run harness MLP (width 32, 2 hidden layers)"),
    "cnn": (cnn, (1, 8, 8), "real-run harness CNN (2 conv stages, width 32)"),
    "resnetmini": (resnetmini, (1, 8, 8), "real-run harness residual CNN (--model resnet)"),
    "resnet18cifar": (resnet18cifar, (3, 32, 32), "ResNet-18, CIFAR variant (3x3 stem)"),
}

_ALIASES = {
    "resnet": "resnet50", "rn50": "resnet50", "resnet50v15": "resnet50",
    "rn152": "resnet152", "vgg": "vgg16", "vggd": "vgg16", "cosmo": "cosmoflow",
    "unet": "unet3d", "3dunet": "unet3d", "unet3": "unet3d",
    "miniresnet": "resnetmini", "resnet18": "resnet18cifar", "cifarresnet18": "resnet18cifar",
}


def _normalise(name: str) -> str:
    return "".join(ch for ch in name.lower() if ch not in "-_ .")


def canonical_name(name: str) -> str:
    """The canonical zoo name for ``name`` (an alias or a spelling variant)."""
    key = _normalise(name)
    if key in MODELS:
        return key
    if key in _ALIASES:
        return _ALIASES[key]
    raise UnknownNameError(f"unknown model {name!r}"
                           f"{did_you_mean(key, list(MODELS) + list(_ALIASES))}; "
                           f"known: {', '.join(MODELS)} or a ParaDL .net file",
                           field="model")


def list_models() -> list[str]:
    """Canonical names of the code-built models."""
    return list(MODELS)


def describe(name: str) -> str:
    return MODELS[canonical_name(name)][2]


def default_input_shape(name: str) -> tuple[int, ...]:
    return MODELS[canonical_name(name)][1]


def is_net_path(name: str) -> bool:
    """True when ``name`` looks like a ParaDL model file: a ``.net``, ``.net_sc`` or
    ``.net_*`` suffix, or a path with a directory part that names an existing file (a bare
    word such as ``vgg16`` is always a zoo name, even if a file of that name exists)."""
    suffix = Path(name).suffix.lower()
    if suffix == ".net" or suffix.startswith(".net_"):
        return True
    return ("/" in name or os.sep in name) and Path(name).is_file()


def get_model(name: str, input_shape: tuple[int, ...] | list[int] | str | None = None
              ) -> Model:
    """Build a zoo model at ``input_shape`` (default: its usual input) or load a ``.net``.

    Raises :class:`UnknownNameError` for an unknown name, :class:`InputError` for a bad
    or too small shape and :class:`ScenarioError` for a malformed ``.net`` file.
    """
    shape = _shape(input_shape)
    if is_net_path(name):
        model = load_net(name).model
        if shape is not None and tuple(shape) != tuple(model.input_shape):
            raise InputError(f"{name} fixes the input shape "
                             f"{'x'.join(map(str, model.input_shape))}; "
                             f"--input-shape {'x'.join(map(str, shape))} cannot change it",
                             field="input_shape")
        return model
    builder, default, _ = MODELS[canonical_name(name)]
    return builder(shape if shape is not None else default)


def _shape(value: tuple[int, ...] | list[int] | str | None) -> tuple[int, ...] | None:
    if value is None:
        return None
    if isinstance(value, str):
        return parse_shape(value, field="input_shape")
    dims = tuple(value)
    if not dims or any(not isinstance(d, int) or isinstance(d, bool) or d <= 0 for d in dims):
        raise InputError(f"input shape {value!r} must be positive integers", field="input_shape")
    return dims
