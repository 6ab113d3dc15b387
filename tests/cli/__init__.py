"""Tests of the command line as a whole (every command's surface, scenarios by name,
sweep grids checked like the file)."""

from __future__ import annotations

from testbed.app.cli.main import main


def in_process(args: list[str], capsys) -> tuple[int, str, str]:
    """Run ``testbed ARGS`` in this process: (exit status, stdout, stderr)."""
    try:
        main(args)
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    out = capsys.readouterr()
    return code, out.out, out.err
