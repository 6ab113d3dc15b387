"""What a calibrated profile predicts for each measured record.

One function per record kind, each returning :class:`Prediction` s (a record may give
several: a checkpoint's save and load time) or none when the profile has no fit that
covers it:

* ParaDL/ABCI iterations: the oracle (:func:`testbed.oracle.estimate`) with the
  profile's ``calibration`` — the same request ``testbed calibrate`` scores;
* harness training steps: the oracle too (:func:`train_request`: the record's model,
  framework, precision and per-process batch, serial or data parallel), which reads
  the profile's fitted section — the model's own step line, else the framework's law,
  and for data-parallel runs the gradient all-reduce with the backend's fitted α–β,
  plus what ranks sharing the host's cores add (:mod:`testbed.calibration.dataparallel`);
* collectives: the α–β of the network fit; checkpoints: the storage fit; restarts:
  the restart fit with the storage fit's load of the checkpoint's bytes;
* supervised runs: the replay (:mod:`testbed.calibration.replay`), run through the
  ``simulate`` callable the application passes in (the simulator engine) — without
  one, the replay's own schedule gives the wall time.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass

from testbed.calibration.abci import request_for
from testbed.calibration.compute import fitted_basis, measured_step_s, model_ir, train_request
from testbed.calibration.dataparallel import (
    dp_terms,
    find_data_parallel,
    host_cores,
    rank_threads,
)
from testbed.calibration.dataparallel import step_s as dp_step_s
from testbed.calibration.design import MIN_RESTARTS
from testbed.calibration.network import collective_time_s, find_collective, measured_time_s
from testbed.calibration.paradl import is_paradl_record, measurement_of
from testbed.calibration.replay import (
    HARNESS_FORMAT,
    kill_times,
    plan_of_record,
    replay_costs,
    replay_spec,
)
from testbed.calibration.restart import find_restart, load_factor, load_words, restart_time_s
from testbed.calibration.storage import (
    find_storage,
    load_time_s,
    measured_load_s,
    measured_save_s,
    save_time_s,
)
from testbed.errors import InputError
from testbed.measurements import (
    Checkpoint,
    Collective,
    Record,
    Restart,
    SupervisedRun,
    TrainSummary,
)
from testbed.oracle import estimate
from testbed.systems.calibrated import RecordsFit
from testbed.systems.profile import SystemProfile

#: ``simulate(spec) -> (wall_s, checkpoint_s, restart_s, lost_s)`` of one replication.
Simulate = Callable[[object], tuple[float, float, float, float]]


@dataclass(frozen=True)
class Prediction:
    """One predicted quantity of one record, with what it rests on."""

    quantity: str
    measured: float
    predicted: float
    label: str
    basis: str

    def to_dict(self) -> dict:
        return asdict(self)


def extrapolation_flags(cfg, fit: RecordsFit | None) -> list[str]:
    """What a training-step prediction reaches beyond its fit for: a precision with no
    fit of its own (another precision's law stands in), a batch outside the batches
    measured (the model's own line, or every line behind the law), a process count the
    collective fit did not measure (the nearest one stands in)."""
    if fit is None:
        return []
    flags: list[str] = []
    fits = [c for c in fit.compute if c.framework == cfg.framework]
    same = [c for c in fits if c.precision == cfg.precision]
    if fits and not same:
        flags.append(f"precision fall-back: {cfg.precision} from the "
                     f"{fits[0].precision} fit (no {cfg.precision} records)")
    cfits = same or fits
    if cfits:
        cfit = sorted(cfits, key=lambda c: c.device != cfg.device)[0]
        name = model_ir(cfg).name
        line = cfit.models.get(name)
        batches = list(line.batches) if line else [b for ln in cfit.models.values()
                                                   for b in ln.batches]
        if not line:
            flags.append(f"law: {name} has no line of its own")
        if batches and not min(batches) <= cfg.batch_size <= max(batches):
            flags.append(f"extrapolated: batch {cfg.batch_size} outside the fitted "
                         f"{min(batches)}–{max(batches)}")
    if cfg.processes > 1:
        counts = sorted({ab.processes for ab in fit.network
                         if ab.backend == cfg.backend and ab.op == "allreduce"})
        if cfg.processes not in counts:
            flags.append(f"unmeasured: all-reduce over {cfg.processes} processes not measured"
                         f" ({', '.join(map(str, counts)) or 'none'} measured)")
    return flags


def _train(rec: TrainSummary, system: SystemProfile) -> list[Prediction]:
    cfg = rec.config
    est = estimate(train_request(cfg, system))
    if est.time_per_iteration_s is None or not fitted_basis(est.calibration):
        return []
    label = f"{cfg.framework} {est.model} b={cfg.batch_size} {cfg.precision}"
    basis = f"oracle: {est.calibration}"
    flags = extrapolation_flags(cfg, system.records_fit)
    if flags:
        basis += "; flagged: " + "; ".join(flags)
    if cfg.processes == 1:
        measured, _ = measured_step_s(rec)
        return [Prediction(f"{cfg.framework}_step_s", measured, est.time_per_iteration_s,
                           label, basis)]
    predicted = est.time_per_iteration_s
    cores, threads = host_cores(rec), rank_threads(rec)
    terms = dp_terms(cfg, system, cores, threads, est)
    if terms is not None:
        fits = system.records_fit.data_parallel if system.records_fit else ()
        dp = find_data_parallel(fits, cfg.backend, cfg.device)
        predicted = dp_step_s(terms, dp)
        basis += (f"; {cfg.processes} rank(s) × {threads} thread(s) on {cores} core(s): "
                  f"compute ×{terms.share:.2f}, loss all-reduce, {terms.waits:.2f} "
                  f"expected wait(s) for a core")
        if dp is None and terms.excess:
            basis += "; flagged: no data-parallel fit (scheduling delay not priced)"
        elif dp is not None and cfg.processes not in dp.processes:
            basis += (f"; flagged: scheduling delay fitted on {', '.join(map(str, dp.processes))}"
                      f" process(es), not {cfg.processes}")
    return [Prediction(f"{cfg.framework}_dp{cfg.processes}_step_s", rec.metrics.step_s,
                       predicted, f"{label} ×{cfg.processes} {cfg.backend}", basis)]


def _paradl(rec: TrainSummary, system: SystemProfile) -> list[Prediction]:
    m = measurement_of(rec)
    # a model the calibration has not measured still has a prediction: the system-wide
    # values the fit learned across the measured ones (testbed.calibration.abci)
    est = estimate(request_for(m, system))
    if est.time_per_iteration_s is None:
        return []
    label = f"{m.model} {m.strategy} {m.gpus} GPU(s) B={m.global_batch}"
    basis = getattr(est, "calibration", "") or ""
    return [Prediction("paradl_iteration_s", m.s_per_iter, est.time_per_iteration_s, label,
                       f"oracle: {basis}" if basis else "oracle")]


def _collective(rec: Collective, fit: RecordsFit) -> list[Prediction]:
    ab = find_collective(fit.network, rec.op, rec.backend, rec.processes)
    if ab is None:
        return []
    size = rec.metrics.message_bytes
    return [Prediction(f"{rec.backend}_{rec.op}_{rec.processes}p_s", measured_time_s(rec),
                       collective_time_s(ab, size, rec.processes),
                       f"{rec.op} {size} B × {rec.processes} ({rec.backend})",
                       f"α–β {ab.tier}")]


def _checkpoint(rec: Checkpoint, fit: RecordsFit) -> list[Prediction]:
    st = find_storage(fit.storage, rec.framework, rec.format)
    if st is None:
        return []
    size = rec.metrics.ckpt_bytes
    label = f"{rec.framework} {rec.format} {size} B"
    out = [Prediction("checkpoint_save_s", measured_save_s(rec), save_time_s(st, size), label,
                      f"storage {rec.format}")]
    load, measured = load_time_s(st, size), measured_load_s(rec)
    if load is not None and measured is not None:
        out.append(Prediction("checkpoint_load_s", measured, load, label,
                              f"storage {rec.format}"))
    return out


def _restart(rec: Restart, fit: RecordsFit, cores: int) -> list[Prediction]:
    rf = find_restart(fit.restart, rec.framework)
    if rf is None:
        return []
    load = 0.0
    if rec.metrics.ckpt_bytes:
        st = find_storage(fit.storage, rec.framework, HARNESS_FORMAT)
        load = (load_time_s(st, rec.metrics.ckpt_bytes) or 0.0) if st else rec.metrics.load_s
    basis = f"restart fit (medians of {rf.points} restart(s))"
    # carried from the load it was fitted under to the load this restart ran under
    m = rec.metrics
    factor = load_factor(rf, m.runnable_tasks, cores, m.cpu_stretch, m.core_probe_ms)
    basis += load_words(factor, m.cpu_stretch, rf, m.runnable_tasks, cores, "its load",
                        m.core_probe_ms)
    if rf.points < MIN_RESTARTS:
        basis += f"; flagged: fewer than {MIN_RESTARTS} restarts behind the fit"
    return [Prediction("restart_s", rec.metrics.restart_s,
                       restart_time_s(rf, 0.0) * factor + load,
                       f"{rec.framework} {rec.model} restart {rec.incarnation}", basis)]


def _supervised(rec: SupervisedRun, system: SystemProfile, simulate: Simulate | None
                ) -> list[Prediction]:
    plan = plan_of_record(rec)
    try:
        costs = replay_costs(system, plan)
    except InputError:
        return []
    schedule = kill_times(plan, costs)
    wall = schedule.wall_s
    if simulate is not None:
        wall = simulate(replay_spec(plan, costs, schedule, rec.run_id or "replay"))[0]
    wall += schedule.start_s
    label = (f"{rec.config.framework} {rec.config.model} {rec.steps} steps, "
             f"{len(rec.kills)} kill(s)")
    return [Prediction("run_wall_s", rec.metrics.wall_time_s, wall, label,
                       "replay: " + costs.basis)]


def predict_record(rec: Record, system: SystemProfile, fit: RecordsFit | None,
                   simulate: Simulate | None = None) -> list[Prediction]:
    """Every prediction the profile makes for ``rec`` (empty: not covered)."""
    if isinstance(rec, TrainSummary) and is_paradl_record(rec):
        return _paradl(rec, system)
    if fit is None:
        return []
    if isinstance(rec, TrainSummary):
        return _train(rec, system)
    if isinstance(rec, Collective):
        return _collective(rec, fit)
    if isinstance(rec, Checkpoint):
        return _checkpoint(rec, fit)
    if isinstance(rec, Restart):
        return _restart(rec, fit, system.node.cpu_cores)
    if isinstance(rec, SupervisedRun):
        return _supervised(rec, system, simulate)
    return []
