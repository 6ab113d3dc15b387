"""``testbed study precision --quick`` end to end (real PyTorch training on the shipped
hurricane series and scikit-learn's bundled digits), and the verdict rule on known
intervals."""

from __future__ import annotations

import json

import numpy as np
import pytest

from real_runs.precision.data import digits, hurricanes
from testbed.app.study.prec_results import PrecisionStat
from testbed.app.study.precision import QUICK, task_verdict
from testbed.precision.inference import Interval, PairedTest
from tests.conftest import each, run_cli


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    out = tmp_path_factory.mktemp("study") / "prec"
    r = run_cli("study", "precision", "--quick", "-o", str(out), timeout=240)
    assert r.returncode == 0, r.stderr
    return r.stdout, json.loads((out / "study.json").read_text()), out


@pytest.mark.frameworks
def test_hurricanes_baselines_skill_and_verdict(quick):
    text, study, _ = quick
    task = next(t for t in study["tasks"] if t["task"] == "hurricanes")
    data = hurricanes()
    base = {b["name"].split(":")[0]: b for b in task["baselines"]}
    # baselines scored on the 120 test months, exactly
    assert base["climatology"]["accuracy"]["mean"] == pytest.approx(86 / 120)
    assert base["zero"]["accuracy"]["mean"] == pytest.approx(np.mean(data.y_test == 0))
    persistence = np.mean(data.x_test[:, 3] == data.y_test)
    assert base["persistence"]["accuracy"]["mean"] == pytest.approx(persistence)
    assert task["blocks"] == 10 and task["block_name"] == "year"
    # the network does not beat climatology, so the claim cannot be judged
    assert not task["has_skill"] and task["skill_pp"]["difference"]["low"] <= 0
    assert task["verdict"]["verdict"] == "undecided"
    assert "no accuracy to lose" in task["verdict"]["evidence"]
    assert any("before 1979" in d for d in task["disclosures"])
    assert any("counts in both" in d for d in task["disclosures"])
    assert task["sensitivity"][0]["split"].startswith("train 1979")
    assert "sensitivity: fp64, trained without the years before 1979" in text
    for line in ("climatology", "persistence", "zero", "what the data cannot show"):
        assert line in text


@pytest.mark.frameworks
def test_digits_has_skill_and_the_claim_is_judged(quick):
    text, study, out = quick
    task = next(t for t in study["tasks"] if t["task"] == "digits")
    base = {b["name"]: b for b in task["baselines"]}
    assert base["the most frequent training class"]["accuracy"]["mean"] < 0.15
    assert task["has_skill"] and task["skill_pp"]["difference"]["low"] > 0
    stats = {s["precision"]: s for s in task["precisions"]}
    assert list(stats) == ["fp64", "fp16", "int8", "int2"]
    assert stats["fp16"]["max_abs_error"] == 0                    # integer pixels: exact
    assert stats["fp16"]["change_pp"]["difference"]["mean"] == 0
    for name in each(["fp16", "int8"], 2):
        s = stats[name]
        assert s["in_claim"] and s["within_tolerance"] == "supported"
        assert s["change_pp"]["difference"]["low"] > -2.0
        section = text[text.index("\ndigits:"):]
        row = next(line for line in section.splitlines() if line.startswith(f"{name} *"))
        assert f"{100 * s['accuracy']['mean']:.2f}" in row
    assert task["verdict"]["verdict"] == "supported"
    curves = {c["precision"]: c for c in task["curves"]}
    assert len(curves["fp64"]["epochs"]) == 40
    assert curves["fp64"]["accuracy"][-1] == pytest.approx(stats["fp64"]["accuracy"]["mean"])
    for name in ("paired.png", "accuracy-digits.png", "curves-hurricanes.png"):
        assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "SUPPORTED" in text and "UNDECIDED" in text


@pytest.mark.frameworks
def test_breast_cancer_rounds_the_inputs_and_keeps_the_accuracy(quick):
    _, study, _ = quick
    task = next(t for t in study["tasks"] if t["task"] == "breast-cancer")
    stats = {s["precision"]: s for s in task["precisions"]}
    assert stats["fp16"]["max_abs_error"] > 0          # real-valued: fp16 rounds them
    assert stats["fp16"]["max_rel_error"] <= 2.0**-11  # … by at most half an ulp
    assert task["has_skill"] and task["verdict"]["verdict"] == "supported"
    assert stats["int2"]["accuracy"]["mean"] < stats["fp64"]["accuracy"]["mean"]


def _stat(name, low, high, in_claim=True):
    mean = (low + high) / 2
    verdict = "supported" if low > -2 else "contradicted" if high < -2 else "undecided"
    return PrecisionStat(precision=name, kind="float", bits_per_value=16, bytes_per_value=2,
                         max_abs_error=0.0, max_rel_error=0.0, accuracy=None, mae=None,
                         change_pp=PairedTest(Interval(mean, low, high), 0.5, 10, 3),
                         mae_change=None, within_tolerance=verdict, in_claim=in_claim)


SKILL = PairedTest(Interval(5.0, 2.0, 8.0), 0.001, 100, 3)
NO_SKILL = PairedTest(Interval(-1.0, -4.0, 2.0), 0.5, 100, 3)


@pytest.mark.parametrize("skill, stats, verdict", [
    (SKILL, [_stat("fp16", -0.5, 0.4), _stat("int8", -1.5, 0.2)], "supported"),
    (SKILL, [_stat("fp16", -0.5, 0.4), _stat("int8", -5.0, -3.0)], "contradicted"),
    (SKILL, [_stat("fp16", -0.5, 0.4), _stat("int8", -3.0, 0.1)], "undecided"),
    (SKILL, [_stat("int2", -9.0, -5.0, in_claim=False), _stat("fp16", -0.1, 0.1)],
     "supported"),                                    # only claimed precisions count
    (NO_SKILL, [_stat("fp16", -0.5, 0.4)], "undecided"),
])
def test_the_verdict_rule(skill, stats, verdict):
    v = task_verdict("t", QUICK, "best", skill, skill.difference.low > 0, tuple(stats))
    assert v.verdict == verdict and v.scope == "t"


def test_digits_baselines():
    data = digits()
    names = [b.name for b in data.references]
    assert names == ["the most frequent training class",
                     "nearest class mean (training images, fp64)"]
    ncm = np.mean(data.references[1].predictions == data.y_test)
    assert 0.85 < ncm < 0.97          # a real baseline with skill, below the network


@pytest.mark.parametrize("args, field", [
    (["--tasks", "sunspots"], "--tasks"),
    (["--precisions", "fp8"], "--precisions"),
    (["--claim-precisions", "int4"], "--claim-precisions"),
    (["--seeds", "0"], "--seeds"),
    (["--tolerance", "0"], "--tolerance"),
    (["--resamples", "5"], "--resamples"),
])
def test_bad_options_exit_2_in_one_line(args, field, tmp_path):
    r = run_cli("study", "precision", "--quick", *args, "-o", str(tmp_path / "never"))
    assert r.returncode == 2, r.stdout + r.stderr
    assert field in r.stderr and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "never").exists()
