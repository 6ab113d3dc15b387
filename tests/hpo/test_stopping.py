"""Stopping ASHA and asynchronous Hyperband (``promotion: stop``) beside promotion ASHA.

Stopping ASHA as Ray Tune's ``ASHAScheduler`` and Syne Tune's ``type="stopping"`` run
it: a trial starts with the full budget and at each rung goes on unless its value is
worse than the 1/η quantile (numpy's linear method) of the values reported there
before it. The checks: the rung against numpy, hand-computed schedules, every decision
of a 2,000-trial simulation against an independent reference that recomputes the
quantile from the trace alone, the bracket mix of asynchronous Hyperband against its
weights, and the replay of a stopping trace.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from simulators.hpo.engine import simulate_hpo
from testbed.errors import ScenarioError
from testbed.hpo.replay import replay_plan
from testbed.hpo.stopping import StopRung, quantile
from testbed.scenario.hpo import brackets
from tests.conftest import each
from tests.hpo.helpers import sim, starts

SPACE = {"lr": {"low": 1e-4, "high": 1e-1, "log": True}, "optimizer": ["adam", "sgd"]}


def _asha(n: int, promotion: str, scheduler: str = "asha", **extra) -> dict:
    return {"search": "random", "n_trials": n, "space": SPACE, "epoch_time": "1s",
            "scheduler": scheduler, "promotion": promotion, "seed": 3,
            "rungs": {"min_epochs": 1, "max_epochs": 27, "reduction_factor": 3}, **extra}


@given(st.lists(st.floats(-1e6, 1e6, allow_nan=False), min_size=1, max_size=80),
       st.integers(2, 5))
def test_stop_rung_equals_numpy_quantile(values, eta):
    rung = StopRung(eta)
    for i, v in enumerate(each(values)):
        before = values[:i]
        expect = not before or v <= np.quantile(before, 1.0 / eta)
        assert rung.decide(i, v) == expect
        assert rung.decide(i, v) is True          # judged once per rung
    assert len(rung.values) == len(values)
    assert quantile(sorted(values), 0.5) == pytest.approx(float(np.median(values)))


def _values(rows):
    return [{"trial": t, "epoch": e, "value": v} for t, e, v in rows]


def test_stopping_asha_by_hand():
    # 1 GPU, rungs 1/3 below 9, η 3; every trial starts with 9 epochs. t0 reports 0.5
    # at epoch 1 (first: goes on), 0.4 at 3 (first: goes on), ends at 9 s. t1: 0.7 at
    # epoch 1, worse than the 1/3 quantile of {0.5} → stopped at 10 s. t2 starts then:
    # 0.2 at 11 s ≤ 0.567 (the 1/3 quantile of {0.5, 0.7}) → on; 0.6 at 3 > 0.4 →
    # stopped at 13 s.
    hpo = {"search": "grid", "space": {"x": [0, 1, 2]}, "epoch_time": "1s",
           "scheduler": "asha", "promotion": "stop",
           "rungs": {"min_epochs": 1, "max_epochs": 9, "reduction_factor": 3},
           "objective": _values([(0, 1, 0.5), (0, 3, 0.4), (0, 9, 0.3), (1, 1, 0.7),
                                 (2, 1, 0.2), (2, 3, 0.6)])}
    run = sim(hpo)
    assert [(f["trial"], f["from_epoch"], f["to_epoch"]) for f in starts(run)] == \
        [(0, 0, 9), (1, 0, 9), (2, 0, 9)]
    ends = [(t, f["trial"], f["epoch"], f["status"]) for t, k, f in run.events
            if k == "trial_end"]
    assert ends == [(9.0, 0, 9, "completed"), (10.0, 1, 1, "stopped"),
                    (13.0, 2, 3, "stopped")]
    rungs = [(t, f["trial"], f["epoch"]) for t, k, f in run.events if k == "trial_rung"]
    assert rungs == [(1.0, 0, 1), (3.0, 0, 3), (11.0, 2, 1)]
    s = run.summary
    assert s.makespan_s == 13.0 and s.trials_completed == 3 and s.trials_stopped_early == 2
    assert s.best_value == 0.2 and s.best_trial == 2


def _reference_decisions(events, eta: int, levels: tuple[int, ...]) -> int:
    """Recompute every rung decision of a stopping trace from the trace alone (numpy's
    quantile over the values recorded before, in event order); returns how many."""
    recorded: dict[int, list[float]] = {e: [] for e in levels}
    judged: set[tuple[int, int]] = set()
    checked = 0
    for _, kind, f in events:
        if kind not in ("trial_rung", "trial_end") or f["epoch"] not in recorded:
            continue
        if kind == "trial_end" and f["status"] != "stopped":
            continue
        key = (f["trial"], f["epoch"])
        assert key not in judged
        judged.add(key)
        before = recorded[f["epoch"]]
        goes_on = not before or f["value"] <= np.quantile(before, 1.0 / eta)
        assert goes_on == (kind == "trial_rung"), (f, len(before))
        before.append(f["value"])
        checked += 1
    return checked


def test_every_decision_of_stopping_asha_matches_an_independent_reference():
    run = sim(_asha(2000, "stop", failures={"probability": 0.05}), nodes=8, gpus=4)
    n = _reference_decisions(run.events, 3, (1, 3, 9))
    assert n > 2000                            # every trial is judged at rung 1 at least
    s = run.summary
    assert s.trials == 2000 and s.trials_completed == 2000 and s.failures > 0
    # stopping ASHA never pauses: one start per trial plus its retries
    assert s.attempts == 2000 + s.retries
    tops = {f["to_epoch"] for f in starts(run)}
    assert tops == {27}
    # about 1/η go on past each rung (the cutoff is the running 1/3 quantile)
    went_on = sum(1 for _, k, f in run.events if k == "trial_rung" and f["epoch"] == 1)
    assert 0.25 < went_on / 2000 < 0.45


def test_stopping_and_promotion_asha_differ_as_documented():
    stop = sim(_asha(300, "stop"), nodes=2, gpus=4).summary
    pause = sim(_asha(300, "pause"), nodes=2, gpus=4).summary
    # promotion ASHA pauses at every rung (an attempt per promotion), stopping never
    assert pause.attempts > 300 and stop.attempts == 300
    assert stop.trials_completed == pause.trials_completed == 300
    assert stop.makespan_s != pause.makespan_s


def test_asynchronous_hyperband_draws_brackets_by_their_weights():
    run = sim(_asha(6000, "stop", scheduler="hyperband"), nodes=16, gpus=8)
    firsts: dict[int, int] = {}
    for _, kind, f in run.events:
        if kind in ("trial_rung", "trial_end") and f["trial"] not in firsts:
            firsts[f["trial"]] = f["epoch"]
    bs = brackets(1, 27, 3)
    weights = np.array([b.n for b in bs], float) / sum(b.n for b in bs)
    # a trial's first judgement is at its bracket's first rung (27: it runs through)
    seen = np.array([sum(1 for e in firsts.values() if e == b.epochs[0]) for b in bs]) / 6000
    assert len(firsts) == 6000
    assert np.abs(seen - weights).max() < 0.02, (seen, weights)


def test_the_replay_of_a_stopping_trace_makes_the_same_decisions():
    run = sim(_asha(200, "stop"), nodes=2, gpus=2)
    plan = replay_plan(list(run.events), source="<trace>")
    assert plan.spec.promotion_mode == "stop"
    again = simulate_hpo(plan).summary
    assert again.makespan_s == pytest.approx(run.summary.makespan_s)
    assert again.trials_stopped_early == run.summary.trials_stopped_early


def test_promotion_applies_to_asha_and_hyperband_only():
    with pytest.raises(ScenarioError, match="promotion"):
        sim({"search": "grid", "space": {"epochs": [1]}, "epoch_time": "1s",
             "promotion": "stop"})


@pytest.mark.frameworks
@pytest.mark.timeout(300)
def test_a_real_stopping_sweep_continues_from_each_rung_and_decides_by_the_rule(tmp_path):
    import json
    import os
    import subprocess
    import sys

    from tests.conftest import REPO
    trace = tmp_path / "trace.jsonl"
    env = {**os.environ, "PYTHONHASHSEED": "0", "PYTHONPATH": str(REPO)}
    r = subprocess.run([sys.executable, "-m", "testbed", "hpo", "run",
                        str(REPO / "scenarios" / "hpo-digits-asha.yaml"), "--workers", "2",
                        "--store", str(tmp_path / "hpo.db"), "--trace", str(trace),
                        "--json"], capture_output=True, text=True, cwd=REPO, env=env,
                       timeout=240)
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout)
    events = [json.loads(line) for line in trace.read_text().splitlines()]
    tuples = [(e["t_s"], e["event"], e) for e in events]
    assert _reference_decisions(tuples, 2, (1, 2)) >= 6
    assert out["trials_completed"] == 6 and 0 < out["trials_stopped_early"] < 6
    assert out["retries"] == 1 and out["failures"] == 1
    # one trial_start per trial plus the retry: a trial that goes on keeps its attempt
    starts = [e for e in events if e["event"] == "trial_start"]
    assert len(starts) == 7 and {e["to_epoch"] for e in starts} == {4}
    # each trial's table has every epoch it trained, up to where it stopped
    for row in each(out["trials_table"]):
        last = row["epochs"][-1][0]
        assert [e for e, _ in row["epochs"]] == list(range(1, last + 1))
        assert (last == 4) == (row["status"] == "completed")


def test_the_report_draws_trials_stopped_at_a_rung(tmp_path, capsys):
    import json

    import yaml

    from testbed.app.cli.main import main
    scen = tmp_path / "stop.yaml"
    scen.write_text(yaml.safe_dump({"name": "stop", "cluster": {"nodes": 1, "gpus_per_node": 4},
                                    "hpo": _asha(40, "stop")}))
    capsys.readouterr()
    main(["hpo", "report", str(scen), "-o", str(tmp_path / "report"), "--json"])
    files = json.loads(capsys.readouterr().out)
    assert any(p.endswith("gantt.png") for p in files["plots"])
