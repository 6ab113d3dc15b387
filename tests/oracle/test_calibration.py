"""Calibration from the ABCI measurements: reproducible, accurate in sample, and able
to extrapolate (fit on ≤8 GPUs, predict 16)."""

from __future__ import annotations

import pytest

from testbed.calibration.abci_csv import calibrate, evaluate, holdout, read_measurements
from testbed.errors import InputError, ScenarioError
from testbed.oracle import predict
from testbed.systems.profile import load_system
from tests.conftest import each

TARGETS = ("resnet50", "vgg16")


@pytest.fixture(scope="module")
def fitted(abci_csv):
    return calibrate(abci_csv, load_system("abci-v100"))


def test_committed_profile_is_the_fit_of_the_data(fitted):
    cal, _, _ = fitted
    committed = load_system("abci-v100").calibration
    assert committed is not None, "run `make calibrate` and commit the profile"
    for name, mc in each(cal.models.items()):
        got = committed.models[name]
        assert got.s_per_sample == pytest.approx(mc.s_per_sample, rel=1e-9)
        for tier, eff in mc.network_efficiency.items():
            assert got.network_efficiency[tier] == pytest.approx(eff, abs=2e-3)
        for strat, sc in mc.strategies.items():
            assert got.strategies[strat].compute_scale == pytest.approx(sc.compute_scale, rel=1e-3)


def test_in_sample_accuracy(fitted):
    _, rows, _ = fitted
    scored = [r["accuracy"] for r in rows if r["model"] in TARGETS]
    assert sum(scored) / len(scored) >= 0.97
    assert min(scored) >= 0.95


def test_extrapolation_from_8_to_16_gpus(abci_csv):
    held = holdout(read_measurements(abci_csv), load_system("abci-v100").model_copy(
        update={"calibration": None}))
    rows = [r for r in held["rows"] if r["model"] in TARGETS]
    assert len(rows) >= 5
    assert sum(r["accuracy"] for r in rows) / len(rows) >= 0.95


def test_communication_grows_beyond_the_calibrated_range():
    """Beyond one rack the all-reduce crosses the 1:3 oversubscribed spine and ring
    latency grows with p: time per iteration at 1,024 GPUs exceeds the 16-GPU value."""
    for model, per_gpu in (("resnet50", 64), ("vgg16", 32)):
        t16 = predict("abci-v100", model, "data", 16, 16 * per_gpu, input_shape=(3, 226, 226))
        t1k = predict("abci-v100", model, "data", 1024, 1024 * per_gpu, input_shape=(3, 226, 226))
        assert t1k.compute_s == pytest.approx(t16.compute_s)
        assert t1k.time_per_iteration_s > 1.1 * t16.time_per_iteration_s


def test_evaluate_uses_the_profile(abci_csv):
    rows = evaluate(read_measurements(abci_csv), load_system("abci-v100"))
    assert all(r["feasible"] for r in rows if r["model"] in TARGETS)


def test_malformed_csv(tmp_path):
    bad = tmp_path / "m.csv"
    bad.write_text("model,strategy,gpus\nresnet50,data,1\n")
    with pytest.raises(InputError, match="missing column"):
        read_measurements(bad)
    bad.write_text("model,strategy,gpus,gpus_per_group,samples_per_gpu,global_batch,"
                   "input_sample_shape,s_per_iter_median\nresnet50,data,x,1,64,64,3x224x224,0.1\n")
    with pytest.raises(ScenarioError, match=r"m.csv:2"):
        read_measurements(bad)


def test_unmeasured_models_and_strategies_use_what_was_learned(fitted):
    """ResNet-152 was never measured: its compute is the per-layer model of the V100
    scaled by the median measured / modelled step of the measured models, its network
    and df factors the models' medians; a measured model keeps its own numbers and says
    so."""
    cal, _, _ = fitted
    system = load_system("abci-v100")
    bare = system.model_copy(update={"calibration": None})
    ratios = sorted(m.s_per_sample * m.batch / predict(bare, name, "serial", 1, m.batch,
                                                       input_shape=(3, 226, 226)).compute_s
                    for name, m in cal.models.items())
    assert cal.compute_scale["fp32"] == pytest.approx(ratios[len(ratios) // 2], abs=1e-4)
    # the per-layer V100 model (fitted on DeepLearningExamples' PyTorch table, not on
    # ABCI) predicts Chainer's measured steps within 20 %
    assert 0.8 < cal.compute_scale["fp32"] < 1.25
    e = predict(system, "resnet152", "serial", 1, 32)
    plain = predict(bare, "resnet152", "serial", 1, 32)
    assert e.compute_s == pytest.approx(plain.compute_s * system.calibration.compute_scale["fp32"])
    assert "fitted scale" in e.calibration
    df = predict(system, "resnet152", "df", 16, 256, group_size=4)
    assert "df factors median of models" in df.calibration
    own = predict(system, "resnet50", "df", 16, 256, group_size=4)
    assert "compute measured (resnet50)" in own.calibration
    assert "df factors measured" in own.calibration
    paradl = predict(system, "resnet50", "data", 2, 128, mode="paradl")
    assert paradl.calibration == "ParaDL rules"
