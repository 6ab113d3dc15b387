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
import math
from dataclasses import dataclass
from pathlib import Path

from testbed.errors import ScenarioError
from testbed.io.read import read_text
from testbed.io.write import write_text
from testbed.units import parse_duration_s

COLUMNS = ("time_s", "node", "cause", "repair_s")
FTA_COLUMNS = ("event_id", "component_id", "node_id", "platform_id", "node_name", "event_type",
               "event_start_time", "event_stop_time", "event_end_reason")


@dataclass(frozen=True)
class TraceRow:
    """One recorded failure."""

    t_s: float
    node: int
    cause: str
    repair_s: float | None


def _lines(text: str):
    for lineno, line in enumerate(text.splitlines(), start=1):
        if line.strip() and not line.lstrip().startswith("#"):
            yield lineno, line


def _row(line: str, source: str, lineno: int) -> list[str]:
    try:
        return next(csv.reader([line]))
    except csv.Error as exc:
        raise ScenarioError(f"not CSV: {exc}", source=source, line=lineno) from None


def parse_trace(text: str, *, source: str = "<trace>") -> list[TraceRow]:
    """Parse the testbed CSV trace format; errors name ``source``, line and column."""
    numbered = list(_lines(text))
    if not numbered:
        raise ScenarioError("trace is empty (needs a header time_s,node,cause,repair_s)",
                            source=source)
    header_line, header = numbered[0]
    cols = [c.strip() for c in _row(header, source, header_line)]
    missing = [c for c in COLUMNS[:3] if c not in cols]
    if missing:
        raise ScenarioError(f"header must name columns {','.join(COLUMNS)} (missing "
                            f"{', '.join(missing)})", source=source, line=header_line)
    idx = {c: cols.index(c) for c in COLUMNS if c in cols}
    rows: list[TraceRow] = []
    last_t = 0.0
    for lineno, line in numbered[1:]:
        rec = _row(line, source, lineno)
        if len(rec) != len(cols):
            raise ScenarioError(f"expected {len(cols)} fields, found {len(rec)}",
                                source=source, line=lineno)
        try:
            t = parse_duration_s(rec[idx["time_s"]].strip())
        except ScenarioError:
            raise
        except Exception as exc:
            raise ScenarioError(getattr(exc, "message", str(exc)), source=source, line=lineno,
                                field="time_s") from None
        if t < last_t:
            raise ScenarioError(f"rows are not sorted by time: {t} after {last_t}",
                                source=source, line=lineno, field="time_s")
        last_t = t
        try:
            node = int(rec[idx["node"]].strip())
            if node < 0:
                raise ValueError
        except ValueError:
            raise ScenarioError(f"node {rec[idx['node']]!r} is not an integer >= 0",
                                source=source, line=lineno, field="node") from None
        cause = rec[idx["cause"]].strip()
        if not cause:
            raise ScenarioError("empty cause", source=source, line=lineno, field="cause")
        repair = None
        if "repair_s" in idx and rec[idx["repair_s"]].strip():
            try:
                repair = parse_duration_s(rec[idx["repair_s"]].strip())
            except Exception as exc:
                raise ScenarioError(getattr(exc, "message", str(exc)), source=source,
                                    line=lineno, field="repair_s") from None
        rows.append(TraceRow(t, node, cause, repair))
    return rows


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


def _fta_event(rec: list[str], ix: dict[str, int], source: str, lineno: int
               ) -> tuple[int, float, float]:
    """(event type, start, stop) of one row, refused unless finite and ordered."""
    try:
        etype = int(rec[ix["event_type"]])
        start = float(rec[ix["event_start_time"]])
        stop = float(rec[ix["event_stop_time"]])
        if not (math.isfinite(start) and math.isfinite(stop)):
            raise ValueError
    except ValueError:
        raise ScenarioError("event_type, event_start_time and event_stop_time must be "
                            "finite numbers", source=source, line=lineno) from None
    if stop < start:
        raise ScenarioError("event_stop_time must be >= event_start_time", source=source,
                            line=lineno, field="event_stop_time")
    return etype, start, stop


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
    ix = {c: cols.index(c) for c in cols}
    raw = []
    for lineno, line in numbered:
        rec = [c.strip() for c in line.split(delim)]
        if len(rec) < len(cols):
            raise ScenarioError(f"expected {len(cols)} fields, found {len(rec)}", source=source,
                                line=lineno)
        if platform_id is not None and "platform_id" in ix and \
                rec[ix["platform_id"]] != str(platform_id):
            continue
        etype, start, stop = _fta_event(rec, ix, source, lineno)
        if etype != 0:
            continue
        reason = rec[ix["event_end_reason"]] if "event_end_reason" in ix and \
            len(rec) > ix["event_end_reason"] else ""
        raw.append((start, rec[ix["node_id"]], stop - start, reason or "unknown", lineno))
    if not raw:
        raise ScenarioError("event_trace has no unavailability (event_type 0) rows",
                            source=source)
    raw.sort(key=lambda r: (r[0], r[4]))
    t0 = raw[0][0]
    nodes: dict[str, int] = {}
    rows = []
    for start, node_id, dur, reason, _ in raw:
        node = nodes.setdefault(node_id, len(nodes))
        rows.append(TraceRow(start - t0, node, f"fta:{reason}", dur))
    return rows
