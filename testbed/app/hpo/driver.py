"""Run an HPO sweep for real: the simulator's decisions, real training, real kills.

The driver holds the same :class:`~testbed.hpo.controller.Controller` as the
simulator, on a cluster of one node with W GPU slots — its W workers (a local process
pool, or the K−1 worker ranks of ``mpiexec -n K python -m mpi4py.futures -m testbed
hpo run … --executor mpi``). A trial needing more GPUs than W is refused like one
needing more than a node has. Each attempt the controller starts is sent to a worker
(:func:`real_runs.hpo.worker.run_attempt`), which trains it in a fresh child process
and SIGKILLs that process at an injected failure; the driver then applies the
failure policy — the retry resumes from the trial's newest checkpoint.

State: every state change (attempts started; an attempt's epochs and its end or
failure) is one transaction in the SQLite store (:mod:`testbed.app.hpo.state_db`)
*before* anything else happens. A rerun of the same command finds the sweep's
history, feeds it to a fresh controller (which makes the same decisions again, so
its state is rebuilt exactly — the decisions are checked against the record), then
treats the attempts that were running when the driver died as failed (cause
``driver_lost``, resumed from their newest checkpoint on disk under the policy) and
carries on. Finished trials never run again.

The schedule trace (``--trace``) is the store's history in the simulator's event
vocabulary; ``testbed hpo replay`` predicts its makespan from its measured times.
"""

from __future__ import annotations

import hashlib
import math
import os
import time
from collections import deque
from collections.abc import Iterable
from concurrent.futures import FIRST_COMPLETED, Executor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from testbed import events as ev
from testbed.app.resolve import hpo_plan
from testbed.app.sweep.executors import require_mpi_launch
from testbed.errors import InputError
from testbed.hpo.controller import Controller, Start
from testbed.hpo.plan import HpoPlan
from testbed.hpo.trace import HpoSummary, summarise, trace_text
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

    def to_dict(self) -> dict:
        return {**self.summary.to_dict(), "name": self.name, "sweep": self.sweep,
                "executor": self.executor, "workers": self.workers, "store": self.store,
                "trace": self.trace_path, "ran": self.ran, "skipped": self.skipped,
                "resumed": self.resumed, "wall_s": self.wall_s}


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
        started = time.time()
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
                            time.time() - started, summary)
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
                        summary.trials, True, 0.0, summary)


class _Driver:
    """The loop: dispatch, wait for results, record, apply the policy."""

    def __init__(self, plan: HpoPlan, sc: Scenario, store, pool: Executor, n: int,
                 ckpt_dir: str | None) -> None:
        from simulators.hpo.tpe import make_sampler
        self.plan, self.store, self.pool, self.n = plan, store, pool, n
        self.spec = plan.spec
        self.sweep = sweep_key(sc, plan, n)
        self.t0 = store.open_sweep(self.sweep, name=sc.name, source=str(sc.source),
                                   slots=n, seed=plan.seed)
        root = Path(ckpt_dir) if ckpt_dir else Path(f"{store.path}.ckpt")
        self.ckpt_root = root.resolve() / self.sweep
        self.ctl = Controller(plan, make_sampler(plan))
        self.live: dict[Any, tuple[Start, int | None, str]] = {}   # future → (start, injection, cause)
        self.fired: set[int] = set()
        self.committed = 0
        self.ran = self.skipped = 0
        self.resumed = False
        self.draws = KeyedUniforms(plan.seed, "hpo.failures", 24)

    def now(self) -> float:
        return time.time() - self.t0

    # ------------------------------------------------------------------ recording

    def _flush(self, trials: Iterable[int] = ()) -> None:
        ctl = self.ctl
        new = ctl.events[self.committed:]
        rows = [{"trial": t.index, "status": t.status, "attempts": t.attempts,
                 "value": t.value, "config": t.config}
                for t in (ctl.trials[i] for i in sorted(trials))]
        if new or rows:
            self.store.commit(self.sweep, new, rows)
        self.committed = len(ctl.events)

    # ------------------------------------------------------------------ resume

    def _replay(self, history) -> tuple[deque, list[Start], bool]:
        """Rebuild the controller from the recorded history (decisions are checked)."""
        ctl = self.ctl
        ctl.record = False
        produced: deque[Start] = deque()
        running: dict[tuple[int, int], Start] = {}
        finished = False
        for t, kind, f in history:
            if kind == ev.TRIAL_START:
                if not produced:
                    produced.extend(ctl.dispatch(t))
                s = produced.popleft() if produced else None
                if s is None or (s.trial, s.attempt, s.a, s.b, list(s.alloc.slots)) != (
                        f["trial"], f["attempt"], f["from_epoch"], f["to_epoch"], f["slots"]):
                    raise InputError("the recorded history of this sweep does not match "
                                     "the scenario's decisions; use a new --store",
                                     source=self.store.path, field="--store")
                s.t_s = t
                running[(s.trial, s.attempt)] = s
            elif kind == ev.TRIAL_END:
                ctl.finish(running.pop((f["trial"], f["attempt"])), t, f.get("value"))
            elif kind in (ev.TRIAL_FAILED, ev.TRIAL_PREEMPTED):
                s = running.pop((f["trial"], f["attempt"]))
                if f.get("injection") is not None:
                    self.fired.add(f["injection"])
                produced.extend(ctl.fail(s, t, epoch=f["epoch"], resume=f["resume_epoch"],
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

    def _driver_lost(self, lost: list[Start], t_fail: float) -> list[Start]:
        """Attempts running when the driver died: failed, resumed from disk."""
        from real_runs.hpo.trial import latest_checkpoint
        out = []
        now = self.now()
        for s in lost:
            resume = max(latest_checkpoint(self._ckpt(s.trial), s.b), s.a)
            out += self.ctl.fail(s, max(t_fail, s.t_s), epoch=float(resume), resume=resume,
                                 lost_s=max(t_fail - s.t_s, 0.0), cause="driver_lost",
                                 restart_at=now)
        return out

    # ------------------------------------------------------------------ attempts

    def _ckpt(self, trial: int) -> Path:
        return self.ckpt_root / f"trial-{trial:05d}"

    def _kill_plan(self, s: Start) -> tuple[int | None, int | None, float | None, str]:
        """(injection, kill at epoch, kill after seconds, cause) for an attempt."""
        best: tuple[int | None, int | None, float | None, str] | None = None
        for i, inj in enumerate(self.spec.inject_failures):
            if inj.trial != s.trial or i in self.fired:
                continue
            if inj.at_epoch is not None:
                epoch = math.ceil(inj.at_epoch)
                if (inj.attempt is None or inj.attempt == s.attempt) and s.a < epoch <= s.b:
                    if best is None or (best[1] or math.inf) > epoch:
                        best = (i, epoch, None, "injected")
            elif (inj.attempt or 0) == s.attempt and best is None:
                best = (i, None, inj.at, "injected")
        if best is not None:
            return best
        p = self.spec.failures.probability
        if p > 0 and s.attempt < 8:
            u = self.draws.row(s.trial)[3 * s.attempt:3 * s.attempt + 2]
            if u[0] < p:
                return None, s.a + max(1, math.ceil(float(u[1]) * (s.b - s.a))), None, "sampled"
        return None, None, None, ""

    def _launch(self, starts: list[Start]) -> None:
        from real_runs.hpo.worker import run_attempt
        self._flush({s.trial for s in starts})
        for s in starts:
            t = self.ctl.trials[s.trial]
            inj, kill_epoch, kill_s, cause = self._kill_plan(s)
            task = {"config": t.config, "seed": trial_seed(self.plan.seed, s.trial),
                    "ckpt_dir": str(self._ckpt(s.trial)), "from_epoch": s.a, "to_epoch": s.b,
                    "max_epochs": t.top, "every": self.spec.checkpoint_every_epochs,
                    "kill_at_epoch": kill_epoch, "kill_at_s": kill_s}
            self.live[self.pool.submit(run_attempt, task)] = (s, inj, cause)
            self.ran += 1

    def _outcome(self, fut) -> list[Start]:
        s, inj, cause = self.live.pop(fut)
        try:
            res = fut.result()
        except Exception as exc:   # the worker itself died (e.g. an MPI rank was lost)
            res = {"status": "error", "error": f"{type(exc).__name__}: {exc}", "epochs": [],
                   "pid": None, "host": None, "received": None}
        ctl = self.ctl
        if s.token not in ctl.running:          # cancelled by the policy meanwhile
            return []
        now = self.now()
        kept_s = 0.0
        resume = s.a
        for rec in res["epochs"]:
            t = s.t_s + (rec["t"] - res["received"]) if res.get("received") else now
            ctl.log(min(t, now), ev.TRIAL_RESULT, trial=s.trial, attempt=s.attempt,
                    epoch=rec["epoch"], value=rec["value"], accuracy=rec["accuracy"],
                    epoch_s=rec["epoch_s"], ckpt_s=rec["ckpt_s"])
            if rec["ckpt"]:
                resume = rec["epoch"]
        for rec in res["epochs"]:
            if rec["epoch"] <= resume:
                kept_s += rec["epoch_s"] + rec["ckpt_s"]
        extra = {"pid": res.get("pid"), "host": res.get("host")}
        if res["status"] == "completed":
            value = res["epochs"][-1]["value"] if res["epochs"] else None
            ctl.finish(s, now, value, extra)
            self._flush({s.trial})
            return []
        epoch = res["epochs"][-1]["epoch"] if res["epochs"] else s.a
        if res["status"] == "killed":
            extra["injection"] = inj
            if inj is not None:
                self.fired.add(inj)
        else:
            cause, extra["error"] = "error", res.get("error")
        retries = ctl.fail(s, now, epoch=float(epoch), resume=resume, lost_s=max(
            now - s.t_s - kept_s, 0.0), cause=cause or "killed", extra=extra)
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
            self._launch(list(produced) + self._driver_lost(lost, history[-1][0]))
        else:
            ctl.start_log(0.0, executor="real", workers=self.n)
            self._flush()
        self._launch(ctl.dispatch(self.now()))
        while self.live:
            done, _ = wait(list(self.live), return_when=FIRST_COMPLETED)
            for fut in sorted(done, key=lambda f: self.live[f][0].token):
                self._launch(self._outcome(fut))
            self._launch(ctl.dispatch(self.now()))
        ctl.finalize(self.now())
        self._flush(set(range(len(ctl.trials))))
