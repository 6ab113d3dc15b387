"""Cluster operations: bad input (one line naming the field, exit 2), user policies,
per-node rates from a trace, adaptive replications, determinism of the event log."""

from __future__ import annotations

import io
import json
import subprocess
import sys

import pytest

from simulators.engine import run_simpy
from simulators.run import replicate, simulate
from testbed.app.resolve import resolve
from testbed.errors import InputError, ScenarioError
from testbed.events import EVENT_KINDS, OPS_EVENT_KINDS, read_events, write_events
from testbed.resilience.policies import ALLOW_CODE_ENV
from testbed.scenario.schema import scenario_from_dict
from tests.sim import policy_example

BASE = {"workload": {"compute_time": "20h"},
        "cluster": {"nodes": 8, "spares": 2, "repair": "2h"},
        "failures": {"node_mtbf": "40h"},
        "checkpoint": {"policy": "fixed", "interval": "1h", "cost": 10, "restart": 10}}


def _doc(**sections) -> dict:
    doc = json.loads(json.dumps(BASE))
    for section, extra in sections.items():
        doc.setdefault(section, {}).update(extra)
    return doc


@pytest.mark.parametrize("section, extra, field, words", [
    ("cluster", {"diagnosis": {"miss": 1.5}}, "cluster.diagnosis.miss", "less than or equal"),
    ("cluster", {"diagnosis": {"wrong_node": -0.1}}, "cluster.diagnosis.wrong_node",
     "greater than or equal"),
    ("cluster", {"bad_nodes": {"fraction": 2, "multiplier": 3}}, "cluster.bad_nodes.fraction",
     "less than or equal"),
    ("cluster", {"repairs": {"automatic": {"duration": "1h", "silent_failure": 1.2}}},
     "cluster.repairs.automatic.silent_failure", "less than or equal"),
    ("cluster", {"repairs": {"automatic": {"duration": "1h"}, "escalation": 7}},
     "cluster.repairs.escalation", "less than or equal"),
    ("failures", {"idle_rate_factor": 3}, "failures.idle_rate_factor", "less than or equal"),
    ("cluster", {"host_selection": "fewest_failure"}, "cluster.host_selection",
     "did you mean 'fewest_failures'"),
    ("cluster", {"repairs": {"automatic": {"duration": "1h"}, "escalate": "alway"}},
     "cluster.repairs.escalate", "did you mean 'always'"),
    ("cluster", {"retirement": {"window": {"failures": 2, "within": "1d"}, "combine": "anyy"}},
     "cluster.retirement.combine", "unknown rule"),
    ("cluster", {"costs": {"swap": {"distribution": "exponental", "mean": "1min"}}},
     "cluster.costs.swap.distribution", "did you mean 'exponential'"),
    ("failures", {"start": "stationry"}, "failures.start", "did you mean 'stationary'"),
    ("failures", {"exposure": "runing"}, "failures.exposure", "did you mean 'running'"),
    ("simulation", {"target_ci": {"figure": "etr", "relative_half_width": 0.01}},
     "simulation.target_ci.figure", "did you mean 'ettr'"),
    ("simulation", {"target_ci": {"relative_half_width": 0.01, "min": 50, "max": 10}},
     "simulation.target_ci.max", "at least"),
    ("cluster", {"host_selection": "highest_score"}, "cluster.host_selection",
     "needs retirement.score"),
])
def test_bad_values_name_the_field(section, extra, field, words):
    with pytest.raises(ScenarioError) as info:
        scenario_from_dict(_doc(**{section: extra}), source="s.yaml")
    assert info.value.field == field, info.value.format()
    assert words in info.value.message
    assert info.value.format().startswith("s.yaml")


@pytest.mark.parametrize("extra, field, words", [
    ({"cluster": {"nodes": 8, "working_pool": 10, "standbys": 4}}, "cluster.working_pool",
     "cannot hold the job's 8 node(s) and 4 warm standby(s)"),
    ({"cluster": {"nodes": 8, "standbys": 2}}, "cluster.standbys", "finite working pool"),
    ({"failures": {"mtbf": "40h"}, "cluster": {"nodes": 8, "bad_nodes": {
        "fraction": 0.1, "multiplier": 2}}}, "cluster.bad_nodes", "node_mtbf"),
    ({"failures": {"node_mtbf": "40h", "lose_work": False}}, "failures.lose_work",
     "checkpoint.policy to none"),
    ({"failures": {"node_mtbf": "40h", "maintenance": {"every": "2h", "duration": 7195}}},
     "failures.maintenance.duration", "planned stop"),
    ({"failures": {"node_mtbf": "40h", "maintenance": {"every": "10h", "duration": "1h"}},
      "checkpoint": {"policy": "none"}}, "checkpoint.policy", "cannot fit between"),
    ({"cluster": {"nodes": 8, "spares": 2, "host_selection": "no_such_module_x:pick"}},
     "cluster.host_selection", "cannot import policy module"),
    ({"cluster": {"nodes": 8, "spares": 2,
                  "host_selection": "tests.sim.policy_example:fewest_repair"}},
     "cluster.host_selection", "did you mean 'fewest_repairs'"),
    ({"cluster": {"nodes": 8, "spares": 2,
                  "host_selection": "tests.sim.policy_example:NOT_CALLABLE"}},
     "cluster.host_selection", "not callable"),
    ({"cluster": {"nodes": 8, "spares": 2, "host_selection": "1bad name:x"}},
     "cluster.host_selection", "not a policy name"),
])
def test_unsatisfiable_and_unknown_are_refused_when_resolving(extra, field, words,
                                                              monkeypatch):
    monkeypatch.setenv(ALLOW_CODE_ENV, "1")
    doc = {**BASE, **extra}
    with pytest.raises(InputError) as info:
        resolve(scenario_from_dict(doc, source="s.yaml"))
    assert info.value.field == field, info.value.format()
    assert words in info.value.message, info.value.message


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "testbed", *args], capture_output=True,
                          text=True, timeout=120)


def test_cli_bad_probability_is_one_line_exit_2(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("workload: {compute_time: 10h}\ncluster: {nodes: 4, spares: 1,\n"
                   "  diagnosis: {miss: 1.5}}\nfailures: {node_mtbf: 40h}\n")
    r = _cli("simulate", str(bad))
    assert r.returncode == 2 and r.stderr.count("\n") == 1
    assert "cluster.diagnosis.miss" in r.stderr and "Traceback" not in r.stderr
    bad.write_text("workload: {compute_time: 10h}\ncluster: {nodes: 4, spares: 1,\n"
                   "  host_selection: random_pick}\nfailures: {node_mtbf: 40h}\n")
    r = _cli("simulate", str(bad))
    assert r.returncode == 2 and "did you mean 'random'" in r.stderr


def test_a_policy_named_in_a_scenario_is_not_imported_without_allow_code(tmp_path,
                                                                       monkeypatch):
    """Loading a file never runs code: the module is not even imported until the user
    passes --allow-code on the command line."""
    monkeypatch.delenv(ALLOW_CODE_ENV, raising=False)
    marker = tmp_path / "imported"
    doc = _doc(cluster={"host_selection": "tests.sim.policy_planted:pick"})
    monkeypatch.setenv("TESTBED_PLANTED_MARKER", str(marker))
    with pytest.raises(InputError) as info:
        resolve(scenario_from_dict(doc))
    assert info.value.field == "cluster.host_selection"
    assert "--allow-code" in info.value.message
    assert not marker.exists() and "tests.sim.policy_planted" not in sys.modules
    path = tmp_path / "s.yaml"
    path.write_text(json.dumps(doc))
    r = _cli("simulate", str(path), "-r", "1")
    assert r.returncode == 2 and "--allow-code" in r.stderr and not marker.exists()
    r = _cli("--allow-code", "simulate", str(path), "-r", "1")
    assert r.returncode == 0, r.stderr
    assert marker.exists()          # imported (and run) because the user asked for it


def test_a_users_policy_is_called_and_checked(monkeypatch):
    monkeypatch.setenv(ALLOW_CODE_ENV, "1")
    doc = _doc(cluster={"host_selection": "tests.sim.policy_example:fewest_repairs"})
    spec = resolve(scenario_from_dict(doc))
    policy_example.CALLS.clear()
    a = replicate(spec, 3, 1)
    assert policy_example.CALLS and a == replicate(spec, 3, 1)
    assert replicate(spec, 2, 1, "simpy") == a[:2]
    broken = resolve(scenario_from_dict(_doc(cluster={
        "host_selection": "tests.sim.policy_example:too_few"})))
    with pytest.raises(InputError, match="must return"):
        replicate(broken, 3, 1)


def test_per_node_rates_from_a_trace():
    doc = _doc(cluster={"node_rates": "traces/example_failures.csv"})
    spec = resolve(scenario_from_dict(doc))
    rates = spec.lifecycle.node_rates
    assert sum(rates) / len(rates) == pytest.approx(1.0)
    assert max(rates) > min(rates)
    assert replicate(spec, 2, 3) == replicate(spec, 2, 3, "simpy")


def test_adaptive_replications_stop_at_the_target_deterministically():
    doc = _doc(simulation={"target_ci": {"figure": "ettr", "relative_half_width": 0.01,
                                         "min": 10, "max": 400}})
    spec = resolve(scenario_from_dict(doc))
    s = simulate(spec, None, 2)
    assert s.stopped == "target reached" and 10 <= s.stats.replications <= 400
    assert s.stats.ettr.relative_half_width <= 0.01
    assert simulate(spec, None, 2).stats == s.stats
    tight = resolve(scenario_from_dict(_doc(simulation={"target_ci": {
        "figure": "wall_time", "relative_half_width": 1e-6, "min": 5, "max": 12}})))
    t = simulate(tight, None, 2)
    assert t.stopped == "maximum reached" and t.stats.replications == 12
    assert t.to_dict()["target_ci"]["max"] == 12


OPS_HEAVY = {"name": "ops", "workload": {"steps": 400, "step_time": 20},
             "cluster": {"nodes": 6, "standbys": 1, "spares": 1, "spare_pool": 2,
                         "technicians": 1, "costs": {"swap": "30s", "host_selection": "2min",
                                                     "preemption": "5min"},
                         "repairs": {"automatic": {"duration": {"distribution": "exponential",
                                                                "mean": "1h"},
                                                   "silent_failure": 0.3},
                                     "manual": {"duration": "4h", "silent_failure": 0.1},
                                     "escalation": 0.6},
                         "diagnosis": {"miss": 0.1, "wrong_node": 0.1},
                         "bad_nodes": {"fraction": 0.3, "multiplier": 4},
                         "host_selection": "highest_score",
                         "retirement": {"score": {"penalty": 40, "threshold": 0}}},
             "failures": {"node_mtbf": "10h", "detect": 30, "restart": 60,
                          "idle_rate_factor": 0.5,
                          "maintenance": {"every": "2h", "duration": "10min"}},
             "checkpoint": {"policy": "daly", "cost": 40, "persist": 60, "restart": 90}}


def test_same_seed_gives_byte_identical_event_log_with_cluster_operations():
    spec = resolve(scenario_from_dict(OPS_HEAVY))

    def log(seed):
        records: list[dict] = []
        run_simpy(spec, seed, 0, records)
        buf = io.StringIO()
        write_events(records, buf)
        return buf.getvalue().encode()
    a = log(5)
    assert a == log(5) and a != log(6)
    kinds = {e["event"] for e in read_events(io.StringIO(a.decode()))}
    assert kinds <= set(EVENT_KINDS)
    assert {"repair_begin", "repair_end", "planned_stop"} <= kinds
    assert kinds & set(OPS_EVENT_KINDS) >= {"standby_swap", "host_selection"}
