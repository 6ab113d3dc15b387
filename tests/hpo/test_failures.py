"""Failure policies on small cases computed by hand (1 s per epoch everywhere).

Notation: "t0 0–5 ✗" = trial 0 runs from 0 s to 5 s and fails. An injection
``at_epoch: E`` strikes when E epochs are trained, before epoch E's checkpoint.
"""

from __future__ import annotations

import pytest

from tests.hpo.helpers import grid_of, sim, starts


def inj(trial, at_epoch=None, at=None, attempt=None):
    d = {"trial": trial}
    for k, v in (("at_epoch", at_epoch), ("at", at), ("attempt", attempt)):
        if v is not None:
            d[k] = v
    return d


def test_retry_from_scratch():
    # t0 0–5 ✗, retry on the same GPU 5–15, t1 15–25
    s = sim(grid_of([10, 10], inject_failures=[inj(0, 5)])).summary
    assert (s.makespan_s, s.retries, s.lost_to_failures_s) == (25, 1, 5)
    assert (s.trials_completed, s.trials_failed, s.failures) == (2, 0, 1)


def test_retry_from_checkpoint():
    # checkpoints every 2 epochs: the retry resumes at epoch 4: 5–11, t1 11–21
    s = sim(grid_of([10, 10], checkpoint_every_epochs=2, inject_failures=[inj(0, 5)])).summary
    assert (s.makespan_s, s.lost_to_failures_s) == (21, 1)


def test_failure_at_a_checkpoint_epoch_strikes_before_it_commits():
    # at_epoch 4 with checkpoints every 2: epoch 4's checkpoint is lost, resume at 2
    run = sim(grid_of([10, 10], checkpoint_every_epochs=2, inject_failures=[inj(0, 4)]))
    assert run.summary.makespan_s == 22 and run.summary.lost_to_failures_s == 2
    failed = [f for _, k, f in run.events if k == "trial_failed"][0]
    assert failed["epoch"] == 4 and failed["resume_epoch"] == 2


def test_checkpoint_and_restore_costs():
    # t0: epochs 1-2 (2 s), ckpt (0.5), 3-4, ckpt → 5.0, epoch 5 ends at 6.0 ✗ (resume 4)
    # retry: restore 1 + epochs 5-10 (6) + ckpts at 6, 8 (1.0) = 8 → ends at 14
    # t1: 10 + 4 ckpts × 0.5 = 12 → ends at 26; lost = 6.0 − (4 + 2 × 0.5) = 1.0
    s = sim(grid_of([10, 10], checkpoint_every_epochs=2, checkpoint_time="0.5s",
                    restore_time="1s", inject_failures=[inj(0, 5)])).summary
    assert s.makespan_s == pytest.approx(26.0)
    assert s.lost_to_failures_s == pytest.approx(1.0)


def test_ignore():
    # t0 0–5 ✗ given up, t1 5–15
    s = sim(grid_of([10, 10], on_failure="ignore", inject_failures=[inj(0, 5)])).summary
    assert (s.makespan_s, s.trials_completed, s.trials_failed, s.retries) == (15, 1, 1, 0)


def test_cancel_successors():
    # 2 GPUs: t0 ✗ at 5; t1 (running) finishes at 10; t2 (queued, a successor) cancelled
    s = sim(grid_of([10, 10, 10], on_failure="cancel_successors",
                    inject_failures=[inj(0, 5)]), gpus=2).summary
    assert (s.makespan_s, s.trials_completed, s.trials_failed, s.trials_cancelled) == \
        (10, 1, 1, 1)


def test_cancel_successors_keeps_predecessors():
    # 2 GPUs, 4 trials: t1 ✗ at 3 → t2, t3 cancelled; t0 (a predecessor) finishes at 10
    run = sim(grid_of([10, 10, 10, 10], on_failure="cancel_successors",
                      inject_failures=[inj(1, 3)]), gpus=2)
    s = run.summary
    assert (s.makespan_s, s.trials_completed, s.trials_cancelled) == (10, 1, 2)
    assert {f["trial"] for f in starts(run)} == {0, 1}


def test_fail_stops_everything():
    # 2 GPUs, 3 trials: t0 ✗ at 5 → t1 (running since 0) and t2 (queued) cancelled at 5
    s = sim(grid_of([10, 10, 10], on_failure="fail", inject_failures=[inj(0, 5)]),
            gpus=2).summary
    assert (s.makespan_s, s.status) == (5, "failed")
    assert (s.trials_completed, s.trials_failed, s.trials_cancelled) == (0, 1, 2)
    assert s.lost_to_failures_s == 10          # t0's 5 s and t1's 5 s thrown away


def test_failure_absorbed_by_idle_slack():
    # 2 GPUs: t0 (100 s) on GPU 0 sets the makespan; t1 ✗ at 10, retried 10–30, t2 30–50
    clean = sim(grid_of([100, 20, 20]), gpus=2).summary
    hit = sim(grid_of([100, 20, 20], inject_failures=[inj(1, 10)]), gpus=2).summary
    assert clean.makespan_s == hit.makespan_s == 100
    assert hit.lost_to_failures_s == 10 and hit.retries == 1
    assert hit.idle_slot_s == clean.idle_slot_s - 10


def test_retry_same_worker_then_another():
    # 2 GPUs: t0 ✗ at 5 (GPU 0), retried at once on GPU 0 and ✗ 3 epochs in (t = 8);
    # the second retry must avoid GPU 0: GPU 1 is busy with t1 until 10, so t2 takes
    # GPU 0 at 8 (8–18) and t0 runs on GPU 1 at 10–20.
    run = sim(grid_of([10, 10, 10], inject_failures=[inj(0, 5), inj(0, 3, attempt=1)]),
              gpus=2)
    t0 = [(f["attempt"], f["slots"], f["kind"]) for f in starts(run) if f["trial"] == 0]
    assert t0 == [(0, [0], "new"), (1, [0], "retry"), (2, [1], "retry")]
    assert run.summary.makespan_s == 20 and run.summary.retries == 2


def test_retries_exhausted_fail_the_trial_and_the_sweep_goes_on():
    # max_retries 1: t0 0–5 ✗, 5–8 ✗ (final), t1 8–18
    s = sim(grid_of([10, 10], max_retries=1,
                    inject_failures=[inj(0, 5), inj(0, 3, attempt=1)])).summary
    assert (s.makespan_s, s.trials_failed, s.trials_completed, s.retries) == (18, 1, 1, 1)


def test_single_worker_retries_stay_on_it():
    # 1 GPU: "another worker" does not exist, so the second retry runs on GPU 0 again
    s = sim(grid_of([10], inject_failures=[inj(0, 5), inj(0, 3, attempt=1)])).summary
    assert (s.makespan_s, s.trials_completed, s.retries) == (18, 1, 2)


def test_time_injection():
    # 'at: 2.5s' into attempt 0: t0 0–2.5 ✗, retry 2.5–12.5
    s = sim(grid_of([10], inject_failures=[inj(0, at="2.5s")])).summary
    assert s.makespan_s == pytest.approx(12.5) and s.lost_to_failures_s == pytest.approx(2.5)


def test_node_failure_preempts_without_using_a_retry():
    # node 0 fails at 5 s, back at 8 s: t0 PREEMPTED (resumes at its checkpoint 4:
    # 8–14), t1 14–24. No retry is used and the trial never counts as failed — even
    # with max_retries 0 and on_failure 'fail'.
    hpo = grid_of([10, 10], checkpoint_every_epochs=2, max_retries=0, on_failure="fail",
                  inject_failures=[{"node": 0, "at": 5, "repair": 3}])
    run = sim(hpo)
    s = run.summary
    assert (s.makespan_s, s.preemptions, s.failures, s.retries) == (24, 1, 0, 0)
    assert (s.trials_completed, s.trials_failed, s.status) == (2, 0, "completed")
    kinds = [k for _, k, _ in run.events]
    assert "trial_preempted" in kinds and "node_up" in kinds and "trial_failed" not in kinds


def test_node_failure_moves_trials_to_another_node():
    # 2 nodes × 1 GPU: node 0 dies at 5 for 100 s and t0 is preempted; t1 holds node 1
    # until 10, then t0 resumes there from scratch (no checkpoints): 10–20.
    hpo = grid_of([10, 10], inject_failures=[{"node": 0, "at": 5, "repair": 100}])
    run = sim(hpo, nodes=2)
    assert run.summary.makespan_s == 20
    assert [f["node"] for f in starts(run)] == [0, 1, 1]


def test_the_issue_example_loses_ten_seconds():
    # trial 26 (100 epochs, last to start) dies at epoch 50 and resumes from epoch 40
    from simulators.hpo.engine import simulate_hpo
    from testbed.hpo.plan import build_plan
    from testbed.scenario.schema import load_scenario
    s = simulate_hpo(build_plan(load_scenario("scenarios/hpo-cifar-grid.yaml"))).summary
    assert (s.makespan_s, s.lost_to_failures_s, s.retries, s.trials_completed) == \
        (450, 10, 1, 27)


def test_sampled_failures_are_keyed_by_trial_and_attempt():
    # the same trials fail under fifo and longest_first (common random numbers)
    base = grid_of([5, 10, 20, 40] * 5, failures={"probability": 0.3}, on_failure="ignore")
    a = sim(base, gpus=3, seed=7)
    b = sim({**base, "scheduler": "longest_first"}, gpus=3, seed=7)

    def failed(run):
        return sorted(f["trial"] for _, k, f in run.events if k == "trial_failed")
    assert failed(a) == failed(b) and failed(a)


def test_hazard_failures_scale_with_running_time():
    hpo = grid_of([100] * 40, failures={"trial_mtbf": "50s"}, on_failure="ignore")
    s = sim(hpo, gpus=8, seed=3).summary
    # P(an exponential(50 s) failure within 100 s) = 1 − e^−2 ≈ 0.865 → ≈ 35 of 40
    assert 28 <= s.trials_failed <= 39
