"""``testbed study hpo-scaling`` and HPO scenarios in ``testbed sweep``: the FIFO
closed form for equal trials (makespan = ⌈trials / slots⌉ · t, so speed-up and
efficiency follow), the verdict rule, the store rows of an HPO point, and bad input."""

from __future__ import annotations

import json
import math

import pytest

from testbed.app.study.hpo_scaling import HpoScalingOptions, run_hpo_scaling_study
from tests.conftest import REPO, each, run_cli

#: 10 equal trials: 1 s start-up + 3 epochs × 2 s = 7 s each, FIFO, no failures.
EQUAL = """name: hpo-equal
cluster: {nodes: 1, gpus_per_node: 2}
hpo:
  search: grid
  space: {lr: [0.001, 0.002, 0.003, 0.004, 0.005, 0.006, 0.007, 0.008, 0.009, 0.01]}
  epochs: 3
  epoch_time: 2s
  startup_time: 1s
  scheduler: fifo
"""
TRIALS, T_S = 10, 7.0


@pytest.fixture
def equal(tmp_path):
    path = tmp_path / "equal.yaml"
    path.write_text(EQUAL)
    return path


def test_equal_fifo_trials_follow_the_closed_form(equal):
    study = run_hpo_scaling_study(HpoScalingOptions(
        scenario=str(equal), nodes=(1, 2, 3, 5, 8), gpus_per_trial=(1, 2), measure=False))
    for p in each(study.points, 10):
        slots = p.nodes * (2 // p.gpus_per_trial)
        assert p.concurrent == slots
        expected = math.ceil(TRIALS / slots) * T_S
        assert p.makespan_s == pytest.approx(expected)
        assert p.closed_form_s == pytest.approx(expected)
        assert p.lower_bound_s == pytest.approx(max(TRIALS * T_S / slots, T_S))
        base = math.ceil(TRIALS / (2 // p.gpus_per_trial)) * T_S
        assert p.speedup == pytest.approx(base / expected, abs=1e-4)
        assert p.efficiency == pytest.approx(base / expected / p.nodes, abs=1e-4)
        assert p.parallelism == pytest.approx(TRIALS)
        assert p.judged == (p.nodes > 1 and slots <= TRIALS)
    # 2 GPUs/trial on 8 nodes: 8 slots ≤ 10 trials, but ⌈10/8⌉ = 2 waves: efficiency
    # (10/2)/8 = 0.625 before the trials run out → contradicted
    claim = study.claims[0]
    assert claim.verdict == "contradicted"
    assert "lowest efficiency 0.625 (8 node(s), 2 GPU(s)/trial, 8 at once)" in claim.evidence
    # without it: 1 GPU/trial slots 2,4,6,10 → waves 5,3,2,1 → efficiency 1, 5/6, 5/6, 1;
    # 2 GPUs/trial slots 1,2,3,5 → waves 10,5,4,2 → 1, 1, 5/6, 1 → supported
    fewer = run_hpo_scaling_study(HpoScalingOptions(
        scenario=str(equal), nodes=(1, 2, 3, 5), gpus_per_trial=(1, 2), measure=False))
    assert fewer.claims[0].verdict == "supported"
    assert "lowest efficiency 0.833" in fewer.claims[0].evidence


def test_threshold_decides_the_verdict(equal):
    study = run_hpo_scaling_study(HpoScalingOptions(
        scenario=str(equal), nodes=(1, 2, 3), gpus_per_trial=(1,), measure=False,
        min_efficiency=0.9))
    # slots 2, 4, 6 → waves 5, 3, 2 → efficiency 5/6 at 2 and 3 nodes < 0.9
    assert study.claims[0].verdict == "contradicted"


def test_shipped_grid_scenario_runs_out_of_long_trials():
    study = run_hpo_scaling_study(HpoScalingOptions(
        scenario=str(REPO / "scenarios" / "hpo-cifar-grid.yaml"), nodes=(1, 2, 4, 8),
        gpus_per_trial=(1,), measure=False))
    by_nodes = {p.nodes: p for p in study.points}
    # 27 trials of 20, 50 and 100 one-second epochs: average parallelism 1530/100 = 15.3
    assert by_nodes[1].parallelism == pytest.approx(15.3)
    assert by_nodes[1].makespan_s == pytest.approx(450.0)      # = `testbed hpo simulate`
    assert by_nodes[8].makespan_s == pytest.approx(110.0)      # the longest trial + retry
    assert not by_nodes[4].judged and by_nodes[2].judged


def test_sweep_runs_an_hpo_scenario_into_the_store(equal, tmp_path):
    store = tmp_path / "r.db"
    r = run_cli("sweep", str(equal), "--grid", "cluster.gpus_per_node=2,5", "-r", "2",
                "--store", str(store), "--json", "-q")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["points"] == 2 and out["rows"] == 4
    for point in each(out["results"], 2):
        slots = point["params"]["cluster.gpus_per_node"]
        expected = math.ceil(TRIALS / slots) * T_S
        assert point["wall_time_s"]["mean"] == pytest.approx(expected)
        assert point["facts"]["analytical_wall_s"] == pytest.approx(expected)
        assert point["facts"]["work_s"] == pytest.approx(TRIALS * T_S / slots)
        # the average slot: kept work + lost + idle = the makespan
        busy = TRIALS * T_S / slots
        assert point["breakdown_s"]["useful_s"] == pytest.approx(busy)
        assert point["breakdown_s"]["waiting_s"] == pytest.approx(expected - busy)


def test_one_point_sweep_equals_hpo_simulate(tmp_path):
    scenario = str(REPO / "scenarios" / "hpo-cifar-grid.yaml")
    sim = run_cli("hpo", "simulate", scenario, "--json")
    assert sim.returncode == 0, sim.stderr
    r = run_cli("sweep", scenario, "-r", "1", "--common-random-numbers", "--store",
                str(tmp_path / "r.db"), "--json", "-q")
    assert r.returncode == 0, r.stderr
    point = json.loads(r.stdout)["results"][0]
    assert point["wall_time_s"]["mean"] == pytest.approx(json.loads(sim.stdout)["makespan_s"])


@pytest.mark.parametrize("args, needle", [
    (("--grid", "hpo.trial_resources.gpus=1,4"), "--grid hpo.trial_resources.gpus=4"),
    (("--engine", "fast"), "--engine"),
])
def test_sweep_refuses_bad_hpo_points(equal, tmp_path, args, needle):
    r = run_cli("sweep", str(equal), *args, "--store", str(tmp_path / "r.db"), "-q")
    assert r.returncode == 2, r.stdout
    assert needle in r.stderr and len(r.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("args, needle", [
    (("--nodes", "0,2"), "--nodes"),
    (("--gpus-per-trial", "8"), "--gpus-per-trial"),
    (("--min-efficiency", "1.5"), "--min-efficiency"),
])
def test_study_refuses_bad_options(equal, args, needle):
    r = run_cli("study", "hpo-scaling", str(equal), "--no-measure", *args)
    assert r.returncode == 2 and needle in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr


def test_study_writes_its_folder(equal, tmp_path):
    out = tmp_path / "hs"
    r = run_cli("study", "hpo-scaling", str(equal), "--nodes", "1,2,3", "--no-measure",
                "-o", str(out))
    assert r.returncode == 0, r.stderr
    assert "SUPPORTED" in r.stdout and "closed form" in r.stdout
    assert {p.name for p in out.iterdir()} >= {"study.json", "points.csv", "summary.txt",
                                               "scaling.png"}
    assert not (out / "measured.csv").exists()          # nothing measured, no empty table
    assert json.loads((out / "study.json").read_text())["points"][0]["makespan_s"] == 35.0


@pytest.mark.frameworks
@pytest.mark.measured
def test_measured_real_trials_on_one_and_two_workers(equal):
    r = run_cli("study", "hpo-scaling", str(equal), "--nodes", "1,2", "--workers", "1,2",
                "--measure-trials", "2", "--measure-epochs", "1", "--json", timeout=120)
    assert r.returncode == 0, r.stderr
    study = json.loads(r.stdout)
    m = {p["workers"]: p for p in study["measured"]}
    assert set(m) == {1, 2} and all(p["trials"] == 2 for p in m.values())
    assert m[2]["speedup"] == pytest.approx(m[1]["makespan_s"] / m[2]["makespan_s"], abs=1e-3)
    assert m[2]["closed_form_s"] == pytest.approx(m[1]["mean_trial_s"])   # ⌈2/2⌉ · t₁
    assert [c["scope"].split(":")[0] for c in study["claims"]] == ["simulated", "measured"]


@pytest.mark.mpi
@pytest.mark.frameworks
@pytest.mark.measured
def test_measured_under_mpi4py_futures(equal):
    r = run_cli("study", "hpo-scaling", str(equal), "--nodes", "1", "--executor", "mpi",
                "--workers", "2", "--measure-trials", "2", "--measure-epochs", "1", "--json",
                timeout=120)
    assert r.returncode == 0, r.stderr
    study = json.loads(r.stdout)
    (point,) = study["measured"]
    assert point["workers"] == 2 and point["trials"] == 2
    assert point["busy_slot_s"] == pytest.approx(2 * point["mean_trial_s"])
    assert "mpi4py.futures" in study["claims"][1]["scope"]
