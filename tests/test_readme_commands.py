"""The README's commands exist as written: every ``testbed …`` line of its ```bash blocks
names a real command path whose ``--help`` works and options that command has, and the
concrete ones (every token real once the ``[optional]`` parts are dropped) that are
fast run verbatim, from a scratch folder, and succeed.

README.md is read when the test runs, so the test follows the README as it is rewritten.

They run twice: as whoever runs the suite, and — when that is root, as on CI — again as an
unprivileged user (``nobody``, through ``setpriv``, with a home of its own and nothing of
root's environment), so a command that needs root's files, home or permissions fails here.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import site
import subprocess
import sys
import tempfile
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from testbed.app.cli.main import cli
from tests.conftest import each

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"

#: Command paths never run verbatim here, and why (their options are still checked).
NOT_RUN = {
    "hpo run": "trains real PyTorch networks (tens of seconds to minutes; tests/hpo run it)",
    "precision-study": "trains networks per precision and seed (minutes)",
    "study": "the studies measure frameworks and train networks (minutes; tests/study)",
    "calibrate-local": "measures this machine with every framework (minutes)",
    "calibrate": "fits a profile from measurement records the README's reader supplies",
    "verify": "needs the profile and records the README's reader made",
    "real-run": "runs frameworks and multi-process jobs (tests/real_runs)",
    "sweep": "hundreds of simulations; its README line leaves SCENARIO to the reader",
}
#: Options whose value is a file or folder the command writes.
OUTPUTS = {"-o", "--output", "--store", "--trace", "--events", "--plot", "--records"}
#: Folders of the checkout the README's commands read from (linked into the scratch folder).
READ_FROM = ("scenarios", "traces")
#: Tokens that stand for something the reader supplies.
READER_SUPPLIED = re.compile(r"^[A-Z][A-Z0-9_]*(?:[./][A-Za-z0-9_.]*)?$|\.\.\.|…|\|")
CONTEXT = click.Context(cli)


def readme_commands(text: str) -> list[str]:
    """Every ``testbed …`` command of the README's ```bash blocks, one string each
    (continuation lines joined, comments dropped, several commands on one line split)."""
    out: list[str] = []
    for block in re.findall(r"```bash\n(.*?)```", text, re.S):
        joined = re.sub(r"\\\n\s*", " ", block)
        for line in joined.splitlines():
            line = re.sub(r"\s+#.*$", "", line.strip())
            if not line.startswith("testbed "):
                continue
            out += [" ".join(part.split()) for part in re.split(r"\s{3,}(?=testbed )", line)]
    return out


def _tokens(command: str) -> list[str]:
    try:
        return shlex.split(command)
    except ValueError:
        return command.split()


def command_path(tokens: list[str]) -> tuple[list[str], click.Command]:
    """The sub-command names after ``testbed`` and the click command they lead to."""
    cmd: click.Command = cli
    path: list[str] = []
    for tok in tokens[1:]:
        if not isinstance(cmd, click.Group) or tok.startswith("-"):
            if tok.startswith("-") and isinstance(cmd, click.Group) and path == []:
                continue                   # a root option before the command
            break
        sub = cmd.get_command(CONTEXT, tok)
        if sub is None:
            break
        path.append(tok)
        cmd = sub
    return path, cmd


def option_names(tokens: list[str]) -> list[str]:
    """The options a command line names (``--grid``, ``-o``; ``--x=v`` → ``--x``)."""
    names = []
    for tok in tokens[1:]:
        tok = tok.strip("[]")
        if re.match(r"^--?[A-Za-z]", tok):
            names.append(tok.split("=", 1)[0])
    return names


def concrete(command: str) -> str | None:
    """The command with its ``[optional …]`` parts dropped, or None while a token the
    reader supplies (``NAME``, ``FILE.net``, ``csv|parquet``, ``…``) is left."""
    bare = re.sub(r"\[[^\[\]]*\]", " ", command)
    if "[" in bare or "]" in bare:
        return None
    if any(READER_SUPPLIED.search(tok) for tok in _tokens(bare)[1:]):
        return None
    return " ".join(bare.split())


COMMANDS = readme_commands(README.read_text(encoding="utf-8"))


def test_the_readme_has_testbed_commands():
    assert len(COMMANDS) >= 10, COMMANDS


@pytest.mark.parametrize("command", COMMANDS)
def test_each_readme_command_path_and_option_exists(command):
    tokens = _tokens(command)
    path, cmd = command_path(tokens)
    assert path, f"no testbed command in {command!r}"
    assert not isinstance(cmd, click.Group), f"{command!r} stops at the group {path}"
    result = CliRunner().invoke(cli, [*path, "--help"])
    assert result.exit_code == 0, result.output
    known = {o for p in cmd.params for o in (*p.opts, *p.secondary_opts)} | {"--help", "-h"}
    known |= {o for p in cli.params for o in (*p.opts, *p.secondary_opts)}
    for name in each(option_names(tokens), at_least=0):
        assert name in known, f"{' '.join(path)} has no option {name} ({command!r})"


def reads_a_missing_file(tokens: list[str]) -> bool:
    """Whether the line reads a file the reader makes first (``results.db`` of an earlier
    sweep, their own ``calibration.csv``): one that is not under :data:`READ_FROM`."""
    for prev, tok in zip(tokens, tokens[1:], strict=False):
        if prev in OUTPUTS or tok.startswith("-"):
            continue
        if re.search(r"\.(csv|db|jsonl|yaml|yml|net|tab|json)$", tok) and \
                not (tok.split("/")[0] in READ_FROM and (REPO / tok).exists()):
            return True
    return False


def _runnable() -> list[str]:
    out = []
    for command in COMMANDS:
        line = concrete(command)
        if line is None or reads_a_missing_file(_tokens(line)):
            continue
        path, _ = command_path(_tokens(line))
        if path and path[0] not in NOT_RUN and " ".join(path[:2]) not in NOT_RUN:
            out.append(line)
    return out


@pytest.mark.parametrize("command", _runnable() or ["(none)"])
def test_each_fast_concrete_readme_command_runs_verbatim(command, tmp_path):
    if command == "(none)":
        pytest.skip("the README has no concrete fast command")
    for name in READ_FROM:                         # paths the README gives from the checkout
        (tmp_path / name).symlink_to(REPO / name)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-m", "testbed", *_tokens(command)[1:]],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, f"{command}\n{proc.stderr[-2000:]}"


#: The unprivileged user the commands run as when the suite runs as root.
USER = "nobody"


def _as_user_prefix() -> tuple[list[str], str]:
    """(the command prefix that runs as :data:`USER` with an interpreter it may run,
    why not when it cannot be done here)."""
    if os.geteuid() != 0:
        return [], "the suite already runs as a user: the test above is that run"
    setpriv = shutil.which("setpriv")
    # this interpreter may live under root's home (pyenv): take the system's own of the
    # same version, which runs the same packages (the ABI of a minor version is fixed)
    python = Path(f"/usr/bin/python{sys.version_info.major}.{sys.version_info.minor}")
    if setpriv is None or not python.exists():
        return [], f"needs setpriv and {python}"
    prefix = [setpriv, f"--reuid={USER}", "--regid=nogroup", "--clear-groups"]
    probe = subprocess.run([*prefix, "test", "-r", str(REPO / "testbed" / "__init__.py"), "-a",
                            "-r", str(Path(click.__file__))], capture_output=True)
    if probe.returncode != 0:
        return [], f"the checkout or its packages are not readable by {USER}"
    return [*prefix, "env", "-i", f"PATH={os.defpath}"], str(python)


@pytest.mark.parametrize("command", _runnable() or ["(none)"])
def test_each_fast_concrete_readme_command_runs_verbatim_as_a_user(command):
    if command == "(none)":
        pytest.skip("the README has no concrete fast command")
    prefix, python = _as_user_prefix()
    if not prefix:
        pytest.skip(python)
    home = Path(tempfile.mkdtemp(prefix="readme-user-"))
    try:
        shutil.chown(home, USER, "nogroup")
        home.chmod(0o755)
        for name in READ_FROM:
            (home / name).symlink_to(REPO / name)
        packages = os.pathsep.join([str(REPO), *site.getsitepackages()])
        proc = subprocess.run([*prefix, f"HOME={home}", f"PYTHONPATH={packages}", python,
                               "-m", "testbed", *_tokens(command)[1:]], cwd=home,
                              capture_output=True, text=True, timeout=180)
        assert proc.returncode == 0, f"{command} (as {USER})\n{proc.stderr[-2000:]}"
        owners = {p.owner() for p in home.rglob("*") if not p.is_symlink()}
        assert owners <= {USER}, f"{command} left files owned by {owners - {USER}}"
    finally:
        shutil.rmtree(home, ignore_errors=True)


def test_the_walker_reads_the_readme_forms():
    """The parser itself: continuation lines, several commands on one line, comments,
    optional parts and tokens the reader supplies."""
    text = ("```bash\ntestbed model list   testbed model export NAME -o FILE.net\n"
            "testbed sweep s.yaml --grid a=1 \\\n    [-r R] [--json]   # comment\n"
            "echo testbed\n```\n")
    got = readme_commands(text)
    assert got == ["testbed model list", "testbed model export NAME -o FILE.net",
                   "testbed sweep s.yaml --grid a=1 [-r R] [--json]"]
    assert concrete(got[0]) == "testbed model list"
    assert concrete(got[1]) is None
    assert concrete(got[2]) == "testbed sweep s.yaml --grid a=1"
    assert option_names(_tokens(got[2])) == ["--grid", "-r", "--json"]
    assert command_path(_tokens("testbed oracle predict --gpus 8"))[0] == ["oracle", "predict"]
    assert reads_a_missing_file(_tokens("testbed report results.db -o report/"))
    assert not reads_a_missing_file(_tokens("testbed hpo simulate scenarios/quickstart.yaml"))
    assert not reads_a_missing_file(_tokens("testbed model export alexnet -o a.net"))
