"""Bad input: one line naming file and key path, exit status 2, nothing written."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from testbed.app.resolve import resolve
from testbed.errors import ScenarioError
from testbed.scenario.schema import load_scenario, scenario_from_dict
from testbed.traces import import_fta_event_trace, parse_trace

BASE = {"workload": {"compute_time": "10h"}, "failures": {"mtbf": "2h"},
        "checkpoint": {"cost": "1min", "restart": "2min"}}


def _merge(section: str, extra: dict) -> dict:
    doc = json.loads(json.dumps(BASE))
    doc.setdefault(section, {}).update(extra)
    return doc


@pytest.mark.parametrize("section, extra, field, words", [
    ("workload", {"compute_time": "-5h"}, "workload.compute_time", ">= 0"),
    ("workload", {"compute_time": 0}, "workload.compute_time", "> 0"),
    ("checkpoint", {"cost": "0s"}, "checkpoint.cost", "> 0"),
    ("failures", {"distribution": "gauss"}, "failures.distribution", "unknown distribution"),
    ("checkpoint", {"policy": "dally"}, "checkpoint.policy", "did you mean 'daly'"),
    ("checkpoint", {"policy": "young", "interval": "1h"}, "checkpoint.interval",
     "applies to policy 'fixed' only"),
    ("checkpoint", {"policy": "fixed"}, "checkpoint.interval", "needs exactly one"),
    ("failures", {"shap": 2}, "failures.shap", "did you mean 'shape'"),
    ("failures", {"shape": 2}, "failures.shape", "weibull distribution only"),
    ("failures", {"mtbf": "soon"}, "failures.mtbf", "cannot read"),
    ("cluster", {"nodes": 0}, "cluster.nodes", "greater than 0"),
])
def test_bad_values_name_the_key(section, extra, field, words):
    with pytest.raises(ScenarioError) as info:
        scenario_from_dict(_merge(section, extra), source="s.yaml")
    assert info.value.field == field
    assert words in info.value.message
    assert info.value.format().startswith("s.yaml")


def test_line_numbers_in_files(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("name: x\nworkload:\n  compute_time: 10h\ncheckpont:\n  cost: 5min\n")
    with pytest.raises(ScenarioError) as info:
        load_scenario(path)
    assert info.value.line == 4 and "did you mean 'checkpoint'" in info.value.message


def test_missing_trace_file_names_the_key(tmp_path):
    path = tmp_path / "t.yaml"
    path.write_text("workload: {compute_time: 10h}\nfailures: {trace: nowhere.csv}\n"
                    "checkpoint: {cost: 1min, restart: 1min, policy: fixed, interval: 1h}\n")
    with pytest.raises(ScenarioError) as info:
        resolve(load_scenario(path))
    assert info.value.field == "failures.trace" and "not found" in info.value.message


@pytest.mark.parametrize("text, line, words", [
    ("time_s,node,cause,repair_s\n10,1,a,5\n5,2,b,5\n", 3, "not sorted"),
    ("time_s,node,cause,repair_s\n10,1,a\n", 2, "expected 4 fields"),
    ("time_s,node,cause,repair_s\n10,x,a,5\n", 2, "node"),
    ("time_s,node,cause,repair_s\n-3,1,a,5\n", 2, ">= 0"),
    ("time,node\n", 1, "header"),
])
def test_malformed_traces(text, line, words):
    with pytest.raises(ScenarioError) as info:
        parse_trace(text, source="t.csv")
    assert info.value.line == line and words in info.value.message


def test_fta_import_and_trace_replay_is_deterministic():
    text = Path("traces/fta_event_trace_sample.tab").read_text()
    rows = import_fta_event_trace(text)
    assert [r.t_s for r in rows] == [0.0, 21600.0, 39200.0]
    assert [r.repair_s for r in rows] == [14400.0, 900.0, 50000.0]
    assert rows[0].cause == "fta:1" and rows[0].node == 0 and rows[1].node == 1
    spec = resolve(load_scenario("scenarios/trace-replay.yaml"))
    from simulators.run import replicate
    a, b = replicate(spec, 2, 0), replicate(spec, 1, 99)
    assert a[0] == a[1] == b[0]
    assert a[0].failures == 6


@pytest.mark.parametrize("at", ["2h", "0"])
def test_a_trace_whose_failures_share_one_instant(tmp_path, at):
    """A zero mean gap between failures: the job MTBF is the rate over [0, that instant]
    (or no MTBF when it is t = 0), so Daly's interval stays finite and the run ends."""
    (tmp_path / "t.csv").write_text(f"time_s,node,cause,repair_s\n{at},1,a,0\n{at},0,b,1h\n")
    path = tmp_path / "s.yaml"
    path.write_text("workload: {compute_time: 30h}\ncluster: {nodes: 4}\n"
                    "failures: {trace: t.csv}\ncheckpoint: {policy: daly, cost: 1min, "
                    "restart: 1min}\nsimulation: {replications: 2}\n")
    spec = resolve(load_scenario(path))
    mtbf = spec.failures.job_mtbf_s
    assert mtbf == (3600.0 if at == "2h" else float("inf"))
    from simulators.run import replicate
    assert all(r.failures == 2 for r in replicate(spec, 2, 0))


def _cli(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "testbed", *args], capture_output=True,
                          text=True, timeout=120, cwd=cwd)


def test_cli_bad_input_one_line_exit_2_nothing_written(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("workload: {compute_time: 10h}\nfailures: {mtbf: 2h, distribution: poisson}\n")
    events = tmp_path / "events.jsonl"
    r = _cli("simulate", str(bad), "--events", str(events))
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and "failures.distribution" in r.stderr
    assert str(bad) in r.stderr and "Traceback" not in r.stderr
    assert not events.exists() and list(tmp_path.iterdir()) == [bad]
    r = _cli("simulate", str(tmp_path / "missing.yaml"))
    assert r.returncode == 2 and "no such file" in r.stderr
    r = _cli("simulate", "scenarios/daly-24h.yaml", "--replications", "0")
    assert r.returncode == 2 and "--replications" in r.stderr


def test_cli_json_keys_and_events(tmp_path):
    events = tmp_path / "ev.jsonl"
    r = _cli("simulate", "scenarios/daly-6h.yaml", "-r", "20", "--seed", "3", "--json",
             "--events", str(events))
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    for key in ("mean", "ci95_low", "ci95_high"):
        assert key in out["wall_time_s"] and key in out["ettr"]
    assert "mean" in out["failures"]
    assert set(out["breakdown_s"]) == {"useful_s", "checkpoint_s", "lost_s", "restart_s",
                                       "waiting_s"}
    assert out["checkpoint_interval_s"] == pytest.approx(3402.7778, rel=1e-6)
    assert out["analytical"]["wall_time_s"] == pytest.approx(610.2164 * 3600, rel=1e-5)
    assert events.read_text().count("\n") > 100
