"""``build_report`` with what ``testbed run`` has at hand, and its determinism."""

from __future__ import annotations

import csv

from testbed.cli.run import oracle_comparison
from testbed.report import build_report
from testbed.scenario import load_scenario
from tests.whatif.conftest import REPO


def test_build_report_from_run_inputs_is_deterministic(tmp_path):
    sc = load_scenario(REPO / "scenarios" / "daly-6h.yaml")
    a = build_report(tmp_path / "a", scenario=sc, study_replications=30)
    b = build_report(tmp_path / "b", scenario=sc, study_replications=30)
    assert [p.name for p in a.plots] == ["breakdown.png", "ettr_interval.png", "timeline.png"]
    for name in ("summary.csv", "breakdown.csv", "ettr_interval.csv", "events.jsonl",
                 "summary.json", "index.html", *[p.name for p in a.plots]):
        assert (a.out_dir / name).read_bytes() == (b.out_dir / name).read_bytes(), name
    rows = list(csv.DictReader((a.out_dir / "ettr_interval.csv").open()))
    assert len(rows) == 9
    # Daly's interval is at the top of the simulated curve (within its CI) and the
    # closed form agrees with the simulation at every interval (within 1%)
    best = max(rows, key=lambda r: float(r["ettr_mean"]))
    daly = next(r for r in rows if abs(float(r["interval_s"]) - 3402.78) < 1)
    assert float(daly["ettr_ci95_high"]) >= float(best["ettr_mean"])
    for r in rows:
        analytic = float(r["wall_s_mean"]) / float(r["analytic_wall_s"])
        assert abs(analytic - 1) < 0.01, r


def test_build_report_takes_the_oracle_comparison_and_a_summary(tmp_path):
    sc = load_scenario(REPO / "scenarios" / "quickstart.yaml")
    comparison = oracle_comparison(sc)
    from testbed.cli.simulate import run_simulation
    summary = run_simulation(sc, replications=20)
    files = build_report(tmp_path / "r", scenario=sc, oracle=comparison, simulation=summary,
                         study=False)
    assert {p.name for p in files.plots} == {"breakdown.png", "ettr_interval.png",
                                             "timeline.png", "strategies.png"}
    strategies = list(csv.DictReader((files.out_dir / "strategies.csv").open()))
    assert {r["strategy"] for r in strategies} >= {"data"}
    html = files.html.read_text()
    assert html.count("<img ") == 4 and "20 replications" in html
