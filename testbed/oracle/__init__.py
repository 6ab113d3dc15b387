"""The oracle: analytical time and memory of parallel CNN training (ParaDL-faithful,
corrected and calibratable). See :mod:`testbed.oracle.estimate` for the model."""

from __future__ import annotations

import importlib
import sys
import types
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from testbed.model.ir import Model
    from testbed.oracle.estimate import Estimate, estimate
    from testbed.oracle.names import FAMILY, MODES, STRATEGIES
    from testbed.oracle.request import Request
    from testbed.oracle.state import state_bytes
    from testbed.systems.profile import SystemProfile

__all__ = ["FAMILY", "MODES", "STRATEGIES", "Estimate", "Request", "estimate", "predict",
           "resolve_model", "state_bytes"]
#: Where each name lives: imported on first use, so that importing one submodule
#: (``testbed.oracle.names`` for the scenario schema's names) does not import the
#: whole model and scipy (about 0.3 s of a command's start).
_LAZY = {"Estimate": "estimate", "estimate": "estimate", "FAMILY": "names",
         "MODES": "names", "STRATEGIES": "names", "Request": "request",
         "state_bytes": "state"}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'testbed.oracle' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"testbed.oracle.{module}"), name)
    globals()[name] = value
    return value


class _Package(types.ModuleType):
    """The package object: importing the submodule ``testbed.oracle.estimate`` binds
    the package's ``estimate`` to that submodule, which would hide the function of the
    same name (the eager imports this package had bound it once, at its import).
    The submodule stays in ``sys.modules``; the package name keeps the function."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _LAZY and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package


def resolve_model(model: str | Path | Model,
                  input_shape: tuple[int, ...] | list[int] | str | None = None) -> Model:
    """A :class:`Model` from a zoo name, a ParaDL ``.net`` path or a Model, at
    ``input_shape`` (dimensions, or written like ``3x224x224``)."""
    from testbed.model.ir import Model
    if isinstance(model, Model):
        return model
    from testbed.model.registry import get_model
    return get_model(str(model), input_shape)


def predict(system: str | SystemProfile, model: str | Model, strategy: str, gpus: int,
            global_batch: int, *, group_size: int | None = None,
            input_shape: tuple[int, ...] | None = None, precision: str | None = "fp32",
            optimizer: str = "momentum", micro_batches: int | None = None,
            schedule: str = "1f1b", overlap: bool | None = None, mode: str = "testbed",
            mask: tuple[bool, ...] | None = None, sample_bytes: float | None = None,
            epoch_samples: int | None = None, input_precision: str | None = None,
            checkpoint_writers: str = "single", checkpoint_tier: str = "pfs",
            framework: str | None = None, checkpoint_format: str | None = None,
            software: str | None = None, bucket_MB: float | None = None) -> Estimate:  # noqa: N803
    """Predict one configuration by names (see :class:`Request` for the fields)."""
    from testbed.oracle.estimate import estimate
    from testbed.oracle.request import Request
    from testbed.systems.profile import load_system
    req = Request(model=resolve_model(model, input_shape), system=load_system(system),
                  strategy=strategy, gpus=gpus, global_batch=global_batch,
                  group_size=group_size, precision=precision, optimizer=optimizer,
                  micro_batches=micro_batches, schedule=schedule, overlap=overlap, mode=mode,
                  mask=mask, sample_bytes=sample_bytes, epoch_samples=epoch_samples,
                  input_precision=input_precision, checkpoint_writers=checkpoint_writers,
                  checkpoint_tier=checkpoint_tier, framework=framework,
                  checkpoint_format=checkpoint_format, software=software,
                  bucket_MB=bucket_MB)
    return estimate(req)
