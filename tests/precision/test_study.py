"""The accuracy study, run for real (PyTorch; TensorFlow and Chainer once each).

The acceptance test of issue 13: inputs stored as fp16 and int8 stay within 2
percentage points of fp64 accuracy on both shipped data sets (3 seeds, paired), and
accuracy falls once k gets small. Seconds on 2 cores.
"""

from __future__ import annotations

import numpy as np
import pytest

from real_runs.precision.data import TEST_YEARS, TRAIN_YEARS, digits, hurricanes, load_dataset
from real_runs.precision.study import run_study
from testbed.errors import InputError
from testbed.precision import parse_precisions
from tests.conftest import each

#: The paper's claim under test: low-precision inputs cost < 2 percentage points.
TOLERANCE_PP = 2.0
SEEDS = range(3)


@pytest.fixture(scope="module")
def hurricane_study():
    return run_study(hurricanes(), parse_precisions("fp64,fp16,int8"), SEEDS)


@pytest.fixture(scope="module")
def digits_study():
    return run_study(digits(), parse_precisions("fp64,fp16,int8,int2"), SEEDS)


@pytest.mark.frameworks
@pytest.mark.parametrize("study", ["hurricane_study", "digits_study"])
def test_fp16_and_int8_inputs_within_2pp_of_fp64(study, request):
    result = request.getfixturevalue(study)
    by_name = {r.precision: r for r in result.results}
    assert result.baseline.precision == "fp64"
    for name in ("fp16", "int8"):
        change = by_name[name].accuracy_change_pp
        assert abs(change) <= TOLERANCE_PP, (study, name, change)
        assert by_name[name].accuracy_change_pp == pytest.approx(
            100 * (by_name[name].accuracy_mean - result.baseline.accuracy_mean))


@pytest.mark.frameworks
def test_digits_network_has_skill_and_int2_costs_most(digits_study):
    """An MLP on the 8×8 digits is ~97% accurate (the most frequent class ~7%); two-bit
    inputs lose more accuracy than eight-bit ones."""
    by_name = {r.precision: r for r in digits_study.results}
    assert by_name["fp64"].accuracy_mean > 0.95
    assert digits_study.climatology.accuracy < 0.15
    assert by_name["int2"].accuracy_mean < by_name["int8"].accuracy_mean


@pytest.mark.frameworks
def test_hurricane_study_reports_counts_against_climatology(hurricane_study):
    result = hurricane_study
    assert result.task == "count" and result.train_rows == 12 * (TRAIN_YEARS[1] - TRAIN_YEARS[0] + 1)
    assert result.test_rows == 12 * (TEST_YEARS[1] - TEST_YEARS[0] + 1)
    # Climatology on 2001–2010 (hand count from the CSV: 86 of 120 months exact).
    assert result.climatology.accuracy == pytest.approx(86 / 120)
    for r in each(result.results):
        assert 0.5 < r.accuracy_mean < 0.85 and 0.2 < r.mae_mean < 0.8
        assert len(r.per_seed) == 3
    d = result.to_dict()
    entry = d["precisions"][1]
    for key in ("precision", "accuracy_mean", "accuracy_std", "mae_mean", "bytes_per_value"):
        assert key in entry
    assert entry["precision"] == "fp16" and entry["bytes_per_value"] == 2
    assert d["baseline"]["precision"] == "fp64" and "accuracy" in d["climatology"]


@pytest.mark.frameworks
def test_same_seed_same_numbers():
    """Seeded weights, batches and stochastic rounding: a rerun is identical."""
    data, chosen = hurricanes(), parse_precisions("int4")
    a = run_study(data, chosen, [7], rounding="stochastic")
    b = run_study(data, chosen, [7], rounding="stochastic")
    assert a.to_dict() == b.to_dict()
    c = run_study(data, chosen, [8], rounding="stochastic")
    assert a.to_dict()["precisions"] != c.to_dict()["precisions"]


@pytest.mark.frameworks
@pytest.mark.parametrize("framework", ["tensorflow", "chainer"])
def test_other_frameworks_run_the_same_study(framework, hurricane_study):
    """Same initial weights and batches: fp64 accuracy within 2 test months of PyTorch's."""
    ours = run_study(hurricanes(), parse_precisions("fp64"), [0], framework=framework)
    torch_seed0 = hurricane_study.baseline.per_seed[0]
    assert abs(ours.baseline.accuracy_mean - torch_seed0.accuracy) <= 2 / 120
    assert abs(ours.baseline.mae_mean - torch_seed0.mae) <= 2 / 120


def test_climatology_is_the_months_mean_count():
    data = hurricanes()
    months = np.arange(len(data.y_test)) % 12
    sept = data.no_skill.predictions[months == 8]
    assert np.allclose(sept, sept[0]) and 1.5 < sept[0] < 3.5   # the season's peak
    assert data.no_skill.predictions[months == 1].max() == 0.0   # February: no hurricanes


def test_csv_classification_regression_and_bad_data(tmp_path):
    rng = np.random.default_rng(3)
    x = rng.normal(size=(40, 2))
    lines = ["a,b,label,value"] + [f"{p:.5f},{q:.5f},{int(p > 0)},{p + 2 * q:.5f}"
                                   for p, q in x]
    path = tmp_path / "data.csv"
    path.write_text("\n".join(lines) + "\n")
    cls = load_dataset(str(path), "label")
    assert cls.task == "classification" and cls.classes == 2
    assert cls.features == ("a", "b", "value")
    reg = load_dataset(str(path), "value")
    assert reg.task == "regression" and len(reg.y_test) == 10
    bad = tmp_path / "bad.csv"
    bad.write_text("\n".join(lines[:5] + ["0.1,,1,0.2"] + lines[5:]) + "\n")
    with pytest.raises(InputError) as info:
        load_dataset(str(bad), "label")
    assert info.value.field == "b" and info.value.line == 6
    with pytest.raises(InputError, match="missing column"):
        load_dataset(str(path), "nope")
