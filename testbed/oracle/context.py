"""The frozen context of one prediction: the request plus everything derived from it
once (rules, per-model arrays, the network, compute per sample, calibration, the
software stack) — what applies to the request read off the profile's data here, by the
rules of :mod:`testbed.oracle.device`, and nowhere later."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from testbed.oracle.collectives import Fabric
from testbed.oracle.compute import ComputeRate, compute_rate
from testbed.oracle.conventions import Conventions, conventions_for
from testbed.oracle.device import model_calibration, software_stack
from testbed.oracle.fitted import fitted_links
from testbed.oracle.names import FAMILY
from testbed.oracle.profile import ModelStats, model_stats
from testbed.oracle.request import Request
from testbed.oracle.state import dtype_bytes, input_bytes_per_value
from testbed.systems.profile import ModelCalibration, StrategyCalibration, SystemProfile
from testbed.systems.software import SoftwareStack

#: How inputs are stored when the request does not say: decoded 8-bit images.
DEFAULT_INPUT_FORMAT = "uint8"


@dataclass(frozen=True)
class Context:
    """What every part of the cost model reads; built by :func:`build_context`."""

    req: Request
    rules: Conventions
    stats: ModelStats
    #: bytes per activation/weight value at the training precision
    delta: int
    precision: str
    fabric: Fabric
    #: fraction of forward+backward time per layer (the rules' estimate)
    share: np.ndarray
    compute: ComputeRate
    model_cal: ModelCalibration | None
    strategy_cal: StrategyCalibration | None
    #: what the numbers rest on, for the estimate's ``calibration`` line
    sources: tuple[str, ...]
    #: bytes of one input sample as stored and moved (dataset, staging, host-to-device)
    input_bytes_per_sample: float
    #: the software stack the step runs on (launches, fusion, loader, buckets)
    stack: SoftwareStack

    @property
    def system(self) -> SystemProfile:
        return self.req.system

    @property
    def p(self) -> int:
        return self.req.gpus

    @property
    def B(self) -> int:  # noqa: N802 - the global batch, as in the papers
        return self.req.global_batch

    @property
    def gpus_per_node(self) -> int:
        return self.req.system.node.gpus_per_node


def _network_efficiency(system: SystemProfile, rules: Conventions,
                        model_cal: ModelCalibration | None, model_name: str | None
                        ) -> tuple[dict[str, float], str]:
    """Fitted bandwidth efficiencies per tier: the model's own, else the median over the
    measured models, else none (the profile's nominal efficiencies)."""
    eff: dict[str, float] = {}
    if rules.use_calibration and system.calibration is not None:
        eff.update(system.calibration.network_efficiency)
    if model_cal is not None and model_cal.network_efficiency:
        eff.update(model_cal.network_efficiency)
        return eff, f"network fitted ({model_name})"
    if eff:
        return eff, "network fitted (median of models)"
    return eff, "network nominal"


@dataclass(frozen=True)
class Network:
    """The calibrated network of a prediction and what it rests on."""

    fabric: Fabric
    source: str


def network_for(system: SystemProfile, model_name: str | None = None,
                rules: Conventions | None = None) -> Network:
    """The network ``oracle predict`` and ``oracle collective`` share: the profile's
    links with the calibration's fitted efficiencies (``model_name``'s own, else the
    median over the measured models) and fitted α–β, under ``rules`` (default: the
    testbed's)."""
    rules = rules or conventions_for("testbed")
    model_cal = model_calibration(system, model_name) if (
        model_name and rules.use_calibration) else None
    efficiency, source = _network_efficiency(system, rules, model_cal, model_name)
    fitted = fitted_links(system) if rules.use_calibration else ()
    fabric = Fabric.of(system, efficiency=efficiency, nominal=rules.nominal_network,
                       algorithms=rules.algorithms, model=rules.network_model, fitted=fitted)
    if fabric.fitted:
        tiers = ", ".join(sorted({f.tier for f in fabric.fitted}))
        source = (f"network α–β fitted ({fabric.fitted[0].backend}: {tiers}), elsewhere "
                  + source.removeprefix("network "))
    return Network(fabric, source)


def _strategy_calibration(req: Request, rules: Conventions,
                          model_cal: ModelCalibration | None
                          ) -> tuple[StrategyCalibration | None, str | None]:
    """Fitted factors for this strategy: the model's own, else the median over the
    measured models for the same strategy, else the same for its family."""
    if not rules.use_calibration or req.system.calibration is None:
        return None, None
    strategy = req.strategy
    own = model_cal.strategies if model_cal else {}
    common = req.system.calibration.strategies
    for key, table, label in ((strategy, own, "measured"), (strategy, common, "median of models"),
                              (FAMILY[strategy], own, "measured, family"),
                              (FAMILY[strategy], common, "median of models, family")):
        if key in table and key != "data":
            return table[key], f"{key} factors {label}"
    return None, None


def _bytes_per_value(req: Request, rules: Conventions, precision: str) -> int:
    if rules.profile_section and req.system.paradl is not None:
        return req.system.paradl.bytes_per_value
    return dtype_bytes(precision)


def input_bytes_per_sample(req: Request) -> float:
    """Bytes of one stored input sample: ``sample_bytes`` when given, else the input's
    values at ``input_precision`` (default: decoded 8-bit images, 1 byte per value)."""
    if req.sample_bytes is not None:
        return float(req.sample_bytes)
    precision = req.input_precision or DEFAULT_INPUT_FORMAT
    return math.prod(req.model.input_shape) * input_bytes_per_value(precision)


def build_context(req: Request) -> Context:
    """Derive everything a (validated) request needs, once."""
    rules = conventions_for(req.mode)
    precision = req.precision or req.system.gpu.training_precision
    stats = model_stats(req.model)
    model_cal = model_calibration(req.system, req.model.name) if rules.use_calibration else None
    net = network_for(req.system, req.model.name, rules)
    fabric, net_source = net.fabric, net.source
    stack = software_stack(req.system, req.software)
    rate = compute_rate(req, rules, stats, model_cal, precision, stack)
    strategy_cal, strat_source = _strategy_calibration(req, rules, model_cal)
    sources = tuple(s for s in (net_source, rate.source, strat_source) if s)
    share = stats.share_paradl if rules.compute_share == "paradl" else stats.share_testbed
    return Context(req=req, rules=rules, stats=stats,
                   delta=_bytes_per_value(req, rules, precision), precision=precision,
                   fabric=fabric, share=share, compute=rate, model_cal=model_cal,
                   strategy_cal=strategy_cal, sources=sources,
                   input_bytes_per_sample=input_bytes_per_sample(req), stack=stack)
