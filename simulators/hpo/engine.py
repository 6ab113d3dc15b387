"""The HPO schedule simulator: event to event on a heap, no clock tick, no SimPy.

Trials compete for GPUs, cores and memory on the cluster's nodes; the decisions
(which trial, where, what a failure means) are the shared
:class:`~testbed.hpo.controller.Controller`'s, so a simulated schedule and a real one
follow the same rules. This module only moves the clock (a
:class:`~testbed.hpo.protocols.SimClock` the controller reads): each started attempt
gets one heap entry — its end, or the failure that strikes first — plus, under a
stopping scheduler, one for its next rung; node failures and repairs are entries of
their own. Events at the same instant are all applied before
the controller dispatches again; ties keep insertion order. Nothing is rebuilt per
event: the heap holds only what is running, and an attempt killed by a node failure
is dropped lazily when its entry comes up.

Randomness: per-attempt failures come from keyed uniforms (trial, attempt) of the
run seed (:mod:`testbed.streams`), node failures from the scenario's failure
model (:mod:`testbed.resilience.failures`) — same seed, same event log, byte for byte.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, field

from testbed.hpo.controller import Controller, Start
from testbed.hpo.plan import HpoPlan
from testbed.hpo.protocols import Sampler, SimClock
from testbed.hpo.timing import Attempt
from testbed.hpo.trace import HpoSummary, summarise, trace_text
from testbed.scenario.hpo import Injection
from testbed.streams import KeyedUniforms, generator

END, FAIL, NODE_FAIL, NODE_UP, RUNG = 0, 1, 2, 3, 4
#: Attempts per trial whose failure draws come from the shared block stream.
ATTEMPTS_PER_ROW = 8


@dataclass(frozen=True)
class HpoRun:
    """A simulated sweep: its summary and its event log."""

    summary: HpoSummary
    events: tuple = field(repr=False)

    def log_text(self) -> str:
        """The event log as canonical JSONL."""
        return trace_text(self.events)

    def to_dict(self) -> dict:
        return self.summary.to_dict()


class _Draws:
    """Per-attempt failure draws: (probability test, time fraction, hazard) uniforms."""

    def __init__(self, plan: HpoPlan) -> None:
        f = plan.spec.failures
        self.p = f.probability
        self.mtbf_s = f.trial_mtbf
        self.active = self.p > 0 or self.mtbf_s is not None
        self.seed = plan.seed
        self.rows = KeyedUniforms(plan.seed, "hpo.failures", 3 * ATTEMPTS_PER_ROW)

    def sampled(self, trial: int, attempt: int, duration_s: float) -> tuple[float, str] | None:
        if not self.active:
            return None
        if attempt < ATTEMPTS_PER_ROW:
            u = self.rows.row(trial)[3 * attempt:3 * attempt + 3]
        else:
            u = generator(self.seed, "hpo.failures", 1 << 20, trial, attempt).random(3)
        best = None
        if self.p > 0 and u[0] < self.p:
            best = (float(u[1]) * duration_s, "sampled")
        if self.mtbf_s is not None:
            tau = -self.mtbf_s * math.log1p(-float(u[2]))
            if tau < duration_s and (best is None or tau < best[0]):
                best = (tau, "hazard")
        return best if best is not None and best[0] < duration_s else None


class _Injections:
    """Explicit trial failures, each fired once."""

    def __init__(self, plan: HpoPlan) -> None:
        self.by_trial: dict[int, list[tuple[int, Injection]]] = {}
        for i, inj in enumerate(plan.spec.inject_failures):
            if inj.trial is not None:
                self.by_trial.setdefault(inj.trial, []).append((i, inj))
        self.fired: set[int] = set()

    def first(self, start: Start, att: Attempt) -> tuple[float, int] | None:
        best = None
        for i, inj in self.by_trial.get(start.trial, ()):
            if i in self.fired:
                continue
            if inj.at_epoch is not None:
                if inj.attempt is not None and inj.attempt != start.attempt:
                    continue
                if not (start.a < inj.at_epoch <= start.b):
                    continue
                tau = att.offset_at_progress(inj.at_epoch)
            else:
                at_s = inj.at        # a trial injection has at_epoch or at (the schema says)
                if (inj.attempt or 0) != start.attempt or at_s is None or at_s > att.duration_s:
                    continue
                tau = at_s
            if best is None or tau < best[0]:
                best = (tau, i)
        return best


class _Sim:
    def __init__(self, plan: HpoPlan, sampler: Sampler, record: bool) -> None:
        self.plan = plan
        self.clock = SimClock()
        self.ctl = Controller(plan, sampler, self.clock, record=True)
        self.heap: list = []
        self.seq = 0
        self.draws = _Draws(plan)
        self.inject = _Injections(plan)
        self.every = plan.spec.checkpoint_every_epochs
        self.objective = plan.objective
        self.overrides = plan.startup_overrides
        self.node_events = self._node_failures()
        self.down_until = [0.0] * plan.nodes

    def push(self, t: float, kind: int, payload) -> None:
        self.seq += 1
        heapq.heappush(self.heap, (t, self.seq, kind, payload))

    def _node_failures(self):
        model = self.plan.node_failures
        merged = [(n.t_s, n.node, "injected", n.repair_s, None)
                  for n in self.plan.node_injections]
        stream = None
        if model is not None and model.has_failures and self.plan.spec.failures.nodes:
            stream = model.events(self.plan.seed, 0)
        return iter(merged), stream

    def next_node_failure(self) -> None:
        injected, stream = self.node_events
        item = next(injected, None)
        if item is not None:
            self.push(item[0], NODE_FAIL, item)
            return
        if stream is not None:
            f = next(stream, None)
            if f is not None:
                causes = self.plan.node_failures.causes
                name = causes[f.cause].name if 0 <= f.cause < len(causes) else "maintenance"
                until = f.until_s if f.node < 0 else None
                repair = self.plan.spec.failures.repair
                self.push(f.t_s, NODE_FAIL, (f.t_s, f.node, name,
                                             f.repair_s if repair is None else repair, until))

    def launch(self, starts: list[Start]) -> None:
        ctl = self.ctl
        for s in starts:
            t = ctl.trials[s.trial]
            att = Attempt(t.cost, s.a, s.b, t.top, self.every,
                          self.overrides.get((s.trial, s.attempt)))
            s.timeline = att
            if s.stops:
                self.push(s.t_s + att.offset_at_progress(s.stops[0]), RUNG, (s, 0))
            fail: tuple[float, str, int | None] | None = None
            inj = self.inject.first(s, att)
            if inj is not None:
                fail = (inj[0], "injected", inj[1])
            drawn = self.draws.sampled(s.trial, s.attempt, att.duration_s)
            if drawn is not None and (fail is None or drawn[0] < fail[0]):
                fail = (drawn[0], drawn[1], None)
            if fail is None:
                self.push(s.t_s + att.duration_s, END, s)
            else:
                self.push(s.t_s + fail[0], FAIL, (s, fail))

    def kill(self, s: Start, now: float, cause: str, preempted: bool) -> list[Start]:
        att = s.timeline
        assert att is not None          # launch() gave every running attempt its timeline
        tau = now - s.t_s
        resume = att.resume_epoch(tau)
        return self.ctl.fail(s, epoch=att.progress_at(tau), resume=resume,
                             lost_s=tau - att.kept_s(resume), cause=cause,
                             preempted=preempted)

    def rung(self, s: Start, i: int) -> None:
        """Attempt ``s`` reached its ``i``-th rung: the scheduler judges it there."""
        ctl = self.ctl
        if s.token not in ctl.running:
            return
        t = ctl.trials[s.trial]
        epoch = s.stops[i]
        if ctl.milestone(s, epoch, self.objective.value(t.index, t.config, epoch)) \
                and i + 1 < len(s.stops):
            att = s.timeline
            assert att is not None
            self.push(s.t_s + att.offset_at_progress(s.stops[i + 1]), RUNG, (s, i + 1))

    def apply(self, now: float, kind: int, payload) -> None:
        ctl = self.ctl
        if kind == END:
            if payload.token in ctl.running:
                t = ctl.trials[payload.trial]
                ctl.finish(payload, self.objective.value(t.index, t.config, payload.b))
        elif kind == RUNG:
            self.rung(*payload)
        elif kind == FAIL:
            s, (_, cause, inj) = payload
            if s.token in ctl.running:
                if inj is not None:
                    self.inject.fired.add(inj)
                self.launch(self.kill(s, now, cause, preempted=False))
        elif kind == NODE_FAIL:
            self.node_fail(now, payload)
            self.next_node_failure()
        else:
            if now >= self.down_until[payload] and not ctl.cluster.is_up(payload):
                ctl.node_up(payload)

    def node_fail(self, now: float, payload) -> None:
        _, node, cause, repair_s, until = payload
        ctl = self.ctl
        nodes = range(self.plan.nodes) if node < 0 else (node,)
        back = until if until is not None else now + repair_s
        ctl.log_failure(node, cause, back - now)
        for n in nodes:
            if not ctl.cluster.is_up(n):
                continue
            for s in ctl.starts_on(n):
                self.kill(s, now, cause, preempted=True)
            ctl.node_down(n)
            self.down_until[n] = back
            self.push(back, NODE_UP, n)

    def done(self) -> bool:
        ctl = self.ctl
        if ctl.running or ctl.stopped:
            return not ctl.running
        if ctl.queued == 0 and ctl.cluster.free_gpus > 0:
            return True
        return not any(k == NODE_UP for _, _, k, _ in self.heap)

    def run(self) -> Controller:
        ctl, clock = self.ctl, self.clock
        ctl.start_log()
        self.next_node_failure()
        self.launch(ctl.dispatch())
        heap = self.heap
        while heap and not self.done():
            now = heap[0][0]
            clock.set(now)
            while heap and heap[0][0] == now:
                _, _, kind, payload = heapq.heappop(heap)
                self.apply(now, kind, payload)
            self.launch(ctl.dispatch())
        ctl.finalize()
        return ctl


def simulate_hpo(plan: HpoPlan, *, sampler: Sampler | None = None,
                 record: bool = True) -> HpoRun:
    """Simulate the plan's sweep once (see the module docstring)."""
    if sampler is None:
        from simulators.hpo.tpe import make_sampler
        sampler = make_sampler(plan)
    ctl = _Sim(plan, sampler, record).run()
    summary = summarise(ctl.events, mode=plan.spec.metric.mode, slots=plan.slots)
    return HpoRun(summary, tuple(ctl.events) if record else ())
