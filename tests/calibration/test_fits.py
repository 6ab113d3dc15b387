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
