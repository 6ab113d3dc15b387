"""The repair shop: one stage of each cause's duration, or the automatic → manual
pipeline with escalation and silent failures, a technician queue, retirement after
repair, and failures of nodes not in use (a mixin of
:class:`testbed.resilience.ops.ClusterOps`)."""

from __future__ import annotations

import heapq

from testbed import events as ev
from testbed.resilience.cluster_state import ClusterState
from testbed.resilience.lifecycle import (
    S_AUTO,
    S_GONE,
    S_MANUAL,
    S_RETIRED,
    S_STANDBY,
    STAGE_AUTO,
    STAGE_MANUAL,
    STAGE_NAMES,
    STAGE_SIMPLE,
)


class RepairShop(ClusterState):
    """Repairs (heap of stage completions, FIFO queue for technicians)."""

    def _to_repair(self, t: float, node: int, cause: int, repair_s: float | None) -> None:
        """Send ``node`` to repair: the pipeline, or one stage of the cause's duration."""
        life = self.life
        if life.spares is None:      # an unlimited pool: repaired elsewhere, never awaited
            self.state[node] = S_GONE
            return
        self.in_repair += 1
        if life.pipeline:
            self._start(t, node, STAGE_AUTO)
            return
        if repair_s is None:
            repair_s = self.causes[cause].repair_s if self.causes else 0.0
        self._start(t, node, STAGE_SIMPLE, repair_s)

    def _start(self, t: float, node: int, stage: int, simple_s: float = 0.0) -> None:
        life = self.life
        needs_person = stage != STAGE_AUTO
        self.state[node] = S_AUTO if stage == STAGE_AUTO else S_MANUAL
        if needs_person and life.technicians is not None and self.busy >= life.technicians:
            self.rqueue.append((node, stage, simple_s))
            return
        if needs_person:
            self.busy += 1
        if stage == STAGE_SIMPLE:
            dur = simple_s
        elif stage == STAGE_AUTO:
            dur = self.d_auto.next()
        else:
            dur = self.d_manual.next()
        if self.log is not None:
            self._log(t, ev.REPAIR_BEGIN, node=node, stage=STAGE_NAMES[stage])
        if dur <= 0.0:
            self._stage_done(t, node, stage)
        else:
            heapq.heappush(self.rheap, (t + dur, next(self._seq), node, stage))

    def _stage_done(self, t: float, node: int, stage: int) -> None:
        life = self.life
        if stage != STAGE_AUTO:
            self.busy -= 1
            if self.rqueue:
                self._start(t, *self.rqueue.popleft())
        if stage == STAGE_SIMPLE:
            self._finish(t, node, True, stage)
            return
        u = self.u_repairs.next
        if stage == STAGE_AUTO:
            self.counts["repairs_automatic"] += 1
            stage_a = life.automatic
            assert stage_a is not None      # an automatic stage runs only in a pipeline
            if life.escalate == "always":
                up = life.manual is not None and life.escalation and u() < life.escalation
                fixed = None if up else u() >= stage_a.silent_failure
            else:
                fixed = u() >= stage_a.silent_failure
                up = (not fixed and life.manual is not None and life.escalation
                      and u() < life.escalation)
            if up:
                self._log(t, ev.REPAIR_END, node=node, stage="automatic", escalated=True)
                self._start(t, node, STAGE_MANUAL)
                return
            self._finish(t, node, bool(fixed), stage)
            return
        self.counts["repairs_manual"] += 1
        manual = life.manual
        assert manual is not None           # reached only by escalating to a manual stage
        self._finish(t, node, u() >= manual.silent_failure, stage)

    def _finish(self, t: float, node: int, fixed: bool, stage: int) -> None:
        """A repair is over: cure, count, retire or return the node."""
        self.in_repair -= 1
        self.counts["repairs_successful" if fixed else "repairs_failed"] += 1
        self.repairs_done[node] += 1
        if fixed and self.bad[node]:
            self.bad[node] = False
            self.counts["bad_nodes_cured"] += 1
        self._back += 1                           # a stalled job wakes up (AIReSim)
        if self.log is not None:
            self._log(t, ev.REPAIR_END, node=node, stage=STAGE_NAMES[stage], fixed=fixed)
        if self.life.retirement is not None and self._retire(t, node):
            self.state[node] = S_RETIRED
            self.counts["retirements"] += 1
            self._log(t, ev.RETIRED, node=node, failures=self.fails[node])
            return
        self._into_pool(t, node)

    def _retire(self, t: float, node: int) -> bool:
        rule = self.life.retirement
        if rule is None:
            return False
        votes = []
        if rule.window is not None and self.recent is not None:
            q = self.recent[node]
            votes.append(len(q) >= rule.window.failures and t - q[0] <= rule.window.within_s)
        if rule.score is not None and rule.score.threshold is not None:
            votes.append(self.score[node] <= rule.score.threshold)
        if not votes:
            return False
        return any(votes) if rule.combine == "any" else all(votes)

    def _idle_failure(self, t: float) -> None:
        """A standby or idle node fails (only with ``idle_rate_factor`` > 0)."""
        if self.lane == "clocks":
            _, node, _ = heapq.heappop(self.iheap_f)
            self.ver[node] += 1
            self.places.append(self.idle_fresh.next())   # its place renews
        else:
            self.ikey += self.idle_gaps.next()
            count = len(self.standby) + len(self.idle)
            k = min(int(self.u_nodes.next() * count), count - 1)
            node = self.standby[k] if k < len(self.standby) else self.idle[k - len(self.standby)]
        if self.state[node] == S_STANDBY:
            self._pop_standby(node)
        else:
            self._drop_idle(node)
        cause = self._pick_cause(False)
        self.counts["failures_idle"] += 1
        self.limits.check(self.counts["failures"] + self.counts["failures_idle"], t, self.rep)
        self._log(t, ev.IDLE_FAILURE, node=node,
                  cause=self.causes[cause].name if self.causes else "failure")
        self._record(t, node)
        self._to_repair(t, node, cause, None)
        self._rates(t)
