"""Same seed ⇒ same event log byte for byte; the CLI; bad input (one line, exit 2)."""

from __future__ import annotations

import json

import pytest

from testbed.app.cli.main import main
from tests.conftest import each
from tests.hpo.helpers import sim

NOISY = {"search": "random", "n_trials": 200, "epoch_time": "5s", "scheduler": "asha",
         "space": {"lr": {"low": 1e-4, "high": 1e-1, "log": True}, "width": [8, 16, 32]},
         "rungs": {"min_epochs": 1, "max_epochs": 27, "reduction_factor": 3},
         "checkpoint_every_epochs": 2, "failures": {"probability": 0.1, "trial_mtbf": "2min",
                                                    "nodes": True},
         "on_failure": "retry"}
NODE_FAILURES = {"failures": {"node_mtbf": "5min", "distribution": "weibull", "shape": 0.7},
                 "simulation": {"seed": 0}}


def test_same_seed_same_bytes_and_other_seed_differs():
    a = sim(NOISY, nodes=4, gpus=4, seed=11, **NODE_FAILURES)
    b = sim(NOISY, nodes=4, gpus=4, seed=11, **NODE_FAILURES)
    c = sim(NOISY, nodes=4, gpus=4, seed=12, **NODE_FAILURES)
    assert a.log_text() == b.log_text()
    assert a.log_text() != c.log_text()
    s = a.summary
    assert s.failures > 0 and s.preemptions > 0 and s.node_failures > 0 and s.retries > 0
    assert s.trials_completed + s.trials_failed + s.trials_cancelled == s.trials
    for line in each(a.log_text().splitlines()[:50]):
        rec = json.loads(line)
        assert list(rec) == sorted(rec)           # canonical: sorted keys


SCEN = "scenarios/hpo-cifar-grid.yaml"


def test_cli_simulate_json(cli, tmp_path):
    events = tmp_path / "events.jsonl"
    r = cli("hpo", "simulate", SCEN, "--json", "--events", str(events))
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    for key in ("makespan_s", "utilisation", "trials_completed", "trials_failed", "retries"):
        assert key in out
    assert out["makespan_s"] == 450 and out["retries"] == 1
    again = tmp_path / "again.jsonl"
    assert cli("hpo", "simulate", SCEN, "--events", str(again)).returncode == 0
    assert events.read_bytes() == again.read_bytes()
    # a simulated trace replays to the same makespan
    r = cli("hpo", "replay", str(events), "--json")
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    assert rep["makespan_s"] == pytest.approx(450) and rep["retries"] == 1


def _write(tmp_path, text: str):
    p = tmp_path / "bad.yaml"
    p.write_text(text)
    return str(p)


BASE = """cluster: {nodes: 1, gpus_per_node: 4}
hpo:
  search: grid
  space: {optimizer: [adam, sgd], epochs: [2, 3]}
  epoch_time: 1s
"""


@pytest.mark.parametrize("edit, field", [
    (("space: {optimizer: [adam, sgd], epochs: [2, 3]}", "space: {}"), "hpo.space"),
    (("epoch_time: 1s", "epoch_time: 1s\n  trial_resources: {gpus: 8}"),
     "hpo.trial_resources.gpus"),
    (("epoch_time: 1s", "epoch_time: 1s\n  scheduler: ashaa"), "hpo.scheduler"),
    (("search: grid", "search: bayes"), "hpo.search"),
    (("epoch_time: 1s", "epoch_time: 1s\n  on_failure: retry_forever"), "hpo.on_failure"),
    (("epoch_time: 1s", "epoch_time: 1s\n  inject_failures: [{trial: 4, at_epoch: 1}]"),
     "hpo.inject_failures[0].trial"),
    (("epoch_time: 1s", "epoch_time: 1s\n  inject_failures: [{node: 3, at: 5s}]"),
     "hpo.inject_failures[0].node"),
    (("epoch_time: 1s", "epoch_time: 1s\n  inject_failures: [{trial: 0, at_epoch: 9}]"),
     "hpo.inject_failures[0].at_epoch"),
    (("epochs: [2, 3]", "epochs: []"), "hpo.space.epochs"),
    (("epoch_time: 1s", "epoch_time: -1s"), "hpo.epoch_time"),
])
def test_bad_input_one_line_exit_2(capsys, tmp_path, edit, field):
    path = _write(tmp_path, BASE.replace(*edit))
    with pytest.raises(SystemExit) as exc:
        main(["hpo", "simulate", path])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert field in err and path in err


def test_bad_input_in_a_fresh_process(cli, tmp_path):
    """What a user sees: one line naming file, line and key; exit 2; for run as well."""
    path = _write(tmp_path, BASE.replace("epoch_time: 1s", "epoch_time: 1s\n  scheduler: ashaa"))
    for cmd in ("simulate", "run"):
        r = cli("hpo", cmd, path, "--store", str(tmp_path / "x.db")) if cmd == "run" else \
            cli("hpo", cmd, path)
        assert r.returncode == 2
        assert r.stderr.strip() == (f"testbed: error: {path}:6: hpo.scheduler: unknown "
                                    "scheduler 'ashaa' (did you mean 'asha'?); choose one of "
                                    "fifo, longest_first, asha, hyperband")
    assert not (tmp_path / "x.db").exists()


def test_run_refuses_a_trial_wider_than_the_pool(capsys, tmp_path):
    path = _write(tmp_path, BASE.replace("epoch_time: 1s",
                                         "epoch_time: 1s\n  trial_resources: {gpus: 3}"))
    with pytest.raises(SystemExit) as exc:
        main(["hpo", "run", path, "--workers", "2", "--store", str(tmp_path / "x.db")])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "hpo.trial_resources.gpus" in err and "pool of 2 worker(s)" in err


def test_scenario_with_only_cluster_and_hpo_is_valid(tmp_path):
    from testbed.scenario.schema import load_scenario
    sc = load_scenario(_write(tmp_path, BASE))
    assert sc.hpo.grid_size == 4 and sc.workload is None


def test_replay_of_a_non_trace_fails_cleanly(cli, tmp_path):
    p = tmp_path / "x.jsonl"
    p.write_text('{"t_s": 0, "event": "job_start"}\n{"t_s": -1, "event": "trial_start"}\n')
    r = cli("hpo", "replay", str(p))
    assert r.returncode == 2 and "x.jsonl:2" in r.stderr and "t_s" in r.stderr


def test_report_of_a_simulated_sweep(tmp_path):
    from testbed.app.report.hpo_report import attempts, utilisation_curve, write_hpo_report
    files = write_hpo_report(SCEN, str(tmp_path / "rep"))
    html = files.html.read_text()
    for name in ("gantt.png", "utilisation.png", "best_so_far.png", "attempts.csv"):
        assert name in html and (tmp_path / "rep" / name).stat().st_size > 0
    run = sim({"search": "grid", "space": {"epochs": [10, 10, 5]}, "epoch_time": "1s",
               "inject_failures": [{"trial": 0, "at_epoch": 4}]}, gpus=2)
    bars = attempts(list(run.events))
    assert [(b.trial, b.outcome, b.start_s, b.end_s) for b in bars] == [
        (0, "failed", 0, 4), (1, "completed", 0, 10), (0, "completed", 4, 14),
        (2, "completed", 10, 15)]
    assert utilisation_curve(bars) == [(0, 2), (4, 2), (10, 2), (14, 1), (15, 0)]
