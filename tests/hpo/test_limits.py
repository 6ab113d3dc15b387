"""Sweeps too large to plan are refused in one line naming the field, before anything
runs (a typo of n_trials, or Hyperband rungs whose one iteration has 10¹² trials, would
otherwise simulate for hours)."""

from __future__ import annotations

import pytest

from testbed.errors import ScenarioError
from testbed.hpo.hyperband import brackets, trials_per_iteration
from testbed.scenario.hpo import MAX_TPE_TRIALS, MAX_TRIALS
from tests.hpo.helpers import scenario

RANGE = {"lr": {"low": 0.001, "high": 0.1}}


@pytest.mark.parametrize("hpo, field, words", [
    ({"search": "random", "seed": 1, "n_trials": MAX_TRIALS + 1, "space": RANGE},
     "hpo.n_trials", "the most a random sweep may plan"),
    ({"search": "tpe", "seed": 1, "n_trials": MAX_TPE_TRIALS + 1, "space": RANGE},
     "hpo.n_trials", "the most a tpe sweep may plan"),
    ({"search": "grid", "space": {k: list(range(10)) for k in "abcdefg"}},
     "hpo.space", "give n_trials to run part of it"),
    ({"search": "random", "seed": 1, "scheduler": "hyperband", "space": RANGE,
      "rungs": {"min_epochs": 1, "max_epochs": 10**12, "reduction_factor": 2}},
     "hpo.rungs.max_epochs", "less than or equal to 100000"),   # MAX_EPOCHS
])
def test_a_sweep_too_large_to_plan_is_refused(hpo, field, words):
    with pytest.raises(ScenarioError) as info:
        scenario({"epochs": 2, "epoch_time": "1s", **hpo}, gpus=2)
    assert info.value.field == field and words in str(info.value)


def test_the_limits_still_admit_large_sweeps():
    """A grid of 10⁷ points with n_trials, and a Hyperband iteration of 10⁵ trials."""
    scenario({"search": "grid", "space": {k: list(range(10)) for k in "abcdefg"},
              "n_trials": 100, "epochs": 2, "epoch_time": "1s"})
    n = trials_per_iteration(brackets(1, 3**10, 3))
    assert 10**4 < n < MAX_TRIALS
    scenario({"search": "random", "seed": 1, "scheduler": "hyperband", "space": RANGE,
              "rungs": {"min_epochs": 1, "max_epochs": 3**10, "reduction_factor": 3},
              "epoch_time": "1s"})
