"""The oracle: analytical time and memory of parallel CNN training (ParaDL-faithful,
corrected and calibratable). See :mod:`testbed.oracle.estimate` for the model."""

from __future__ import annotations

from pathlib import Path

from testbed.model.ir import Model
from testbed.oracle.estimate import Estimate, estimate
from testbed.oracle.request import FAMILY, MODES, STRATEGIES, Request
from testbed.oracle.state import state_bytes
from testbed.systems.profile import SystemProfile, load_system

__all__ = ["FAMILY", "MODES", "STRATEGIES", "Estimate", "Request", "estimate", "predict",
           "resolve_model", "state_bytes"]


def resolve_model(model: str | Path | Model, input_shape: tuple[int, ...] | None = None) -> Model:
    """A :class:`Model` from a zoo name, a ParaDL ``.net`` path or a Model."""
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
            framework: str | None = None, checkpoint_format: str | None = None) -> Estimate:
    """Predict one configuration by names (see :class:`Request` for the fields)."""
    req = Request(model=resolve_model(model, input_shape), system=load_system(system),
                  strategy=strategy, gpus=gpus, global_batch=global_batch,
                  group_size=group_size, precision=precision, optimizer=optimizer,
                  micro_batches=micro_batches, schedule=schedule, overlap=overlap, mode=mode,
                  mask=mask, sample_bytes=sample_bytes, epoch_samples=epoch_samples,
                  input_precision=input_precision, checkpoint_writers=checkpoint_writers,
                  checkpoint_tier=checkpoint_tier, framework=framework,
                  checkpoint_format=checkpoint_format)
    return estimate(req)
