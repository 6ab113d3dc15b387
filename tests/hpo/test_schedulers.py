"""ASHA and Hyperband: the papers' numbers, hand-computed schedules, and a property
test of ASHA's O(log n) rung against a naive sort."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from testbed.hpo.asha import Rung, rung_levels
from testbed.hpo.hyperband import brackets
from tests.conftest import each
from tests.hpo.helpers import sim, starts


def test_hyperband_brackets_match_li_et_al_table_1():
    # Li et al., JMLR 2018, Table 1: R = 81, η = 3
    bs = brackets(1, 81, 3)
    assert [b.n for b in bs] == [81, 34, 15, 8, 5]
    assert [b.epochs for b in bs] == [(1, 3, 9, 27, 81), (3, 9, 27, 81), (9, 27, 81),
                                      (27, 81), (81,)]


def test_asha_rung_levels():
    assert rung_levels(1, 81, 3) == (1, 3, 9, 27, 81)
    assert rung_levels(1, 100, 3) == (1, 3, 9, 27, 81, 100)
    assert rung_levels(5, 5, 2) == (5,)


@given(st.lists(st.tuples(st.integers(0, 20), st.booleans()), min_size=1, max_size=60),
       st.integers(2, 4))
def test_rung_equals_naive_top_k(ops, eta):
    """After every insertion (and promotions of the best promotable), the rung's
    promotable trial is the best unpromoted one in the top ⌊n/η⌋ of a full sort."""
    rung = Rung(eta)
    seen: list[tuple[float, int]] = []
    promoted: set[int] = set()
    for trial, (value, promote) in enumerate(each(ops)):
        rung.add(float(value), trial)
        seen.append((float(value), trial))
        top = sorted(seen)[:len(seen) // eta]
        expect = next((t for _, t in top if t not in promoted), None)
        assert rung.best_promotable() == expect
        if promote and expect is not None:
            rung.promote(expect)
            promoted.add(expect)


def _values(rows):
    return [{"trial": t, "epoch": e, "value": v} for t, e, v in rows]


def test_asha_by_hand():
    # 1 GPU, rungs 1/3/9, η 3, 3 trials: t0 0–1, t1 1–2, t2 2–3; rung 0 has 3 results,
    # its top 1 is t1 (0.3) → promoted 1→3 epochs, 3–5; rung 1 has 1 result (top 0).
    hpo = {"search": "grid", "space": {"x": [0, 1, 2]}, "epoch_time": "1s",
           "scheduler": "asha", "rungs": {"min_epochs": 1, "max_epochs": 9,
                                          "reduction_factor": 3},
           "objective": _values([(0, 1, 0.5), (1, 1, 0.3), (2, 1, 0.9), (1, 3, 0.2)])}
    run = sim(hpo)
    assert [(f["trial"], f["from_epoch"], f["to_epoch"]) for f in starts(run)] == \
        [(0, 0, 1), (1, 0, 1), (2, 0, 1), (1, 1, 3)]
    s = run.summary
    assert s.makespan_s == 5 and s.trials_completed == 3 and s.trials_stopped_early == 3
    assert (s.best_value, s.best_trial) == (0.2, 1)


def test_hyperband_by_hand():
    # min 1, max 3, η 3: bracket s=1 (3 trials at 1 epoch, best 1 to 3 epochs), then
    # s=0 (2 trials at 3 epochs). 2 GPUs: t0, t1 0–1; t2 on GPU 0 1–2 while bracket
    # s=0 opens on GPU 1: t3 1–4; rung ranked at 2: t1 (best) promoted 2–4; t4 4–7.
    hpo = {"search": "grid", "space": {"x": [0, 1, 2, 3, 4]}, "epoch_time": "1s",
           "scheduler": "hyperband", "rungs": {"min_epochs": 1, "max_epochs": 3,
                                               "reduction_factor": 3},
           "objective": _values([(0, 1, 0.5), (1, 1, 0.3), (2, 1, 0.9), (1, 3, 0.2),
                                 (3, 3, 0.4), (4, 3, 0.1)])}
    run = sim(hpo, gpus=2)
    got = [(f["trial"], f["from_epoch"], f["to_epoch"], run.events[i][0])
           for i, f in [(i, e[2]) for i, e in enumerate(run.events) if e[1] == "trial_start"]]
    assert got == [(0, 0, 1, 0), (1, 0, 1, 0), (2, 0, 1, 1), (3, 0, 3, 1), (1, 1, 3, 2),
                   (4, 0, 3, 4)]
    s = run.summary
    assert s.makespan_s == 7 and s.best_trial == 4 and s.trials_stopped_early == 2


def test_asha_large_random_search_is_sane():
    hpo = {"search": "random", "n_trials": 500, "epoch_time": "10s", "scheduler": "asha",
           "space": {"lr": {"low": 1e-4, "high": 1e-1, "log": True},
                     "optimizer": ["adam", "sgd"]},
           "rungs": {"min_epochs": 1, "max_epochs": 27, "reduction_factor": 3}}
    run = sim(hpo, nodes=4, gpus=8, seed=1)
    s = run.summary
    assert s.trials == 500 and s.trials_completed == 500
    top = [f for _, k, f in run.events if k == "trial_end" and f["epoch"] == 27]
    # about 500/27 trials reach the top rung (ASHA promotes 1/η per rung)
    assert 10 <= len(top) <= 30
    assert 0 < s.utilisation <= 1
    # the best-so-far curve only improves
    values = [v for _, v, _ in s.best_so_far]
    assert values == sorted(values, reverse=True)
    assert s.best_at(s.makespan_s)[0] == s.best_value


def test_tpe_through_optuna_ask_tell():
    hpo = {"search": "tpe", "n_trials": 30, "epochs": 5, "epoch_time": "1s",
           "space": {"lr": {"low": 1e-4, "high": 1e-1, "log": True},
                     "optimizer": ["adam", "sgd", "rmsprop"]}}
    a = sim(hpo, gpus=2, seed=5)
    b = sim(hpo, gpus=2, seed=5)
    assert a.log_text() == b.log_text()            # seeded TPE: reproducible
    assert a.summary.trials_completed == 30 and a.summary.makespan_s == 75
    configs = [f["config"] for f in starts(a)]
    assert all(1e-4 <= c["lr"] <= 1e-1 for c in configs)
