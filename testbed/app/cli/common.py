"""Helpers shared by CLI commands: JSON output, tables, option parsing."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

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


def scenario_path(ref: str) -> Path:
    """A scenario given as a path, or the name of a shipped scenario (``testbed
    scenarios`` lists them): what every command taking a SCENARIO accepts."""
    from testbed.io.packaged import named_file, names

    p = Path(ref)
    if p.exists() or "/" in ref or ref.endswith((".yaml", ".yml")):
        return p
    builtin = named_file("scenarios", ref)
    if builtin is None:
        raise InputError(f"no such scenario file or shipped scenario (shipped: "
                         f"{', '.join(names('scenarios'))}; see `testbed scenarios`)",
                         source=ref)
    return builtin


#: Modules of the optional ``frameworks`` extra.
FRAMEWORK_MODULES = ("torch", "tensorflow", "chainer")
FRAMEWORKS_EXTRA = "needs the 'frameworks' extra: pip install testbed[frameworks]"


def missing_framework(exc: BaseException) -> str | None:
    """The framework module whose absence raised ``exc`` (an ImportError), or None."""
    if not isinstance(exc, ImportError):
        return None
    name = (exc.name or "").split(".")[0]
    if not name:            # an error pickled back from a worker loses .name
        text = str(exc)
        name = next((m for m in FRAMEWORK_MODULES if f"'{m}" in text), "")
    return name if name in FRAMEWORK_MODULES else None


def require_framework(module: str, *, command: str) -> None:
    """Refuse now, in one line naming the extra, a command that needs ``module``
    (torch, tensorflow, chainer) where it is not installed, rather than fail with a
    traceback in the middle of the run (or in every worker process)."""
    from real_runs.env import framework_installed
    if not framework_installed(module):
        raise InputError(f"{FRAMEWORKS_EXTRA} ({module} is not installed)", source=command)


def progress_enabled(quiet: bool, as_json: bool) -> bool:
    """Progress bars go to stderr, only for people: not with --quiet or --json."""
    return not quiet and not as_json and sys.stderr.isatty()
