"""The job's books, kept alike by both engines: where the job stands (checkpoint ``c``,
offset ``off`` into the next segment, the planned-stop floor), the seconds booked to
checkpoints, restarts and waits, and the replication's result from them.

The SimPy engine (:mod:`simulators.engine`) and the fast path's general loop
(:mod:`simulators.fast_ops`) derive their job from :class:`JobBooks`, so that a hold, a
rollback and a planned stop's commit are booked by one rule in both.
"""

from __future__ import annotations

from testbed.outcomes import OpsCounts, RepResult, close_books
from testbed.resilience import ops as cops
from testbed.resilience.ops import ClusterOps, HoldTimes
from testbed.resilience.spec import SimSpec

#: The cluster counters a replication's :class:`OpsCounts` takes over as they are.
COUNTED = ("failures_hardware", "failures_job_induced", "failures_idle", "failures_systematic",
           "failures_burst", "missed_diagnoses", "misdiagnoses", "repairs_automatic",
           "repairs_manual", "repairs_successful", "repairs_failed", "bad_nodes_cured",
           "retirements", "preemptions", "host_selections", "swaps", "stalls")


def ops_counts(ops: ClusterOps, times: dict[str, float], planned: int,
               depleted: bool) -> OpsCounts:
    """The replication's :class:`OpsCounts` from the cluster's counters and the job's
    booked hold times."""
    c = ops.counts
    return OpsCounts(
        **{k: c[k] for k in COUNTED},
        planned_stops=planned, stall_s=times[cops.STALL], swap_s=times[cops.SWAP],
        host_selection_s=times[cops.HOST_SELECTION], preemption_s=times[cops.PREEMPTION],
        maintenance_s=times[cops.MAINTENANCE], depleted=depleted)


class JobBooks(HoldTimes):
    """The job's position and booked seconds (see the module docstring; the holds'
    seconds are :class:`~testbed.resilience.ops.HoldTimes`)."""

    def __init__(self, spec: SimSpec, ops: ClusterOps) -> None:
        super().__init__()
        self.spec, self.plan, self.ops = spec, spec.plan, ops
        self.causes = spec.failures.causes
        self.lose_work = spec.failures.lose_work
        self.windows = spec.windows
        self.stop_ckpt_s = self.plan.stop_ckpt_s if self.lose_work else 0.0
        self.c, self.off, self.floor = 0, 0.0, (0, 0.0)
        self.ckpt_s = 0.0
        self.commits = self.planned = 0
        self.by_cause = [0] * len(self.causes)
        self.depleted = False

    def rollback(self, survives: frozenset[str] | None) -> None:
        """Back to the newest checkpoint that survives the failure (or the planned-stop
        floor when it is newer and the top level survives); nothing without work loss."""
        if not self.lose_work:
            return
        plan = self.plan
        top_ok = survives is None or plan.top_level in survives
        cand = (plan.rollback(self.c, survives), 0.0)
        if top_ok and self.floor > cand:
            cand = self.floor
        self.c, self.off = cand

    def commit_stop(self, done: float) -> bool:
        """A planned stop's checkpoint commits ``done`` seconds of the current segment
        (whether it committed: not without checkpoints when work is lost)."""
        if not (self.plan.checkpoints or not self.lose_work):
            return False
        self.off = done
        self.floor = (self.c, self.off)
        self.planned += 1
        self.ckpt_s += self.stop_ckpt_s
        return True

    def result(self, t: float) -> RepResult:
        """The replication's result when the job ends at ``t`` (a depleted cluster keeps
        only the work committed so far)."""
        plan = self.plan
        useful = plan.work_s if not self.depleted else min(plan.work_s,
                                                          plan.work_at(self.c) + self.off)
        return close_books(t, useful, self.ckpt_s, self.restart_s, self.wait_s,
                           self.ops.counts["failures"], self.commits, self.by_cause,
                           ops_counts(self.ops, self.times, self.planned, self.depleted))
