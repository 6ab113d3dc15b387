"""Where every number of a profile comes from: the ``sources:`` section (issue 18).

A profile's constants are of three kinds, and each says which (DESIGN.md, "Every
constant says what it rests on"):

* ``datasheet`` — a vendor specification or documented default (a datasheet, a
  library's documented constant, a framework's default setting), with ``ref``;
* ``measurement`` — a measurement in this repository: ``record`` names its file or
  record id;
* ``fit`` — solved from published or measured figures: ``data`` names the data sets
  (the keys of the test suite's figure sets, :mod:`tests.oracle.figures`), so a figure
  a constant was fitted on is reported as *fitted*, never as validation;
* ``assumed`` — a value no datasheet or measurement here gives (a share of a shared
  file system): said so, listed apart by the ledger, and only where no published
  figure in the suite depends on it.

Keys are dotted paths into the profile (``gpu.memory_GiB``, ``network.tiers.nvswitch.
latency_us``, ``software.stacks.pytorch.launch_us``); a source on a path covers every
number below it (``gpu.peak_TFLOPS`` covers every precision). :func:`numeric_paths`
lists the numbers a profile holds and :func:`uncovered` those without a source — the
ledger test requires none for the shipped profiles. The generated ``calibration``
block carries its own provenance (``calibration.source`` and ``method``) and counts as
a fit on that data.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from testbed.io.schema import Strict


class Source(Strict):
    """What one constant (or every constant under one path) rests on."""

    kind: Literal["datasheet", "measurement", "fit", "assumed"]
    ref: str = Field(min_length=1, description="the document, table or issue it comes from")
    data: tuple[str, ...] = Field(default=(), description="fit: the data sets fitted on")
    record: str | None = Field(default=None, description="measurement: record id or file")

    @model_validator(mode="after")
    def _complete(self) -> Source:
        if self.kind == "fit" and not self.data:
            raise ValueError("a fit names the data sets it was fitted on (data: [...])")
        if self.kind == "measurement" and not self.record:
            raise ValueError("a measurement names its record (record: ...)")
        return self


#: Keys whose values are not physical constants (names, descriptions, flags).
NOT_CONSTANTS = ("name", "description", "model", "library", "source", "method",
                 "frameworks", "training_precision", "allreduce_algorithms",
                 "data_loader", "gradient_allreduce")


def _walk(prefix: str, value: Any, out: list[str]) -> None:
    if isinstance(value, bool) or value is None:
        return
    if isinstance(value, int | float):
        out.append(prefix)
        return
    if isinstance(value, dict):
        for key, sub in value.items():
            if key in NOT_CONSTANTS:
                continue
            _walk(f"{prefix}.{key}" if prefix else str(key), sub, out)
        return
    if isinstance(value, list | tuple):
        for i, sub in enumerate(value):
            name = sub.get("name", str(i)) if isinstance(sub, dict) else str(i)
            _walk(f"{prefix}.{name}", sub, out)


def numeric_paths(data: dict) -> list[str]:
    """Dotted paths of every number in a profile's data (lists of named items by name;
    the ``sources`` and ``calibration`` sections left out)."""
    out: list[str] = []
    _walk("", {k: v for k, v in data.items() if k not in ("sources", "calibration")}, out)
    return out


def source_for(path: str, sources: dict[str, Source]) -> Source | None:
    """The source covering ``path``: its own, else the nearest covering prefix."""
    parts = path.split(".")
    for i in range(len(parts), 0, -1):
        hit = sources.get(".".join(parts[:i]))
        if hit is not None:
            return hit
    return None


def uncovered(data: dict, sources: dict[str, Source]) -> list[str]:
    """Numbers of a profile without a source."""
    return [p for p in numeric_paths(data) if source_for(p, sources) is None]


def dangling(data: dict, sources: dict[str, Source]) -> list[str]:
    """Source keys that name no number of the profile (a typo, or a removed key)."""
    paths = numeric_paths(data)
    return sorted(k for k in sources
                  if not any(p == k or p.startswith(k + ".") for p in paths))


def _value(data: dict, path: str):
    node: object = data
    for part in path.split("."):
        if isinstance(node, dict):
            node = node.get(part)
        elif isinstance(node, list | tuple):
            node = next((x for x in node if isinstance(x, dict) and x.get("name") == part),
                        node[int(part)] if part.isdigit() and int(part) < len(node) else None)
        else:
            return None
    return node


def ledger(data: dict, sources: dict[str, Source]) -> list[dict]:
    """Every number of a profile with what it rests on (``kind`` None: no source)."""
    rows = []
    for path in numeric_paths(data):
        src = source_for(path, sources)
        rows.append({"path": path, "value": _value(data, path),
                     "kind": src.kind if src else None, "ref": src.ref if src else None,
                     "data": list(src.data) if src else [],
                     "record": src.record if src else None})
    return rows
