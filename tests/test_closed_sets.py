"""Closed sets of names (policies, distributions, strategies, precisions, schedules,
schedulers, failure policies, engines): one ``Literal`` each, refused with the same
did-you-mean line in a scenario and on the command line."""

from __future__ import annotations

import json
from typing import get_args

import pytest

from testbed.app.cli.main import main
from testbed.errors import ScenarioError
from testbed.oracle.names import SCHEDULES, STRATEGIES
from testbed.oracle.state import DTYPE_BYTES, PRECISIONS
from testbed.resilience.ckpt_policy import POLICIES, PolicyName
from testbed.resilience.spec import ENGINES
from testbed.scenario.hpo import ON_FAILURE, SCHEDULERS, SEARCHES, FailurePolicy, Scheduler, Search
from testbed.scenario.schema import scenario_from_dict

BASE = {"workload": {"compute_time": "10h"}, "failures": {"mtbf": "2h"},
        "checkpoint": {"cost": "1min", "restart": "2min"}}
ORACLE = {"system": "abci-v100", "model": {"name": "resnet50"},
          "parallelism": {"strategy": "data", "gpus": 8, "global_batch": 256}}
HPO = {"space": {"lr": [0.1, 0.01]}, "epochs": 3, "epoch_time": "1s"}


def _doc(section: str, extra: dict, base: dict | None = None) -> dict:
    doc = json.loads(json.dumps({**BASE, **(base or {})}))
    doc.setdefault(section, {}).update(extra)
    return doc


def test_one_list_of_names_each():
    assert tuple(DTYPE_BYTES) == PRECISIONS
    assert SEARCHES == get_args(Search) and SCHEDULERS == get_args(Scheduler)
    assert ON_FAILURE == get_args(FailurePolicy)
    assert "daly" in POLICIES and ENGINES == ("fast", "simpy")
    assert tuple(POLICIES) == get_args(PolicyName)   # the registry is the schema's set


@pytest.mark.parametrize("section, extra, base, field, words", [
    ("simulation", {"engine": "fsat"}, None, "simulation.engine",
     "unknown engine 'fsat' (did you mean 'fast'?); choose one of fast, simpy"),
    ("checkpoint", {"policy": "yung"}, None, "checkpoint.policy", "did you mean 'young'"),
    ("failures", {"distribution": "weibul"}, None, "failures.distribution",
     "did you mean 'weibull'"),
    ("parallelism", {"strategy": "dat"}, ORACLE, "parallelism.strategy",
     "unknown strategy 'dat' (did you mean 'data'?); known: serial, data"),
    ("parallelism", {"strategy": "pipeline", "schedule": "gpip"}, ORACLE,
     "parallelism.schedule", "unknown pipeline schedule 'gpip' (did you mean 'gpipe'?)"),
    ("model", {"precision": "bf61"}, ORACLE, "model.precision",
     "unknown precision 'bf61' (did you mean 'bf16'?); known: fp64, fp32"),
    ("hpo", {**HPO, "search": "gird"}, None, "hpo.search", "did you mean 'grid'"),
    ("hpo", {**HPO, "scheduler": "ahsa"}, None, "hpo.scheduler", "did you mean 'asha'"),
    ("hpo", {**HPO, "on_failure": "retyr"}, None, "hpo.on_failure",
     "unknown failure policy 'retyr' (did you mean 'retry'?)"),
])
def test_unknown_name_in_a_scenario(section, extra, base, field, words):
    with pytest.raises(ScenarioError) as info:
        scenario_from_dict(_doc(section, extra, base), source="s.yaml")
    assert info.value.field == field
    assert words in info.value.message


def test_precision_names_fold_case():
    sc = scenario_from_dict(_doc("model", {"precision": "FP16"}, ORACLE), source="s.yaml")
    assert sc.model is not None and sc.model.precision == "fp16"


def test_a_name_of_the_wrong_type_is_still_refused():
    with pytest.raises(ScenarioError) as info:
        scenario_from_dict(_doc("checkpoint", {"policy": 5}), source="s.yaml")
    assert info.value.field == "checkpoint.policy"


PREDICT = ["oracle", "predict", "--system", "abci-v100", "--model", "resnet50", "--gpus", "4",
           "--global-batch", "64"]


@pytest.mark.parametrize("args, words", [
    (PREDICT + ["--strategy", "dta"], "unknown strategy 'dta' (did you mean 'data'?); known: "
     + ", ".join(STRATEGIES)),
    (PREDICT + ["--strategy", "pipeline", "--schedule", "1fb1"],
     "unknown pipeline schedule '1fb1' (did you mean '1f1b'?); known: "
     + ", ".join(SCHEDULES)),
    (PREDICT + ["--strategy", "data", "--precision", "bf61"], "did you mean 'bf16'"),
    (PREDICT + ["--strategy", "data", "--mode", "paradll"], "did you mean 'paradl'"),
    (["oracle", "sweep", "--system", "abci-v100", "--model", "resnet50", "--strategy", "pipe"],
     "unknown strategy 'pipe'"),
    (["simulate", "scenarios/quickstart.yaml", "--engine", "simpi"],
     "unknown engine 'simpi' (did you mean 'simpy'?); known: fast, simpy"),
])
def test_unknown_name_on_the_command_line(capsys, args, words):
    with pytest.raises(SystemExit) as exc:
        main(args)
    err = capsys.readouterr().err
    assert exc.value.code == 2
    assert len(err.strip().splitlines()) == 1 and words in err


def test_cli_precision_folds_case(capsys):
    main(PREDICT + ["--strategy", "data", "--precision", "FP16", "--json"])
    assert json.loads(capsys.readouterr().out)["precision"] == "fp16"
