"""The scenario report presents a computed run: deterministic, and its study is the sweep
machinery's (the 1× point equals the scenario's own summary)."""

from __future__ import annotations

import csv

import pytest

from testbed.app.report import build_report
from testbed.app.sweep.studies import run_scenario
from testbed.scenario.schema import load_scenario
from tests.conftest import each
from tests.whatif.conftest import REPO


def test_report_is_deterministic_and_the_study_agrees_with_the_closed_form(tmp_path):
    sc = load_scenario(REPO / "scenarios" / "daly-6h.yaml")
    a = build_report(tmp_path / "a", run_scenario(sc, replications=30))
    b = build_report(tmp_path / "b", run_scenario(sc, replications=30))
    assert [p.name for p in a.plots] == ["breakdown.png", "ettr_interval.png",
                                         "interval_paired.png", "timeline.png"]
    for name in ("summary.csv", "breakdown.csv", "ettr_interval.csv", "interval_paired.csv",
                 "events.jsonl",
                 "summary.json", "index.html", *[p.name for p in a.plots]):
        assert (a.out_dir / name).read_bytes() == (b.out_dir / name).read_bytes(), name
    rows = list(csv.DictReader((a.out_dir / "ettr_interval.csv").open()))
    assert len(rows) == 9
    # Daly's interval (the scenario's) is at the top of the simulated curve (within its
    # CI) and the closed form agrees with the simulation at every interval (within 1%)
    best = max(rows, key=lambda r: float(r["ettr_mean"]))
    daly = next(r for r in rows if float(r["multiple"]) == 1.0)
    assert abs(float(daly["interval_s"]) - 3402.78) < 1
    assert float(daly["ettr_ci95_high"]) >= float(best["ettr_mean"])
    for r in each(rows):
        analytic = float(r["wall_s_mean"]) / float(r["analytic_wall_s"])
        assert abs(analytic - 1) < 0.01, r


def test_paired_view_compares_each_interval_with_the_best_on_the_same_draws(tmp_path):
    """The paired table is each point's ETTR minus the best point's, exactly (a ratio of
    sums over the same replications), its interval holds the difference, and the far
    intervals (¼× and 4× Daly's) are worse than the best beyond doubt."""
    sc = load_scenario(REPO / "scenarios" / "daly-6h.yaml")
    files = build_report(tmp_path / "r", run_scenario(sc, replications=30))
    points = {float(r["multiple"]): float(r["ettr_mean"])
              for r in csv.DictReader((files.out_dir / "ettr_interval.csv").open())}
    paired = list(csv.DictReader((files.out_dir / "interval_paired.csv").open()))
    best = max(points, key=lambda m: points[m])
    assert len(paired) == len(points) - 1 == 8
    for r in each(paired, at_least=8):
        m, d = float(r["multiple"]), float(r["ettr_difference"])
        assert float(r["reference_multiple"]) == best and m != best
        assert d == pytest.approx(points[m] - points[best], abs=1e-12)
        assert float(r["ci95_low"]) <= d <= float(r["ci95_high"]) and int(r["pairs"]) == 30
    far = {float(r["multiple"]): float(r["ci95_high"]) for r in paired}
    assert far[0.25] < 0 and far[4.0] < 0
    assert "Which intervals are worse" in files.html.read_text()


def test_study_one_times_point_is_the_scenario_summary():
    """The interval study runs through the sweep machinery with the scenario's
    replications and seed, so its 1× point reproduces the summary exactly."""
    sc = load_scenario(REPO / "scenarios" / "quickstart.yaml")
    run = run_scenario(sc, replications=60, events=False)
    one = next(p for p in run.study.points if p.multiple == 1.0)
    assert one.stats.ettr == run.summary.stats.ettr
    assert one.stats.wall_time_s == run.summary.stats.wall_time_s
    assert one.stats.breakdown_s == run.summary.stats.breakdown_s
    assert run.study.replications == 60


def test_report_of_a_run_with_strategies(tmp_path):
    sc = load_scenario(REPO / "scenarios" / "quickstart.yaml")
    files = build_report(tmp_path / "r", run_scenario(sc, replications=20, study=False))
    assert {p.name for p in files.plots} == {"breakdown.png", "ettr_interval.png",
                                             "checkpoint_cost.png", "timeline.png",
                                             "strategies.png"}
    strategies = list(csv.DictReader((files.out_dir / "strategies.csv").open()))
    assert {r["strategy"] for r in strategies} >= {"data"}
    html = files.html.read_text()
    assert html.count("<img ") == 5 and "20 replications" in html
    cost = list(csv.DictReader((files.out_dir / "checkpoint_cost.csv").open()))
    terms = {r["term"]: float(r["seconds"]) for r in cost}
    assert terms["write_s"] == pytest.approx(sum(terms[k] for k in (
        "device_to_host_s", "serialize_s", "transfer_s", "metadata_s", "fsync_s")))


def test_report_of_an_input_precision_scenario_compares_with_fp32(tmp_path):
    """The CosmoFlow scenario is input-bound at fp32: the report's panel shows the fp16
    speed-up (issue: "a scenario whose iteration is input-bound shows the speed-up")."""
    sc = load_scenario(REPO / "scenarios" / "cosmoflow-input-precision.yaml")
    run = run_scenario(sc, replications=10, study=False, events=False)
    c = run.input_precision
    assert c.scenario.input_precision == "fp16" and c.baseline.input_precision == "fp32"
    assert c.scenario.input_bytes_per_sample * 2 == c.baseline.input_bytes_per_sample
    assert c.baseline.bottleneck == "io" and c.speedup > 1.3
    files = build_report(tmp_path / "r", run)
    assert "input_precision.png" in {p.name for p in files.plots}
