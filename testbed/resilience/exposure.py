"""When a node's failure clock runs: the job's phases, the cause mixes, the clock speeds.

The job is ``RUNNING`` (computing or writing a checkpoint), ``RESTARTING`` (detection,
swap, host selection, requeue, load) or ``WAITING`` (preemption, a stall for a repair, a
maintenance window). Under ``exposure: in_use`` (the default) every cause strikes a
running job; only causes that are not job-induced strike while it restarts, at their
share ``p_hw`` of the rate; nodes not in use (the job's while it waits, standbys, idle
nodes) fail at ``idle_rate_factor·p_hw`` of the in-use rate (0 by default: their clocks
stop). Under ``exposure: running`` nothing fails unless the job runs (AIReSim's model).
"""

from __future__ import annotations

import itertools
from typing import Literal, get_args

from testbed.resilience.failures import FailureModel
from testbed.resilience.lifecycle import Lifecycle

RUNNING, RESTARTING, WAITING, DONE = 0, 1, 2, 3
#: When causes strike: ``in_use`` (see ops), ``running`` (only while the job runs).
Exposure = Literal["in_use", "running"]
EXPOSURES: tuple[str, ...] = get_args(Exposure)
#: How renewal clocks start: in equilibrium (``stationary``) or new at t = 0 (``fresh``).
ClockStart = Literal["stationary", "fresh"]
STARTS: tuple[str, ...] = get_args(ClockStart)


def cause_tables(failures: FailureModel) -> tuple[list[float], list[float], float]:
    """Cumulative probabilities of the full cause mix and of the causes that strike
    while the job is not running (not job-induced), and the latter's share."""
    probs = [c.probability for c in failures.causes] or [1.0]
    hw = [0.0 if c.job_induced else c.probability for c in failures.causes] or [1.0]
    p_hw = sum(hw)
    full = list(itertools.accumulate(probs))
    full[-1] = 1.0
    if p_hw > 0:
        cum_hw = [x / p_hw for x in itertools.accumulate(hw)]
        last = max(i for i, x in enumerate(hw) if x > 0)
        for i in range(last, len(cum_hw)):
            cum_hw[i] = 1.0
    else:
        cum_hw = [1.0] * len(hw)
    return full, cum_hw, min(1.0, p_hw)


def phase_speeds(failures: FailureModel, p_hw: float) -> tuple[float, float, float, float]:
    """Clock speed of the job's nodes while RUNNING, RESTARTING, WAITING, and of nodes
    not in use."""
    if failures.exposure == "running":
        return 1.0, 0.0, 0.0, 0.0
    idle = failures.idle_rate_factor * p_hw
    return 1.0, p_hw, idle, idle


def lane_of(failures: FailureModel, life: Lifecycle) -> str:
    """Which failure source a model uses: ``job`` (job-level MTBF), ``poisson``
    (identical exponential nodes), ``clocks`` (a renewal clock per node), ``none``."""
    if failures.trace is not None or failures.interarrival is None:
        return "none"
    if not failures.per_node:
        return "job"
    if failures.interarrival.kind == "exponential" and not life.heterogeneous:
        return "poisson"
    return "clocks"
