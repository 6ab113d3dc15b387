"""Replaying a supervised run: the kill schedule and the simulator agree, and the CLI
reads a supervisor timeline."""

from __future__ import annotations

import json

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from simulators.engine import run_simpy
from simulators.fast import run_fast
from testbed.calibration.replay import (
    ReplayCosts,
    RunPlan,
    kill_times,
    measured_from_timeline,
    replay_spec,
    run_plan,
)
from testbed.measurements import Kill, TrainConfig
from tests.calibration.conftest import one_line_error, run_testbed

CFG = TrainConfig(framework="torch", model="mlp", model_options={"width": 64},
                  input_shape="1x8x8", batch_size=16)
COSTS = ReplayCosts(step_s=0.01, checkpoint_s=0.05, load_s=0.02, restart_s=3.0, startup_s=3.5,
                    ckpt_bytes=1e5, basis="test")

kills = st.lists(st.one_of(
    st.builds(lambda s: Kill(at_step=s), st.integers(1, 30)),
    st.just(Kill(during_checkpoint=True)),
    st.builds(lambda s, d: Kill(at_step=s, damage=d), st.integers(1, 30),
              st.sampled_from(["bitflip", "truncate"])),
    st.builds(lambda t: Kill(at_s=t), st.floats(0.01, 8.0))), max_size=4)


@given(plan_kills=kills, steps=st.integers(2, 30), every=st.integers(1, 8))
def test_schedule_and_both_engines_agree(plan_kills, steps, every):
    plan = RunPlan(CFG, steps, every, tuple(plan_kills))
    schedule = kill_times(plan, COSTS)
    # a kill inside the work a damaged checkpoint's fall-back re-does is the one case the
    # simulator sees differently (during its restart: the replay module's doc)
    times, extra = schedule.kill_times_s, schedule.fallback_extra_s
    assume(all(times[i + 1] >= times[i] + COSTS.restart_s + COSTS.load_s + extra[i]
               for i in range(len(times) - 1) if extra[i]))
    spec = replay_spec(plan, COSTS, schedule, "prop")
    fast = run_fast(spec, 0, 0)
    simpy, _ = run_simpy(spec, 0, 0)
    assert fast.wall_s == pytest.approx(schedule.wall_s, rel=1e-9, abs=1e-9)
    assert simpy.wall_s == pytest.approx(schedule.wall_s, rel=1e-9, abs=1e-9)
    assert fast.failures == len(schedule.kill_times_s)


def test_a_kill_after_a_checkpoint_step_loses_that_checkpoint():
    # kill after step 4 with checkpoints every 4: the worker stops before checkpoint 4,
    # so the restart resumes from step 0 and all 4 steps are lost
    plan = RunPlan(CFG, 8, 4, (Kill(at_step=4),))
    schedule = kill_times(plan, COSTS)
    assert schedule.lost_steps == 4
    assert schedule.kill_times_s == pytest.approx((0.04,), abs=1e-6) and schedule.start_s == 3.5
    # 8 steps, one lost 4, a 3 s restart, no load (nothing committed), one checkpoint
    assert schedule.wall_s == pytest.approx(0.04 + 3.0 + 0.08 + 0.05, abs=1e-6)


def test_a_damaged_checkpoint_falls_back_to_the_one_before():
    # 16 steps, checkpoints every 4; killed after step 10 with the newest checkpoint (8)
    # damaged: the restart resumes from 4, so steps 5–10 are lost, not just 9–10
    plan = RunPlan(CFG, 16, 4, (Kill(at_step=10, damage="bitflip"),))
    schedule = kill_times(plan, COSTS)
    assert schedule.lost_steps == 6
    # the work re-done because of the fall-back: steps 5–8 and the checkpoint at 8
    assert schedule.rework_s == pytest.approx((4 * 0.01 + 0.05,))
    assert schedule.wall_s == pytest.approx(
        10 * 0.01 + 2 * 0.05 + 3.0 + 0.02 + 12 * 0.01 + 2 * 0.05, abs=1e-6)
    # keep 1: nothing older is kept, the restart starts from scratch
    alone = kill_times(RunPlan(CFG, 16, 4, (Kill(at_step=10, damage="bitflip"),), keep=1),
                       COSTS)
    assert alone.lost_steps == 10
    # the simulator's replay lands on the same wall time and books the re-done work as lost
    from testbed.calibration.replay import predicted_of
    rep = run_fast(replay_spec(plan, COSTS, schedule, "fallback"), 0, 0)
    assert rep.wall_s == pytest.approx(schedule.wall_s, rel=1e-9)
    pred = predicted_of(rep.wall_s, rep.checkpoint_s, rep.restart_s, schedule, COSTS, 1)
    assert pred.restart_s == pytest.approx(3.0 + 0.02, abs=1e-6)


def test_a_kill_during_the_first_start_up_moves_the_start():
    plan = RunPlan(CFG, 2, 1, (Kill(at_s=1.0),))
    schedule = kill_times(plan, COSTS)
    # spawned at 0, killed at 1 s (still importing), restarted: training from 4 s
    assert schedule.start_s == pytest.approx(4.0) and schedule.kill_times_s == ()
    assert schedule.total_s == pytest.approx(4.0 + 2 * 0.01 + 0.05)


def _timeline(tmp_path):
    cfg = CFG.model_dump(mode="json")
    events = [
        {"t_s": 0.0, "event": "job_start", "steps": 8, "checkpoint_every": 4, "config": cfg},
        {"t_s": 3.6, "event": "checkpoint_commit", "step": 4, "duration_s": 0.05},
        {"t_s": 3.7, "event": "failure", "step": 6, "at_step": 6},
        {"t_s": 6.8, "event": "restart_end", "step": 4, "lost_steps": 2},
        {"t_s": 6.9, "event": "job_end", "step": 8},
    ]
    path = tmp_path / "timeline.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in events))
    return path, events


def test_timeline_gives_the_plan_and_the_measured_figures(tmp_path):
    path, events = _timeline(tmp_path)
    plan = run_plan(events, str(path))
    assert plan.steps == 8 and plan.checkpoint_every == 4
    assert plan.kills == (Kill(at_step=6),)
    m = measured_from_timeline(events)
    assert (m.wall_time_s, m.lost_steps, m.kills) == (6.9, 2, 1)
    assert m.restart_s == pytest.approx(3.1) and m.checkpoint_s == 0.05


def test_replay_cli_needs_a_calibrated_profile(tmp_path):
    path, _ = _timeline(tmp_path)
    line = one_line_error(run_testbed("simulate", "--replay-run", str(path), "--system",
                                      "laptop-cpu"))
    assert "records_fit" in line
    line = one_line_error(run_testbed("simulate", "--replay-run", str(path)))
    assert "--system" in line
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"t_s": 0, "event": "job_start"}\n')
    assert "job_end" in one_line_error(run_testbed("simulate", "--replay-run", str(bad),
                                                   "--system", "laptop-cpu"))
