"""Failure traces: the testbed's CSV format and importers for public formats (pure).

Testbed failure trace (``traces/*.csv``), one failure per row, header required::

    time_s,node,cause,repair_s
    3600,12,Faulty GPU,14400
    5400.5,3,Software bug,

* ``time_s``: seconds since the start of the job, non-decreasing, >= 0;
* ``node``: integer node index (taken modulo the job's node count when replayed);
* ``cause``: free text; names matching the scenario's cause mix get that cause's
  restart costs, others the defaults;
* ``repair_s``: how long the node is away (empty: the cause's repair time).

Durations may carry units (``4h``). Lines starting with ``#`` are comments.

Importer: the Failure Trace Archive ``event_trace`` table (tab-separated; columns
``event_id component_id node_id platform_id node_name event_type event_start_time
event_stop_time event_end_reason``, epoch seconds; ``event_type`` 0 marks
unavailability, i.e. a failure, lasting until ``event_stop_time``), see
:func:`import_fta_event_trace`.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from testbed.errors import InputError, ScenarioError
from testbed.io.read import parse_csv, read_text
from testbed.io.schema import (
    Duration,
    Line,
    number_in,
    validate,
    validate_records,
    whole_in,
    whole_value,
)
from testbed.io.write import write_text

COLUMNS = ("time_s", "node", "cause", "repair_s")
FTA_COLUMNS = ("event_id", "component_id", "node_id", "platform_id", "node_name", "event_type",
               "event_start_time", "event_stop_time", "event_end_reason")


#: Most nodes a trace may name (a node index beyond it is a typo, not a machine).
MAX_TRACE_NODE = 10**9


def _lines(text: str):
    for lineno, line in enumerate(text.splitlines(), start=1):
        if line.strip() and not line.lstrip().startswith("#"):
            yield lineno, line


def _node(value: Any) -> int:
    try:
        return whole_value(value, 0, MAX_TRACE_NODE)
    except ValueError as exc:
        raise ValueError(f"node {str(value)[:30]!r}: {exc}") from None


@dataclass(frozen=True)
class TraceRow:
    """One recorded failure."""

    t_s: float
    node: int
    cause: str
    repair_s: float | None


class TraceRecord(BaseModel):
    """One row of a testbed trace as written (the CSV's columns, every cell a bounded
    type): a time and repair of at most 1000 years (units allowed), a node index,
    a cause of one line."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    time_s: Duration
    node: Annotated[int, BeforeValidator(_node)]
    cause: Line = Field(min_length=1)
    repair_s: Duration | None = None

    def row(self) -> TraceRow:
        return TraceRow(self.time_s, self.node, self.cause.strip(), self.repair_s)


def _uncommented(text: str) -> str:
    """The text with ``#`` comment lines blanked (line numbers stay those of the file)."""
    return "\n".join("" if line.lstrip().startswith("#") else line
                     for line in text.splitlines())


def parse_trace(text: str, *, source: str = "<trace>") -> list[TraceRow]:
    """Parse the testbed CSV trace format through the boundary's CSV reader (duplicate
    columns refused) and :class:`TraceRecord`; errors name ``source``, line and column."""
    body = _uncommented(text)
    if not body.strip():
        raise ScenarioError("trace is empty (needs a header time_s,node,cause,repair_s)",
                            source=source)
    try:
        rows = list(parse_csv(body, source=source, strip=True))
    except InputError as exc:
        raise ScenarioError(exc.message, source=source, field=exc.field, line=exc.line) \
            from None
    header_line = next(n for n, line in enumerate(body.splitlines(), 1) if line.strip())
    header = next(csv.reader([body.splitlines()[header_line - 1]]))
    missing = [c for c in COLUMNS[:3] if c not in [h.strip() for h in header]]
    if missing:
        raise ScenarioError(f"header must name columns {','.join(COLUMNS)} (missing "
                            f"{', '.join(missing)})", source=source, line=header_line)
    out: list[TraceRow] = []
    for line, record in validate_records(TraceRecord, (
            (n, {k: v for k, v in r.items() if v}) for n, r in rows),
            source=source, what="trace row"):
        row = record.row()
        if out and row.t_s < out[-1].t_s:
            raise ScenarioError(f"rows are not sorted by time: {row.t_s} after "
                                f"{out[-1].t_s}", source=source, line=line, field="time_s")
        out.append(row)
    return out


def load_trace(path: str | Path, *, field: str | None = None,
               referrer: str | None = None) -> list[TraceRow]:
    """Read a testbed CSV trace through the input boundary; a missing file is an error
    naming ``referrer``/``field``."""
    path = Path(path)
    if not path.exists():
        raise ScenarioError(f"trace file {str(path)!r} not found", source=referrer,
                            field=field)
    return parse_trace(read_text(path, field=field), source=str(path))


def format_trace(rows: list[TraceRow]) -> str:
    """The CSV text of a trace (canonical: repr floats, empty repair when unknown)."""
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(COLUMNS)
    for r in rows:
        w.writerow([repr(r.t_s), r.node, r.cause, "" if r.repair_s is None else repr(r.repair_s)])
    return out.getvalue()


def write_trace(rows: list[TraceRow], path: str | Path, *, field: str | None = None) -> None:
    """Write a trace atomically (:func:`testbed.io.write.write_text`)."""
    write_text(path, format_trace(rows), field=field)


def _fta_table(numbered: list[tuple[int, str]], source: str
               ) -> tuple[list[tuple[int, str]], str, list[str]]:
    """(data lines, delimiter, column names) of an ``event_trace`` table: its header
    row when it has one, else the archive's nine columns in order."""
    if not numbered:
        raise ScenarioError("event_trace is empty", source=source)
    delim = "\t" if "\t" in numbered[0][1] else ","
    first = [c.strip() for c in numbered[0][1].split(delim)]
    if "event_type" in first:
        cols = first
        numbered = numbered[1:]
    else:
        cols = list(FTA_COLUMNS)
    need = ("node_id", "event_type", "event_start_time", "event_stop_time")
    missing = [c for c in need if c not in cols]
    if missing:
        raise ScenarioError(f"event_trace lacks columns {', '.join(missing)}", source=source)
    return numbered, delim, cols


#: Latest FTA time accepted: epoch seconds up to the year 2200 (the archive's traces run
#: from the 1990s to the 2010s; a larger value is not a time in seconds).
MAX_FTA_EPOCH_S = 7.3e9


class FtaEvent(BaseModel):
    """The cells of an ``event_trace`` row the importer reads, bounded: epoch seconds
    within :data:`MAX_FTA_EPOCH_S`, a whole event type, a node id of one line."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    node_id: Line = Field(min_length=1)
    event_type: Annotated[int, whole_in(-1000, 1000)]
    event_start_time: Annotated[float, number_in(0.0, MAX_FTA_EPOCH_S, "s")]
    event_stop_time: Annotated[float, number_in(0.0, MAX_FTA_EPOCH_S, "s")]
    event_end_reason: Line = ""
    platform_id: Line = ""


def _fta_event(rec: list[str], cols: list[str], source: str, lineno: int) -> FtaEvent:
    """One row, validated (finite, in range, stop not before start)."""
    data = {c: v for c, v in zip(cols, rec, strict=False) if v != ""}
    event = validate(FtaEvent, data, source=source, what="event_trace row", line=lineno)
    if event.event_stop_time < event.event_start_time:
        raise ScenarioError("event_stop_time must be >= event_start_time", source=source,
                            line=lineno, field="event_stop_time")
    return event


def import_fta_event_trace(text: str, *, source: str = "<event_trace>",
                           platform_id: int | None = None) -> list[TraceRow]:
    """Failures from a Failure Trace Archive ``event_trace`` table.

    Rows with ``event_type`` 0 (unavailability) become failures at
    ``event_start_time`` relative to the earliest such start, on the node's index in
    order of first appearance, lasting ``event_stop_time − event_start_time`` (the
    repair time); the cause is ``fta:<event_end_reason>``. A header row naming the
    columns is optional; without one the nine columns above are expected in order.
    Rows may be tab- or comma-separated.
    """
    numbered, delim, cols = _fta_table(list(_lines(text)), source)
    seen: dict[str, int] = {}
    for i, name in enumerate(cols, start=1):
        if name in seen:
            raise ScenarioError(f"column {name!r} appears twice in the header (columns "
                                f"{seen[name]} and {i})", source=source, field=name, line=1)
        seen[name] = i
    raw = []
    for lineno, line in numbered:
        rec = [c.strip() for c in line.split(delim)]
        if len(rec) < len(cols):
            raise ScenarioError(f"expected {len(cols)} fields, found {len(rec)}", source=source,
                                line=lineno)
        event = _fta_event(rec, cols, source, lineno)
        if platform_id is not None and "platform_id" in cols and \
                event.platform_id != str(platform_id):
            continue
        if event.event_type != 0:
            continue
        raw.append((event.event_start_time, event.node_id,
                    event.event_stop_time - event.event_start_time,
                    event.event_end_reason or "unknown", lineno))
    if not raw:
        raise ScenarioError("event_trace has no unavailability (event_type 0) rows",
                            source=source)
    raw.sort(key=lambda r: (r[0], r[4]))
    t0 = raw[0][0]
    nodes: dict[str, int] = {}
    rows = []
    for start, node_id, dur, reason, lineno in raw:
        node = nodes.setdefault(node_id, len(nodes))
        # the row the importer writes must be one `traces check` reads back
        record = validate(TraceRecord, {"time_s": start - t0, "node": node,
                                        "cause": f"fta:{reason}", "repair_s": dur},
                          source=source, what="imported failure", line=lineno)
        rows.append(record.row())
    return rows
