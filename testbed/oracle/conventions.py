"""The rules one prediction follows: the testbed's physics, or ParaDL's as published.

ParaDL (Kahira et al., HPDC'21) made choices the testbed corrects — fp32 everywhere,
its own per-layer compute shares, fractional local batches, ring-only collectives at
nominal bandwidth, a memory formula that divides filter/channel memory by p twice, a
halo without channels. To reproduce its published outputs exactly, every such choice
is a field of one frozen :class:`Conventions` object, chosen once per request by
:func:`conventions_for`; the cost model reads the field instead of asking "is this
ParaDL?" at every turn.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

#: Samples in one ImageNet-1k training epoch as ParaDL counts it (its D; the exact
#: ILSVRC-2012 training set has 1,281,167 images).
IMAGENET_EPOCH_SAMPLES = 1_280_000


@dataclass(frozen=True)
class Conventions:
    """One consistent set of modelling rules (see the module doc)."""

    name: Literal["testbed", "paradl"]
    #: read the profile's ``paradl`` section: bytes per value and epoch size (else the
    #: precision's bytes and :data:`IMAGENET_EPOCH_SAMPLES`)
    profile_section: bool
    #: measured compute, fitted efficiencies and strategy factors from ``calibration``
    use_calibration: bool
    #: per-layer compute shares: our FLOP/measured estimate, or ParaDL's formula
    compute_share: Literal["testbed", "paradl"]
    #: local batch B/p as a real number (ParaDL) instead of ⌈B/p⌉ samples
    fractional_batch: bool
    #: strategies whose per-epoch compute counts D/B iterations, not ⌈D/B⌉
    fractional_epoch: frozenset[str]
    #: gradient bytes: every trainable parameter, or ParaDL's Σ|w|
    gradient_elements: Literal["parameters", "weight_elements"]
    #: all-reduce algorithms allowed (None: what the profile's library offers)
    algorithms: tuple[str, ...] | None
    #: ignore bandwidth efficiencies (profile and calibration): nominal links
    nominal_network: bool
    #: network model: NCCL channels per NIC with ring/tree/NVLS, or ParaDL's one ring
    #: at the spanned tier's bandwidth
    network_model: Literal["nccl", "links"]
    #: compute as a curve over per-GPU batch with a per-step floor (else linear in B)
    batch_curve: bool
    #: filter/channel per-layer traffic: real collectives, or ParaDL's 3(p−1) formula
    filter_comm: Literal["collectives", "paradl"]
    #: halo face: channels × full face, or ParaDL's width × halo rows
    halo_face: Literal["full", "paradl"]
    #: check filter/channel/spatial split limits (filters, channels, rows per GPU)
    structural_limits: bool
    #: gather spatially split activations before the unsplit head
    gather_before_unsplit: bool
    #: memory formula: the testbed's breakdown, or ParaDL's 2·δ·Σ(B|x|+B|y|+|w|)
    memory: Literal["testbed", "paradl"]
    #: strategies whose memory is not checked against the GPU's capacity
    memory_unchecked: frozenset[str]
    #: input pipeline (file system reads) and gradient/backward overlap modelled
    input_io: bool
    overlap: bool
    #: a synchronous step waits for its slowest GPU (:mod:`testbed.oracle.sync`)
    sync_wait: bool = False
    #: what the estimate's ``calibration`` field says when nothing else does
    basis: str = ""


TESTBED = Conventions(
    name="testbed", profile_section=False, use_calibration=True,
    compute_share="testbed", fractional_batch=False, fractional_epoch=frozenset(),
    gradient_elements="parameters", algorithms=None, nominal_network=False,
    network_model="nccl", batch_curve=True,
    filter_comm="collectives", halo_face="full", structural_limits=True,
    gather_before_unsplit=True, memory="testbed", memory_unchecked=frozenset(),
    input_io=True, overlap=True, sync_wait=True)

PARADL = Conventions(
    name="paradl", profile_section=True, use_calibration=False,
    compute_share="paradl", fractional_batch=True,
    fractional_epoch=frozenset({"serial", "data"}), gradient_elements="weight_elements",
    algorithms=("ring",), nominal_network=True, network_model="links", batch_curve=False,
    filter_comm="paradl", halo_face="paradl",
    structural_limits=False, gather_before_unsplit=False, memory="paradl",
    memory_unchecked=frozenset({"ds"}), input_io=False, overlap=False,
    basis="ParaDL rules")

_BY_MODE: dict[str, Conventions] = {c.name: c for c in (TESTBED, PARADL)}


def conventions_for(mode: str) -> Conventions:
    """The rules of a (validated) mode name."""
    return _BY_MODE[mode]
