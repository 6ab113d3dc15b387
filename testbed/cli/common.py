"""Helpers shared by CLI commands: JSON output, tables, option parsing."""

from __future__ import annotations

import sys
from collections.abc import Sequence

import click

from testbed.errors import InputError
from testbed.files import json_text
from testbed.units import parse_shape


def emit_json(data) -> None:
    """Write a JSON document to stdout (sorted keys, stable; typed results through
    their ``to_dict()``, see :func:`testbed.files.json_text`)."""
    click.echo(json_text(data))


def table(headers: Sequence[str], rows: Sequence[Sequence], align: str | None = None) -> str:
    """A plain-text table; ``align`` is one char per column ('l' or 'r')."""
    cells = [[str(c) for c in row] for row in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    align = align or "l" + "r" * (len(headers) - 1)

    def fmt(row):
        return "  ".join(c.ljust(w) if a == "l" else c.rjust(w)
                         for c, w, a in zip(row, widths, align, strict=True)).rstrip()

    lines = [fmt(headers), "  ".join("-" * w for w in widths)]
    lines += [fmt(r) for r in cells]
    return "\n".join(lines)


def shape_option(value: str | None, option: str = "--input-shape") -> tuple[int, ...] | None:
    if value is None:
        return None
    return parse_shape(value, source=option)


def positive(value: int, option: str) -> int:
    if value is None or value <= 0:
        raise InputError(f"must be a positive integer, got {value}", source=option)
    return value


def progress_enabled(quiet: bool, as_json: bool) -> bool:
    """Progress bars go to stderr, only for people: not with --quiet or --json."""
    return not quiet and not as_json and sys.stderr.isatty()
