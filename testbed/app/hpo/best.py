"""One definition of an HPO sweep's "best", for ``hpo run``, ``hpo replay`` and ``hpo report``.

The best result of a sweep is the best value of its named metric (``hpo.metric.name``,
lower or higher is better by ``hpo.metric.mode``) over *every epoch any trial
reported* — the best epoch, not the last one — and "best so far" is the running best of
those values in time order, so it only falls (``min``) or only rises (``max``).

A real run reports every epoch (``trial_result`` records), and
:func:`testbed.hpo.trace.summarise` takes its best over them. A replay simulates the
same trials on the simulator, which reports a value only where a scheduler judges a
trial (rungs) and at the end of an attempt — its own summary would pick the best
*last* epoch. :func:`replayed_best` gives the replay the same definition: every epoch
the replayed schedule trained, with the value the real run measured for it, at the
time the replay finished it (the attempt's span divided in proportion to the measured
epoch times).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from testbed import events as ev
from testbed.hpo.trace import HpoSummary


def better(mode: str):
    """``better(a, b)``: a is a strictly better value than b under ``mode``."""
    return (lambda a, b: a < b) if mode == "min" else (lambda a, b: a > b)


def running_best(points: Sequence[tuple[float, float, int]], mode: str
                 ) -> list[tuple[float, float, int]]:
    """The improvements of ``(t_s, value, trial)`` points taken in time order."""
    is_better = better(mode)
    out: list[tuple[float, float, int]] = []
    for t, value, trial in sorted(points, key=lambda p: (p[0], p[2])):
        if not out or is_better(value, out[-1][1]):
            out.append((t, value, trial))
    return out


def measured_epochs(events) -> tuple[dict[tuple[int, int], float], dict[tuple[int, int], float]]:
    """(value, seconds) of every (trial, epoch) a real run's trace reported."""
    values: dict[tuple[int, int], float] = {}
    seconds: dict[tuple[int, int], float] = {}
    for _t, kind, f in events:
        if kind in (ev.TRIAL_RESULT, ev.TRIAL_RUNG, ev.TRIAL_END) and \
                f.get("value") is not None and f.get("epoch") is not None:
            values[(int(f["trial"]), int(f["epoch"]))] = float(f["value"])
        if kind == ev.TRIAL_RESULT and f.get("epoch") is not None:
            seconds[(int(f["trial"]), int(f["epoch"]))] = \
                float(f.get("epoch_s", 0.0)) + float(f.get("ckpt_s", 0.0))
    return values, seconds


def _trained(events) -> list[tuple[int, float, float, int, float]]:
    """(trial, start, end, from_epoch, epochs reached) of every ended attempt."""
    starts: dict[tuple[int, int], tuple[float, dict]] = {}
    out = []
    for t, kind, f in events:
        if kind == ev.TRIAL_START:
            starts[(f["trial"], f["attempt"])] = (t, f)
        elif kind in (ev.TRIAL_END, ev.TRIAL_FAILED, ev.TRIAL_PREEMPTED, ev.TRIAL_CANCELLED) \
                and f.get("attempt") is not None:
            got = starts.pop((f["trial"], f["attempt"]), None)
            if got is None:
                continue
            t0, fs = got
            reached = float(f.get("epoch") if f.get("epoch") is not None else fs["from_epoch"])
            out.append((int(fs["trial"]), t0, t, int(fs["from_epoch"]), reached))
    return out


def replayed_best(summary: HpoSummary, replayed_events, measured_events, mode: str
                  ) -> HpoSummary:
    """The replay's summary with its best taken as the module docstring says."""
    values, seconds = measured_epochs(measured_events)
    configs = {f["trial"]: f["config"] for _t, kind, f in measured_events
               if kind == ev.TRIAL_START and isinstance(f.get("config"), dict)}
    points: list[tuple[float, float, int]] = []
    for trial, t0, t1, first, reached in _trained(replayed_events):
        top = int(reached)
        durations = [seconds.get((trial, e), 1.0) for e in range(first + 1, top + 2)]
        whole = sum(durations[: top - first]) + (reached - top) * durations[-1]
        done = 0.0
        for e, d in zip(range(first + 1, top + 1), durations, strict=False):
            done += d
            if (trial, e) in values:
                at = t0 + (t1 - t0) * (done / whole if whole > 0 else 1.0)
                points.append((at, values[(trial, e)], trial))
    curve = running_best(points, mode)
    if not curve:
        return summary
    best = curve[-1]                  # the running best's last improvement is the best
    return dataclasses.replace(summary, best_trial=best[2], best_value=best[1],
                               best_t_s=best[0], best_config=configs.get(best[2]),
                               best_so_far=tuple(curve))
