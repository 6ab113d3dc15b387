"""One definition of "best" in ``hpo run``, ``hpo replay`` and ``hpo report``: the best
value of the named metric over every epoch reported, and a best-so-far that only moves
the better way."""

from __future__ import annotations

import csv
import json

from hypothesis import given
from hypothesis import strategies as st

from testbed import events as ev
from testbed.app.cli.main import main
from testbed.app.hpo.best import replayed_best, running_best
from testbed.hpo.trace import summarise
from tests.conftest import each

#: trial → values after epochs 1, 2, 3 (trial 0 is best at epoch 2, not at its last).
VALUES = {0: (0.5, 0.3, 0.4), 1: (0.6, 0.45, 0.35)}


def _measured() -> list[tuple[float, str, dict]]:
    """A real run's trace: trials side by side, 1 s per epoch, a result after each."""
    out: list[tuple[float, str, dict]] = [(0.0, ev.JOB_START, {"slots": 2})]
    for trial, values in VALUES.items():
        out.append((0.0, ev.TRIAL_START, {"trial": trial, "attempt": 0, "slots": [trial],
                                          "from_epoch": 0, "to_epoch": 3,
                                          "config": {"lr": 0.1 * (trial + 1)}}))
        for e, v in enumerate(values, start=1):
            out.append((float(e), ev.TRIAL_RESULT, {"trial": trial, "attempt": 0, "epoch": e,
                                                    "value": v, "epoch_s": 1.0}))
        out.append((3.0, ev.TRIAL_END, {"trial": trial, "attempt": 0, "epoch": 3,
                                        "value": values[-1], "status": "completed"}))
    return sorted(out, key=lambda e: e[0])


def _replayed() -> list[tuple[float, str, dict]]:
    """The simulator's replay on one slot: trial 0 then trial 1, values only at the end."""
    out: list[tuple[float, str, dict]] = [(0.0, ev.JOB_START, {"slots": 1})]
    for trial, (t0, t1) in {0: (0.0, 6.0), 1: (6.0, 9.0)}.items():
        out.append((t0, ev.TRIAL_START, {"trial": trial, "attempt": 0, "slots": [0],
                                         "from_epoch": 0, "to_epoch": 3}))
        out.append((t1, ev.TRIAL_END, {"trial": trial, "attempt": 0, "epoch": 3,
                                       "value": VALUES[trial][-1], "status": "completed"}))
    return out


def test_the_best_is_the_best_epoch_in_a_run_and_in_its_replay():
    measured = summarise(_measured(), mode="min")
    assert (measured.best_value, measured.best_trial, measured.best_t_s) == (0.3, 0, 2.0)
    replay = _replayed()
    plain = summarise(replay, mode="min")
    assert plain.best_value == 0.35          # the last epochs only: not the definition
    best = replayed_best(plain, replay, _measured(), "min")
    assert (best.best_value, best.best_trial) == (measured.best_value, measured.best_trial)
    assert best.best_t_s == 4.0              # epoch 2 of 3 in trial 0's 6 s span
    assert best.best_config == {"lr": 0.1}
    assert [p[1] for p in best.best_so_far] == [0.5, 0.3]


def test_with_max_the_best_is_the_highest_epoch():
    best = replayed_best(summarise(_replayed(), mode="max"), _replayed(), _measured(), "max")
    assert (best.best_value, best.best_trial) == (0.6, 1)


@given(st.lists(st.tuples(st.floats(0, 1e6), st.floats(-1e6, 1e6), st.integers(0, 50)),
                max_size=60), st.sampled_from(["min", "max"]))
def test_best_so_far_only_moves_the_better_way(points, mode):
    curve = running_best(points, mode)
    values = [v for _, v, _ in curve]
    times = [t for t, _, _ in curve]
    assert times == sorted(times)
    assert values == sorted(values, reverse=(mode == "min"))
    assert len(set(values)) == len(values)
    if points:
        best = min if mode == "min" else max
        assert values[-1] == best(v for _, v, _ in points)


def test_the_report_and_simulate_name_the_metric_and_fall(tmp_path, capsys):
    out_dir = tmp_path / "r"
    try:
        main(["hpo", "report", "hpo-cifar-grid", "-o", str(out_dir)])
    except SystemExit as exc:
        assert not exc.code
    capsys.readouterr()
    html = (out_dir / "index.html").read_text()
    assert "best val_loss (lowest of any epoch)" in html and "only falls" in html
    with open(out_dir / "best_so_far.csv") as fh:
        values = [float(r["value"]) for r in csv.DictReader(fh)]
    assert len(values) >= 3
    for a, b in each(list(zip(values, values[1:], strict=False))):
        assert b < a
    try:
        main(["hpo", "simulate", "hpo-cifar-grid", "--json"])
    except SystemExit as exc:
        assert not exc.code
    doc = json.loads(capsys.readouterr().out)
    assert (doc["metric"], doc["mode"]) == ("val_loss", "min")
    assert doc["best_value"] == values[-1]
