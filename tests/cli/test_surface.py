"""The command line as a whole: help text on every option, ``--json`` on every command,
one meaning for ``-q`` and ``-o``, the shipped scenarios by name, grid values refused
where the file would refuse them, and one line naming the extra when a framework is
missing."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import click
import pytest
from click.testing import CliRunner

from testbed.app.cli.main import cli
from tests.cli import in_process
from tests.conftest import REPO, each

CONTEXT = click.Context(cli)

#: Commands of modules another change is rewriting, and what they still lack; the test
#: fails when one of them is fixed, so the entry is removed with the fix.
KNOWN_GAPS: set[tuple[str, str]] = set()


def leaves(cmd: click.Command = cli, path: tuple[str, ...] = ()):
    """(command path, command) of every command that runs (not a group)."""
    if isinstance(cmd, click.Group):
        for name in cmd.list_commands(CONTEXT):
            yield from leaves(cmd.get_command(CONTEXT, name), (*path, name))
    else:
        yield " ".join(path), cmd


LEAVES = list(leaves())


def _options(cmd: click.Command) -> list[click.Option]:
    return [p for p in cmd.params if isinstance(p, click.Option) and p.name != "help"]


def test_every_option_has_help_text_and_every_command_json():
    gaps = set()
    for path, cmd in each(LEAVES, at_least=30):
        assert cmd.help, f"{path} has no help text"
        names = {n for o in _options(cmd) for n in o.opts}
        if "--json" not in names:
            gaps.add((path, "--json"))
        gaps |= {(path, o.opts[-1]) for o in _options(cmd) if not o.help}
    assert gaps - KNOWN_GAPS == set(), "options without help or commands without --json"
    assert KNOWN_GAPS - gaps == set(), "fixed: remove these from KNOWN_GAPS"


def test_q_is_quiet_and_o_is_output_everywhere():
    for path, cmd in each(LEAVES, at_least=30):
        for o in _options(cmd):
            for short, long in (("-q", "--quiet"), ("-o", "--output")):
                assert (short in o.opts) == (long in o.opts), \
                    f"{path}: {short} and {long} must be one option, got {o.opts}"


def test_help_of_every_command_renders():
    for path, _cmd in each(LEAVES, at_least=30):
        result = CliRunner().invoke(cli, [*path.split(), "--help"])
        assert result.exit_code == 0, (path, result.output)



def test_model_export_and_fta_import_speak_json(tmp_path, capsys):
    code, out, err = in_process(["model", "export", "alexnet", "-o", str(tmp_path / "a.net"),
                                  "--json"], capsys)
    assert code == 0, err
    doc = json.loads(out)
    assert doc["model"] == "alexnet" and doc["layers"] > 5
    assert doc["output"] == str(tmp_path / "a.net") and (tmp_path / "a.net").is_file()
    fta = REPO / "traces" / "fta_event_trace_sample.tab"
    code, out, err = in_process(["traces", "import-fta", str(fta), "-o",
                                  str(tmp_path / "f.csv"), "--json"], capsys)
    assert code == 0, err
    doc = json.loads(out)
    lines = (tmp_path / "f.csv").read_text().strip().splitlines()
    assert doc["failures"] == len(lines) - 1 > 0


# ------------------------------------------------------------------ frameworks absent

BLOCKER = '''
import sys
class _Absent:
    """The frameworks extra not installed: torch, tensorflow and chainer cannot be found."""
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {"torch", "tensorflow", "chainer"}:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None
sys.meta_path.insert(0, _Absent())
'''


@pytest.mark.parametrize("args", [
    ["precision-study", "--dataset", "digits", "--seeds", "1"],
    ["precision-study", "--dataset", "digits", "--framework", "chainer"],
    ["hpo", "run", "hpo-digits-real", "--store", "h.db"],
    ["study", "precision", "--quick"],
])
def test_a_missing_framework_is_one_line_naming_the_extra(tmp_path, args):
    (tmp_path / "sitecustomize.py").write_text(BLOCKER)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(REPO)])}
    proc = subprocess.run([sys.executable, "-m", "testbed", *args], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert "needs the 'frameworks' extra: pip install testbed[frameworks]" in lines[0]
    assert "is not installed" in lines[0]
    assert not (tmp_path / "h.db").exists()
