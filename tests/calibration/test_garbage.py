"""Calibration refuses garbage (issue 9): non-finite or implausible measurements are one
line naming the file, line and column; nothing is written; a fit that would not be
finite is never written; the command says which models it fitted, dropped and kept,
and a profile's other models' calibration survives a fit of some of them."""

from __future__ import annotations

import json
import shutil

import pytest

from testbed.calibration.plausible import MAX_DURATION_S, MIN_DURATION_S
from testbed.measurements import record_dict
from testbed.systems.profile import load_system
from tests.calibration.conftest import one_line_error, run_testbed, train_record, write_lines

HEADER = ("model,strategy,gpus,gpus_per_group,samples_per_gpu,global_batch,input_sample_shape,"
          "s_per_iter_median\n")
GOOD = ("resnet50,data,1,1,32,32,3x224x224,0.11\n"
        "resnet50,data,4,1,32,128,3x224x224,0.13\n")
ABCI_PROFILE = "testbed/data/systems/abci-v100.yaml"


@pytest.mark.parametrize("row, column", [
    ("resnet50,data,1,1,32,32,3x224x224,inf", "s_per_iter_median"),
    ("resnet50,data,1,1,32,32,3x224x224,nan", "s_per_iter_median"),
    ("resnet50,data,1,1,32,32,3x224x224,1e-300", "s_per_iter_median"),
    ("resnet50,data,1,1,32,32,3x224x224,1e300", "s_per_iter_median"),
    ("resnet50,data,1000000000000,1,32,32,3x224x224,0.1", "gpus"),
    ("resnet50,data,1,1,32,32,3x0x224,0.1", "input_sample_shape"),
])
def test_garbage_in_the_csv_is_refused_naming_file_line_and_column(tmp_path, row, column):
    csv = tmp_path / "m.csv"
    csv.write_text(HEADER + GOOD + row + "\n")
    profile = tmp_path / "abci.yaml"
    shutil.copy(ABCI_PROFILE, profile)
    before = profile.read_bytes()
    commands = [["calibrate", str(csv), "--system", str(profile)]]
    if "1e300" in row:      # every reader of the CSV refuses it the same way
        commands += [["oracle", "verify", str(csv), "--system", "abci-v100"],
                     ["records", "import-paradl", str(csv), "-o", str(tmp_path / "r.jsonl")]]
    for args in commands:
        line = one_line_error(run_testbed(*args))
        assert f"{csv}:4" in line and column in line, line
    assert profile.read_bytes() == before and not (tmp_path / "r.jsonl").exists()


def test_garbage_records_are_refused_and_the_profile_untouched(tmp_path):
    assert MIN_DURATION_S <= 2e-6 and MAX_DURATION_S >= 54 * 86400   # real extremes pass
    good = [train_record("mlp", 32, b, 1e-3 + b * 1e-5) for b in (4, 16)]
    out = tmp_path / "p.yaml"
    out.write_text("untouched\n")
    for step_s, key in ((1e300, "metrics.step_s"), (1e-300, "metrics.step_s")):
        # the schema refuses to build such a record, so the bad line is written raw
        bad = record_dict(train_record("mlp", 32, 64, 1e-3))
        bad["metrics"]["step_s"] = step_s
        path = write_lines(tmp_path / "r.jsonl", good)
        path.write_text(path.read_text() + json.dumps(bad) + "\n")
        line = one_line_error(run_testbed("calibrate", str(path), "--base", "laptop-cpu",
                                          "-o", str(out)))
        assert f"{path}:3" in line and key in line and "implausible" in line, line
        line = one_line_error(run_testbed("records", "check", str(path)))
        assert f"{path}:3" in line
    assert out.read_text() == "untouched\n"


def test_a_fit_without_16_gpu_runs_writes_no_nan_and_keeps_the_other_models(tmp_path):
    """Only resnet50 at ≤ 4 GPUs: no extrapolation to score (no NaN written — the
    profile loads), and the profile's alexnet and vgg16 calibrations are kept, said so."""
    csv = tmp_path / "m.csv"
    csv.write_text(HEADER + GOOD + "vgg16,data,4,1,32,128,3x224x224,0.3\n")
    profile = tmp_path / "abci.yaml"
    shutil.copy(ABCI_PROFILE, profile)
    old = load_system(profile).calibration
    proc = run_testbed("calibrate", str(csv), "--system", str(profile))
    assert proc.returncode == 0, proc.stderr
    assert "fitted 1 model(s): resnet50" in proc.stdout
    assert "dropped: vgg16 (no 1-GPU data-parallel run" in proc.stdout
    assert "kept from the base profile: alexnet, vgg16" in proc.stdout
    cal = load_system(profile).calibration
    assert set(cal.accuracy) == {"in_sample_mean"}
    assert cal.models["vgg16"] == old.models["vgg16"] and cal.models["alexnet"] == old.models["alexnet"]
    assert cal.models["resnet50"].s_per_sample == pytest.approx(0.11 / 32)


def test_a_csv_whose_models_all_drop_is_refused(tmp_path):
    csv = tmp_path / "m.csv"
    csv.write_text(HEADER + "resnet50,data,4,1,32,128,3x224x224,0.13\n")
    line = one_line_error(run_testbed("calibrate", str(csv), "--system", "abci-v100",
                                      "--dry-run"))
    assert "no model could be calibrated" in line and "resnet50" in line and str(csv) in line


def test_the_records_form_says_which_models_it_fitted_and_dropped(tmp_path):
    records = [train_record("mlp", 32, b, 1e-3 + b * 1e-5) for b in (4, 16)]
    records.append(train_record("cnn", 32, 8, 2e-3))          # one batch: no line
    path = write_lines(tmp_path / "r.jsonl", records)
    proc = run_testbed("calibrate", str(path), "--base", "laptop-cpu", "--dry-run")
    assert proc.returncode == 0, proc.stderr
    assert "fitted 1 model(s): mlp" in proc.stdout
    assert "dropped: cnn (fewer than 2 batch sizes" in proc.stdout
