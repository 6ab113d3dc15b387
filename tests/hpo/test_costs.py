"""Where epoch times come from: the oracle, a table (inline or CSV), a measured trace."""

from __future__ import annotations

import pytest

from tests.hpo.helpers import sim, starts


def _durations(run):
    begin = {}
    out = {}
    for t, k, f in run.events:
        if k == "trial_start":
            begin[f["trial"]] = t
        elif k == "trial_end":
            out[f["trial"]] = t - begin[f["trial"]]
    return out


def test_oracle_epoch_time_for_the_trials_batch_and_gpus():
    from testbed.oracle import predict
    oracle = {"system": "abci-v100", "model": "resnet50", "epoch_samples": 50000,
              "input_shape": "3x32x32"}
    run = sim({"search": "grid", "space": {"batch_size": [32, 128], "gpus": [1, 4]},
               "epochs": 2, "cost": {"oracle": oracle}}, gpus=4)
    got = _durations(run)
    for trial, (batch, gpus) in enumerate([(32, 1), (32, 4), (128, 1), (128, 4)]):
        est = predict("abci-v100", "resnet50", "data" if gpus > 1 else "serial", gpus, batch,
                      input_shape=(3, 32, 32), epoch_samples=50000)
        assert got[trial] == pytest.approx(2 * est.epoch_s, rel=1e-12)
    # the 4-GPU trials hold all four GPUs; the 1-GPU trial 2 back-fills past trial 1
    assert [f["trial"] for f in starts(run)][:2] == [0, 2]


def test_table_inline_and_csv(tmp_path):
    rows = [{"optimizer": "adam", "epoch_time": "2s"}, {"optimizer": "sgd", "epoch_time": 3}]
    hpo = {"search": "grid", "space": {"optimizer": ["adam", "sgd"]}, "epochs": 10,
           "cost": {"table": rows}}
    assert _durations(sim(hpo, gpus=2)) == {0: 20.0, 1: 30.0}
    csv = tmp_path / "cost.csv"
    csv.write_text("optimizer,epoch_time_s\nsgd,4\nadam,1.5\n")
    path = tmp_path / "s.yaml"
    path.write_text("cluster: {nodes: 1, gpus_per_node: 2}\nhpo:\n  search: grid\n"
                    "  space: {optimizer: [adam, sgd]}\n  epochs: 10\n"
                    "  cost: {table: cost.csv}\n")
    from simulators.hpo.engine import simulate_hpo
    from testbed.app.resolve import hpo_plan
    from testbed.scenario.schema import load_scenario
    assert _durations(simulate_hpo(hpo_plan(load_scenario(path)))) == {0: 15.0, 1: 40.0}


def test_table_without_a_matching_row_names_the_field():
    from testbed.errors import ScenarioError
    hpo = {"search": "grid", "space": {"optimizer": ["adam", "lion"]}, "epochs": 1,
           "cost": {"table": [{"optimizer": "adam", "epoch_time": 1}]}}
    with pytest.raises(ScenarioError, match=r"hpo\.cost\.table.*trial 1 \(optimizer=lion\)"):
        sim(hpo)


def test_measured_per_epoch_times_from_a_trace(tmp_path):
    trace = tmp_path / "t.jsonl"
    lines = ['{"t_s":0,"event":"job_start","slots":1}',
             '{"t_s":0,"event":"trial_start","trial":0,"attempt":0,"slots":[0],'
             '"from_epoch":0,"to_epoch":3}']
    for e, s in ((1, 1.0), (2, 2.0), (3, 4.0)):
        lines.append(f'{{"t_s":{e},"event":"trial_result","trial":0,"attempt":0,"epoch":{e},'
                     f'"epoch_s":{s},"value":0.5}}')
    trace.write_text("\n".join(lines) + "\n")
    path = tmp_path / "s.yaml"
    path.write_text("cluster: {nodes: 1, gpus_per_node: 1}\nhpo:\n  search: grid\n"
                    "  space: {x: [0, 1]}\n  epochs: 4\n  cost: {trace: t.jsonl}\n")
    from simulators.hpo.engine import simulate_hpo
    from testbed.app.resolve import hpo_plan
    from testbed.scenario.schema import load_scenario
    got = _durations(simulate_hpo(hpo_plan(load_scenario(path))))
    # trial 0: its epochs 1-3 as measured, epoch 4 like its last (4 s); trial 1 (never
    # measured): the mean of all measured epochs, 7/3 s, for 4 epochs
    assert got[0] == pytest.approx(11.0)
    assert got[1] == pytest.approx(4 * 7 / 3)


@pytest.mark.parametrize("name", ["hpo-cifar-grid", "hpo-digits-real", "hpo-asha-1024"])
def test_library_scenarios_simulate(name):
    from simulators.hpo.engine import simulate_hpo
    from testbed.app.resolve import hpo_plan
    from testbed.scenario.schema import load_scenario
    from tests.conftest import REPO
    s = simulate_hpo(hpo_plan(load_scenario(REPO / "scenarios" / f"{name}.yaml"))).summary
    assert s.trials_completed + s.trials_failed + s.trials_cancelled == s.trials
    assert 0 < s.utilisation <= 1
    if name == "hpo-asha-1024":
        assert s.trials == 10_000 and s.preemptions > 0 and s.failures > 0


@pytest.mark.parametrize("space, field, words", [
    ({"lr": {"low": 1, "high": 0.1}}, "hpo.space.lr.high", "must be greater than low"),
    ({"lr": {"low": 0, "high": 1, "log": True}}, "hpo.space.lr.low", "a log range needs"),
    ({"lr": []}, "hpo.space.lr", "has no values"),
])
def test_a_bad_range_says_what_is_wrong_with_it(space, field, words):
    """A range is one member of a union (list of values | range): its own error is
    reported, not "should be a valid list"."""
    from testbed.errors import ScenarioError
    with pytest.raises(ScenarioError) as info:
        sim({"search": "random", "n_trials": 3, "seed": 1, "space": space, "epochs": 1,
             "epoch_time": "1s"})
    assert info.value.field == field and words in str(info.value)
