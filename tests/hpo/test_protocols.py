"""The controller's two protocols: a sampler and a clock, simulated and real.

The simulator moves a :class:`~testbed.hpo.protocols.SimClock`; the real driver reads a
monotonic clock that continues a sweep's time across a resume from the store's wall
stamp (:mod:`testbed.app.hpo.clock`). Every decision the controller makes is stamped
with its clock's ``now()``.
"""

from __future__ import annotations

import time

import pytest

from simulators.hpo.tpe import ListSampler, make_sampler
from testbed.app.hpo.clock import MonotonicClock, resumed_at_s
from testbed.app.resolve import hpo_plan
from testbed.hpo.controller import Controller
from testbed.hpo.protocols import Clock, Sampler, SimClock
from testbed.hpo.timing import Attempt
from tests.hpo.helpers import grid_of, scenario


def test_samplers_and_clocks_implement_the_protocols():
    plan = hpo_plan(scenario(grid_of([1, 2])))
    assert isinstance(make_sampler(plan), Sampler) and isinstance(ListSampler([]), Sampler)
    assert isinstance(SimClock(), Clock) and isinstance(MonotonicClock(), Clock)


def test_the_controller_stamps_its_decisions_with_its_clock():
    plan = hpo_plan(scenario(grid_of([2, 3], epoch_time="1s")))
    clock = SimClock(5.0)
    ctl = Controller(plan, make_sampler(plan), clock)
    ctl.start_log()
    (start,) = ctl.dispatch()
    assert start.t_s == 5.0 and start.timeline is None
    start.timeline = Attempt(ctl.trials[0].cost, start.a, start.b, ctl.trials[0].top, None)
    clock.set(7.0)
    ctl.finish(start, 0.5)
    (second,) = ctl.dispatch()
    assert second.t_s == 7.0
    clock.set(10.0)
    ctl.finish(second, 0.4)
    ctl.finalize()
    stamps = [(t, k) for t, k, _ in ctl.events]
    assert stamps == [(5.0, "job_start"), (5.0, "trial_start"), (7.0, "trial_end"),
                      (7.0, "trial_start"), (10.0, "trial_end"), (10.0, "job_end")]


def test_the_real_clock_is_monotonic_and_continues_a_resumed_sweep():
    clock = MonotonicClock(100.0)
    readings = [clock.now() for _ in range(1000)]
    assert readings == sorted(readings) and readings[0] >= 100.0
    # a rerun continues at the last commit's time plus the wall time since it …
    assert resumed_at_s(40.0, time.time() - 5.0) == pytest.approx(45.0, abs=0.5)
    # … never before it (a wall clock set back), nor without a stamp
    assert resumed_at_s(40.0, time.time() + 3600.0) == 40.0
    assert resumed_at_s(40.0, None) == 40.0
