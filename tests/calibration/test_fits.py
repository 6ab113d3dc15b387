"""The fits recover the constants of synthetic measurements made from their own models,
and a calibrated profile is deterministic, loadable and self-describing."""

from __future__ import annotations

import pytest

from testbed.calibration.compute import features, fit_compute, law_time_s, predict_compute_s
from testbed.calibration.fit import fit_records
from testbed.calibration.network import collective_time_s, fit_network
from testbed.calibration.profile import load_calibrated, validate_profile
from testbed.calibration.records import RecordFile, RecordSet, load_records
from testbed.calibration.restart import fit_restart, restart_time_s
from testbed.calibration.storage import fit_storage, load_time_s, save_time_s
from testbed.measurements import make_record
from testbed.model.zoo.harness import harness_model
from testbed.systems.calibrated import ComputeLaw, Residuals
from tests.calibration.conftest import (
    checkpoint_record,
    collective_record,
    env,
    train_record,
    write_lines,
)

#: A law to generate step times from (seconds per layer, parameter, MAC, patch element,
#: activation element).
TRUE_LAW = ComputeLaw(per_layer_s={"conv": 4e-5, "fc": 2e-5, "bn": 0.0, "other": 1e-5},
                      per_parameter_s=2e-9, conv_mac_s=3e-11, fc_mac_s=1e-11,
                      conv_patch_s=1e-9, activation_s=4e-9,
                      residuals=Residuals(n=0, accuracy=0, mape_pct=0, worst_accuracy=0))
MODELS = [("mlp", 32), ("mlp", 128), ("mlp", 512), ("cnn", 16), ("cnn", 64), ("cnn", 128)]
BATCHES = (4, 16, 64)


def _synthetic_train(stamp="2025-01-01T00:00:00Z"):
    return [train_record(m, w, b, law_time_s(TRUE_LAW, harness_model(m, width=w), b),
                         stamp=stamp) for m, w in MODELS for b in BATCHES]


def test_compute_fit_recovers_lines_and_law():
    (fit,) = fit_compute(_synthetic_train())
    assert fit.quantity == "step_cpu_s" and fit.framework == "torch"
    for m, w in MODELS:
        ir = harness_model(m, width=w)
        line = fit.models[ir.name]
        f = features(ir)
        fixed = (sum(TRUE_LAW.per_layer_s[k] * f.layers[k] for k in f.layers)
                 + TRUE_LAW.per_parameter_s * f.parameters)
        assert line.fixed_s == pytest.approx(fixed, rel=1e-4)
        assert line.residuals.accuracy == pytest.approx(1.0, abs=1e-4)
    # a model the fit never saw: the law predicts it from its layers
    unseen = harness_model("cnn", width=32)
    pred, basis = predict_compute_s(fit, unseen, 8)
    assert basis == "law"
    assert pred == pytest.approx(law_time_s(TRUE_LAW, unseen, 8), rel=1e-3)


def test_network_fit_recovers_ring_alpha_beta():
    alpha_s, bw = 40e-6, 1.5e9     # per ring step, per link
    sizes = [4 * 4**k for k in range(10)]
    recs = [collective_record(s, 2 * alpha_s + s / bw) for s in sizes]   # ring, n = 2
    (ab,) = fit_network(recs, [("shm", 1), ("loopback", 8)])
    assert ab.tier == "loopback" and ab.processes == 2
    assert ab.latency_us == pytest.approx(40.0, rel=1e-5)
    assert ab.bandwidth_GBps == pytest.approx(1.5, rel=1e-5)
    # the same α–β at 4 ranks: 6 steps of α, 3/2 of the bytes over the link
    assert collective_time_s(ab, 1e6, 4) == pytest.approx(6 * alpha_s + 1.5e6 / bw, rel=1e-5)


def test_storage_fit_recovers_latency_and_bandwidth():
    recs = [checkpoint_record(n, 0.004 + n / 0.5e9, 0.002 + n / 2e9, params=n // 8)
            for n in (10_000, 1_000_000, 30_000_000)]
    (st,) = fit_storage(recs)
    assert st.save_latency_s == pytest.approx(0.004, rel=1e-4)
    assert st.write_GBps == pytest.approx(0.5, rel=1e-4)
    assert st.read_GBps == pytest.approx(2.0, rel=1e-4) and st.per_file_ms == pytest.approx(4 / 3)
    assert save_time_s(st, 5e6) == pytest.approx(0.004 + 0.01, rel=1e-4)
    assert load_time_s(st, 5e6) == pytest.approx(0.002 + 0.0025, rel=1e-4)


def test_restart_fit_takes_medians_and_the_load_from_storage():
    def rec(total, load):
        return make_record("restart", env=env(), framework="torch", model="mlp", incarnation=1,
                           metrics={"restart_s": total, "process_start_s": 0.1, "setup_s": 2.0,
                                    "load_s": load, "first_step_s": 0.01})
    (rf,) = fit_restart([rec(2.2, 0.01), rec(2.4, 0.02), rec(9.0, 0.01)])
    assert rf.setup_s == 2.0 and rf.points == 3
    assert rf.other_s == pytest.approx(2.4 - 2.13, rel=1e-6)     # median of the remainders
    assert restart_time_s(rf, 0.05) == pytest.approx(rf.other_s + 2.11 + 0.05)


def _profile(records, tmp_path, name="p"):
    path = write_lines(tmp_path / f"{name}.jsonl", records)
    return fit_records(load_records([path]), load_calibrated("laptop-cpu"))


def test_profile_is_deterministic_loadable_and_records_its_inputs(tmp_path):
    records = _synthetic_train("2025-01-02T03:04:05Z") + [
        collective_record(4 * 4**k, 2e-4 + 4 * 4**k / 1e9) for k in range(8)]
    records[3] = records[3].model_copy(update={"measured_at": "2025-03-01T00:00:00Z"})
    first, second = _profile(records, tmp_path), _profile(records, tmp_path)
    assert first.text == second.text
    sec = first.section
    assert sec.fitted_at == "2025-03-01T00:00:00Z"            # newest record, not the clock
    assert sec.inputs[0].records == len(records) and len(sec.inputs[0].sha256) == 64
    assert sec.machine.host == "testhost" and sec.base == "laptop-cpu"
    out = tmp_path / "profile.yaml"
    out.write_text(first.text)
    prof = load_calibrated(out)
    assert prof.fit == sec
    # the tiers keep the base's nominal physics; the fitted α–β of the tier the 2
    # processes span is what the oracle's collectives there use (2 steps of α, S/B)
    tier = next(t for t in prof.system.network.tiers if t.name == "loopback")
    assert tier.latency_us == 20.0 and tier.bandwidth_GBps == 2.0
    from testbed.oracle.context import Fabric
    from testbed.oracle.fitted import fitted_links
    fabric = Fabric.from_spec(prof.system.network, 1, fitted=fitted_links(prof.system))
    cost = fabric.allreduce(1e6, 2)
    assert cost.tier == "loopback"
    assert cost.time_s == pytest.approx(2 * 100e-6 + 1e6 / 1e9, rel=1e-4)
    # per-model compute of the default framework in the profile's calibration: the line
    mc = prof.system.calibration.models["mlp-w128"]
    assert mc.batch == 16 and mc.precision == "fp32" and mc.framework == "torch"
    line = sec.compute[0].models["mlp-w128"]
    assert (mc.fixed_s, mc.s_per_sample) == (line.fixed_s, line.s_per_sample)
    assert sec.framework == "torch"


def test_a_fit_never_writes_what_would_not_load():
    bad = {"name": "x", "gpu": {}, "calibration": {"records_fit": {"base": 3}}}
    with pytest.raises(Exception, match="records_fit"):
        validate_profile(bad, "<test>")


def test_record_set_fitted_at_is_none_without_times():
    rec = collective_record(8, 1e-4).model_copy(update={"measured_at": None})
    rs = RecordSet((RecordFile("x", "0" * 64, ((1, rec),)),))
    assert rs.fitted_at is None


def test_law_prices_memory_bound_work_per_activation_element():
    """A law whose per-sample cost is all elementwise work (no MAC or patch cost): the
    per-sample time is the coefficient times the activation elements every layer writes
    (closed form), and the fit recovers the law from step times alone, so an unseen
    wider MLP at a batch beyond the fitted ones is predicted within 1 %."""
    law = TRUE_LAW.model_copy(update={"conv_mac_s": 0.0, "fc_mac_s": 0.0,
                                      "conv_patch_s": 0.0, "activation_s": 1e-8})
    narrow, wide = harness_model("mlp", width=64), harness_model("mlp", width=128)
    for ir in (narrow, wide):
        f = features(ir)
        assert f.activations == sum(layer.y_elems for layer in ir.layers) > 0
        per_sample = law_time_s(law, ir, 2) - law_time_s(law, ir, 1)
        assert per_sample == pytest.approx(1e-8 * f.activations, rel=1e-9)
    recs = [train_record(m, w, b, law_time_s(law, harness_model(m, width=w), b))
            for m, w in MODELS for b in BATCHES]
    (fit,) = fit_compute(recs)
    assert fit.law is not None and fit.law.residuals.accuracy == pytest.approx(1.0, abs=1e-3)
    unseen = harness_model("mlp", width=256)
    assert law_time_s(fit.law, unseen, 512) == pytest.approx(law_time_s(law, unseen, 512),
                                                             rel=1e-2)


def _dp_record(model, width, batch, processes, step_s):
    return make_record(
        "train_summary", env=env(world_size=processes), measured_at="2025-01-01T00:00:00Z",
        method={"warmup": 3, "rounds": 3, "samples_per_round": 8,
                "statistic": "median of round medians", "threads": 1, "affinity": "0-1"},
        config={"framework": "torch", "model": model, "model_options": {"width": width},
                "input_shape": "1x8x8", "batch_size": batch, "processes": processes,
                "backend": "gloo"},
        metrics={"steps": 10, "step_s": step_s})


def test_data_parallel_fit_recovers_the_scheduling_delay_of_ranks_sharing_cores(tmp_path):
    """Ranks sharing 2 cores (module testbed.calibration.dataparallel): compute stretched
    by p/C, the loss all-reduce, and κ per expected wait for a core. Steps made with a
    known κ give it back from two runs, and predict a third configuration."""
    from testbed.calibration.dataparallel import (
        dp_terms,
        excess_tasks,
        expected_waits,
        step_s,
        time_share,
    )
    from testbed.calibration.predict import predict_record
    assert (excess_tasks(2, 1, 2), excess_tasks(3, 1, 2), excess_tasks(2, 1, 4)) == (1, 2, 0)
    assert (time_share(2, 1, 2), time_share(3, 1, 2), time_share(4, 2, 2)) == (1.0, 1.5, 4.0)
    # two calls a step: 2 ranks → 2·2·1·(1/3) waits; 3 ranks → 2·4·(2/4); 4 cores → none
    assert expected_waits(2, 2, 1, 2) == pytest.approx(4 / 3)
    assert (expected_waits(2, 3, 1, 2), expected_waits(2, 2, 1, 4)) == (4.0, 0.0)
    base = _synthetic_train() + [
        collective_record(4 * 4**k, 2 * (n - 1) * 50e-6 + 2 * (n - 1) / n * 4 * 4**k / 1e9,
                          processes=n) for k in range(8) for n in (2, 3)]
    plain = _profile(base, tmp_path, "plain")
    system, _ = validate_profile(plain.data, "<plain>")
    kappa = 7e-4
    configs = [("mlp", 64, 16, 2), ("cnn", 16, 8, 3), ("mlp", 128, 32, 3)]
    steps = {}
    for m, w, b, n in configs:
        cfg = _dp_record(m, w, b, n, 1.0).config
        t = dp_terms(cfg, system, cores=2, threads=1)
        assert t is not None and t.calls == 2 and t.excess == n - 1
        assert t.share == max(1.0, n / 2) and t.loss_allreduce_s == pytest.approx(
            2 * (n - 1) * 50e-6 + 2 * (n - 1) / n * 4 / 1e9, rel=1e-3)
        assert t.waits == expected_waits(2, n, 1, 2)
        steps[(m, w, b, n)] = t.priced_s + kappa * t.waits
    fitted = _profile(base + [_dp_record(*c, steps[c]) for c in configs[:2]], tmp_path, "dp")
    (dp,) = fitted.section.data_parallel
    assert (dp.backend, dp.cores, dp.processes, dp.points) == ("gloo", 2, (2, 3), 2)
    assert dp.wait_s == pytest.approx(kappa, rel=1e-3)
    assert dp.residuals.accuracy == pytest.approx(1.0, abs=1e-3)
    # the held-out configuration: its step from the fitted κ
    prof, _ = validate_profile(fitted.data, "<dp>")
    held = _dp_record(*configs[2], steps[configs[2]])
    (pred,) = predict_record(held, prof, prof.records_fit)
    assert pred.quantity == "torch_dp3_step_s" and "compute ×1.50" in pred.basis
    assert pred.predicted == pytest.approx(steps[configs[2]], rel=1e-3)
    assert step_s(dp_terms(held.config, prof, 2, 1), None) < pred.predicted   # κ counts


def test_a_restart_fitted_under_one_load_is_carried_to_another():
    """Processor sharing: CPU-bound restart work with R runnable tasks on C cores takes
    max(1, R/C) of its idle time. The fit keeps the median R of its restarts; a run
    under another R gets the ratio of the two stretches (1 when either is unknown)."""
    from testbed.calibration.restart import load_factor, load_stretch

    def rec(total, runnable):
        return make_record("restart", env=env(), framework="chainer", model="mlp",
                           incarnation=1,
                           metrics={"restart_s": total, "process_start_s": 0.05,
                                    "setup_s": 0.4, "load_s": 0.01, "first_step_s": 0.01,
                                    "runnable_tasks": runnable})
    assert (load_stretch(1.0, 2), load_stretch(3.0, 2), load_stretch(0.0, 2)) == (1.0, 1.5, 1.0)
    (rf,) = fit_restart([rec(0.8, 1.0), rec(0.85, 1.2), rec(0.9, 3.0)])
    assert rf.runnable_tasks == 1.2
    assert load_factor(rf, 3.0, 2) == pytest.approx(1.5)      # idle fit, a run on 3 tasks
    assert load_factor(rf, 1.0, 2) == 1.0                     # both below the cores
    assert load_factor(rf, None, 2) == 1.0
    (old,) = fit_restart([rec(0.8, None)])
    assert old.runnable_tasks is None and load_factor(old, 5.0, 2) == 1.0


def _restart(total_s, **metrics):
    """A torch mlp restart record: 0.1 s process start, 1.5 s set-up, a 4 ms load."""
    return make_record("restart", env=env(), framework="torch", model="mlp", incarnation=1,
                       metrics={"restart_s": total_s, "process_start_s": 0.1, "setup_s": 1.5,
                                "load_s": 0.004, "first_step_s": 0.02, **metrics})


def _run(**metrics):
    """A torch mlp-w32 supervised run of 40 steps, one kill, with ``metrics``."""
    return make_record(
        "supervised_run", env=env(), measured_at="2025-01-01T00:00:00Z",
        config={"framework": "torch", "model": "mlp", "model_options": {"width": 32},
                "input_shape": "1x8x8", "batch_size": 16},
        steps=40, checkpoint_every=10, kills=[{"at_step": 15}],
        metrics={"wall_time_s": 5.0, "kills": 1, "restarts": 1, "lost_steps": 5,
                 "checkpoints_committed": 3, **metrics})


def _loaded_profile(tmp_path, name, extra):
    """A profile from the synthetic steps, three checkpoint sizes and ``extra``."""
    records = _synthetic_train() + [
        checkpoint_record(n, 0.004 + n / 0.5e9, 0.002 + n / 2e9, params=n // 8)
        for n in (10_000, 1_000_000, 30_000_000)] + extra
    system, _ = validate_profile(_profile(records, tmp_path, name).data, f"<{name}>")
    return system


def test_a_run_under_load_is_priced_at_its_load(tmp_path):
    """One library thread per step: a step the fit prices at its CPU time takes that
    times max(1, R/C) on the wall clock with R runnable tasks on C cores while the run
    trains; a held-out restart is carried from the fit's load to its own, like the
    replay's restarts (the checkpoint load, I/O, is not stretched)."""
    from testbed.calibration.predict import predict_record
    from testbed.calibration.replay import plan_of_record, replay_costs

    system = _loaded_profile(tmp_path, "loaded", [
        _restart(t, ckpt_bytes=10_000, runnable_tasks=1.0) for t in (1.8, 1.9, 2.0, 1.85, 1.95)])
    cores = system.node.cpu_cores
    (rf,) = system.records_fit.restart
    assert rf.runnable_tasks == 1.0 and rf.points == 5
    idle = replay_costs(system, plan_of_record(_run()))
    busy_r = 2.0 * cores                                    # twice the cores: ×2
    busy = replay_costs(system, plan_of_record(_run(train_runnable_tasks=busy_r,
                                                    restart_runnable_tasks=busy_r)))
    assert busy.step_s == pytest.approx(2 * idle.step_s, rel=1e-12)
    assert busy.restart_s == pytest.approx(2 * idle.restart_s, rel=1e-12)
    assert (busy.load_s, busy.checkpoint_s) == (idle.load_s, idle.checkpoint_s)
    assert "× 2.00 for the load while training" in busy.basis
    light = replay_costs(system, plan_of_record(_run(train_runnable_tasks=0.5 * cores)))
    assert light.step_s == idle.step_s                      # fewer tasks than cores
    # a held-out restart under the load of 2C runnable tasks
    (quiet,) = predict_record(_restart(1.9, ckpt_bytes=10_000, runnable_tasks=1.0), system,
                              system.records_fit)
    (loaded,) = predict_record(_restart(3.8, ckpt_bytes=10_000, runnable_tasks=busy_r),
                               system, system.records_fit)
    ckpt_load_s = quiet.predicted - rf.time_s(0.0)          # the storage fit's, unstretched
    assert ckpt_load_s > 0
    assert loaded.predicted == pytest.approx(2 * rf.time_s(0.0) + ckpt_load_s, rel=1e-12)
    assert "× 2.00 for its load" in loaded.basis and "for its load" not in quiet.basis


def test_what_the_workers_lived_comes_before_the_runnable_count(tmp_path):
    """The CPU stretch a worker lived ((on-CPU + waiting) / on-CPU, real_runs.loadprobe)
    carries a fitted restart by the ratio of the two stretches and prices the steps at
    their CPU time times the training's stretch; the runnable count, blind to session
    groups, is the fall-back where no stretch was read."""
    from testbed.calibration.replay import plan_of_record, replay_costs

    system = _loaded_profile(tmp_path, "lived", [
        _restart(t, runnable_tasks=1.0, cpu_stretch=s)
        for t, s in ((1.8, 1.1), (1.9, 1.2), (2.0, 1.3), (1.85, 1.2), (1.95, 1.25))])
    (rf,) = system.records_fit.restart
    assert rf.cpu_stretch == 1.2                              # the median of the five
    idle = replay_costs(system, plan_of_record(_run()))
    # 2.4 against the fit's 1.2: ×2 however many tasks the count saw (it says ×4 here)
    busy = replay_costs(system, plan_of_record(_run(
        restart_cpu_stretch=2.4, start_cpu_stretch=3.6, train_cpu_stretch=1.5,
        restart_runnable_tasks=8.0, train_runnable_tasks=8.0)))
    assert busy.restart_s == pytest.approx(2 * idle.restart_s, rel=1e-12)
    # no first start fitted (no supervised run in the fit set): the restart's parts
    assert busy.startup_s == pytest.approx(2 * idle.startup_s, rel=1e-12)
    assert idle.end_s == busy.end_s == 0.0
    assert busy.step_s == pytest.approx(1.5 * idle.step_s, rel=1e-12)
    assert "CPU stretch 2.40, fitted at 1.20" in busy.basis
    # no stretch read on the run: the runnable count stands in (8 on 2 cores: ×4)
    counted = replay_costs(system, plan_of_record(_run(restart_runnable_tasks=8.0)))
    cores = system.node.cpu_cores
    assert counted.restart_s == pytest.approx(max(1, 8 / cores) * idle.restart_s, rel=1e-12)


def test_a_runs_first_start_and_end_are_fitted_as_themselves(tmp_path):
    """The fit set's supervised runs give the first start (the run's start to its
    first worker's first step) and the end (last step to the run's end), medians with
    the stretch each lived; the replay carries them by the ratio of stretches and adds
    the end to the wall time."""
    from testbed.calibration.replay import kill_times, plan_of_record, predicted_of, replay_costs

    def run(start_s, end_s, start_stretch, train_stretch):
        return _run(start_s=start_s, end_s=end_s, start_cpu_stretch=start_stretch,
                    train_cpu_stretch=train_stretch)
    system = _loaded_profile(tmp_path, "ends", [_restart(2.0, cpu_stretch=1.0)] * 5 + [
        run(2.4, 0.3, 1.2, 1.0), run(2.6, 0.5, 1.3, 1.1), run(9.0, 0.4, 1.4, 1.2)])
    (rf,) = system.records_fit.restart
    assert (rf.start_s, rf.start_cpu_stretch, rf.end_s, rf.end_cpu_stretch, rf.runs) == (
        2.6, 1.3, 0.4, 1.1, 3)
    busy = run(None, None, 2.6, 2.2)
    costs = replay_costs(system, plan_of_record(busy))
    assert costs.startup_s == pytest.approx(2.6 * 2, rel=1e-12)      # 2.6 s at 1.3, lived 2.6
    assert costs.end_s == pytest.approx(0.4 * 2, rel=1e-12)          # 0.4 s at 1.1, lived 2.2
    schedule = kill_times(plan_of_record(busy), costs)
    pred = predicted_of(10.0, 0.0, 0.0, schedule, costs, 1)
    assert pred.wall_time_s == pytest.approx(schedule.start_s + 10.0 + 0.8, rel=1e-12)
    assert schedule.total_s == pytest.approx(schedule.start_s + schedule.wall_s + 0.8)


def test_only_the_time_on_a_core_is_stretched():
    """A restart of 3 s of which 1 s on a core, fitted at a CPU stretch of 2 (that
    second also waited 1 s): lived at 1, the on-core part takes 1 s and the rest 1 s —
    2 s, 2/3 of the fit, not the 1/2 the ratio of stretches says; without the on-core
    time the ratio it is."""
    from testbed.calibration.restart import carried
    assert carried(3.0, 1.0, 2.0, 1.0) == pytest.approx(2 / 3)
    assert carried(3.0, 1.0, 2.0, 4.0) == pytest.approx(5 / 3)    # 2 s more waiting
    assert carried(3.0, None, 2.0, 1.0) == 0.5
    assert carried(3.0, 1.0, 2.0, 2.0) == 1.0
    assert carried(0.0, 1.0, 2.0, 1.0) == 1.0                     # nothing to carry


def test_a_slower_core_carries_the_time_on_it():
    """Cores 1.5× as slow (the supervisor's core probe, real_runs.loadprobe): the 1 s a
    restart of 3 s spent on a core at a stretch of 2 becomes 1.5 s on the core and as
    long again waiting — 3 s for that part, 4 s in all; with no stretch read on either
    side only the core's speed carries; without the on-core time, all of it does."""
    from testbed.calibration.restart import carried, probe_ratio
    assert carried(3.0, 1.0, 2.0, 2.0, 1.5) == pytest.approx(4 / 3)
    assert carried(3.0, 1.0, None, 2.0, 1.5) == pytest.approx(3.5 / 3)
    assert carried(3.0, None, 2.0, 2.0, 1.5) == pytest.approx(1.5)
    assert carried(3.0, 1.0, 2.0, 2.0) == 1.0
    assert (probe_ratio(2.0, 3.0), probe_ratio(None, 3.0), probe_ratio(2.0, None)) == (
        1.5, 1.0, 1.0)


def test_the_fit_brings_each_restart_to_its_median_probe(tmp_path):
    """Five restarts, each on a core of another speed: their time on a core is carried
    to the median probe before the median is taken (here all the same work, 2 s at a
    probe of 2 ms), so the fit holds no trace of which ones ran on a slow core; a run
    whose restarts saw cores 1.25× as slow gets 1.25× the on-core part (at the fit's
    stretch). A first start does what a restart does: its time on a core is the
    restarts' (2 s at 2 ms), its rest its own (3 s − 2.5 s on a core = 0.5 s)."""
    from testbed.calibration.replay import plan_of_record, replay_costs
    from testbed.calibration.restart import at_median_probe

    samples = [(2.0 * p / 2.0, p) for p in (1.0, 1.5, 2.0, 3.0, 4.0)]
    assert at_median_probe(samples) == (2.0, 2.0)
    assert at_median_probe([(1.0, None), (3.0, None), (2.0, None)]) == (2.0, None)
    assert at_median_probe([(None, 2.0)]) == (None, None)
    system = _loaded_profile(tmp_path, "probed", [
        _restart(2.2, cpu_stretch=1.0, on_cpu_s=on, core_probe_ms=p) for on, p in samples] + [
        _run(start_s=3.0, start_on_cpu_s=2.5, start_cpu_stretch=1.0, start_core_probe_ms=2.0,
             end_s=0.1, train_cpu_stretch=1.0, train_core_probe_ms=2.0)])
    (rf,) = system.records_fit.restart
    assert (rf.on_cpu_s, rf.core_probe_ms, rf.start_core_probe_ms, rf.end_core_probe_ms) == (
        2.0, 2.0, 2.0, 2.0)
    same = replay_costs(system, plan_of_record(_run(
        restart_cpu_stretch=1.0, restart_core_probe_ms=2.0, start_cpu_stretch=1.0,
        start_core_probe_ms=2.0, train_cpu_stretch=1.0, train_core_probe_ms=2.0)))
    slow = replay_costs(system, plan_of_record(_run(
        restart_cpu_stretch=1.0, restart_core_probe_ms=2.5, start_cpu_stretch=1.0,
        start_core_probe_ms=2.5, train_cpu_stretch=1.0, train_core_probe_ms=3.0)))
    total = rf.time_s(0.0)
    assert slow.restart_s == pytest.approx(same.restart_s * (total + 0.25 * 2.0) / total)
    assert (rf.rest_s, rf.start_rest_s) == (pytest.approx(0.196), 0.5)
    assert same.startup_s == pytest.approx(0.5 + 2.0)
    assert slow.startup_s == pytest.approx(0.5 + 2.0 * 1.25)
    assert slow.end_s == pytest.approx(0.1 * 1.5)           # all of the end carries
    assert "cores 1.25× as slow as fitted" in slow.basis


def test_a_restart_is_its_time_on_a_core_stretched_plus_a_rest(tmp_path):
    """Five restarts of 0.02 s besides their worker's on-core time × stretch, with more
    on-core time the more they shared the cores (+0.5 s per unit of stretch over 2 s at
    stretch 1.5: a contention slope of 0.25): the fit keeps the rest, the median
    on-core time and the slope; priced at stretch 1 on the fit's cores, a restart is
    0.02 + 2 × (1 − 0.25 × 0.5) × 1 = 1.77 s — where carrying by the stretch alone would
    say 0.02 + 2 × 1 = 2.02 s. Stretches spanning too little give no slope."""
    from testbed.calibration.restart import contention_slope, restart_wall_s

    line = [(s_, 2.0 + 0.5 * (s_ - 1.5)) for s_ in (1.2, 1.3, 1.5, 1.7, 1.8)]
    assert contention_slope(line) == pytest.approx(0.25)
    assert contention_slope(line[:3]) is None                       # too few
    assert contention_slope([(1.0 + i * 0.01, 2.0 + i) for i in range(5)]) is None
    assert contention_slope([(s_, 2.0 - (s_ - 1.5)) for s_, _ in line]) == 0.0  # never < 0
    system = _loaded_profile(tmp_path, "split", [
        _restart(0.004 + 0.02 + on * s_, cpu_stretch=s_, on_cpu_s=on, core_probe_ms=2.0)
        for s_, on in line])
    (rf,) = system.records_fit.restart
    assert (rf.rest_s, rf.on_cpu_s, rf.cpu_stretch, rf.core_probe_ms) == pytest.approx(
        (0.02, 2.0, 1.5, 2.0))
    assert rf.contention_per_stretch == pytest.approx(0.25)
    assert restart_wall_s(rf, 1.0, 2.0) == pytest.approx(0.02 + 2.0 * 0.875)
    assert restart_wall_s(rf, None, None) == pytest.approx(0.02 + 2.0 * 1.5)   # as fitted
    assert restart_wall_s(rf, 1.5, 3.0) == pytest.approx(0.02 + 3.0 * 1.5)     # slower core
    # each fitted restart is priced at what it lived: the in-sample residuals are ~0
    assert rf.residuals.worst_accuracy > 0.98
