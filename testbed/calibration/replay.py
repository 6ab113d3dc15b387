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
start-up (interpreter, framework import, model build) is time before the first step.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from testbed import events as ev
from testbed.calibration.compute import fitted_basis, model_ir, train_request
from testbed.calibration.restart import restart_time_s
from testbed.calibration.storage import bytes_on_disk, load_time_s, save_time_s
from testbed.errors import ScenarioError
from testbed.measurements import Kill, SupervisedRun, TrainConfig
from testbed.oracle import estimate
from testbed.oracle.state import state_bytes
from testbed.resilience.causes import ResolvedCause
from testbed.resilience.failures import FailureModel, TraceFailure
from testbed.resilience.plan import CkptLevel, JobPlan
from testbed.resilience.spec import SimSpec
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

    def to_dict(self) -> dict:
        return asdict(self)


def _config(fields: dict, source: str) -> TrainConfig:
    cfg = fields.get("config")
    if not isinstance(cfg, dict):
        raise ScenarioError("job_start has no config (timeline written by an older "
                            "supervisor?)", source=source, field="config")
    try:
        return TrainConfig.model_validate(cfg)
    except ValueError as exc:
        raise ScenarioError(f"job_start config: {exc}", source=source, field="config") from None


def run_plan(events: list[dict], source: str) -> RunPlan:
    """The :class:`RunPlan` of a supervisor timeline (events in file order; a timeline
    that holds several runs — a resume appends its run — gives its last complete one)."""
    starts = [i for i, e in enumerate(events) if e.get("event") == ev.JOB_START]
    for i in reversed(starts):
        if any(e.get("event") == ev.JOB_END for e in events[i:]):
            events = events[i:]
            break
    start = next((e for e in events if e.get("event") == ev.JOB_START), None)
    end = next((e for e in events if e.get("event") == ev.JOB_END), None)
    if start is None or end is None:
        raise ScenarioError("not a complete supervised-run timeline (no job_start or "
                            "job_end)", source=source)
    every = start.get("checkpoint_every")
    if not isinstance(every, int) or every <= 0:
        raise ScenarioError("job_start has no checkpoint_every", source=source,
                            field="checkpoint_every")
    kills = []
    for e in events:
        if e.get("event") == ev.FAILURE:
            kills.append(Kill(at_step=e.get("at_step"), at_s=e.get("at_s"),
                              during_checkpoint=bool(e.get("during_checkpoint", False))))
    return RunPlan(config=_config(start, source), steps=int(start["steps"]),
                   checkpoint_every=every, kills=tuple(kills),
                   measured=measured_from_timeline(events))


def plan_of_record(record: SupervisedRun) -> RunPlan:
    """The plan of a ``supervised_run`` record (its timeline gives the measured split)."""
    measured = measured_from_timeline(record.timeline) if record.timeline else None
    if measured is None:
        m = record.metrics
        measured = Measured(m.wall_time_s, m.lost_steps, 0.0, 0.0, m.kills)
    else:
        measured = Measured(record.metrics.wall_time_s, record.metrics.lost_steps,
                            measured.checkpoint_s, measured.restart_s, record.metrics.kills)
    return RunPlan(config=record.config, steps=record.steps,
                   checkpoint_every=record.checkpoint_every, kills=tuple(record.kills),
                   measured=measured)


def measured_from_timeline(events: list[dict]) -> Measured | None:
    """Wall time, lost steps, committed-checkpoint time and restart time of a timeline."""
    end = next((e for e in events if e.get("event") == ev.JOB_END), None)
    if end is None:
        return None
    ckpt = sum(float(e.get("duration_s", 0.0)) for e in events
               if e.get("event") == ev.CHECKPOINT_COMMIT)
    restart, kill_t, lost, kills = 0.0, None, 0, 0
    for e in events:
        if e.get("event") == ev.FAILURE:
            kill_t = float(e["t_s"])
            kills += 1
        elif e.get("event") == ev.RESTART_END and kill_t is not None:
            restart += float(e["t_s"]) - kill_t
            lost += int(e.get("lost_steps", 0))
            kill_t = None
    return Measured(wall_time_s=float(end["t_s"]), lost_steps=lost, checkpoint_s=ckpt,
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
    startup = restart.process_start_s + restart.setup_s + restart.first_step_s
    return ReplayCosts(step_s=step, checkpoint_s=save_time_s(storage, nbytes), load_s=load,
                       restart_s=restart_time_s(restart, 0.0), startup_s=startup,
                       ckpt_bytes=nbytes,
                       basis=f"oracle step ({est.calibration}); storage {HARNESS_FORMAT}; "
                             "restart fit")


@dataclass(frozen=True)
class Schedule:
    """The predicted run: when training first starts (seconds after the supervisor
    started), the kill times after that (the simulator's clock), the wall time on that
    clock and the steps lost."""

    start_s: float
    kill_times_s: tuple[float, ...]
    wall_s: float
    lost_steps: int

    @property
    def total_s(self) -> float:
        """Wall time from the supervisor's start."""
        return self.start_s + self.wall_s


def _run_incarnation(plan: RunPlan, costs: ReplayCosts, kill: Kill | None, t: float,
                     step: int, committed: int, spawn: float) -> tuple[float | None, float, int, int]:
    """Run from ``step`` (training starting at ``t``) until the kill fires or the job
    ends: (kill time or None, time, step, committed step)."""
    every = plan.checkpoint_every
    deadline = spawn + kill.at_s if kill is not None and kill.at_s is not None else math.inf
    if deadline < t:
        return deadline, deadline, step, committed       # killed while starting up
    while step < plan.steps:
        if t + costs.step_s > deadline:
            return deadline, deadline, step, committed
        step += 1
        t += costs.step_s
        if kill is not None and kill.at_step is not None and step >= kill.at_step:
            return t - AT_STEP_EARLY_S, t - AT_STEP_EARLY_S, step, committed
        if step % every == 0 and step < plan.steps:
            if kill is not None and kill.during_checkpoint:
                return t + DURING_CHECKPOINT_FRACTION * costs.checkpoint_s, t, step, committed
            if t + costs.checkpoint_s > deadline:
                return deadline, deadline, step, committed
            t += costs.checkpoint_s
            committed = step
    return None, t, step, committed


def kill_times(plan: RunPlan, costs: ReplayCosts) -> Schedule:
    """Place every kill of ``plan`` on the predicted clock. Times run from the
    supervisor's start; the simulator's clock starts when training first starts, and a
    kill before that (while the first process starts up) only moves that start."""
    start = costs.startup_s
    t, step, committed, lost = start, 0, 0, 0
    spawn = 0.0
    origin: float | None = None
    times: list[float] = []
    for i in range(len(plan.kills) + 1):
        kill = plan.kills[i] if i < len(plan.kills) else None
        training_from = t
        fail, t, step, committed = _run_incarnation(plan, costs, kill, t, step, committed, spawn)
        if origin is None and (fail is None or fail >= training_from):
            origin = training_from
        if fail is None:
            break
        if origin is not None:
            times.append(fail - origin)
        lost += step - committed
        spawn = fail
        t = fail + costs.restart_s + (costs.load_s if committed else 0.0)
        step = committed
    origin = start if origin is None else origin
    return Schedule(origin, tuple(times), t - origin, lost)


def replay_spec(plan: RunPlan, costs: ReplayCosts, schedule: Schedule, name: str) -> SimSpec:
    """The trace-replay :class:`SimSpec` of the run (failures at the scheduled times)."""
    levels = (CkptLevel("checkpoint", costs.checkpoint_s, costs.load_s, 1),
              CkptLevel("final", 0.0, 0.0, plan.steps + 1))
    job = JobPlan.build(plan.steps * costs.step_s, plan.checkpoint_every * costs.step_s, levels,
                        step_s=costs.step_s, steps=plan.steps)
    cause = ResolvedCause(name="sigkill", category="sigkill", probability=1.0, repair_s=0.0,
                          detect_s=0.0, restart_s=costs.restart_s)
    trace = tuple(TraceFailure(t_s=t, node=0, cause=0, repair_s=0.0)
                  for t in schedule.kill_times_s)
    failures = FailureModel(nodes=1, causes=(cause,), trace=trace)
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
    return Predicted(wall_time_s=schedule.start_s + sim_wall_s,
                     lost_steps=float(schedule.lost_steps), checkpoint_s=checkpoint_s,
                     restart_s=restart_s, kills=kills)
