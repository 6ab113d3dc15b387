"""Every file a scenario refers to, read through the input boundary — here and only here.

The system profile, a failure trace, a cause table, the per-node rates of a trace, the
HPO cost table or trace and the objective table: each is read at its key, with its path
resolved by :mod:`testbed.app.resolve.paths`, and handed on as data. The other modules
of the resolver, and the core below them, read no file of a scenario's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from testbed.app.resolve.paths import at, relative_path, system_ref
from testbed.io.read import read_csv, read_jsonl
from testbed.resilience.causes import CauseRow, load_cause_table
from testbed.scenario.schema import Scenario
from testbed.traces import TraceRow, load_trace

if TYPE_CHECKING:   # the profiles' models load when a scenario names a system
    from testbed.systems.profile import SystemProfile


def scenario_system(sc: Scenario) -> SystemProfile | None:
    """The scenario's system profile (None when it names none)."""
    if sc.system is None:
        return None
    return named_system(sc)


def named_system(sc: Scenario) -> SystemProfile:
    """The profile of the scenario's ``system:`` (which the caller knows is given)."""
    from testbed.systems.profile import load_system
    ref = system_ref(sc)
    with at(sc, "system"):
        return load_system(ref)


def trace_rows(sc: Scenario, ref: str, field: str) -> list[TraceRow]:
    """The failures of a trace the scenario names at ``field``."""
    with at(sc, field):
        return load_trace(relative_path(sc, ref), field=field, referrer=sc.source)


def cause_rows(sc: Scenario, ref: str) -> list[CauseRow]:
    """A cause table: a shipped one by name, else a CSV path relative to the scenario."""
    is_path = "/" in ref or "\\" in ref or ref.endswith(".csv")
    with at(sc, "failures.causes"):
        return load_cause_table(str(relative_path(sc, ref)) if is_path else ref,
                                source=sc.source)


def csv_rows(sc: Scenario, ref: str, field: str, required: tuple[str, ...]
             ) -> list[dict[str, Any]]:
    """The rows of a CSV table the scenario names at ``field`` (e.g. ``hpo.cost.table``)."""
    return [dict(row) for _, row in read_csv(relative_path(sc, ref), field=field,
                                             required=required)]


def jsonl_records(sc: Scenario, ref: str, field: str) -> list[Any]:
    """The records of a JSONL file the scenario names at ``field`` (``hpo.cost.trace``)."""
    return read_jsonl(relative_path(sc, ref), field=field)
