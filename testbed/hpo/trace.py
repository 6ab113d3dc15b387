"""The schedule trace of an HPO sweep, and the summary computed from it.

Simulated and real sweeps write the same records (canonical JSONL in the vocabulary of
:mod:`testbed.events`): ``job_start`` (cluster, scheduler, policy), ``trial_start``
(trial, attempt, node, slots, from_epoch, to_epoch, kind, and the configuration on
attempt 0), ``trial_result`` (real runs: epoch, value, epoch_s, ckpt_s),
``trial_end`` (epoch, value, status completed|paused|stopped), ``trial_rung`` (a
stopping scheduler let the trial go on at a rung: epoch, value), ``trial_failed`` /
``trial_preempted`` (epoch, resume_epoch, lost_s, cause), ``trial_cancelled``,
``failure`` / ``node_up`` (nodes) and ``job_end``. Real runs add ``worker``, ``pid``
and ``host`` to ``trial_start``, and ``sweep_resumed`` (``down_at_s``, ``outage_s``)
where a rerun resumed a sweep whose driver was lost: the attempts running then are
``trial_preempted`` with ``cause: driver_lost`` at ``down_at_s``.

:func:`summarise` turns a trace into :class:`HpoSummary` — one function for both,
so a simulated summary and a measured one mean the same thing. Slot-seconds count
GPU slots: a 2-GPU trial running 10 s uses 20 slot-seconds. The outage of a lost
driver is wall time in ``makespan_s`` but no slot's capacity: utilisation and idle
slot-time are over ``makespan_s − outage_s``.
"""

from __future__ import annotations

import bisect
import functools
import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Annotated, Any, Literal, TextIO

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, create_model

from testbed import events as ev
from testbed.errors import ScenarioError
from testbed.io.schema import line_text, number_in, number_value, validate, whole_in
from testbed.scenario.hpo import MAX_EPOCHS, MAX_SLOTS, MAX_TRIALS


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
    outage_s: float                   # driver down (lost, then resumed by a rerun)
    resumes: int                      # reruns that resumed the sweep
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
        self.outage = 0.0
        self.resumes = 0

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
        elif kind in (ev.TRIAL_END, ev.TRIAL_RESULT, ev.TRIAL_RUNG):
            self._result(t, kind, f)
        elif kind == ev.SWEEP_RESUMED:
            self.outage += f.get("outage_s", 0.0)
            self.resumes += 1
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
        capacity = slots * max(self.makespan - self.outage, 0.0)
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
            status=self.state, outage_s=self.outage, resumes=self.resumes,
            best_trial=best[1] if best else None,
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


def trial_table(events: Iterable[tuple[float, str, dict]]) -> tuple[dict, ...]:
    """Per trial (in trial order): its configuration, final status and value, and the
    value it reported after each epoch (``epochs``: ``[[epoch, value], …]``, the last
    report of an epoch kept — a deterministic trial reports the same value again when
    an epoch is redone after a failure). The table a sweep produced, whatever it cost:
    an interrupted and resumed sweep gives the same one as an uninterrupted sweep."""
    rows: dict[int, dict] = {}
    curves: dict[int, dict[int, float]] = {}

    def row(trial: int) -> dict:
        return rows.setdefault(trial, {"trial": trial, "config": None, "status": "pending",
                                       "value": None})

    for _, kind, f in events:
        if kind not in ev.HPO_EVENT_KINDS or kind == ev.NODE_UP:
            continue
        r = row(f["trial"])
        if kind == ev.TRIAL_START and "config" in f:
            r["config"] = f["config"]
        if kind in (ev.TRIAL_RESULT, ev.TRIAL_RUNG, ev.TRIAL_END) \
                and f.get("value") is not None:
            curves.setdefault(f["trial"], {})[int(f["epoch"])] = f["value"]
        if kind in (ev.TRIAL_RUNG, ev.TRIAL_END) and f.get("value") is not None:
            r["value"] = f["value"]
        if kind == ev.TRIAL_END:
            r["status"] = f["status"]
        elif kind == ev.TRIAL_FAILED and f.get("final"):
            r["status"] = "failed"
        elif kind == ev.TRIAL_CANCELLED:
            r["status"] = "cancelled"
    out = []
    for trial in sorted(rows):
        r = rows[trial]
        if r["status"] == "paused":
            r["status"] = "stopped"
        out.append({**r, "epochs": [[e, v] for e, v in sorted(curves.get(trial, {}).items())]})
    return tuple(out)


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


#: Most attempts of one trial a trace may name (every retry and preemption is one).
MAX_ATTEMPTS = 100_000

Whole = Annotated[int, whole_in(0, None)]
Seconds = Annotated[float, number_in(0.0, MAX_T_S, "s")]
Text = Annotated[str, BeforeValidator(line_text)]
Value = Annotated[float, BeforeValidator(lambda v: number_value(v, -math.inf, math.inf))]
Trial = Annotated[int, whole_in(0, MAX_TRIALS - 1, "trial ids")]
Attempt = Annotated[int, whole_in(0, MAX_ATTEMPTS, "attempts")]
Epoch = Annotated[int, whole_in(0, MAX_EPOCHS, "epochs")]
Slot = Annotated[int, whole_in(0, MAX_SLOTS - 1, "slots")]
Count = Annotated[int, whole_in(1, MAX_SLOTS)]

#: Per event kind: field → (required, bounded type). The event kinds come from
#: :mod:`testbed.events`; fields not named here (a real run's worker, pid and host) are
#: kept as they are. Every kind of the HPO vocabulary but ``node_up`` also needs a
#: ``trial`` and (but ``trial_result``, and a ``trial_cancelled`` that never ran) an
#: ``attempt``.
_FIELDS: dict[str, dict[str, tuple[bool, Any]]] = {
    ev.JOB_START: {"slots": (False, Count), "nodes": (False, Count),
                   "gpus_per_node": (False, Annotated[int, whole_in(0, MAX_SLOTS)]),
                   "max_retries": (False, Annotated[int, whole_in(0, MAX_ATTEMPTS)]),
                   "seed": (False, Whole | None),
                   "checkpoint_every_epochs": (False, Annotated[int, whole_in(1, MAX_EPOCHS)] | None),
                   "rungs": (False, Annotated[list[Annotated[int, whole_in(0, MAX_EPOCHS)] | None],
                                              Field(min_length=3, max_length=3)]),
                   "scheduler": (False, Text), "on_failure": (False, Text),
                   "metric": (False, Text), "mode": (False, Literal["min", "max"]),
                   "promotion": (False, Literal["pause", "stop"]),
                   "trials": (False, Annotated[int, whole_in(0, MAX_TRIALS)])},
    ev.TRIAL_START: {"slots": (True, Annotated[list[Slot], Field(max_length=MAX_SLOTS)]),
                     "from_epoch": (True, Epoch), "to_epoch": (True, Epoch),
                     "node": (False, Annotated[int, whole_in(0, MAX_SLOTS - 1)]), "kind": (False, Text),
                     "config": (False, dict[str, Any])},
    ev.TRIAL_RESULT: {"epoch": (True, Epoch), "value": (False, Value | None),
                      "epoch_s": (False, Seconds), "ckpt_s": (False, Seconds)},
    ev.TRIAL_END: {"epoch": (True, Epoch), "value": (False, Value | None),
                   "status": (True, Literal["completed", "paused", "stopped"])},
    ev.TRIAL_FAILED: {"epoch": (False, Annotated[float, number_in(0.0, MAX_EPOCHS, "epochs")]),
                      "resume_epoch": (False, Epoch), "lost_s": (False, Seconds),
                      "final": (False, bool)},
    ev.TRIAL_CANCELLED: {"lost_s": (False, Seconds)},
    ev.FAILURE: {"node": (False, Annotated[int, whole_in(-1, MAX_SLOTS - 1)]), "repair_s": (False, Seconds)},
    ev.NODE_UP: {"node": (True, Annotated[int, whole_in(0, MAX_SLOTS - 1)])},
    ev.TRIAL_RUNG: {"epoch": (True, Epoch), "value": (False, Value | None)},
    ev.SWEEP_RESUMED: {"outage_s": (True, Seconds), "down_at_s": (False, Seconds)},
}
_FIELDS[ev.TRIAL_PREEMPTED] = _FIELDS[ev.TRIAL_FAILED]


class _Event(BaseModel):
    """What every record of a schedule trace has: a time and a known event."""

    model_config = ConfigDict(extra="allow", frozen=True, strict=False)

    t_s: Seconds
    event: Annotated[str, BeforeValidator(lambda v: _event_kind(v))]


def _event_kind(value: Any) -> str:
    if not isinstance(value, str) or value not in ev.EVENT_KINDS:
        raise ValueError(f"unknown event {repr(value)[:40]}")
    return value


@functools.cache
def event_model(kind: str) -> type[BaseModel]:
    """The pydantic model of one event kind, generated from ``_FIELDS`` (and the trial
    and attempt every HPO event carries)."""
    fields: dict[str, Any] = {}
    for key, (required, kind_type) in _FIELDS.get(kind, {}).items():
        fields[key] = (kind_type, ...) if required else (kind_type | None, None)
    if kind in ev.HPO_EVENT_KINDS and kind != ev.NODE_UP:
        fields["trial"] = (Trial, ...)
        if kind == ev.TRIAL_CANCELLED:
            fields["attempt"] = (Attempt | None, None)
        elif kind != ev.TRIAL_RESULT:
            fields["attempt"] = (Attempt, ...)
        else:
            fields["attempt"] = (Attempt | None, None)
    return create_model(f"{kind}_record", __base__=_Event, **fields)


def _check_record(rec: Any, *, source: str, line: int) -> tuple[float, str, dict]:
    """One record validated by its kind's model; ``(t_s, event, fields)`` of it (the
    fields the record gave, with their validated values)."""
    if not isinstance(rec, dict):
        raise ScenarioError("each line must be a JSON object", source=source, line=line)
    head = validate(_Event, rec, source=source, what="trace record", line=line)
    model = validate(event_model(head.event), rec, source=source, what="trace record",
                     line=line)
    data = model.model_dump()
    fields = {k: data[k] for k in rec if k not in ("t_s", "event")}
    if head.event == ev.TRIAL_START and fields["to_epoch"] < fields["from_epoch"]:
        raise ScenarioError("trial_start: 'to_epoch' is before 'from_epoch'", source=source,
                            field="to_epoch", line=line)
    return float(head.t_s), head.event, fields


def parse_trace(records: Sequence[tuple[int, Any]], *, source: str
                ) -> list[tuple[float, str, dict]]:
    """Check ``(line, value)`` records of a JSONL trace; errors name the line and field.

    Each record needs a time and a known event (of :mod:`testbed.events`); the fields a
    summary or a replay reads are validated by kind (``_FIELDS``: whole numbers within
    the scenario schema's bounds on trials, epochs and slots, finite times within
    ``MAX_T_S``), and every slot a trial holds must exist in the cluster its
    ``job_start`` describes."""
    out = []
    slots: int | None = None
    for line, rec in records:
        t, kind, fields = _check_record(rec, source=source, line=line)
        if kind == ev.JOB_START:
            slots = fields.get("slots", slots)
            cells = (fields.get("nodes") or 1) * (fields.get("gpus_per_node") or 1)
            if cells > MAX_SLOTS:
                raise ScenarioError(f"job_start: {cells:,} GPU slots are more than "
                                    f"{MAX_SLOTS:,}", source=source, field="nodes", line=line)
        if kind == ev.TRIAL_START and slots is not None \
                and any(x >= slots for x in fields["slots"]):
            raise ScenarioError(f"trial_start holds slot(s) {fields['slots'][:8]} of a "
                                f"cluster with {slots} slot(s)", source=source,
                                field="slots", line=line)
        out.append((t, kind, fields))
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
