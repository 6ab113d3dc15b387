"""Helpers shared by CLI commands: JSON output, tables, option parsing."""

from __future__ import annotations

import sys
from collections.abc import Sequence

import click

from testbed.errors import InputError
from testbed.io.write import json_text
from testbed.units import did_you_mean, parse_shape


class Names(click.Choice):
    """``click.Choice`` for a closed set of names (the ``Literal`` of a schema): an
    unknown name is refused in the words the schemas use — ``unknown strategy 'dta'
    (did you mean 'data'?); known: …``. ``fold_case`` accepts any letter case and passes
    the name on in lower case."""

    def __init__(self, names: Sequence[str], what: str, *, fold_case: bool = False) -> None:
        super().__init__(list(names), case_sensitive=not fold_case)
        self.what = what

    def convert(self, value, param, ctx):
        try:
            return super().convert(value, param, ctx)
        except click.BadParameter:
            names = [str(c) for c in self.choices]
            key = value.lower() if not self.case_sensitive else value
            self.fail(f"unknown {self.what} {value!r}{did_you_mean(key, names)}; "
                      f"known: {', '.join(names)}", param, ctx)


def emit_json(data) -> None:
    """Write a JSON document to stdout (sorted keys, stable; typed results through
    their ``to_dict()``, see :func:`testbed.io.write.json_text`)."""
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


def key_values(rows: Sequence[tuple[str, object]]) -> str:
    """``key  value`` lines with the keys padded to one width (a record for people)."""
    if not rows:
        return ""
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{key:<{width}}  {value}" for key, value in rows)


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
