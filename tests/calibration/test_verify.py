"""Verification: ParaDL's accuracy and the other figures, hold-out refits, the CLI."""

from __future__ import annotations

import json

import pytest

from testbed.calibration.fit import fit_records
from testbed.calibration.metrics import accuracy, mape_pct, rank_correlation
from testbed.calibration.profile import load_calibrated
from testbed.calibration.records import load_records
from testbed.calibration.verify import group_key, verify
from testbed.model.zoo.harness import harness_model
from tests.calibration.conftest import one_line_error, run_testbed, train_record, write_lines
from tests.calibration.test_fits import BATCHES, MODELS, TRUE_LAW, _synthetic_train


def test_accuracy_figures():
    assert accuracy(2.0, 1.0) == 0.5 and accuracy(1.0, 2.0) == 0.5   # symmetric
    assert accuracy(0.0, 1.0) == 0.0 and accuracy(float("inf"), 1.0) == 0.0
    assert mape_pct([1.1, 0.9], [1.0, 1.0]) == pytest.approx(10.0)
    assert rank_correlation([1, 2, 3], [10, 20, 30]) == pytest.approx(1.0)
    assert rank_correlation([3, 2, 1], [10, 20, 30]) == pytest.approx(-1.0)
    assert rank_correlation([1, 2], [1, 2]) is None


def test_holdout_groups():
    rec = train_record("cnn", 32, 16, 1e-3)
    assert group_key(rec, "by-batch", 0) == "batch:16"
    assert group_key(rec, "by-model", 0) == "model:cnn"
    assert group_key(rec, "loo", 7) == "record:7"


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory):
    root = tmp_path_factory.mktemp("verify")
    records = write_lines(root / "fit.jsonl", _synthetic_train())
    result = fit_records(load_records([records]), load_calibrated("laptop-cpu"))
    profile = root / "profile.yaml"
    profile.write_text(result.text)
    return root, records, profile


def test_exact_synthetic_data_verify_perfectly_in_and_out_of_sample(synthetic):
    _, records, profile = synthetic
    prof = load_calibrated(profile)
    rs = load_records([records])
    for holdout in ("none", "by-batch", "by-model", "loo"):
        report = verify(rs, prof.system, prof.fit, holdout=holdout)
        q = report.quantities["torch_step_s"]
        assert q.n == len(MODELS) * len(BATCHES), holdout
        assert q.accuracy == pytest.approx(1.0, abs=2e-3), holdout
        assert q.rank_correlation == pytest.approx(1.0, abs=1e-3)


def test_holdout_is_really_out_of_sample(tmp_path):
    # one model measured with a per-step cost its layers do not explain: in sample its
    # own line fits it, left out the law (fitted on the others) cannot
    recs = _synthetic_train()
    odd = harness_model("mlp", width=128)
    from testbed.calibration.compute import law_time_s
    recs = [r if (r.config.model, r.config.model_options["width"]) != ("mlp", 128) else
            train_record("mlp", 128, r.config.batch_size,
                         law_time_s(TRUE_LAW, odd, r.config.batch_size) + 2e-3)
            for r in recs]
    path = write_lines(tmp_path / "r.jsonl", recs)
    result = fit_records(load_records([path]), load_calibrated("laptop-cpu"))
    profile = tmp_path / "p.yaml"
    profile.write_text(result.text)
    prof = load_calibrated(profile)
    rs = load_records([path])
    inside = verify(rs, prof.system, prof.fit, holdout="none").rows
    outside = verify(rs, prof.system, prof.fit, holdout="by-model").rows
    odd_in = [r.accuracy for r in inside if "mlp-w128" in r.label]
    odd_out = [r.accuracy for r in outside if "mlp-w128" in r.label]
    assert min(odd_in) > 0.999 and max(odd_out) < 0.9


def test_verify_cli_json_and_plot(synthetic):
    root, records, profile = synthetic
    plot = root / "scatter.png"
    proc = run_testbed("verify", str(profile), str(records), "--holdout", "by-batch", "--json",
                       "--plot", str(plot))
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    q = data["quantities"]["torch_step_s"]
    assert {"accuracy", "mape", "n", "rank_correlation", "worst"} <= set(q)
    assert q["n"] == 18 and data["holdout"] == "by-batch"
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    table = run_testbed("verify", str(profile), str(records), "--in-sample")
    assert table.returncode == 0 and "torch_step_s" in table.stdout


def test_verify_bad_input(synthetic, tmp_path):
    _, records, profile = synthetic
    bad = tmp_path / "bad.jsonl"
    bad.write_text(records.read_text().replace('"schema_version":1', '"schema_version":9', 1))
    line = one_line_error(run_testbed("verify", str(profile), str(bad)))
    assert f"{bad}:1" in line and "schema version 9" in line
    line = one_line_error(run_testbed("verify", str(profile), str(records), "--plot",
                                      str(tmp_path / "no" / "p.png")))
    assert "--plot" in line and "folder" in line
    assert "holdout" in run_testbed("verify", str(profile), str(records), "--holdout",
                                    "sideways").stderr
    # the records the profile was fitted on: refused without --in-sample or a refit
    line = one_line_error(run_testbed("verify", str(profile), str(records)))
    assert str(records) in line and "in sample" in line
