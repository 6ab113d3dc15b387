"""A profile calibrated from records is used by the oracle: it loads everywhere a profile
loads, measured models follow their line ``fixed_s + s_per_sample · b`` exactly, other
models the framework's law, collectives the backend's fitted α–β on the tier they run
on, checkpoints the fitted storage of a format, restarts the fitted restart — and every
estimate says which basis it used. Synthetic records made from known constants, so
every figure is exact."""

from __future__ import annotations

import json
import statistics
import time

import pytest

from testbed.calibration.fit import fit_records
from testbed.calibration.profile import load_calibrated
from testbed.calibration.records import load_records
from testbed.calibration.storage import bytes_on_disk
from testbed.measurements import make_record
from testbed.model.zoo.harness import harness_model
from testbed.oracle import Request, estimate, state_bytes
from testbed.oracle.fitted import law_time_s
from testbed.resilience.ckpt_cost import checkpoint_cost
from testbed.systems.profile import Calibration, ModelCalibration, default_restart_s, load_system
from tests.calibration.conftest import checkpoint_record, env, run_testbed, write_lines
from tests.calibration.test_fits import TRUE_LAW, _synthetic_train
from tests.targets import at_most, mean_s

#: The α–β the synthetic micro-benchmarks follow, per backend (per ring step, per link).
ALPHA_BETA = {"gloo": (100e-6, 1.0e9), "mpi": (5e-6, 4.0e9)}
#: The synthetic restart's parts (s): process start, set-up, first step, the rest.
RESTART = {"process_start_s": 0.1, "setup_s": 2.0, "first_step_s": 0.05}
RESTART_OTHER_S = 0.2


def _collectives():
    out = []
    for backend, (alpha, bw) in ALPHA_BETA.items():
        for k in range(8):
            size = 4 * 4**k
            out.append(make_record(
                "collective", env=env(world_size=2), measured_at="2025-01-01T00:00:00Z",
                op="allreduce", backend=backend, processes=2,
                metrics={"message_bytes": size, "time_s": 2 * alpha + size / bw,
                         "repeats": 5}))
    return out


def _checkpoints():
    out = []
    for fmt, latency, bw in (("harness", 4e-3, 0.5e9), ("torch.save", 1e-3, 2e9)):
        for n in (10_000, 1_000_000, 30_000_000):
            out.append(checkpoint_record(n + 1000, latency + (n + 1000) / bw,
                                         latency / 2 + (n + 1000) / (2 * bw), fmt=fmt,
                                         params=n // 8))
    return out


def _restarts():
    total = sum(RESTART.values()) + RESTART_OTHER_S
    return [make_record("restart", env=env(), framework="torch", model="mlp", incarnation=i,
                        metrics={"restart_s": total, "load_s": 0.0, **RESTART})
            for i in (1, 2, 3)]


@pytest.fixture(scope="module")
def calibrated(tmp_path_factory):
    root = tmp_path_factory.mktemp("records-fit")
    records = write_lines(root / "fit.jsonl", _synthetic_train() + _collectives()
                          + _checkpoints() + _restarts())
    result = fit_records(load_records([records]), load_calibrated("laptop-cpu"))
    path = root / "P.yaml"
    path.write_text(result.text)
    return path, load_system(path), records


def _serial(system, model, batch, **kw):
    return estimate(Request(model=model, system=system, strategy="serial", gpus=1,
                            global_batch=batch, **kw))


def test_a_calibrated_profile_loads_everywhere(calibrated, tmp_path):
    path, system, records = calibrated
    assert system.records_fit is not None and system.records_fit.framework == "torch"
    # testbed oracle predict
    proc = run_testbed("oracle", "predict", "--system", str(path), "--model", "mlp",
                       "--strategy", "serial", "--gpus", "1", "--global-batch", "16", "--json")
    assert proc.returncode == 0, proc.stderr
    assert "compute measured (mlp, torch fp32 cpu line" in json.loads(proc.stdout)["calibration"]
    # a scenario's system: path (the simulator's input)
    from testbed.app.resolve import resolve
    from testbed.scenario.schema import load_scenario
    scenario = tmp_path / "s.yaml"
    scenario.write_text(f"name: calibrated\nsystem: {path}\nmodel: {{name: mlp}}\n"
                        "parallelism: {strategy: serial, gpus: 1, global_batch: 16}\n"
                        "workload: {steps: 1000}\nfailures: {mtbf: 1h}\n"
                        "checkpoint: {policy: daly}\nsimulation: {replications: 2}\n")
    spec = resolve(load_scenario(scenario))
    line = system.records_fit.compute[0].models["mlp"]
    assert spec.step_s == pytest.approx(line.fixed_s + 16 * line.s_per_sample, rel=1e-12)
    assert spec.checkpoint_terms["basis"].startswith("fitted torch harness")
    # testbed verify (every synthetic step predicted exactly, through the oracle): the
    # records are the fit's own, so this is an in-sample check and says so
    proc = run_testbed("verify", str(path), str(records), "--in-sample", "--json")
    assert proc.returncode == 0, proc.stderr
    q = json.loads(proc.stdout)["quantities"]
    assert q["torch_step_s"]["accuracy"] == pytest.approx(1.0, abs=1e-3)
    assert q["gloo_allreduce_2p_s"]["accuracy"] == pytest.approx(1.0, abs=1e-3)


@pytest.mark.parametrize("batch", [1, 16, 256])
def test_a_measured_model_follows_its_line(calibrated, batch):
    """t(b) = fixed_s + s_per_sample · b at every batch: the fixed part added, no floor."""
    _, system, _ = calibrated
    model = harness_model("mlp", width=128)
    line = system.records_fit.compute[0].models[model.name]
    e = _serial(system, model, batch)
    assert e.time_per_iteration_s == pytest.approx(line.fixed_s + batch * line.s_per_sample,
                                                   rel=1e-12)
    assert e.compute_model["step_fixed_s"] == line.fixed_s
    assert "compute measured (mlp-w128, torch fp32 cpu line: fixed + per sample)" in e.calibration


def test_an_unmeasured_model_follows_the_law(calibrated):
    _, system, _ = calibrated
    law = system.records_fit.compute[0].law
    model = harness_model("cnn", width=32)
    assert model.name not in system.records_fit.compute[0].models
    for batch in (4, 64):
        e = _serial(system, model, batch)
        assert e.time_per_iteration_s == pytest.approx(law_time_s(law, model, batch), rel=1e-9)
        # and the law recovers the constants the records were made from
        assert e.time_per_iteration_s == pytest.approx(law_time_s(TRUE_LAW, model, batch),
                                                       rel=2e-3)
    assert "compute law (torch fp32 cpu: per layer kind, parameter, MAC, patch and activation)" \
        in e.calibration


def test_framework_and_precision_choose_the_fit(calibrated):
    _, system, _ = calibrated
    model = harness_model("mlp", width=128)
    line = system.records_fit.compute[0].models[model.name]
    # a framework without fits: no measurement applies, FLOPs it is
    other = _serial(system, model, 16, framework="chainer")
    assert "compute from FLOPs" in other.calibration
    # another precision: the training precision's line, per-sample part scaled by the
    # sustained rates (equal on this CPU), the fixed part as measured
    bf16 = _serial(system, model, 16, precision="bf16")
    assert "scaled to bf16" in bf16.calibration
    assert bf16.compute_model["step_fixed_s"] == line.fixed_s


def test_model_calibration_fixed_s_is_added_not_a_floor():
    base = load_system("laptop-cpu")
    mlp = harness_model("mlp")
    mc = ModelCalibration(s_per_sample=1e-5, fixed_s=2e-3, batch=16, input_shape="1x8x8",
                          forward_flops=float(mlp.forward_flops))
    system = base.model_copy(update={"calibration": Calibration(models={"mlp": mc})})
    for batch in (1, 8, 1000):
        e = _serial(system, mlp, batch)
        assert e.time_per_iteration_s == pytest.approx(2e-3 + 1e-5 * batch, rel=1e-12)
    assert "compute measured (mlp: fixed + per sample)" in e.calibration
    # data parallel: each rank's local batch on its line
    dp = estimate(Request(model=mlp, system=system, strategy="data", gpus=2, global_batch=64))
    assert dp.compute_s == pytest.approx(2e-3 + 1e-5 * 32, rel=1e-12)


@pytest.mark.parametrize("library", ["gloo", "mpi"])
def test_collectives_use_the_backends_fitted_alpha_beta(calibrated, library):
    _, system, _ = calibrated
    network = system.network.model_copy(update={"library": library})
    system = system.model_copy(update={"network": network})
    model = harness_model("mlp", width=512)
    e = estimate(Request(model=model, system=system, strategy="data", gpus=2, global_batch=32))
    (grad,) = e.collectives
    alpha, bw = ALPHA_BETA[library]
    nbytes = model.parameters * 4
    assert grad["tier"] == "loopback"
    assert grad["time_s"] == pytest.approx(2 * alpha + nbytes / bw, rel=1e-4)
    assert f"network α–β fitted ({library}: loopback)" in e.calibration
    # 4 ranks: the same α–β on the same tier, the ring's steps and bytes
    e4 = estimate(Request(model=model, system=system, strategy="data", gpus=4, global_batch=32))
    assert e4.collectives[0]["time_s"] == pytest.approx(6 * alpha + 1.5 * nbytes / bw, rel=1e-4)


def test_a_library_the_records_did_not_measure_stays_nominal(calibrated):
    _, system, _ = calibrated
    nccl = system.model_copy(update={"network": system.network.model_copy(
        update={"library": "nccl-2.18"})})
    base = load_system("laptop-cpu")
    base = base.model_copy(update={"network": base.network.model_copy(
        update={"library": "nccl-2.18"})})
    model = harness_model("mlp", width=512)
    got, nominal = (estimate(Request(model=model, system=s, strategy="data", gpus=2,
                                     global_batch=32)) for s in (nccl, base))
    assert got.collectives == nominal.collectives
    assert "α–β fitted" not in got.calibration


def test_checkpoints_use_the_fitted_storage_of_a_format(calibrated):
    _, system, _ = calibrated
    fit = system.records_fit
    model = harness_model("mlp", width=128)
    state = state_bytes(model.parameters, "momentum", "fp32")
    e = _serial(system, model, 16)
    harness = fit.storage_for("torch", "harness")
    assert fit.checkpoint_format == "harness"
    c = e.checkpoint
    assert c["basis"].startswith("fitted torch harness")
    disk = bytes_on_disk(harness, state)
    assert c["write_s"] == pytest.approx(harness.save_latency_s + disk / (harness.write_GBps * 1e9),
                                         rel=1e-12)
    assert c["read_s"] == pytest.approx(harness.load_latency_s + disk / (harness.read_GBps * 1e9),
                                        rel=1e-12)
    assert c["device_to_host_s"] == 0.0 and c["fsync_s"] == 0.0 and c["transfer_s"] == 0.0
    saved = _serial(system, model, 16, checkpoint_format="torch.save").checkpoint
    assert saved["basis"].startswith("fitted torch torch.save")
    assert saved["write_s"] < c["write_s"]
    physics = _serial(system, model, 16, checkpoint_format="no-such-format").checkpoint
    assert physics["basis"] == "physics"
    assert _serial(load_system("laptop-cpu"), model, 16).checkpoint["basis"] == "physics"


def test_fitted_checkpoints_add_only_what_sharing_the_tier_costs(calibrated):
    """One writer pays its fitted time; four writers on one node-local disk share it
    (each takes four times as long to move its bytes); the fixed latency is paid once."""
    _, system, _ = calibrated
    fit = system.records_fit.storage_for("torch", "harness")
    one = checkpoint_cost(1e8, 1, 4, system.storage, writers="single", tier="node-local",
                          fitted=fit)
    four = checkpoint_cost(1e8, 1, 4, system.storage, writers="all", tier="node-local",
                           fitted=fit)
    assert four.serialize_s == one.serialize_s
    assert four.transfer_s == pytest.approx(3 * one.serialize_s, rel=1e-12)
    assert four.write_s == pytest.approx(one.write_s + 3 * one.serialize_s, rel=1e-12)
    assert four.metadata_s == one.metadata_s == fit.save_latency_s


def test_default_restart_comes_from_the_restart_fit(calibrated):
    _, system, _ = calibrated
    assert default_restart_s(system) == pytest.approx(sum(RESTART.values()) + RESTART_OTHER_S,
                                                      rel=1e-5)
    assert default_restart_s(system, "chainer") is None
    assert default_restart_s(load_system("laptop-cpu")) is None


def test_paradl_rules_ignore_the_fitted_section(calibrated):
    _, system, _ = calibrated
    model = harness_model("mlp", width=128)
    bare = system.model_copy(update={"calibration": None})
    for strategy, gpus in (("serial", 1), ("data", 2)):
        got, ref = (estimate(Request(model=model, system=s, strategy=strategy, gpus=gpus,
                                     global_batch=16, mode="paradl")) for s in (system, bare))
        assert got.time_per_iteration_s == ref.time_per_iteration_s


def test_bench_prediction_on_a_calibrated_profile(benchmark, calibrated):
    _, system, _ = calibrated
    req = Request(model=harness_model("resnet18cifar", width=16), system=system,
                  strategy="data", gpus=4, global_batch=64)
    estimate(req)
    result = benchmark(estimate, req)
    assert "compute law" in result.calibration
    # the median of 50 single calls: one stall of a loaded machine moves a mean of 50
    # by 10 ms (seen once), not the median
    calls = []
    for _ in range(50):
        start = time.perf_counter()
        estimate(req)
        calls.append(time.perf_counter() - start)
    at_most(benchmark, mean_s(benchmark, statistics.median(calls)), 1e-3,
            "one prediction on a calibrated profile")
