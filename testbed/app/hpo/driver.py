"""Run an HPO sweep for real: the simulator's decisions, real training, real kills.

The driver holds the same :class:`~testbed.hpo.controller.Controller` as the
simulator, on a cluster of one node with W GPU slots — its W workers (a local process
pool, or the K−1 worker ranks of ``mpiexec -n K python -m mpi4py.futures -m testbed
hpo run … --executor mpi``). A trial needing more GPUs than W is refused like one
needing more than a node has. Each attempt the controller starts is sent to a worker
(:func:`real_runs.hpo.worker.run_attempt`), which trains it in a fresh child process
and SIGKILLs that process at an injected failure; the driver then applies the
failure policy — the retry resumes from the trial's newest checkpoint.

Under a stopping scheduler (``promotion: stop``) an attempt runs rung by rung: each
segment ends at the trial's next rung (checkpointed there), the controller judges the
trial, and a trial that goes on continues from that checkpoint at once.

State: every state change (attempts started; an attempt's epochs and its end or
failure) is one transaction in the SQLite store (:mod:`testbed.app.hpo.state_db`)
*before* anything else happens, and the trial processes journal their epochs as they
go (:mod:`testbed.app.hpo.journal`). A rerun of the same command finds the sweep's
history, feeds it to a fresh controller (which makes the same decisions again, so
its state is rebuilt exactly — the decisions are checked against the record), reads
the journals of the attempts that were running when the driver died (their epochs'
values are kept; an attempt that had reached its target is finished) and **preempts**
the others (cause ``driver_lost``: a driver crash is not the trials' failure — no
retry is spent, no failure counted, whatever the policy); they resume from their
newest checkpoint on disk. The time the driver was away is an outage
(``sweep_resumed``) that the summary and the replay take out. Finished trials never
run again. Injected and sampled failures belong to a trial's own attempts: an attempt
cut by a lost driver and its resumption count as one, so a resumed sweep fails the
same trials at the same epochs as an uninterrupted one.

Time: the driver's monotonic clock, workers' deltas, the wall clock only across a
resume (:mod:`testbed.app.hpo.clock`).

The schedule trace (``--trace``) is the store's history in the simulator's event
vocabulary; ``testbed hpo replay`` predicts its makespan from its measured times.
"""

from __future__ import annotations

import hashlib
import math
import os
import time
from collections.abc import Iterable
from concurrent.futures import FIRST_COMPLETED, Executor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from testbed import events as ev
from testbed.app.hpo.clock import MonotonicClock, resumed_at_s, wall_s
from testbed.app.hpo.journal import journal_path, read_journal
from testbed.app.resolve import hpo_plan
from testbed.app.sweep.executors import require_mpi_launch
from testbed.errors import InputError
from testbed.hpo.controller import Controller, Start
from testbed.hpo.plan import HpoPlan
from testbed.hpo.protocols import Clock, SimClock
from testbed.hpo.trace import HpoSummary, summarise, trace_text, trial_table
from testbed.io.canonical import dumps
from testbed.scenario.schema import Scenario
from testbed.streams import KeyedUniforms, generator


@dataclass(frozen=True)
class HpoRunResult:
    """What a real sweep did (this invocation) and its summary (the whole history)."""

    name: str
    sweep: str
    executor: str
    workers: int
    store: str
    trace_path: str | None
    ran: int                 # attempts started by this invocation
    skipped: int             # trials already finished before it
    resumed: bool
    wall_s: float
    summary: HpoSummary

    trials: tuple[dict, ...] = ()     # per trial: config, status, value, epoch values

    def to_dict(self) -> dict:
        return {**self.summary.to_dict(), "name": self.name, "sweep": self.sweep,
                "executor": self.executor, "workers": self.workers, "store": self.store,
                "trace": self.trace_path, "ran": self.ran, "skipped": self.skipped,
                "resumed": self.resumed, "wall_s": self.wall_s,
                "trials_table": list(self.trials)}


def trial_seed(seed: int, trial: int) -> int:
    """The training seed of a trial (the same in every attempt)."""
    return int(generator(seed, "hpo.trial_seed", trial).integers(2**31 - 1))


def _workers(sc: Scenario, executor: str, workers: int | None) -> int:
    if workers is not None and workers <= 0:
        raise InputError(f"must be a positive integer, got {workers}", source="--workers")
    if executor == "mpi":
        require_mpi_launch("hpo run")
        return 0            # decided by the MPI allocation
    if workers is not None:
        from real_runs.env import PROCESSES_PER_CPU, max_local_processes
        most = max_local_processes()
        if workers > most:
            raise InputError(f"must be at most {most} on this machine ({PROCESSES_PER_CPU} "
                             f"per CPU): each worker is a PyTorch process", source="--workers")
        return workers
    gpus = (sc.cluster.nodes or 1) * (sc.cluster.gpus_per_node or 1)
    return max(1, min(gpus, os.cpu_count() or 1))


def _pool(executor: str, workers: int) -> tuple[Executor, int]:
    if executor == "mpi":
        from simulators.mpi_pool import mpi_pool
        return mpi_pool(workers or None)
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    from real_runs.hpo.worker import init_worker
    return ProcessPoolExecutor(max_workers=workers, initializer=init_worker,
                               mp_context=multiprocessing.get_context("fork")), workers


def _warm(pool: Executor, n: int) -> None:
    """Have every worker import PyTorch and load the data before the clock starts."""
    from real_runs.hpo.worker import warm_and_wait
    list(pool.map(warm_and_wait, range(2 * n)))


def run_sweep(scenario: str, *, executor: str = "local", workers: int | None = None,
              store_path: str = "hpo.db", trace_path: str | None = None,
              seed: int | None = None, ckpt_dir: str | None = None) -> HpoRunResult:
    """Run (or resume) the scenario's sweep for real; see the module docstring."""
    from testbed.app.hpo.state_db import HpoStore
    from testbed.io.write import check_writable_target
    from testbed.scenario.schema import check_overrides, load_scenario

    check_overrides(None, seed)
    if trace_path is not None:
        check_writable_target(trace_path, field="--trace")
    check_writable_target(store_path, field="--store")
    sc = load_scenario(scenario)
    n = _workers(sc, executor, workers)
    if n:
        plan = hpo_plan(sc, seed=seed, slots=n)    # refuse bad input before any pool starts
        done = _finished(plan, sc, store_path, executor, trace_path)
        if done is not None:
            return done
    pool, n = _pool(executor, n)
    try:
        plan = hpo_plan(sc, seed=seed, slots=n)
        started = time.monotonic()
        _warm(pool, n)
        with HpoStore(store_path) as store:
            driver = _Driver(plan, sc, store, pool, n, ckpt_dir)
            driver.run()
            events = store.events(driver.sweep)
        if trace_path is not None:
            from testbed.io.write import write_text
            write_text(trace_path, trace_text(events), field="--trace")
        summary = summarise(events, mode=plan.spec.metric.mode, slots=n)
        return HpoRunResult(sc.name, driver.sweep, executor, n, store_path, trace_path,
                            driver.ran, driver.skipped, driver.resumed,
                            time.monotonic() - started, summary, trial_table(events))
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def sweep_key(sc: Scenario, plan: HpoPlan, slots: int) -> str:
    """The store's name for this sweep: the hpo section, seed, name and worker count."""
    key = dumps({"hpo": plan.spec.model_dump(mode="json"), "seed": plan.seed, "slots": slots,
                 "name": sc.name})
    return hashlib.sha256(key.encode()).hexdigest()[:16]


def _finished(plan: HpoPlan, sc: Scenario, store_path: str, executor: str,
              trace_path: str | None) -> HpoRunResult | None:
    """The result of a sweep the store already has to its end (no pool is started)."""
    from testbed.app.hpo.state_db import HpoStore
    if not Path(store_path).exists():
        return None
    sweep = sweep_key(sc, plan, plan.slots)
    with HpoStore(store_path) as store:
        events = store.events(sweep)
    if not events or events[-1][1] != ev.JOB_END:
        return None
    if trace_path is not None:
        from testbed.io.write import write_text
        write_text(trace_path, trace_text(events), field="--trace")
    summary = summarise(events, mode=plan.spec.metric.mode, slots=plan.slots)
    return HpoRunResult(sc.name, sweep, executor, plan.slots, store_path, trace_path, 0,
                        summary.trials, True, 0.0, summary, trial_table(events))


@dataclass
class _Segment:
    """A segment of an attempt on a worker: epochs ``a`` → ``b``, submitted at ``t_s``
    (the driver's clock), with its kill plan."""

    start: Start
    a: int
    b: int
    t_s: float
    injection: int | None
    cause: str


class _Driver:
    """The loop: dispatch, wait for results, record, apply the policy."""

    def __init__(self, plan: HpoPlan, sc: Scenario, store, pool: Executor, n: int,
                 ckpt_dir: str | None) -> None:
        from simulators.hpo.tpe import make_sampler
        self.plan, self.store, self.pool, self.n = plan, store, pool, n
        self.spec = plan.spec
        self.sweep = sweep_key(sc, plan, n)
        store.open_sweep(self.sweep, name=sc.name, source=str(sc.source), slots=n,
                         seed=plan.seed)
        root = Path(ckpt_dir) if ckpt_dir else Path(f"{store.path}.ckpt")
        self.ckpt_root = root.resolve() / self.sweep
        self.clock: Clock = MonotonicClock(0.0)
        self.ctl = Controller(plan, make_sampler(plan), self.clock)
        self.live: dict[Any, _Segment] = {}
        self.fired: set[int] = set()
        self.committed = 0
        self.ran = self.skipped = 0
        self.resumed = False
        self.draws = KeyedUniforms(plan.seed, "hpo.failures", 24)
        self.lost_before: dict[int, int] = {}        # driver-lost attempts per trial
        self.first_from: dict[tuple[int, int], int] = {}   # (trial, own attempt) → from
        self.seg_t: dict[int, float] = {}            # attempt → start of its segment

    def _use_clock(self, clock: Clock) -> None:
        self.clock = clock
        self.ctl.clock = clock

    # ------------------------------------------------------------------ recording

    def _flush(self, trials: Iterable[int] = ()) -> None:
        ctl = self.ctl
        new = ctl.events[self.committed:]
        rows = [{"trial": t.index, "status": t.status, "attempts": t.attempts,
                 "value": t.value, "config": t.config}
                for t in (ctl.trials[i] for i in sorted(trials))]
        if new or rows:
            self.store.commit(self.sweep, new, rows, beat=(self.clock.now(), wall_s()))
        self.committed = len(ctl.events)

    # ------------------------------------------------------------------ resume

    def _replay(self, history) -> tuple[list[Start], list[Start], bool]:
        """Rebuild the controller from the recorded history (decisions are checked)."""
        ctl = self.ctl
        clock = SimClock()
        self._use_clock(clock)
        ctl.record = False
        produced: list[Start] = []
        running: dict[tuple[int, int], Start] = {}
        finished = False
        for t, kind, f in history:
            clock.set(t)
            if kind == ev.TRIAL_START:
                if not produced:
                    produced.extend(ctl.dispatch())
                s = produced.pop(0) if produced else None
                if s is None or (s.trial, s.attempt, s.a, s.b, list(s.alloc.slots)) != (
                        f["trial"], f["attempt"], f["from_epoch"], f["to_epoch"], f["slots"]):
                    raise InputError("the recorded history of this sweep does not match "
                                     "the scenario's decisions; use a new --store",
                                     source=self.store.path, field="--store")
                s.t_s = t
                running[(s.trial, s.attempt)] = s
                self._own_attempt(s)
            elif kind == ev.TRIAL_RUNG:
                s = running[(f["trial"], f["attempt"])]
                ctl.milestone(s, f["epoch"], f.get("value"))
                self.seg_t[s.token] = t
            elif kind == ev.TRIAL_END:
                s = running.pop((f["trial"], f["attempt"]))
                if f.get("status") == "stopped" and f["epoch"] < s.b:
                    ctl.milestone(s, f["epoch"], f.get("value"))
                else:
                    ctl.finish(s, f.get("value"))
            elif kind in (ev.TRIAL_FAILED, ev.TRIAL_PREEMPTED):
                s = running.pop((f["trial"], f["attempt"]))
                if f.get("injection") is not None:
                    self.fired.add(f["injection"])
                if f.get("cause") == "driver_lost":
                    self.lost_before[s.trial] = self.lost_before.get(s.trial, 0) + 1
                produced.extend(ctl.fail(s, epoch=f["epoch"], resume=f["resume_epoch"],
                                         lost_s=f["lost_s"], cause=f["cause"],
                                         preempted=kind == ev.TRIAL_PREEMPTED))
            elif kind == ev.TRIAL_CANCELLED and f.get("attempt") is not None:
                running.pop((f["trial"], f["attempt"]), None)
            elif kind == ev.JOB_END:
                finished = True
        ctl.record = True
        self.committed = len(ctl.events)
        lost = [s for s in running.values() if s.token in ctl.running]
        return produced, sorted(lost, key=lambda s: s.token), finished

    def _segment_from(self, s: Start) -> int:
        """Where the current segment of a running attempt began (its start, or the last
        rung it was judged at and went on from)."""
        judged = self.ctl.trials[s.trial].judged
        return max([s.a] + [m for m in s.stops if m <= judged])

    @staticmethod
    def _segment_to(s: Start, a: int) -> int:
        """Where a segment of ``s`` that begins at ``a`` ends: its next rung, or ``b``."""
        return next((m for m in s.stops if m > a), s.b)

    def _resume(self, history, produced: list[Start], lost: list[Start]) -> None:
        """The driver was lost: keep what the running attempts journaled, finish those
        that reached their segment's end, preempt the others, mark the outage."""
        beat = self.store.beat(self.sweep)
        last_t = max(history[-1][0], beat[0] if beat else 0.0)
        resume_t = resumed_at_s(last_t, beat[1] if beat else None)
        clock = SimClock(last_t)
        self._use_clock(clock)
        down = last_t
        reached: list[tuple[float, int, Start, dict]] = []
        kept_at: dict[int, float] = {}
        for s in lost:
            a = self._segment_from(s)
            seg_t = self.seg_t.get(s.token, s.t_s)
            kept_at[s.token] = seg_t
            recs = read_journal(journal_path(self._ckpt(s.trial), s.attempt, a))
            for rec in recs:
                t = min(seg_t + max(0.0, float(rec["t"])), resume_t)
                self._log_result(s, rec, t)
                down = max(down, t)
                if rec["ckpt"]:
                    kept_at[s.token] = t
            if recs and recs[-1]["epoch"] == self._segment_to(s, a):
                reached.append((min(seg_t + max(0.0, float(recs[-1]["t"])), resume_t),
                                s.token, s, recs[-1]))
        for t, _, s, rec in sorted(reached, key=lambda r: (r[0], r[1])):
            clock.set(t)
            if rec["epoch"] < s.b:            # a rung of a stopping scheduler: judge it,
                self.ctl.milestone(s, rec["epoch"], rec["value"])   # preempted if it goes on
            else:
                self.ctl.finish(s, rec["value"])
        self._preempt_lost(lost, down, kept_at)
        clock.set(resume_t)
        self.ctl.log(resume_t, ev.SWEEP_RESUMED, down_at_s=down, outage_s=resume_t - down)
        self._use_clock(MonotonicClock(resume_t))
        for s in produced:                    # decided but never recorded: start them now
            self.ctl.restart_log(s)
        self._flush()

    def _preempt_lost(self, lost: list[Start], down: float, kept_at: dict[int, float]
                      ) -> None:
        """Attempts still running when the driver died: preempted at ``down``, resumed
        from their newest checkpoint on disk (no retry spent, no failure counted);
        ``kept_at``: when each one's newest checkpoint was committed (or its segment
        began), the work after it is lost."""
        from real_runs.hpo.trial import latest_checkpoint
        ctl = self.ctl
        assert isinstance(self.clock, SimClock)
        self.clock.set(down)
        for s in lost:
            if s.token not in ctl.running:
                continue
            resume = max(latest_checkpoint(self._ckpt(s.trial), s.b), s.a)
            self.lost_before[s.trial] = self.lost_before.get(s.trial, 0) + 1
            ctl.fail(s, epoch=float(resume), resume=resume,
                     lost_s=max(down - kept_at.get(s.token, s.t_s), 0.0),
                     cause="driver_lost", preempted=True)

    # ------------------------------------------------------------------ attempts

    def _ckpt(self, trial: int) -> Path:
        return self.ckpt_root / f"trial-{trial:05d}"

    def _own_attempt(self, s: Start) -> int:
        """The trial's own attempt number of ``s``: attempts cut by a lost driver and
        their resumption count as one (injections and sampled failures are keyed by
        it, so a resumed sweep fails the same attempts as an uninterrupted one)."""
        own = s.attempt - self.lost_before.get(s.trial, 0)
        self.first_from.setdefault((s.trial, own), s.a)
        return own

    def _kill_plan(self, s: Start, a: int, b: int) -> tuple[int | None, int | None,
                                                            float | None, str]:
        """(injection, kill at epoch, kill after seconds, cause) for the segment a → b
        of attempt ``s``."""
        own = self._own_attempt(s)
        first = a == s.a
        best: tuple[int | None, int | None, float | None, str] | None = None
        for i, inj in enumerate(self.spec.inject_failures):
            if inj.trial != s.trial or i in self.fired:
                continue
            if inj.at_epoch is not None:
                epoch = math.ceil(inj.at_epoch)
                if (inj.attempt is None or inj.attempt == own) and a < epoch <= b:
                    if best is None or (best[1] or math.inf) > epoch:
                        best = (i, epoch, None, "injected")
            elif (inj.attempt or 0) == own and best is None and first \
                    and self.lost_before.get(s.trial, 0) == 0:
                best = (i, None, inj.at, "injected")
        if best is not None:
            return best
        p = self.spec.failures.probability
        if p > 0 and own < 8:
            u = self.draws.row(s.trial)[3 * own:3 * own + 2]
            origin = self.first_from[(s.trial, own)]
            epoch = origin + max(1, math.ceil(float(u[1]) * (s.b - origin)))
            if u[0] < p and a < epoch <= b:
                return None, epoch, None, "sampled"
        return None, None, None, ""

    def _submit(self, s: Start, a: int) -> None:
        """Send the segment of ``s`` from epoch ``a`` to a worker."""
        from real_runs.hpo.worker import run_attempt
        t = self.ctl.trials[s.trial]
        b = self._segment_to(s, a)
        inj, kill_epoch, kill_s, cause = self._kill_plan(s, a, b)
        task = {"config": t.config, "seed": trial_seed(self.plan.seed, s.trial),
                "ckpt_dir": str(self._ckpt(s.trial)), "from_epoch": a, "to_epoch": b,
                "max_epochs": t.top, "every": self.spec.checkpoint_every_epochs,
                "kill_at_epoch": kill_epoch, "kill_at_s": kill_s,
                "journal": str(journal_path(self._ckpt(s.trial), s.attempt, a))}
        now = self.clock.now()
        self.seg_t[s.token] = now
        self.live[self.pool.submit(run_attempt, task)] = _Segment(s, a, b, now, inj, cause)

    def _launch(self, starts: list[Start]) -> None:
        self._flush({s.trial for s in starts})
        for s in starts:
            self._submit(s, s.a)
            self.ran += 1

    def _log_result(self, s: Start, rec: dict, t: float) -> None:
        self.ctl.log(t, ev.TRIAL_RESULT, trial=s.trial, attempt=s.attempt,
                     epoch=rec["epoch"], value=rec["value"], accuracy=rec["accuracy"],
                     epoch_s=rec["epoch_s"], ckpt_s=rec["ckpt_s"])

    def _outcome(self, fut) -> list[Start]:
        seg = self.live.pop(fut)
        s = seg.start
        try:
            res = fut.result()
        except Exception as exc:   # the worker itself died (e.g. an MPI rank was lost)
            res = {"status": "error", "error": f"{type(exc).__name__}: {exc}", "epochs": [],
                   "pid": None, "host": None}
        ctl = self.ctl
        if s.token not in ctl.running:          # cancelled by the policy meanwhile
            return []
        now = self.clock.now()
        kept_at, resume = seg.t_s, seg.a
        for rec in res["epochs"]:
            t = min(seg.t_s + max(0.0, float(rec.get("t", 0.0))), now)
            self._log_result(s, rec, t)
            if rec["ckpt"]:
                resume, kept_at = rec["epoch"], t
        extra = {"pid": res.get("pid"), "host": res.get("host")}
        if res["status"] == "completed":
            value = res["epochs"][-1]["value"] if res["epochs"] else None
            if seg.b < s.b:                     # a rung: judged, and on from its checkpoint
                if ctl.milestone(s, seg.b, value):
                    self._submit(s, seg.b)
            else:
                ctl.finish(s, value, extra)
            self._flush({s.trial})
            return []
        epoch = res["epochs"][-1]["epoch"] if res["epochs"] else seg.a
        cause = seg.cause
        if res["status"] == "killed":
            extra["injection"] = seg.injection
            if seg.injection is not None:
                self.fired.add(seg.injection)
        else:
            cause, extra["error"] = "error", res.get("error")
        retries = ctl.fail(s, epoch=float(epoch), resume=resume,
                           lost_s=max(now - kept_at, 0.0), cause=cause or "killed",
                           extra=extra)
        self._flush({s.trial} | {i for i in range(len(ctl.trials))
                                 if ctl.trials[i].status == "cancelled"})
        return retries

    # ------------------------------------------------------------------ loop

    def run(self) -> None:
        ctl = self.ctl
        history = self.store.events(self.sweep)
        if history:
            self.resumed = True
            produced, lost, finished = self._replay(history)
            self.skipped = sum(1 for t in ctl.trials if t.status in ("completed", "failed",
                                                                      "stopped", "cancelled"))
            if finished:
                return
            self._resume(history, produced, lost)
            self._launch(produced)
        else:
            ctl.start_log(executor="real", workers=self.n)
            self._flush()
        self._launch(ctl.dispatch())
        while self.live:
            done, _ = wait(list(self.live), return_when=FIRST_COMPLETED)
            for fut in sorted(done, key=lambda f: self.live[f].start.token):
                self._launch(self._outcome(fut))
            self._launch(ctl.dispatch())
        ctl.finalize()
        self._flush(set(range(len(ctl.trials))))
