"""Replaying a supervised fault-injection run in the simulator (the pure part).

A supervised run (``testbed real-run train --kill-…``) leaves a timeline in the
simulator's event vocabulary: the run's configuration at ``job_start``, every kill as
a ``failure`` (with the plan that fired it: after a step, during a checkpoint write,
or seconds after the process started), the checkpoints, the restarts. :func:`run_plan`
reads it back into a :class:`RunPlan`; :func:`replay_costs` prices the run with a
calibrated profile (step time from the compute fit, checkpoint save and load from the
storage fit of the harness's own format, restart from the restart fit);
:func:`kill_times` places every kill on the predicted clock, and :func:`replay_spec`
turns plan, costs and kills into a trace-replay :class:`~testbed.resilience.spec.SimSpec`
that the simulator runs like any other job.

Conventions that make the replay the same job as the real run: the harness writes a
checkpoint every ``checkpoint_every`` steps except at the last step (a ``final``
level of cost 0 ends the plan); a kill after step ``k`` lands before that step's
checkpoint; a kill during a checkpoint lands inside the write; the first process's
start-up (interpreter, framework import, model build) is time before the first step;
a kill that damages the newest checkpoint (``damage``) makes the restart fall back to
the one before (the store keeps ``keep`` of them), so the steps since that one are
lost too. The simulator's trace replay restarts from its newest checkpoint, so such a
kill gets a cause of its own whose restart holds the re-done work (the steps and the
checkpoint writes between the two checkpoints): the wall time and every later kill
land where the real run put them, and :func:`predicted_of` books that time as lost,
not as restart. (A further kill inside that re-done work is placed where the real run
had it, but the simulator sees it during a restart.)
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from testbed import events as ev
from testbed.calibration.compute import cpu_timed, fitted_basis, model_ir, train_request
from testbed.calibration.restart import (
    carried,
    load_factor,
    load_stretch,
    load_words,
    probe_ratio,
    restart_time_s,
    start_wall_s,
)
from testbed.calibration.storage import bytes_on_disk, load_time_s, save_time_s
from testbed.errors import ScenarioError
from testbed.io.read import read_jsonl
from testbed.io.schema import validate, validate_records
from testbed.measurements import (
    MAX_REPLAY_SEGMENTS,
    Kill,
    SupervisedRun,
    TimelineEvent,
    TrainConfig,
)
from testbed.oracle import estimate
from testbed.oracle.state import state_bytes
from testbed.resilience.causes import ResolvedCause
from testbed.resilience.failures import FailureModel, TraceFailure
from testbed.resilience.plan import CkptLevel, JobPlan
from testbed.resilience.spec import SimSpec
from testbed.systems.calibrated import RestartFit
from testbed.systems.profile import SystemProfile

#: The storage-fit format name of the harness's own checkpoint (store + manifest).
HARNESS_FORMAT = "harness"
#: Where inside a checkpoint write a during-checkpoint kill lands (fraction of its cost):
#: the supervisor kills as soon as the worker says the write began.
DURING_CHECKPOINT_FRACTION = 0.05
#: A kill after step k lands a hair before that step's end on the simulated clock: the
#: real worker has done the step's work but not reported past it (it holds still
#: there), and the engines must see a failure, not a finished segment, even at the
#: job's very last step (float round-off would otherwise decide the tie).
AT_STEP_EARLY_S = 1e-7


@dataclass(frozen=True)
class Measured:
    """What the real run measured (from its timeline or record)."""

    wall_time_s: float
    lost_steps: int
    checkpoint_s: float
    restart_s: float
    kills: int
    #: the run's start to the first step, and the last step to its end (None: not read)
    start_s: float | None = None
    end_s: float | None = None

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class RunPlan:
    """A supervised run as the simulator needs it."""

    config: TrainConfig
    steps: int
    checkpoint_every: int
    kills: tuple[Kill, ...]
    measured: Measured | None = None
    keep: int = 3
    #: runnable tasks besides the supervisor during the run's restarts (None: not read)
    runnable_tasks: float | None = None
    #: runnable tasks besides the supervisor while the run trained (None: not read)
    train_runnable_tasks: float | None = None
    #: the workers' CPU stretch (real_runs.loadprobe) at the first start, over the
    #: restarts (mean) and while training (None: not read)
    start_cpu_stretch: float | None = None
    restart_cpu_stretch: float | None = None
    train_cpu_stretch: float | None = None
    #: the supervisor's core probe (ms, real_runs.loadprobe) at the same three times:
    #: how slow the cores ran (None: not timed)
    start_core_probe_ms: float | None = None
    restart_core_probe_ms: float | None = None
    train_core_probe_ms: float | None = None


@dataclass(frozen=True)
class ReplayCosts:
    """Predicted costs of one run on a calibrated profile."""

    step_s: float
    checkpoint_s: float
    load_s: float
    restart_s: float        # kill → first step, without the checkpoint load
    startup_s: float        # the first process: start, import, build, first step
    ckpt_bytes: float
    basis: str
    end_s: float = 0.0      # the last process: last step → result, environment, exit

    def to_dict(self) -> dict:
        return asdict(self)


def read_timeline(path: str) -> list[TimelineEvent]:
    """A supervisor timeline through the input boundary, every event validated
    (:class:`~testbed.measurements.TimelineEvent`: errors name the file, line and field)."""
    lines = read_jsonl(path)
    if not lines:
        raise ScenarioError("empty timeline", source=path)
    kinds = {value.get("event") for _, value in lines if isinstance(value, dict)
             and isinstance(value.get("event"), str)}
    if not {ev.JOB_START, ev.JOB_END} <= kinds:
        raise ScenarioError("not a complete supervised-run timeline (no job_start or "
                            "job_end)", source=path)
    return [event for _, event in validate_records(TimelineEvent, lines, source=path,
                                                   what="timeline event")]


def timeline_events(events: list[TimelineEvent] | list[dict], source: str
                    ) -> list[TimelineEvent]:
    """Events as validated models (plain dicts are validated, numbered from 1)."""
    return [e if isinstance(e, TimelineEvent) else
            validate(TimelineEvent, e, source=source, what="timeline event", line=i)
            for i, e in enumerate(events, start=1)]


def run_plan(events: list[TimelineEvent] | list[dict], source: str) -> RunPlan:
    """The :class:`RunPlan` of a supervisor timeline (events in file order, validated if
    plain; a timeline that holds several runs — a resume appends its run — gives its
    last complete one)."""
    events = timeline_events(events, source)
    starts = [i for i, e in enumerate(events) if e.event == ev.JOB_START]
    for i in reversed(starts):
        if any(e.event == ev.JOB_END for e in events[i:]):
            events = events[i:]
            break
    start = next((e for e in events if e.event == ev.JOB_START), None)
    end = next((e for e in events if e.event == ev.JOB_END), None)
    if start is None or end is None:
        raise ScenarioError("not a complete supervised-run timeline (no job_start or "
                            "job_end)", source=source)
    # a validated job_start has all three (TimelineEvent requires them)
    assert start.config is not None and start.steps is not None
    assert start.checkpoint_every is not None
    if end.t_s < start.t_s:
        raise ScenarioError(f"job_end at {end.t_s:g} s is before its job_start at "
                            f"{start.t_s:g} s", source=source, field="t_s")
    kills = tuple(e.kill for e in events if e.event == ev.FAILURE)
    return check_replay_size(RunPlan(config=start.config, steps=start.steps,
                                     checkpoint_every=start.checkpoint_every, kills=kills,
                                     measured=measured_from_timeline(events),
                                     keep=start.keep or 3), source)


def check_replay_size(plan: RunPlan, source: str, line: int | None = None) -> RunPlan:
    """Refuse, before anything is simulated, a run whose replay would walk more than
    :data:`MAX_REPLAY_SEGMENTS` segments (``steps / checkpoint_every`` per incarnation)."""
    segments = -(-plan.steps // plan.checkpoint_every)
    walk = segments * (len(plan.kills) + 1)
    if walk > MAX_REPLAY_SEGMENTS:
        raise ScenarioError(
            f"{plan.steps:,} steps with a checkpoint every {plan.checkpoint_every:,} are "
            f"{segments:,} segments; replaying {len(plan.kills)} kill(s) would walk "
            f"{walk:,}, more than {MAX_REPLAY_SEGMENTS:,} (a larger checkpoint_every, "
            "fewer steps or kills)", source=source, line=line, field="checkpoint_every")
    return plan


def plan_of_record(record: SupervisedRun) -> RunPlan:
    """The plan of a ``supervised_run`` record (its timeline gives the measured split)."""
    measured = measured_from_timeline(record.timeline) if record.timeline else None
    if measured is None:
        m = record.metrics
        measured = Measured(m.wall_time_s, m.lost_steps, 0.0, 0.0, m.kills)
    else:
        measured = Measured(record.metrics.wall_time_s, record.metrics.lost_steps,
                            measured.checkpoint_s, measured.restart_s, record.metrics.kills,
                            start_s=record.metrics.start_s, end_s=record.metrics.end_s)
    return RunPlan(config=record.config, steps=record.steps,
                   checkpoint_every=record.checkpoint_every, kills=tuple(record.kills),
                   measured=measured, keep=record.keep,
                   runnable_tasks=record.metrics.restart_runnable_tasks,
                   train_runnable_tasks=record.metrics.train_runnable_tasks,
                   start_cpu_stretch=record.metrics.start_cpu_stretch,
                   restart_cpu_stretch=record.metrics.restart_cpu_stretch,
                   train_cpu_stretch=record.metrics.train_cpu_stretch,
                   start_core_probe_ms=record.metrics.start_core_probe_ms,
                   restart_core_probe_ms=record.metrics.restart_core_probe_ms,
                   train_core_probe_ms=record.metrics.train_core_probe_ms)


def measured_from_timeline(events: list[TimelineEvent] | list[dict]) -> Measured | None:
    """Wall time, lost steps, committed-checkpoint time and restart time of a timeline."""
    events = timeline_events(events, "<timeline>")
    end = next((e for e in events if e.event == ev.JOB_END), None)
    if end is None:
        return None
    ckpt = sum(e.duration_s or 0.0 for e in events if e.event == ev.CHECKPOINT_COMMIT)
    restart, kill_t, lost, kills = 0.0, None, 0, 0
    for e in events:
        if e.event == ev.FAILURE:
            # a kill during a restart: the restart runs on from the first kill
            kill_t = e.t_s if kill_t is None else kill_t
            kills += 1
        elif e.event == ev.RESTART_END and kill_t is not None:
            restart += max(e.t_s - kill_t, 0.0)
            lost += e.lost_steps or 0
            kill_t = None
    return Measured(wall_time_s=end.t_s, lost_steps=lost, checkpoint_s=ckpt,
                    restart_s=restart, kills=kills)


def replay_costs(system: SystemProfile, plan: RunPlan) -> ReplayCosts:
    """Price ``plan`` with a calibrated profile: the step from the oracle
    (:func:`testbed.oracle.estimate`, which reads the profile's fitted compute), the
    checkpoint save and load from the storage fit of the harness's own format, the
    restart from the restart fit."""
    cfg = plan.config
    fit = system.records_fit
    ir = model_ir(cfg)
    est = estimate(train_request(cfg, system))
    step = est.time_per_iteration_s if fitted_basis(est.calibration) else None
    storage = fit.storage_for(cfg.framework, HARNESS_FORMAT) if fit else None
    restart = fit.restart_for(cfg.framework) if fit else None
    missing = [what for what, v in (("compute", step), ("storage (harness format)", storage),
                                    ("restart", restart)) if v is None]
    if missing or step is None or storage is None or restart is None:
        raise ScenarioError(f"the profile has no {', '.join(missing)} fit for "
                            f"{cfg.framework} {ir.name} {cfg.precision}: calibrate with "
                            "records of that framework", field="calibration.records_fit")
    nbytes = bytes_on_disk(storage, state_bytes(ir.parameters, "momentum", "fp32"))
    load = load_time_s(storage, nbytes) or 0.0
    cores = system.node.cpu_cores
    # restarts are CPU-bound: carried from the load they were fitted under to the run's
    factor = load_factor(restart, plan.runnable_tasks, cores, plan.restart_cpu_stretch,
                         plan.restart_core_probe_ms)
    loaded = load_words(factor, plan.restart_cpu_stretch, restart, plan.runnable_tasks,
                        cores, "the run's restarts", plan.restart_core_probe_ms)
    startup, end, ends = _run_ends(restart, plan, factor)
    stretch, stepped = _step_stretch(plan, cores) if cpu_timed(cfg) else (1.0, "")
    return ReplayCosts(step_s=step * stretch, checkpoint_s=save_time_s(storage, nbytes),
                       load_s=load, restart_s=restart_time_s(restart, 0.0) * factor,
                       startup_s=startup, ckpt_bytes=nbytes, end_s=end,
                       basis=f"oracle step ({est.calibration}){stepped}; storage "
                             f"{HARNESS_FORMAT}; restart fit ({restart.points} "
                             f"restart(s)){loaded}{ends}")


def _run_ends(restart: RestartFit, plan: RunPlan, factor: float) -> tuple[float, float, str]:
    """The run's first start and its end, with the basis's words: the fitted first
    start and end (:mod:`testbed.calibration.restart`) at the run's stretches, else the
    restart's parts (interpreter start, set-up, first step) at the restarts' factor and
    no end."""
    if restart.start_s is None:
        startup = (restart.process_start_s + restart.setup_s + restart.first_step_s) * factor
        return startup, 0.0, "; first start from the restart's parts"
    split = start_wall_s(restart, plan.start_cpu_stretch, plan.start_core_probe_ms)
    first = (split / restart.start_s if split is not None and restart.start_s > 0 else
             carried(restart.start_s, restart.start_on_cpu_s, restart.start_cpu_stretch,
                     plan.start_cpu_stretch,
                     probe_ratio(restart.start_core_probe_ms, plan.start_core_probe_ms)))
    # the end's work is the worker's, its part on a core unmeasured: all of it stretches
    last = carried(restart.end_s or 0.0, None, restart.end_cpu_stretch, plan.train_cpu_stretch,
                   probe_ratio(restart.end_core_probe_ms, plan.train_core_probe_ms))
    words = f"; first start and end fitted on {restart.runs} run(s)"
    if first != 1.0 or last != 1.0:
        words += f" (× {first:.2f} and × {last:.2f} for what the run's workers lived)"
    return restart.start_s * first, (restart.end_s or 0.0) * last, words


def _step_stretch(plan: RunPlan, cores: int) -> tuple[float, str]:
    """A step priced at its CPU time takes that times what the workers lived while
    training on the wall clock: their CPU stretch, else processor sharing of the
    runnable count (1: neither read); with the basis's words."""
    if plan.train_cpu_stretch is not None:
        s = plan.train_cpu_stretch
        return s, (f" × {s:.2f} for the load while training (CPU stretch)" if s != 1.0
                   else "")
    if plan.train_runnable_tasks is not None:
        s = load_stretch(plan.train_runnable_tasks, cores)
        return s, (f" × {s:.2f} for the load while training ({plan.train_runnable_tasks:g} "
                   f"runnable task(s) on {cores} core(s))" if s != 1.0 else "")
    return 1.0, ""


@dataclass(frozen=True)
class Schedule:
    """The predicted run: when training first starts (seconds after the supervisor
    started), the kill times after that (the simulator's clock), the wall time on that
    clock and the steps lost."""

    start_s: float
    kill_times_s: tuple[float, ...]
    wall_s: float
    lost_steps: int
    #: per kill on the simulated clock: the work re-done because its damaged checkpoint
    #: fell back to the one before (0: none)
    rework_s: tuple[float, ...] = ()
    #: per kill: what its restart takes beyond a plain one in the simulator's replay
    #: (the re-done work, less the load a fall-back to scratch does not do)
    fallback_extra_s: tuple[float, ...] = ()
    #: the last process's end after its last step (result, environment, exit)
    end_s: float = 0.0

    @property
    def total_s(self) -> float:
        """Wall time from the supervisor's start."""
        return self.start_s + self.wall_s + self.end_s


def _checkpoints(plan: RunPlan, a: int, b: int) -> int:
    """Checkpoints the harness writes after the steps in (a, b]: every
    ``checkpoint_every``-th step, never after the last step."""
    b = min(b, plan.steps - 1)
    every = plan.checkpoint_every
    return max(b // every - a // every, 0)


def _last_checkpoint(plan: RunPlan, a: int, b: int, committed: int) -> int:
    """The newest checkpoint step in (a, b] (``committed`` when there is none)."""
    return (min(b, plan.steps - 1) // plan.checkpoint_every) * plan.checkpoint_every \
        if _checkpoints(plan, a, b) else committed


def _whole_steps(t: float, deadline: float, step_s: float, most: int) -> int:
    """Steps of ``step_s`` that finish by ``deadline`` from ``t`` (at most ``most``):
    a step that would end after the deadline is cut by it."""
    m = min(int((deadline - t) // step_s), most) if step_s > 0 else most
    m = max(m, 0)
    while m < most and t + (m + 1) * step_s <= deadline:
        m += 1
    while m > 0 and t + m * step_s > deadline:
        m -= 1
    return m


def _until_deadline(plan: RunPlan, costs: ReplayCosts, deadline: float, t: float,
                    step: int, committed: int) -> tuple[float | None, float, int, int]:
    """Train from ``step`` at ``t`` until ``deadline`` cuts a step or a checkpoint, or
    the job ends, in closed form: (kill time or None, time, step, committed step)."""
    s, c, every = costs.step_s, costs.checkpoint_s, plan.checkpoint_every
    done_t = t + (plan.steps - step) * s + _checkpoints(plan, step, plan.steps) * c
    if done_t <= deadline:
        return None, done_t, plan.steps, _last_checkpoint(plan, step, plan.steps, committed)
    first = min((step // every + 1) * every, plan.steps)       # end of the first block
    blocks = [(step, first)]
    if first < plan.steps:
        period = every * s + c
        t_first = t + (first - step) * s + c                    # after the first checkpoint
        if t_first <= deadline:                                 # skip whole periods at once
            full = _checkpoints(plan, first, plan.steps)        # further checkpoints
            j = min(max(int((deadline - t_first) // period), 0), full) if period > 0 else full
            while j > 0 and t_first + j * period > deadline:
                j -= 1
            while j < full and t_first + (j + 1) * period <= deadline:
                j += 1
            t, step, committed = t_first + j * period, first + j * every, first + j * every
            blocks = [(step, min(step + every, plan.steps))]
    a, b = blocks[0]
    m = _whole_steps(t, deadline, s, b - a)
    if m < b - a or b >= plan.steps:           # cut inside a step (or at the very end)
        return deadline, deadline, a + m, committed
    return deadline, deadline, b, committed    # cut inside the checkpoint after step b


def _run_incarnation(plan: RunPlan, costs: ReplayCosts, kill: Kill | None, t: float,
                     step: int, committed: int, spawn: float) -> tuple[float | None, float, int, int]:
    """Run from ``step`` (training starting at ``t``) until the kill fires or the job
    ends: (kill time or None, time, step, committed step). Closed form, so a run of 10⁹
    steps costs what a run of ten does."""
    s, c, every = costs.step_s, costs.checkpoint_s, plan.checkpoint_every
    deadline = spawn + kill.at_s if kill is not None and kill.at_s is not None else math.inf
    if deadline < t:
        return deadline, deadline, step, committed       # killed while starting up
    if step >= plan.steps:
        return None, t, step, committed
    if kill is not None and kill.at_step is not None:
        k = max(kill.at_step, step + 1)
        if k <= plan.steps:
            fire = t + (k - step) * s + _checkpoints(plan, step, k - 1) * c - AT_STEP_EARLY_S
            return fire, fire, k, _last_checkpoint(plan, step, k - 1, committed)
    elif kill is not None and kill.during_checkpoint:
        k = (step // every + 1) * every
        if k < plan.steps:
            t_k = t + (k - step) * s
            return t_k + DURING_CHECKPOINT_FRACTION * c, t_k, k, committed
    return _until_deadline(plan, costs, deadline, t, step, committed)


def fallback_step(plan: RunPlan, committed: int) -> int:
    """The checkpoint a restart resumes from when the newest (at ``committed``) is
    damaged: the one before, if the store kept it (``keep`` ≥ 2), else from scratch."""
    if committed <= 0 or plan.keep < 2:
        return 0
    return max(committed - plan.checkpoint_every, 0)


def kill_times(plan: RunPlan, costs: ReplayCosts) -> Schedule:
    """Place every kill of ``plan`` on the predicted clock. Times run from the
    supervisor's start; the simulator's clock starts when training first starts, and a
    kill before that (while the first process starts up) only moves that start. A
    damaging kill falls back one checkpoint (:func:`fallback_step`)."""
    start = costs.startup_s
    t, step, committed, lost = start, 0, 0, 0
    spawn = 0.0
    origin: float | None = None
    times: list[float] = []
    rework: list[float] = []
    extra: list[float] = []
    for i in range(len(plan.kills) + 1):
        kill = plan.kills[i] if i < len(plan.kills) else None
        training_from = t
        fail, t, step, committed = _run_incarnation(plan, costs, kill, t, step, committed, spawn)
        if origin is None and (fail is None or fail >= training_from):
            origin = training_from
        if fail is None:
            break
        redo = more = 0.0
        if kill is not None and kill.damage and committed:
            back = fallback_step(plan, committed)
            redo = ((committed - back) * costs.step_s
                    + _checkpoints(plan, back, committed) * costs.checkpoint_s)
            more = redo - (costs.load_s if back == 0 else 0.0)
            committed = back
        if origin is not None:
            times.append(fail - origin)
            rework.append(redo)
            extra.append(more)
        lost += step - committed
        spawn = fail
        t = fail + costs.restart_s + (costs.load_s if committed else 0.0)
        step = committed
    origin = start if origin is None else origin
    return Schedule(origin, tuple(times), t - origin, lost, tuple(rework), tuple(extra),
                    end_s=costs.end_s)


def replay_spec(plan: RunPlan, costs: ReplayCosts, schedule: Schedule, name: str) -> SimSpec:
    """The trace-replay :class:`SimSpec` of the run (failures at the scheduled times)."""
    levels = (CkptLevel("checkpoint", costs.checkpoint_s, costs.load_s, 1),
              CkptLevel("final", 0.0, 0.0, plan.steps + 1))
    job = JobPlan.build(plan.steps * costs.step_s, plan.checkpoint_every * costs.step_s, levels,
                        step_s=costs.step_s, steps=plan.steps)
    cause = ResolvedCause(name="sigkill", category="sigkill", probability=1.0, repair_s=0.0,
                          detect_s=0.0, restart_s=costs.restart_s)
    rework = schedule.fallback_extra_s or (0.0,) * len(schedule.kill_times_s)
    # a kill whose damaged checkpoint fell back: its own cause, the re-done work in its
    # restart (module doc)
    extra = sorted({r for r in rework if r != 0})
    causes = (cause, *(ResolvedCause(name=f"sigkill-fallback-{i + 1}", category="sigkill",
                                     probability=0.0, repair_s=0.0, detect_s=0.0,
                                     restart_s=costs.restart_s + r)
                       for i, r in enumerate(extra)))
    trace = tuple(TraceFailure(t_s=t, node=0, cause=extra.index(r) + 1 if r != 0 else 0,
                               repair_s=0.0)
                  for t, r in zip(schedule.kill_times_s, rework, strict=True))
    failures = FailureModel(nodes=1, causes=causes, trace=trace)
    return SimSpec(name=name, plan=job, failures=failures, spares=None, nodes=1, policy="fixed",
                   job_mtbf_s=failures.job_mtbf_s, ckpt_cost_s=costs.checkpoint_s,
                   restart_s=costs.restart_s + costs.load_s, analytical_wall_s=None,
                   daly_formula_wall_s=None, step_s=costs.step_s,
                   state_bytes=int(costs.ckpt_bytes))


@dataclass(frozen=True)
class Predicted:
    """The replay's figures, comparable with :class:`Measured`."""

    wall_time_s: float
    lost_steps: float
    checkpoint_s: float
    restart_s: float
    kills: int

    def to_dict(self) -> dict:
        return asdict(self)


def predicted_of(sim_wall_s: float, checkpoint_s: float, restart_s: float,
                 schedule: Schedule, costs: ReplayCosts, kills: int) -> Predicted:
    """The simulator's replication read as the real run's figures: wall time from the
    supervisor's start (the start-up before the simulated clock added), lost steps as
    the schedule counts them (the simulator's lost time also holds the part of an
    aborted checkpoint write)."""
    restart_s += schedule.start_s - costs.startup_s     # restarts during the first start-up
    restart_s -= sum(schedule.rework_s)                 # re-done work is lost, not restart
    return Predicted(wall_time_s=schedule.start_s + sim_wall_s + schedule.end_s,
                     lost_steps=float(schedule.lost_steps), checkpoint_s=checkpoint_s,
                     restart_s=restart_s, kills=kills)
