"""Invariants of simulated sweeps under every scheduler and failure policy (hypothesis):
no GPU slot is ever held by two attempts, every attempt ends exactly once, the trial
counts add up, and busy time never exceeds the capacity."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import each
from tests.hpo.helpers import sim

POLICIES = ["retry", "ignore", "cancel_successors", "fail"]
SCHEDULERS = ["fifo", "longest_first", "asha", "hyperband"]


@st.composite
def sweeps(draw):
    scheduler = draw(st.sampled_from(SCHEDULERS))
    n = draw(st.integers(1, 14))
    hpo = {"search": "random", "n_trials": n, "epoch_time": draw(st.sampled_from(["1s", "2.5s"])),
           "space": {"x": {"low": 0.0, "high": 1.0}, "gpus": draw(st.sampled_from(
               [[1], [1, 2]]))},
           "scheduler": scheduler, "on_failure": draw(st.sampled_from(POLICIES)),
           "max_retries": draw(st.integers(0, 3)),
           "failures": {"probability": draw(st.sampled_from([0.0, 0.2, 0.5]))}}
    if scheduler in ("asha", "hyperband"):
        top = draw(st.sampled_from([3, 9]))
        hpo["rungs"] = {"min_epochs": 1, "max_epochs": top, "reduction_factor": 3}
    else:
        hpo["space"]["epochs"] = [draw(st.integers(1, 6)), draw(st.integers(1, 6))]
        top = max(hpo["space"]["epochs"])
    if draw(st.booleans()):
        hpo["checkpoint_every_epochs"] = draw(st.integers(1, 3))
    injections = []
    for _ in range(draw(st.integers(0, 3))):
        injections.append({"trial": draw(st.integers(0, n - 1)),
                           "at_epoch": draw(st.sampled_from([x for x in (1, 1.5, 2, 3)
                                                             if x <= top]))})
    if draw(st.booleans()):
        injections.append({"node": 0, "at": draw(st.sampled_from([0.5, 2, 3.5])),
                           "repair": draw(st.sampled_from([0, 1, 4]))})
    hpo["inject_failures"] = injections
    return hpo, draw(st.integers(1, 2)), draw(st.integers(2, 3)), draw(st.integers(0, 99))


@settings(max_examples=60)
@given(sweeps())
def test_schedule_invariants(case):
    hpo, nodes, gpus, seed = case
    run = sim(hpo, nodes=nodes, gpus=gpus, seed=seed)
    s = run.summary
    held: dict[int, tuple[int, int]] = {}
    open_: set[tuple[int, int]] = set()
    last_t = 0.0
    for t, kind, f in each(run.events):
        assert t >= last_t - 1e-9          # the log is in time order
        last_t = t
        key = (f.get("trial"), f.get("attempt"))
        if kind == "trial_start":
            assert key not in open_
            open_.add(key)
            for slot in f["slots"]:
                assert slot not in held, f"slot {slot} double-booked at {t}"
                held[slot] = key
        elif kind in ("trial_end", "trial_failed", "trial_preempted") or (
                kind == "trial_cancelled" and f["attempt"] is not None):
            assert key in open_
            open_.remove(key)
            for slot in [sl for sl, k in held.items() if k == key]:
                del held[slot]
    assert not open_ and not held
    assert s.trials_completed + s.trials_failed + s.trials_cancelled == s.trials
    assert s.busy_slot_s <= s.slots * s.makespan_s + 1e-6
    assert 0 <= s.lost_to_failures_s <= s.busy_slot_s + 1e-6
    assert s.retries <= s.failures
    if hpo["on_failure"] != "retry":
        assert s.retries == 0
    if s.status == "failed":
        assert hpo["on_failure"] == "fail" and s.trials_failed == 1
