"""Loops whose length came from an input are closed forms now (issue 20): each one
equals the walk it replaced, on every small case hypothesis draws, and answers at once
on a huge one.

* the kill schedule of a replayed run (:mod:`testbed.calibration.replay`) walked every
  step of every incarnation — 10¹⁵ steps never answered;
* a plan's failure-free time and its checkpoints per level
  (:meth:`testbed.resilience.plan.JobPlan.failure_free_s`) summed every segment — and
  the closed form of the expected wall time built a list of 10¹⁵ segment lengths;
* the rollback to a surviving checkpoint level walked back one checkpoint at a time.
"""

from __future__ import annotations

import math
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from testbed.calibration.replay import (
    AT_STEP_EARLY_S,
    DURING_CHECKPOINT_FRACTION,
    ReplayCosts,
    RunPlan,
    kill_times,
)
from testbed.calibration.replay import _run_incarnation as closed_form
from testbed.measurements import Kill, TrainConfig
from testbed.resilience.plan import CkptLevel, JobPlan

CFG = TrainConfig(framework="torch", model="mlp", input_shape="1x8x8", batch_size=16)


def walk(plan, costs, kill, t, step, committed, spawn):
    """The step-by-step walk the closed form replaced (the reference)."""
    every = plan.checkpoint_every
    deadline = spawn + kill.at_s if kill is not None and kill.at_s is not None else math.inf
    if deadline < t:
        return deadline, deadline, step, committed
    while step < plan.steps:
        if t + costs.step_s > deadline:
            return deadline, deadline, step, committed
        step += 1
        t += costs.step_s
        if kill is not None and kill.at_step is not None and step >= kill.at_step:
            return t - AT_STEP_EARLY_S, t - AT_STEP_EARLY_S, step, committed
        if step % every == 0 and step < plan.steps:
            if kill is not None and kill.during_checkpoint:
                return t + DURING_CHECKPOINT_FRACTION * costs.checkpoint_s, t, step, committed
            if t + costs.checkpoint_s > deadline:
                return deadline, deadline, step, committed
            t += costs.checkpoint_s
            committed = step
    return None, t, step, committed


kills = st.one_of(st.none(), st.builds(lambda s: Kill(at_step=s), st.integers(1, 60)),
                  st.just(Kill(during_checkpoint=True)),
                  st.builds(lambda t: Kill(at_s=t), st.floats(0.01, 40.0)))


@settings(max_examples=300)
@given(steps=st.integers(1, 50), every=st.integers(1, 12), kill=kills,
       step_s=st.sampled_from([0.01, 0.1, 0.37, 1.0]),
       ckpt_s=st.sampled_from([0.0, 0.05, 0.5, 2.0]), t=st.floats(0.0, 10.0),
       data=st.data())
def test_the_kill_schedule_in_closed_form_is_the_walk(steps, every, kill, step_s, ckpt_s, t,
                                                      data):
    plan = RunPlan(CFG, steps, every, ())
    costs = ReplayCosts(step_s=step_s, checkpoint_s=ckpt_s, load_s=0.02, restart_s=3.0,
                        startup_s=3.5, ckpt_bytes=1.0, basis="test")
    step = data.draw(st.integers(0, steps))
    committed = data.draw(st.sampled_from([0, (step // every) * every]))
    spawn = data.draw(st.floats(0.0, t))
    got = closed_form(plan, costs, kill, t, step, committed, spawn)
    ref = walk(plan, costs, kill, t, step, committed, spawn)
    assert (got[0] is None) == (ref[0] is None) and got[2:] == ref[2:]
    assert got[1] == pytest.approx(ref[1], rel=1e-9, abs=1e-9)
    if ref[0] is not None:
        assert got[0] == pytest.approx(ref[0], rel=1e-9, abs=1e-9)


def test_a_billion_steps_schedule_at_once():
    plan = RunPlan(CFG, 10**9, 1, (Kill(at_s=1e5), Kill(at_step=999_999_999),
                                   Kill(during_checkpoint=True)))
    costs = ReplayCosts(step_s=1e-3, checkpoint_s=1e-4, load_s=0.0, restart_s=2.0,
                        startup_s=1.0, ckpt_bytes=1.0, basis="test")
    start = time.perf_counter()
    schedule = kill_times(plan, costs)
    assert time.perf_counter() - start < 0.5
    assert len(schedule.kill_times_s) == 3 and schedule.wall_s > 10**6


levels_st = st.lists(st.tuples(st.floats(0.0, 5.0), st.integers(1, 8)), min_size=1, max_size=4)


def _plan(levels, work, interval, persist):
    lv = tuple(CkptLevel(f"l{i}", cost, 0.0, every if i else 1)
               for i, (cost, every) in enumerate(levels))
    return JobPlan.build(work, interval, lv, persist_s=persist)


@settings(max_examples=300)
@given(levels=levels_st, work=st.floats(10.0, 2000.0), interval=st.floats(1.0, 60.0),
       persist=st.sampled_from([0.0, 3.0, 30.0]))
def test_failure_free_time_and_level_counts_are_the_sums_over_segments(levels, work, interval,
                                                                       persist):
    plan = _plan(levels, work, interval, persist)
    counts = [0] * len(plan.levels)
    total = plan.work_s
    for i in range(1, plan.n_segments + 1):
        counts[plan.level_of(i)] += 1
        total += plan.cost_of(i)
        if plan.persist_s:
            nxt = plan.segment_s(i + 1) if i < plan.n_segments else 0.0
            total += max(0.0, plan.persist_s - nxt)
    assert plan.level_counts() == counts
    assert plan.failure_free_s() == pytest.approx(total, rel=1e-12)


@settings(max_examples=300)
@given(levels=levels_st, work=st.floats(10.0, 2000.0), interval=st.floats(1.0, 60.0),
       data=st.data())
def test_the_rollback_is_the_walk_back(levels, work, interval, data):
    plan = _plan(levels, work, interval, 0.0)
    names = [lv.name for lv in plan.levels]
    survives = frozenset(data.draw(st.lists(st.sampled_from(names), unique=True)))
    committed = data.draw(st.integers(0, plan.n_segments))
    i = committed
    while i > 0 and plan.levels[plan.level_of(i)].name not in survives:
        i -= 1
    assert plan.rollback(committed, survives) == i


def test_ten_to_the_fifteen_segments_answer_at_once():
    plan = JobPlan.build(3.6e8, 1e-6, (CkptLevel("local", 1e-6, 0.0, 1),
                                       CkptLevel("pfs", 1e-5, 0.0, 10)), persist_s=1e-7)
    assert plan.n_segments > 10**14
    start = time.perf_counter()
    counts = plan.level_counts()
    ff = plan.failure_free_s()
    assert time.perf_counter() - start < 0.1
    assert sum(counts) == plan.n_segments and ff > plan.work_s
    assert plan.rollback(plan.n_segments - 1, frozenset()) == 0
