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
from testbed.scenario.hpo import MAX_SLOTS


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


class _Tally:
    """Running totals of a trace, event by event (see :func:`summarise`)."""

    def __init__(self, mode: str, slots: int | None) -> None:
        self.better = _better(mode)
        self.slots = slots
        self.open: dict[tuple[int, int], tuple[float, int]] = {}   # attempt → (start, slots)
        self.status: dict[int, str] = {}
        self.configs: dict[int, dict] = {}
        self.busy = self.lost = 0.0
        self.retries = self.failures = self.preempt = self.node_fail = self.attempts = 0
        self.best: tuple[float, int, float] | None = None
        self.curve: list[tuple[float, float, int]] = []
        self.makespan = 0.0
        self.state = "completed"

    def _close(self, f: dict, t: float) -> int:
        """End an attempt's slot time; the slots it held."""
        t0, n = self.open.pop((f["trial"], f["attempt"]), (t, 0))
        self.busy += (t - t0) * n
        return n

    def _start(self, t: float, f: dict) -> None:
        self.open[(f["trial"], f["attempt"])] = (t, len(f.get("slots") or ()))
        self.attempts += 1
        self.retries += f.get("kind") == "retry"
        self.status.setdefault(f["trial"], "pending")
        if "config" in f:
            self.configs[f["trial"]] = f["config"]

    def _result(self, t: float, kind: str, f: dict) -> None:
        if kind == ev.TRIAL_END:
            self._close(f, t)
            self.status[f["trial"]] = f["status"]
        value = f.get("value")
        if value is not None and (self.best is None or self.better(value, self.best[0])):
            self.best = (value, f["trial"], t)
            self.curve.append((t, value, f["trial"]))

    def _interrupted(self, t: float, kind: str, f: dict) -> None:
        self.lost += f.get("lost_s", 0.0) * self._close(f, t)
        if kind == ev.TRIAL_PREEMPTED:
            self.preempt += 1
            return
        self.failures += 1
        if f.get("final"):
            self.status[f["trial"]] = "failed"

    def add(self, t: float, kind: str, f: dict) -> None:
        if kind == ev.TRIAL_START:
            self._start(t, f)
        elif kind in (ev.TRIAL_END, ev.TRIAL_RESULT):
            self._result(t, kind, f)
        elif kind in (ev.TRIAL_FAILED, ev.TRIAL_PREEMPTED):
            self._interrupted(t, kind, f)
        elif kind == ev.TRIAL_CANCELLED:
            if f.get("attempt") is not None:
                self.lost += f.get("lost_s", 0.0) * self._close(f, t)
            self.status[f["trial"]] = "cancelled"
        elif kind == ev.FAILURE:
            self.node_fail += 1
        elif kind == ev.JOB_START:
            self.slots = f.get("slots", self.slots) if self.slots is None else self.slots
        elif kind == ev.JOB_END:
            self.makespan = t
            self.state = f.get("status", self.state)
        if kind != ev.JOB_END:
            self.makespan = max(self.makespan, t)

    def summary(self) -> HpoSummary:
        slots = int(self.slots or 0)
        capacity = slots * self.makespan
        status, best, busy = self.status.values(), self.best, self.busy
        done = [s for s in status if s in ("completed", "paused", "stopped")]
        return HpoSummary(
            makespan_s=self.makespan, utilisation=busy / capacity if capacity > 0 else 0.0,
            busy_slot_s=busy, idle_slot_s=max(capacity - busy, 0.0),
            lost_to_failures_s=self.lost, retries=self.retries, failures=self.failures,
            preemptions=self.preempt, node_failures=self.node_fail, attempts=self.attempts,
            slots=slots, trials=len(self.status), trials_completed=len(done),
            trials_stopped_early=sum(1 for s in status if s in ("paused", "stopped")),
            trials_failed=sum(1 for s in status if s == "failed"),
            trials_cancelled=sum(1 for s in status if s == "cancelled"),
            status=self.state, best_trial=best[1] if best else None,
            best_value=best[0] if best else None, best_t_s=best[2] if best else None,
            best_config=self.configs.get(best[1]) if best else None,
            best_so_far=tuple(self.curve))


def summarise(events: Iterable[tuple[float, str, dict]], *, mode: str = "min",
              slots: int | None = None) -> HpoSummary:
    """The :class:`HpoSummary` of a trace given as ``(t_s, event, fields)``."""
    tally = _Tally(mode, slots)
    for t, kind, f in events:
        tally.add(t, kind, f)
    return tally.summary()


# ---------------------------------------------------------------------- files

def write_trace(events: Iterable[tuple[float, str, dict]], stream: TextIO) -> None:
    """Canonical JSONL, one event per line (same events ⇒ same bytes)."""
    for t, kind, fields in events:
        stream.write(ev.encode_event(t, kind, **fields) + "\n")


def trace_text(events: Iterable[tuple[float, str, dict]]) -> str:
    return "".join(ev.encode_event(t, k, **f) + "\n" for t, k, f in events)


#: The longest time a trace may name (about 317 years): beyond it a ``t_s`` is not a
#: measurement of a sweep.
MAX_T_S = 1e10


def _whole(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def _seconds(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) \
        and 0 <= v <= MAX_T_S


def _value(v: Any) -> bool:
    return v is None or (isinstance(v, (int, float)) and not isinstance(v, bool)
                         and math.isfinite(v))


def _slot_count(v: Any) -> bool:
    return _whole(v) and 0 < v <= MAX_SLOTS


def _slot_list(v: Any) -> bool:
    return isinstance(v, list) and all(_whole(x) for x in v)


#: Per event kind: field → (required, check, what the check wants). Fields not named
#: here (a real run's worker, pid and host; the configuration) are kept as they are.
_FIELDS: dict[str, dict[str, tuple[bool, Any, str]]] = {
    ev.JOB_START: {"slots": (False, _slot_count, f"a whole number in 1…{MAX_SLOTS:,}"),
                   "nodes": (False, _slot_count, f"a whole number in 1…{MAX_SLOTS:,}"),
                   "gpus_per_node": (False, lambda v: _whole(v) and v <= MAX_SLOTS,
                                     f"a whole number in 0…{MAX_SLOTS:,}"),
                   "max_retries": (False, _whole, "a whole number >= 0"),
                   "seed": (False, lambda v: v is None or _whole(v), "a whole number >= 0"),
                   "checkpoint_every_epochs": (False, lambda v: v is None or _whole(v),
                                               "a whole number or null"),
                   "rungs": (False, lambda v: isinstance(v, list) and len(v) == 3,
                             "[min_epochs, max_epochs, reduction_factor]"),
                   "scheduler": (False, lambda v: isinstance(v, str), "a string"),
                   "on_failure": (False, lambda v: isinstance(v, str), "a string"),
                   "metric": (False, lambda v: isinstance(v, str), "a string"),
                   "mode": (False, lambda v: v in ("min", "max"), "min or max")},
    ev.TRIAL_START: {"slots": (True, _slot_list, "a list of slot numbers"),
                     "from_epoch": (True, _whole, "a whole number >= 0"),
                     "to_epoch": (True, _whole, "a whole number >= 0"),
                     "node": (False, _whole, "a whole number >= 0"),
                     "kind": (False, lambda v: isinstance(v, str), "a string"),
                     "config": (False, lambda v: isinstance(v, dict), "a mapping")},
    ev.TRIAL_RESULT: {"epoch": (True, _whole, "a whole number >= 0"),
                      "value": (False, _value, "a finite number or null"),
                      "epoch_s": (False, _seconds, "seconds >= 0"),
                      "ckpt_s": (False, _seconds, "seconds >= 0")},
    ev.TRIAL_END: {"epoch": (True, _whole, "a whole number >= 0"),
                   "value": (False, _value, "a finite number or null"),
                   "status": (True, lambda v: v in ("completed", "paused", "stopped"),
                              "completed, paused or stopped")},
    ev.TRIAL_FAILED: {"epoch": (False, _seconds, "an epoch count >= 0"),
                      "resume_epoch": (False, _whole, "a whole number >= 0"),
                      "lost_s": (False, _seconds, "seconds >= 0"),
                      "final": (False, lambda v: isinstance(v, bool), "true or false")},
    ev.TRIAL_CANCELLED: {"lost_s": (False, _seconds, "seconds >= 0")},
    ev.FAILURE: {"node": (False, _whole, "a whole number >= 0"),
                 "repair_s": (False, _seconds, "seconds >= 0")},
    ev.NODE_UP: {"node": (True, _whole, "a whole number >= 0")},
}
_FIELDS[ev.TRIAL_PREEMPTED] = _FIELDS[ev.TRIAL_FAILED]


def _check_fields(kind: str, fields: dict, *, source: str, line: int) -> None:
    """Every field the summary and the replay read has the type and range they need."""
    if kind in ev.HPO_EVENT_KINDS and kind != ev.NODE_UP:
        for key in ("trial",) + (("attempt",) if kind != ev.TRIAL_RESULT else ()):
            v = fields.get(key)
            if not (v is None and kind == ev.TRIAL_CANCELLED and key == "attempt") \
                    and not _whole(v):
                raise ScenarioError(f"{kind} needs a whole number '{key}' >= 0",
                                    source=source, field=key, line=line)
    for key, (required, ok, wants) in _FIELDS.get(kind, {}).items():
        if key not in fields:
            if required:
                raise ScenarioError(f"{kind} needs '{key}' ({wants})", source=source,
                                    field=key, line=line)
        elif not ok(fields[key]):
            raise ScenarioError(f"{kind}: '{key}' must be {wants}, got {fields[key]!r}",
                                source=source, field=key, line=line)
    if kind == ev.TRIAL_START and fields["to_epoch"] < fields["from_epoch"]:
        raise ScenarioError("trial_start: 'to_epoch' is before 'from_epoch'", source=source,
                            field="to_epoch", line=line)


def parse_trace(records: Sequence[tuple[int, Any]], *, source: str
                ) -> list[tuple[float, str, dict]]:
    """Check ``(line, value)`` records of a JSONL trace; errors name the line and field.

    Each record needs a time and a known event; the fields a summary or a replay reads
    are checked by kind (see ``_FIELDS``), and every slot a trial holds must exist in
    the cluster its ``job_start`` describes."""
    out = []
    slots: int | None = None
    for line, rec in records:
        if not isinstance(rec, dict):
            raise ScenarioError("each line must be a JSON object", source=source, line=line)
        t: Any = rec.get("t_s")
        kind = rec.get("event")
        if not _seconds(t):
            raise ScenarioError(f"needs a time 't_s' in 0…{MAX_T_S:g} s", source=source,
                                field="t_s", line=line)
        if kind not in ev.EVENT_KINDS:
            raise ScenarioError(f"unknown event {kind!r}", source=source, field="event",
                                line=line)
        fields = {k: v for k, v in rec.items() if k not in ("t_s", "event")}
        _check_fields(kind, fields, source=source, line=line)
        if kind == ev.JOB_START:
            slots = fields.get("slots", slots)
            cells = fields.get("nodes", 1) * fields.get("gpus_per_node", 1)
            if cells > MAX_SLOTS:
                raise ScenarioError(f"job_start: {cells:,} GPU slots are more than "
                                    f"{MAX_SLOTS:,}", source=source, field="nodes", line=line)
        if kind == ev.TRIAL_START and slots is not None \
                and any(x >= slots for x in fields["slots"]):
            raise ScenarioError(f"trial_start holds slot(s) {fields['slots']} of a cluster "
                                f"with {slots} slot(s)", source=source, field="slots",
                                line=line)
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
