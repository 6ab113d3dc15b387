"""The checkpoint of a scenario: its cost and load time, its levels and interval.

Given costs win; else the storage physics of the system profile
(:func:`~testbed.resilience.ckpt_cost.checkpoint_cost`, which knows who writes and
where); a scenario that overrides bandwidths in ``storage`` (or has no system) gets its
state over the writers' aggregate bandwidth. What a policy does with them — its levels
and its interval — is the policy's own (:mod:`testbed.resilience.ckpt_policy`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from testbed.app.resolve.paths import at
from testbed.resilience.ckpt_cost import checkpoint_cost, pfs_transfer_s
from testbed.resilience.ckpt_policy import JobFigures, policy
from testbed.resilience.plan import CkptLevel
from testbed.scenario.schema import Scenario

if TYPE_CHECKING:   # annotations only: the oracle and the profiles load when they are used
    from testbed.oracle.estimate import Estimate
    from testbed.systems.profile import SystemProfile


def _physics_cost(sc: Scenario, nodes: int, state: int, system: SystemProfile,
                  est: Estimate | None) -> dict:
    """The checkpoint's cost terms from the storage physics of the system profile: the
    oracle's (which knows the state's layout over model and data parallelism), else the
    scenario's state written by its nodes."""
    if est is not None and est.checkpoint:
        return dict(est.checkpoint)
    gpu = system.gpu
    with at(sc, "checkpoint"):
        return checkpoint_cost(
            state, nodes, nodes, system.storage, gpus_per_node=system.node.gpus_per_node,
            writers=sc.checkpoint.writers, tier=sc.checkpoint.tier,
            host_link_Bps=gpu.host_link_GBps * 1e9 if gpu.host_link_GBps else None).to_dict()


def checkpoint_costs(sc: Scenario, nodes: int, state: int | None,
                     system: SystemProfile | None, est: Estimate | None = None
                     ) -> tuple[float, float, dict | None]:
    """One checkpoint's blocking cost, its load time and (when derived from the physics)
    its terms."""
    ck = sc.checkpoint
    cost, load = ck.cost, ck.restart
    if (cost is not None and load is not None) or not policy(ck.policy).derives_cost:
        return (cost or 0.0), (load or 0.0), None
    if state is None:
        raise sc.error("give 'cost' and 'restart', or a 'state' size (or a model via the "
                       "oracle) to derive them", "checkpoint.cost" if cost is None
                       else "checkpoint.restart")
    if system is not None and sc.storage is None:
        terms = _physics_cost(sc, nodes, state, system, est)
        return (terms["write_s"] if cost is None else cost,
                terms["read_s"] if load is None else load, terms)
    # the scenario's storage section, each bandwidth it leaves out from the profile's
    st, store = sc.storage, system.storage if system is not None else None
    write = (st.pfs_write_bandwidth if st else None) or (
        store.pfs_write_bandwidth_Bps if store else None)
    read = (st.pfs_read_bandwidth if st else None) or (
        store.pfs_read_bandwidth_Bps if store else None)
    node_w = (st.node_write_bandwidth if st else None) or (
        store.pfs_per_node_Bps if store else None)
    node_r = (st.node_read_bandwidth if st else None) or (
        store.pfs_per_node_Bps if store else None)
    if not write or not read:
        raise sc.error("no storage bandwidth: give storage.pfs_write_bandwidth and "
                       "pfs_read_bandwidth, or a system profile", "storage")
    meta = st.metadata_per_writer if st else 0.0
    if cost is None:
        cost = pfs_transfer_s(state, nodes, write, node_w, meta)
    if load is None:
        load = pfs_transfer_s(state, nodes, read, node_r, meta)
    return cost, load, None


def levels(sc: Scenario, cost_s: float, load_s: float) -> tuple[CkptLevel, ...]:
    """The levels the scenario's policy writes (empty: none)."""
    return policy(sc.checkpoint.policy).levels(sc.checkpoint, cost_s, load_s)


def interval_s(sc: Scenario, job: JobFigures) -> float | None:
    """Compute between checkpoints that the scenario's policy chooses."""
    try:
        return policy(sc.checkpoint.policy).interval_s(sc.checkpoint, job)
    except ValueError as exc:       # an interval formula outside its domain
        raise sc.error(str(exc), "checkpoint.cost") from None
