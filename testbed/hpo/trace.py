"""The schedule trace of an HPO sweep, and the summary computed from it.

Simulated and real sweeps write the same records (canonical JSONL in the vocabulary of
:mod:`testbed.events`): ``job_start`` (cluster, scheduler, policy), ``trial_start``
(trial, attempt, node, slots, from_epoch, to_epoch, kind, and the configuration on
attempt 0), ``trial_result`` (real runs: epoch, value, epoch_s, ckpt_s),
``trial_end`` (epoch, value, status completed|paused), ``trial_failed`` /
``trial_preempted`` (epoch, resume_epoch, lost_s, cause), ``trial_cancelled``,
``failure`` / ``node_up`` (nodes) and ``job_end``. Real runs add ``worker``, ``pid``
and ``host`` to ``trial_start``.

:func:`summarise` turns a trace into :class:`HpoSummary` — one function for both,
so a simulated summary and a measured one mean the same thing. Slot-seconds count
GPU slots: a 2-GPU trial running 10 s uses 20 slot-seconds.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any, TextIO

from testbed import events as ev
from testbed.errors import ScenarioError


@dataclass(frozen=True)
class HpoSummary:
    """What a sweep cost and found (times in seconds)."""

    makespan_s: float
    utilisation: float                # busy slot-seconds / (slots × makespan)
    busy_slot_s: float
    idle_slot_s: float
    lost_to_failures_s: float         # slot-seconds of work thrown away (failures,
                                      # preemptions, cancelled attempts)
    retries: int
    failures: int                     # attempts that failed (their own fault)
    preemptions: int                  # attempts stopped by a node failure
    node_failures: int
    attempts: int
    slots: int
    trials: int
    trials_completed: int             # finished without failure (incl. stopped early)
    trials_stopped_early: int         # asha / hyperband: not promoted to the top rung
    trials_failed: int
    trials_cancelled: int
    status: str                       # completed | failed (policy 'fail' stopped it)
    best_trial: int | None
    best_value: float | None
    best_t_s: float | None
    best_config: dict | None
    best_so_far: tuple[tuple[float, float, int], ...]   # (t_s, value, trial) improvements

    def best_at(self, t_s: float) -> tuple[float, int] | None:
        """(value, trial) of the best result reported by time ``t_s``, or None."""
        i = bisect.bisect_right([b[0] for b in self.best_so_far], t_s)
        if not i:
            return None
        _, value, trial = self.best_so_far[i - 1]
        return value, trial

    def to_dict(self) -> dict:
        out = asdict(self)
        out["best_so_far"] = [list(b) for b in self.best_so_far]
        return out


def _better(mode: str):
    return (lambda a, b: a < b) if mode == "min" else (lambda a, b: a > b)


def summarise(events: Iterable[tuple[float, str, dict]], *, mode: str = "min",
              slots: int | None = None) -> HpoSummary:
    """The :class:`HpoSummary` of a trace given as ``(t_s, event, fields)``."""
    better = _better(mode)
    open_: dict[tuple[int, int], tuple[float, int]] = {}
    status: dict[int, str] = {}
    configs: dict[int, dict] = {}
    busy = lost = 0.0
    retries = failures = preempt = node_fail = attempts = 0
    best: tuple[float, int, float] | None = None
    curve: list[tuple[float, float, int]] = []
    makespan = 0.0
    state = "completed"

    def close(key, t):
        nonlocal busy
        t0, n = open_.pop(key, (t, 0))
        busy += (t - t0) * n
        return n

    for t, kind, f in events:
        if kind == ev.TRIAL_START:
            key = (f["trial"], f["attempt"])
            open_[key] = (t, len(f.get("slots") or ()))
            attempts += 1
            retries += f.get("kind") == "retry"
            status.setdefault(f["trial"], "pending")
            if "config" in f:
                configs[f["trial"]] = f["config"]
        elif kind in (ev.TRIAL_END, ev.TRIAL_RESULT):
            if kind == ev.TRIAL_END:
                close((f["trial"], f["attempt"]), t)
                status[f["trial"]] = f["status"]
            value = f.get("value")
            if value is not None and (best is None or better(value, best[0])):
                best = (value, f["trial"], t)
                curve.append((t, value, f["trial"]))
        elif kind in (ev.TRIAL_FAILED, ev.TRIAL_PREEMPTED):
            n = close((f["trial"], f["attempt"]), t)
            lost += f.get("lost_s", 0.0) * n
            if kind == ev.TRIAL_FAILED:
                failures += 1
                if f.get("final"):
                    status[f["trial"]] = "failed"
            else:
                preempt += 1
        elif kind == ev.TRIAL_CANCELLED:
            if f.get("attempt") is not None:
                n = close((f["trial"], f["attempt"]), t)
                lost += f.get("lost_s", 0.0) * n
            status[f["trial"]] = "cancelled"
        elif kind == ev.FAILURE:
            node_fail += 1
        elif kind == ev.JOB_START:
            slots = f.get("slots", slots) if slots is None else slots
        elif kind == ev.JOB_END:
            makespan = t
            state = f.get("status", state)
        makespan = max(makespan, t) if kind != ev.JOB_END else makespan
    slots = int(slots or 0)
    capacity = slots * makespan
    done = [s for s in status.values() if s in ("completed", "paused", "stopped")]
    early = sum(1 for s in status.values() if s in ("paused", "stopped"))
    return HpoSummary(
        makespan_s=makespan, utilisation=busy / capacity if capacity > 0 else 0.0,
        busy_slot_s=busy, idle_slot_s=max(capacity - busy, 0.0), lost_to_failures_s=lost,
        retries=retries, failures=failures, preemptions=preempt, node_failures=node_fail,
        attempts=attempts, slots=slots, trials=len(status), trials_completed=len(done),
        trials_stopped_early=early,
        trials_failed=sum(1 for s in status.values() if s == "failed"),
        trials_cancelled=sum(1 for s in status.values() if s == "cancelled"),
        status=state, best_trial=best[1] if best else None,
        best_value=best[0] if best else None, best_t_s=best[2] if best else None,
        best_config=configs.get(best[1]) if best else None, best_so_far=tuple(curve))


# ---------------------------------------------------------------------- files

def write_trace(events: Iterable[tuple[float, str, dict]], stream: TextIO) -> None:
    """Canonical JSONL, one event per line (same events ⇒ same bytes)."""
    for t, kind, fields in events:
        stream.write(ev.encode_event(t, kind, **fields) + "\n")


def trace_text(events: Iterable[tuple[float, str, dict]]) -> str:
    return "".join(ev.encode_event(t, k, **f) + "\n" for t, k, f in events)


def parse_trace(records: Sequence[tuple[int, Any]], *, source: str
                ) -> list[tuple[float, str, dict]]:
    """Check ``(line, value)`` records of a JSONL trace; errors name the line."""
    out = []
    for line, rec in records:
        if not isinstance(rec, dict):
            raise ScenarioError("each line must be a JSON object", source=source, line=line)
        t = rec.get("t_s")
        kind = rec.get("event")
        if isinstance(t, bool) or not isinstance(t, (int, float)) or not math.isfinite(t) \
                or t < 0:
            raise ScenarioError("needs a time 't_s' >= 0", source=source, field="t_s",
                                line=line)
        if kind not in ev.EVENT_KINDS:
            raise ScenarioError(f"unknown event {kind!r}", source=source, field="event",
                                line=line)
        fields = {k: v for k, v in rec.items() if k not in ("t_s", "event")}
        if kind in ev.HPO_EVENT_KINDS and kind != ev.NODE_UP:
            for key in ("trial",) + (("attempt",) if kind != ev.TRIAL_RESULT else ()):
                v = fields.get(key)
                if not (v is None and kind == ev.TRIAL_CANCELLED and key == "attempt") and (
                        isinstance(v, bool) or not isinstance(v, int) or v < 0):
                    raise ScenarioError(f"{kind} needs a whole number '{key}' >= 0",
                                        source=source, field=key, line=line)
        out.append((float(t), kind, fields))
    if not any(k == ev.TRIAL_START for _, k, _ in out):
        raise ScenarioError("not an HPO schedule trace: it has no trial_start record",
                            source=source)
    return out


def measured_epochs(records: Sequence[tuple[int, Any]], *, source: str
                    ) -> dict[int, dict[int, float]]:
    """Per trial, seconds of each epoch (mean over attempts) from ``trial_result`` records."""
    events = parse_trace(records, source=source)
    sums: dict[int, dict[int, list[float]]] = {}
    for _, kind, f in events:
        if kind == ev.TRIAL_RESULT and isinstance(f.get("epoch_s"), (int, float)):
            sums.setdefault(f["trial"], {}).setdefault(int(f["epoch"]), []).append(f["epoch_s"])
    return {t: {e: sum(v) / len(v) for e, v in per.items()} for t, per in sums.items()}
