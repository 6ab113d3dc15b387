"""Failure causes: a weighted mix, each cause with its own repair and restart costs.

A cause mix comes from a scenario list, or from a CSV with columns ``cause``,
``category`` and ``count`` (the format of the Llama 3 405B interruption table shipped
in ``testbed/data/causes/llama3_405b.csv``). Costs are looked up per cause name, then per
category (``failures.category_costs``), then fall back to the scenario's defaults.

``survives`` lists the checkpoint levels that outlive a failure of that cause (a
node-local copy does not survive losing the node); ``None`` means every level does.

``job_induced`` marks causes that come from the job itself (software bugs, NCCL
timeouts, dependencies): they strike only while the job runs, never a node that waits or
sits idle, and the node stays (a restart on the same nodes, no repair). A cause table
may carry a ``job_induced`` column (``true``/``false``); otherwise a cause is not
job-induced unless the scenario says so (per cause, or per category in
``failures.category_costs``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from testbed.errors import ScenarioError
from testbed.io.packaged import named_file, names
from testbed.io.read import read_csv


@dataclass(frozen=True)
class CauseRow:
    """One row of a cause table: name, category and relative weight."""

    name: str
    category: str
    weight: float
    job_induced: bool | None = None


@dataclass(frozen=True)
class ResolvedCause:
    """A cause with its probability and costs in seconds."""

    name: str
    category: str
    probability: float
    repair_s: float
    detect_s: float
    restart_s: float
    survives: frozenset[str] | None = None
    job_induced: bool = False


def named_cause_tables() -> list[str]:
    """Names of the cause tables shipped with the package (``testbed/data/causes``)."""
    return names("causes")


def load_cause_table(ref: str, *, source: str | None = None,
                     field: str = "failures.causes") -> list[CauseRow]:
    """Read a cause table given a file path (already resolved by the caller) or the name
    of a shipped table."""
    p = Path(ref)
    path = p if p.is_file() else named_file("causes", ref)
    if path is None:
        from testbed.units import did_you_mean
        raise ScenarioError(f"no cause table {ref!r}{did_you_mean(ref, named_cause_tables())}"
                            f" (a CSV path or one of: {', '.join(named_cause_tables())})",
                            source=source, field=field)
    rows: list[CauseRow] = []
    for lineno, rec in read_csv(path, required=("cause", "count")):
        try:
            weight = float(rec["count"])
        except (TypeError, ValueError):
            raise ScenarioError(f"count {rec['count']!r} is not a number", source=str(path),
                                line=lineno, field="count") from None
        if not math.isfinite(weight) or weight <= 0:
            raise ScenarioError(f"count must be a finite number > 0, got {rec['count']!r}",
                                source=str(path), line=lineno, field="count")
        name = (rec["cause"] or "").strip()
        if not name:
            raise ScenarioError("empty cause name", source=str(path), line=lineno,
                                field="cause")
        if any(r.name == name for r in rows):
            raise ScenarioError(f"cause {name!r} appears twice", source=str(path),
                                line=lineno, field="cause")
        flag = (rec.get("job_induced") or "").strip().lower()
        if flag not in ("", "true", "false"):
            raise ScenarioError(f"job_induced must be true or false, got {flag!r}",
                                source=str(path), line=lineno, field="job_induced")
        rows.append(CauseRow(name, (rec.get("category") or name).strip(), weight,
                             None if not flag else flag == "true"))
    if not rows:
        raise ScenarioError("cause table has no rows", source=str(path))
    return rows


def resolve_causes(rows: list[CauseRow], costs: dict[str, dict], *, repair_s: float,
                   detect_s: float, restart_s: float) -> tuple[ResolvedCause, ...]:
    """Attach probabilities and costs: per cause name, then per category, then defaults."""
    total = sum(r.weight for r in rows)
    out = []
    for r in rows:
        spec = {**costs.get(r.category, {}), **{k: v for k, v in costs.get(r.name, {}).items()
                                                 if v is not None}}
        survives = spec.get("survives")
        induced = spec.get("job_induced")
        if induced is None:
            induced = bool(r.job_induced)
        out.append(ResolvedCause(
            name=r.name, category=r.category, probability=r.weight / total,
            repair_s=repair_s if spec.get("repair") is None else spec["repair"],
            detect_s=detect_s if spec.get("detect") is None else spec["detect"],
            restart_s=restart_s if spec.get("restart") is None else spec["restart"],
            survives=None if survives is None else frozenset(survives),
            job_induced=bool(induced)))
    return tuple(out)
