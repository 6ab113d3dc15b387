"""``testbed study oracle``: ParaDL mode on the shipped ABCI runs (the accuracies
``testbed calibrate`` wrote into the abci-v100 profile, recomputed row by row), the
testbed's own records (fit set vs hold-out set), the verdict rule, and bad input."""

from __future__ import annotations

import json

import numpy as np
import pytest
import yaml

from testbed.app.study.oracle import (
    FITTED,
    HELD_OUT,
    PAPER_ACCURACY,
    OracleRow,
    judge,
)
from testbed.systems.profile import profile_path
from tests.conftest import ABCI_CSV, REPO, each, run_cli

VM = REPO / "traces" / "measurements" / "vm"


def _stored_accuracy() -> dict:
    """What ``testbed calibrate`` stored in the shipped profile (a separate code path)."""
    return yaml.safe_load(profile_path("abci-v100").read_text())["calibration"]["accuracy"]


@pytest.fixture(scope="module")
def paradl(tmp_path_factory):
    out = tmp_path_factory.mktemp("study") / "oracle"
    r = run_cli("study", "oracle", str(ABCI_CSV), "-o", str(out), "--json", timeout=120)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout), out


def _group(study, split, by, name):
    return next(g for g in study["groups"] if (g["split"], g["by"], g["name"]) == (split, by, name))


def test_paradl_mode_reproduces_the_profiles_accuracy(paradl):
    study, out = paradl
    assert study["mode"] == "paradl" and study["records"] == 31 and study["not_covered"] == 0
    rows = study["rows"]
    fitted = [r for r in rows if r["split"] == FITTED]
    held = [r for r in rows if r["split"] == HELD_OUT]
    # by-gpus: the ≤8-GPU runs stay in the fit, the 16-GPU runs are predicted by a refit
    assert len(fitted) == 22 and len(held) == 9
    assert {r["gpus"] for r in held} == {16} and max(r["gpus"] for r in fitted) <= 8
    for r in each(rows, 31):     # ParaDL's metric, row by row
        p, m = r["predicted_s"], r["measured_s"]
        assert r["accuracy"] == pytest.approx(min(p, m) / max(p, m), abs=1e-4)
        assert r["accuracy_rel"] == pytest.approx(1 - abs(p - m) / m, abs=1e-4)
    g = _group(study, HELD_OUT, "all", "training (all)")
    assert g["accuracy"] == pytest.approx(np.mean([r["accuracy"] for r in held]), abs=1e-4)
    # the 16-from-≤8 hold-out accuracy `testbed calibrate` stored in abci-v100
    assert g["accuracy"] == pytest.approx(_stored_accuracy()["holdout_16_from_le8_mean"],
                                          abs=1e-4)
    per_strategy = {x["name"]: x for x in study["groups"]
                    if x["split"] == HELD_OUT and x["by"] == "strategy"}
    assert set(per_strategy) == {"data", "ds", "df"}
    assert sum(x["n"] for x in per_strategy.values()) == 9
    # AlexNet's I/O-bound 16-GPU data-parallel run is the worst prediction
    worst = min(held, key=lambda r: r["accuracy"])
    assert (worst["model"], worst["strategy"], worst["gpus"]) == ("alexnet", "data", 16)
    claim = study["claims"][0]
    assert claim["verdict"] == "undecided"      # 9 rows: the interval straddles 86.74%
    assert g["ci95_low"] < PAPER_ACCURACY < g["ci95_high"]
    assert {p.name for p in out.iterdir()} >= {"study.json", "rows.csv", "groups.csv",
                                               "summary.txt", "predicted_vs_measured.png",
                                               "accuracy_by_group.png"}


def test_holdout_none_is_the_in_sample_fit():
    r = run_cli("study", "oracle", str(ABCI_CSV), "--holdout", "none", "--json")
    assert r.returncode == 0, r.stderr
    study = json.loads(r.stdout)
    assert all(row["split"] == FITTED for row in study["rows"])
    g = _group(study, FITTED, "all", "training (all)")
    assert g["n"] == 31
    assert g["accuracy"] == pytest.approx(_stored_accuracy()["in_sample_mean"], abs=1e-4)
    assert study["claims"][0]["verdict"] == "undecided"
    assert "0 held-out parallel" in study["claims"][0]["evidence"]


def test_own_records_split_by_the_profiles_fit_set():
    r = run_cli("study", "oracle", str(VM / "fit.jsonl"), str(VM / "holdout.jsonl"),
                "--profile", str(VM / "profile.yaml"), "--json")
    assert r.returncode == 0, r.stderr
    study = json.loads(r.stdout)
    assert study["mode"] == "records"
    for row in each(study["rows"], 100):
        expected = FITTED if row["file"].endswith("fit.jsonl") else HELD_OUT
        assert row["split"] == expected
    held_parallel = [x for x in study["rows"] if x["split"] == HELD_OUT and x["gpus"] > 1
                     and x["quantity"].endswith("_step_s")]
    claim = study["claims"][0]
    if len(held_parallel) < 3:
        assert claim["verdict"] == "undecided"
        assert f"{len(held_parallel)} held-out parallel" in claim["evidence"]
    else:
        assert claim["verdict"] in ("supported", "contradicted", "undecided")
    assert {g["by"] for g in study["groups"]} >= {"all", "strategy", "model", "quantity"}


def _row(acc: float, gpus: int = 4, split: str = HELD_OUT) -> OracleRow:
    return OracleRow(file="f", line=1, quantity="paradl_iteration_s", label="x", model="m",
                     strategy="data", gpus=gpus, measured_s=1.0, predicted_s=acc,
                     accuracy=acc, accuracy_rel=acc, split=split, basis="test")


def test_the_verdict_rule():
    assert judge([_row(a) for a in (0.95, 0.96, 0.97, 0.95)], PAPER_ACCURACY).verdict \
        == "supported"
    assert judge([_row(a) for a in (0.50, 0.52, 0.51, 0.49)], PAPER_ACCURACY).verdict \
        == "contradicted"
    assert judge([_row(a) for a in (0.6, 0.99, 0.8, 0.95)], PAPER_ACCURACY).verdict \
        == "undecided"
    # too few held-out parallel rows; serial and fitted rows never count
    few = [_row(0.99), _row(0.99), _row(0.99, gpus=1), _row(0.99, split=FITTED)]
    v = judge(few, PAPER_ACCURACY)
    assert v.verdict == "undecided" and "2 held-out parallel" in v.evidence


@pytest.mark.parametrize("args, needle", [
    (("--max-fit-gpus", "0"), "--max-fit-gpus"),
    (("--target", "1.5"), "--target"),
])
def test_bad_options_are_one_line(args, needle):
    r = run_cli("study", "oracle", str(ABCI_CSV), *args)
    assert r.returncode == 2 and needle in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr


def test_own_records_need_a_profile():
    r = run_cli("study", "oracle", str(VM / "holdout.jsonl"))
    assert r.returncode == 2 and "--profile" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_paradl_records_are_matched_to_the_fit_set_by_content(paradl, tmp_path):
    records = tmp_path / "abci.jsonl"
    r = run_cli("records", "import-paradl", str(ABCI_CSV), "-o", str(records))
    assert r.returncode == 0, r.stderr
    r = run_cli("study", "oracle", str(records), "--json")
    assert r.returncode == 0, r.stderr
    study = json.loads(r.stdout)
    assert study["groups"] == paradl[0]["groups"]      # the same split, the same scores
