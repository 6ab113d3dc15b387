"""``testbed precision-study`` as a user runs it: JSON, table, plot, and bad input (one
line, exit status 2, no traceback, nothing written)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests.conftest import run_cli


@pytest.mark.frameworks
def test_json_table_and_plot(tmp_path):
    plot = tmp_path / "acc.png"
    r = run_cli("precision-study", "--dataset", "hurricanes", "--precisions", "fp16,int4",
                "--seeds", "1", "--json", "--plot", str(plot))
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert [p["precision"] for p in d["precisions"]] == ["fp64", "fp16", "int4"]
    assert d["precisions"][2]["bytes_per_value"] == 0.5
    assert d["baseline"]["accuracy_change_pp"] == 0
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.frameworks
def test_csv_regression_table(tmp_path):
    rng = np.random.default_rng(5)
    rows = ["u,v,y"] + [f"{a:.4f},{b:.4f},{3 * a - b:.4f}" for a, b in rng.normal(size=(24, 2))]
    path = tmp_path / "reg.csv"
    path.write_text("\n".join(rows) + "\n")
    r = run_cli("precision-study", "--dataset", str(path), "--target", "y", "--precisions",
                "bf16", "--seeds", "1")
    assert r.returncode == 0, r.stderr
    assert "regression" in r.stdout and "R²" in r.stdout and "bf16" in r.stdout


@pytest.mark.parametrize("args, field", [
    (["--dataset", "hurricanes", "--precisions", "fp8"], "--precisions"),
    (["--dataset", "hurricanes", "--precisions", "int17"], "--precisions"),
    (["--dataset", "hurricanes", "--precisions", "int1"], "--precisions"),
    (["--dataset", "sunspots"], "--dataset"),
    (["--dataset", "hurricanes", "--seeds", "0"], "--seeds"),
    (["--dataset", "hurricanes", "--seeds", "many"], "--seeds"),
    (["--dataset", "hurricanes", "--target", "max_wind_kt"], "--target"),
    (["--dataset", "hurricanes", "--framework", "jax"], "--framework"),
])
def test_bad_options_exit_2_naming_the_field(args, field):
    r = run_cli("precision-study", *args)
    assert r.returncode == 2, r.stdout + r.stderr
    assert field in r.stderr and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("body, target, field", [
    ("a,b,y\n" + "1,2,0\n" * 4 + "1,NaN,1\n" + "1,2,0\n" * 4, "y", "b"),
    ("a,b,y\n" + "1,2,0\n" * 4 + "1,,1\n" + "1,2,0\n" * 4, "y", "b"),
    ("a,b,y\n" + "1,2,0\n" * 9, "label", "label"),
    ("a,b,y\n" + "1,x,0\n" * 9, "y", "b"),
])
def test_bad_csv_exits_2_naming_the_column(tmp_path, body, target, field):
    path = tmp_path / "data.csv"
    path.write_text(body)
    plot = tmp_path / "never.png"
    r = run_cli("precision-study", "--dataset", str(path), "--target", target,
                "--plot", str(plot))
    assert r.returncode == 2, r.stdout + r.stderr
    assert field in r.stderr and str(path) in r.stderr and "Traceback" not in r.stderr
    assert not plot.exists()


def test_overflowing_fp16_input_is_refused_before_training(tmp_path):
    rows = ["a,big,y"] + [f"{i},{1e5 * (i + 1)},{i % 2}" for i in range(12)]
    path = tmp_path / "big.csv"
    path.write_text("\n".join(rows) + "\n")
    r = run_cli("precision-study", "--dataset", str(path), "--target", "y", "--precisions",
                "fp16", "--seeds", "1")
    assert r.returncode == 2 and "big" in r.stderr and "overflow fp16" in r.stderr
