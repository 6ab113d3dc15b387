"""Running a command on a hostile input and checking the answer.

Every case asserts the same promise (issue "hostile inputs"): exit status 2, at most a
few lines on stderr naming the file (and the field where there is one), no traceback,
the inputs byte-identical afterwards, no output created or changed, and an answer in
seconds. :func:`run_in_process` calls the CLI's ``main`` in this process (fast, and
any exception that escapes is a failure); :func:`run_bounded` starts a subprocess with
a memory limit and a timeout, for the cases that attack memory or time.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import resource
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
#: Memory a bounded subprocess may use: well above the CLI's needs (≈ 300 MB), far below
#: what an unbounded read or an alias bomb would take.
MEMORY_LIMIT_BYTES = 3 * 2**30
ANSWER_WITHIN_S = 30.0


@dataclass(frozen=True)
class Outcome:
    code: int
    stdout: str
    stderr: str
    seconds: float


def run_in_process(args: list[str], cwd: Path | None = None) -> Outcome:
    """``testbed ARGS`` through :func:`testbed.app.cli.main.main` in this process."""
    from testbed.app.cli.main import main
    out, err = io.StringIO(), io.StringIO()
    start = time.monotonic()
    old = Path.cwd()
    saved_env = dict(os.environ)     # --max-input-size sets the limit in the environment
    code = 0
    try:
        if cwd is not None:
            os.chdir(cwd)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                main(list(args))
            except SystemExit as exc:
                code = int(exc.code or 0)
    finally:
        os.chdir(old)
        os.environ.clear()
        os.environ.update(saved_env)
    return Outcome(code, out.getvalue(), err.getvalue(), time.monotonic() - start)


def _limits() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT_BYTES, MEMORY_LIMIT_BYTES))


def run_bounded(args: list[str], cwd: Path | None = None, *, extra_env: dict | None = None,
                timeout: float = ANSWER_WITHIN_S, fsize_bytes: int | None = None) -> Outcome:
    """``python -m testbed ARGS`` in a subprocess with bounded memory (and optionally a
    bounded file size, which makes writes fail as on a full disk)."""
    env = {**os.environ, "PYTHONPATH": str(REPO), **(extra_env or {})}

    def pre() -> None:
        _limits()
        if fsize_bytes is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (fsize_bytes, fsize_bytes))
    start = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "testbed", *args], cwd=cwd or REPO, env=env,
                          capture_output=True, text=True, timeout=timeout, preexec_fn=pre)
    return Outcome(proc.returncode, proc.stdout, proc.stderr, time.monotonic() - start)


def tree_state(root: Path) -> dict[str, str]:
    """Every regular file under ``root`` with the SHA-256 of its bytes (what must not
    change), and every folder."""
    state: dict[str, str] = {}
    for path in sorted(root.rglob("*")):
        rel = str(path.relative_to(root))
        if path.is_symlink():
            state[rel] = f"link:{os.readlink(path)}"
        elif path.is_file():
            state[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
        elif path.is_dir():
            state[rel] = "dir"
        else:
            state[rel] = "special"
    return state


def assert_refused(outcome: Outcome, *, names: str | None = None, field: str | None = None,
                   max_lines: int = 3) -> None:
    """The promise: exit 2, a few lines naming the file (and field), no traceback, fast."""
    err = outcome.stderr
    assert outcome.code == 2, f"exit {outcome.code}; stderr: {err[-800:]}; stdout: {outcome.stdout[-300:]}"
    assert "Traceback" not in err and "Error:" not in err.replace("error:", ""), err[-800:]
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert 1 <= len(lines) <= max_lines, err
    if names is not None:
        assert names in err, f"{names!r} not named in {err!r}"
    if field is not None:
        assert field in err, f"field {field!r} not named in {err!r}"
    assert outcome.seconds < ANSWER_WITHIN_S, f"took {outcome.seconds:.1f} s"
