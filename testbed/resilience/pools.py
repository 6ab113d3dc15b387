"""Moving nodes between the job, the standbys, the idle pool and the spare pool (a
mixin of :class:`testbed.resilience.ops.ClusterOps`; every move is O(1) or O(log N))."""

from __future__ import annotations

import heapq
from collections import deque

from testbed import events as ev
from testbed.resilience.cluster_state import ClusterState
from testbed.resilience.draws import Clock
from testbed.resilience.lifecycle import S_GONE, S_IDLE, S_RUN, S_STANDBY
from testbed.resilience.policies import NodeRecord, checked_choice

INF = float("inf")


class Pools(ClusterState):
    """Slots of the job, standbys (first in, first out), the idle pool (a list for
    uniform picks, a heap of policy keys for the ordered policies), fresh nodes of an
    unlimited pool."""

    def _job_clock_in(self, node: int, t: float) -> None:
        """Start ``node``'s job clock with its remaining life ``rem`` at its rate."""
        self.ver[node] += 1
        m = self.km[node] = self._mult(node)
        key = self.jclock.now(t) + self.rem[node] / m
        self.jkey[node] = key
        heapq.heappush(self.jheap, (key, node, self.ver[node]))

    def _clock_out(self, node: int, clock: Clock, t: float) -> None:
        """Stop ``node``'s clock: its remaining life (own-clock seconds) back in ``rem``."""
        self.rem[node] = max(0.0, (self.jkey[node] - clock.now(t)) * self.km[node])
        self.ver[node] += 1

    def _idle_clock_in(self, node: int, t: float, life: float | None = None) -> None:
        """Start ``node``'s idle clock: it takes a free place of the pool and continues
        that place's renewal clock (a new place starts stationary, with an equilibrium
        residual; ``life``: the node's t = 0 draw)."""
        self.ver[node] += 1
        if life is None:
            life = self.places.pop() if self.places else self.idle_life.next()
        self.rem[node] = life
        m = self.km[node] = self._mult(node)
        key = self.iclock.now(t) + self.rem[node] / m
        self.jkey[node] = key
        heapq.heappush(self.iheap_f, (key, node, self.ver[node]))

    def _idle_clocked(self) -> bool:
        return self.lane == "clocks" and self.speeds[3] > 0 and self.life.spares is not None

    def _leave_job(self, t: float, node: int) -> None:
        slot = self.slot_of[node]
        i = self.fpos[slot]
        last = self.filled[-1]
        self.filled[i] = last
        self.fpos[last] = i
        self.filled.pop()
        self.fpos[slot] = -1
        self.slots[slot] = -1
        self.slot_of[node] = -1
        self.empty.append(slot)
        if self.lane == "clocks":
            self._clock_out(node, self.jclock, t)
            self.slot_rem[slot] = self.rem[node]    # the slot's clock stays with the slot

    def _join_job(self, t: float, node: int) -> None:
        slot = self.empty.pop()
        self.slots[slot] = node
        self.slot_of[node] = slot
        self.fpos[slot] = len(self.filled)
        self.filled.append(slot)
        self.state[node] = S_RUN
        self.gjoin[node] = self.G
        if self.lane == "clocks":
            self.rem[node] = self.slot_rem[slot]   # it continues the slot's renewal clock
            self._job_clock_in(node, t)

    def _push_standby(self, node: int) -> None:
        self.state[node] = S_STANDBY
        self.standby.append(node)

    def _pop_standby(self, node: int | None = None) -> int:
        """The longest-waiting standby (first in, first out), or ``node``."""
        if node is None:
            return self.standby.pop(0)
        self.standby.remove(node)
        return node

    def _policy_key(self, node: int) -> tuple:
        if self.life.host_policy == "fewest_failures":
            return (self.fails[node], node)
        return (-self.score[node], node)

    def _push_idle(self, node: int) -> None:
        self.state[node] = S_IDLE
        self.ipos[node] = len(self.idle)
        self.idle.append(node)
        if self.life.host_policy in ("fewest_failures", "highest_score"):
            self.iver[node] += 1
            heapq.heappush(self.iheap, (*self._policy_key(node), self.iver[node]))

    def _drop_idle(self, node: int) -> None:
        i = self.ipos.pop(node)
        last = self.idle.pop()
        if last != node:
            self.idle[i] = last
            self.ipos[last] = i

    def _new_node(self) -> int:
        """A fresh node from an unlimited pool (bad with probability ``bad_fraction``)."""
        node = self.next_id
        self.next_id += 1
        life = self.life
        self.state.append(S_IDLE)
        self.bad.append(bool(life.bad_fraction and self.r_life.random() < life.bad_fraction))
        for counters in (self.ver, self.iver, self.fails, self.repairs_done, self.gjoin):
            counters.append(0)
        self.km.append(1.0)
        self.last_fail.append(-INF)
        self.slot_of.append(-1)
        self.jkey.append(0.0)
        self.score.append(self.score_rule.initial if self.score_rule else 0.0)
        self.rem.append(0.0)                    # drawn when it joins the job
        if self.recent is not None and self.window is not None:
            self.recent.append(deque(maxlen=self.window.failures))
        return node

    def _take_idle(self, count: int) -> list[int]:
        """``count`` idle nodes chosen by the host-selection policy."""
        if count <= 0:
            return []
        life = self.life
        if life.spares is None:
            return [self._new_node() for _ in range(count)]
        if life.host_policy_fn is not None:
            cands = [NodeRecord(n, self.fails[n], self.score[n], self.repairs_done[n],
                                self.last_fail[n]) for n in sorted(self.idle)]
            chosen = checked_choice(life.host_policy_fn(cands, count, self.r_select), cands,
                                    count, life.host_policy)
        elif life.host_policy == "random":
            chosen = []
            idle, u = self.idle, self.u_select
            for _ in range(count):
                chosen.append(idle[min(int(u.next() * len(idle)), len(idle) - 1)])
                self._drop_idle(chosen[-1])
            return chosen
        else:
            chosen = []
            while len(chosen) < count:
                *_, node, ver = heapq.heappop(self.iheap)
                if node in self.ipos and ver == self.iver[node] and node not in chosen:
                    chosen.append(node)
        for node in chosen:
            self._drop_idle(node)
        return chosen

    def _into_pool(self, t: float, node: int) -> None:
        """A node available again: a standby while the job lacks standbys, else idle."""
        life = self.life
        if len(self.standby) < life.standbys:
            self._push_standby(node)
            where = "standby"
        elif life.spares is None:
            self.state[node] = S_GONE
            where = "pool"
        else:
            self._push_idle(node)
            where = "idle"
        if self._idle_clocked() and self.state[node] in (S_STANDBY, S_IDLE):
            self._idle_clock_in(node, t)
        if self._idle_on:           # the pool's idle clock counts its nodes
            self._rates(t)
        if self.log is not None:
            self._log(t, ev.NODE_UP, node=node, to=where)
