"""What the reports show, as a user reads them: overhead as a share of useful compute,
checkpoint ticks binned, infeasible strategies with their reason, the sweep's axis in
the grid's units, and paired differences where points share random numbers."""

from __future__ import annotations

import csv
import json
import random

from hypothesis import given
from hypothesis import strategies as st

from testbed.app.report import build_report, plots
from testbed.app.report.common import paired_ettr_difference
from testbed.app.report.scenario_report import infeasible_strategies
from testbed.app.report.sweep_report import grid_unit
from testbed.app.sweep.studies import run_scenario
from testbed.scenario.schema import load_scenario
from tests.conftest import each
from tests.whatif.conftest import REPO, run_testbed


def test_overhead_share_is_each_category_over_useful_compute():
    shares = plots.overhead_shares({"useful_s": 100.0, "checkpoint_s": 1.0, "lost_s": 0.5,
                                    "restart_s": 0.25, "waiting_s": 0.25})
    assert shares == {"checkpoint_s": 0.01, "lost_s": 0.005, "restart_s": 0.0025,
                      "waiting_s": 0.0025}
    assert abs(sum(shares.values()) - 0.02) < 1e-15
    assert plots.overhead_shares({"useful_s": 0.0, "lost_s": 5.0})["lost_s"] == 0.0


@given(st.lists(st.floats(0, 1000), max_size=400), st.integers(1, 100))
def test_checkpoint_bins_count_every_commit_once(times, bins):
    end = 1000.0
    got = plots.checkpoint_bins(times, end, bins)
    assert sum(n for _, n in got) == len(times)
    assert len(got) <= bins and all(n > 0 for _, n in got)
    starts = [a for a, _ in got]
    assert starts == sorted(starts) and all(0 <= a < end for a in starts)


def test_grid_unit_is_the_unit_the_user_wrote():
    assert grid_unit(("10min", "30min", "1h")) == (60.0, "min")
    assert grid_unit(("2h", "6h")) == (3600.0, "h")
    assert grid_unit(("600", "1800")) == (1.0, None)
    assert grid_unit(("64GiB",)) == (2.0 ** 30, "GiB")


def test_paired_difference_removes_the_noise_the_points_share():
    """Two points on the same random numbers: point b loses a constant 1 h of a 100 h
    run more than a. The difference is exact with a narrow interval, although each
    point on its own varies by tens of hours; with the pairs broken it is not."""
    rng = random.Random(7)
    a = [(100.0, 100.0 + rng.uniform(0, 60)) for _ in range(50)]
    b = [(u, w + 1.0) for u, w in a]
    d = paired_ettr_difference(b, a)
    ra = sum(u for u, _ in a) / sum(w for _, w in a)
    rb = sum(u for u, _ in b) / sum(w for _, w in b)
    assert abs(d.difference - (rb - ra)) < 1e-15 and d.difference < 0 and d.pairs == 50
    assert d.ci95_high < 0                       # worse beyond doubt
    shuffled = list(b)
    rng.shuffle(shuffled)                        # the same values, pairs broken
    broken = paired_ettr_difference(shuffled, a)
    assert (d.ci95_high - d.ci95_low) < (broken.ci95_high - broken.ci95_low) / 5


def test_the_quickstart_lists_its_infeasible_strategies_with_reasons(tmp_path):
    sc = load_scenario(REPO / "scenarios" / "quickstart.yaml")
    run = run_scenario(sc, replications=5, study=False)
    bad = {s: why for s, _g, why in infeasible_strategies(run.comparison)}
    feasible = {e.strategy for e in run.comparison.best_per_strategy}
    assert set(bad) and not set(bad) & feasible
    assert {"filter", "channel", "spatial", "serial"} <= set(bad)
    assert "64 filters" in bad["filter"] and "per GPU >" in bad["serial"]
    files = build_report(tmp_path / "r", run)
    rows = list(csv.DictReader((files.out_dir / "strategies.csv").open()))
    assert {r["strategy"] for r in rows if r["infeasible_reason"]} == set(bad)
    html = files.html.read_text()
    assert "Strategies with no feasible configuration" in html
    for why in each(bad.values(), at_least=4):
        assert why.replace("'", "&#x27;").replace(">", "&gt;") in html
    assert "% of useful compute" in html and "checkpoints counted per" in html


def test_a_common_random_numbers_sweep_reports_paired_differences(tmp_path, sweep_scenario):
    db = tmp_path / "crn.db"
    proc = run_testbed("sweep", str(sweep_scenario), "--grid",
                       "checkpoint.interval=10min,30min,1h,3h", "--grid", "failures.mtbf=3h,6h",
                       "-r", "40", "--store", str(db), "-q", "--common-random-numbers")
    assert proc.returncode == 0, proc.stderr
    proc = run_testbed("report", str(db), "-o", str(tmp_path / "r"), "--json")
    assert proc.returncode == 0, proc.stderr
    files = json.loads(proc.stdout)
    assert {p.rsplit("/", 1)[-1] for p in files["plots"]} == \
        {"sweep_ettr.png", "sweep_breakdown.png", "sweep_paired.png"}
    rows = list(csv.DictReader((tmp_path / "r" / "paired.csv").open()))
    assert len(rows) == 6                          # 8 points less the best of each line
    points = {p["point"]: p for p in csv.DictReader((tmp_path / "r" / "points.csv").open())}

    def width(p) -> float:
        return float(p["ettr_ci95_high"]) - float(p["ettr_ci95_low"])
    for r in each(rows, at_least=6):
        assert float(r["ci95_low"]) <= float(r["ettr_difference"]) <= float(r["ci95_high"])
        assert float(r["ettr_difference"]) <= 0 and int(r["pairs"]) == 40
        # narrower than the unpaired interval of the same difference
        unpaired = (width(points[r["point"]]) ** 2 + width(points[r["reference_point"]]) ** 2
                    ) ** 0.5
        assert float(r["ci95_high"]) - float(r["ci95_low"]) < unpaired, r
    html = (tmp_path / "r" / "index.html").read_text()
    assert "Paired differences (common random numbers)" in html
    assert "checkpoint.interval (min, as the grid gives it)" in html


def test_a_sweep_without_common_random_numbers_says_how_to_pair(tmp_path, sweep_scenario):
    db = tmp_path / "s.db"
    assert run_testbed("sweep", str(sweep_scenario), "--grid", "checkpoint.interval=1h,2h",
                       "-r", "5", "--store", str(db), "-q").returncode == 0
    proc = run_testbed("report", str(db), "-o", str(tmp_path / "r"))
    assert proc.returncode == 0, proc.stderr
    html = (tmp_path / "r" / "index.html").read_text()
    assert "--common-random-numbers for paired differences" in html
    assert not (tmp_path / "r" / "paired.csv").exists()
