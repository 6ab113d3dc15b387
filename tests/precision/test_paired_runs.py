"""The paired runs behind both precision commands: learning curves watch without
touching, and ``run_study`` is ``run_paired`` summarised."""

from __future__ import annotations

import numpy as np
import pytest

from real_runs.precision.data import hurricanes, load_dataset
from real_runs.precision.nets import batch_order, initial_weights, train_predict
from real_runs.precision.study import net_spec, run_paired, run_study, score, standardise
from testbed.precision import parse_precisions
from tests.conftest import each

pytestmark = pytest.mark.frameworks


@pytest.mark.parametrize("framework", ["torch", "tensorflow", "chainer"])
def test_a_learning_curve_does_not_change_the_training(framework):
    data = hurricanes()
    spec = net_spec(data)
    x_train, x_test = standardise(data.x_train, data.x_test)
    y = ((data.y_train - data.y_train.mean()) / data.y_train.std()).astype(np.float32)
    y = y.reshape(-1, 1)
    args = (framework, spec, initial_weights(spec, 3), x_train, y, x_test,
            batch_order(len(y), spec, 3), 3)
    plain = train_predict(*args)
    curve: list = []
    watched = train_predict(*args, curve=curve)
    assert np.array_equal(plain, watched)
    assert len(curve) == spec.epochs and np.array_equal(curve[-1][1], watched)
    assert curve[-1][0] < curve[0][0]            # the training loss fell


def test_run_study_summarises_the_paired_runs():
    data, chosen = hurricanes(), parse_precisions("int4")
    paired = run_paired(data, chosen, [0, 1], curves=True)
    study = run_study(data, chosen, [0, 1])
    assert [p.name for p in paired.precisions] == ["fp64", "int4"]
    assert paired.forecasts.shape == (2, 2, 120)
    assert paired.curve_forecasts.shape == (2, 2, net_spec(data).epochs, 120)
    for i, result in each(enumerate(study.results)):
        assert [score(data, f) for f in paired.forecasts[i]] == list(result.per_seed)


def test_the_sensitivity_data_leave_out_the_years_before_1979():
    full, later = hurricanes(), load_dataset("hurricanes-1979")
    assert len(full.y_train) == 300 and len(later.y_train) == 12 * 22
    assert np.array_equal(full.x_test, later.x_test) and np.array_equal(full.y_test,
                                                                         later.y_test)
