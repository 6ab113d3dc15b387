"""``dd`` of a given number of bytes: the raw storage bound a checkpoint save is held to.

``dd if=/dev/zero of=FILE bs=4M count=BYTES iflag=count_bytes`` writes exactly the
checkpoint's bytes in 4 MiB blocks without any serialisation — into the page cache,
like a framework's save (which does not fsync), and with ``conv=fsync`` to the device,
like the atomic store's commit; ``dd if=FILE of=/dev/null`` reads them back. The time
is the one ``dd`` reports itself (its own process start excluded). GNU coreutils' ``dd``
in the C locale prints ``N bytes (…) copied, S s, R``.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

from testbed.errors import TestbedError

BLOCK = "4M"
_COPIED = re.compile(r"^(\d+) bytes.*copied, ([0-9.eE+-]+) s", re.MULTILINE)


class DdFailed(TestbedError):
    """``dd`` is missing or failed (one line in the CLI, exit 1)."""


def _run(args: list[str]) -> tuple[int, float]:
    exe = shutil.which("dd")
    if exe is None:
        raise DdFailed("dd (GNU coreutils) is not on PATH: the study compares every save "
                       "with dd of the same bytes")
    env = dict(os.environ, LC_ALL="C")
    proc = subprocess.run([exe, *args], capture_output=True, text=True, env=env, timeout=600)
    match = _COPIED.search(proc.stderr)
    if proc.returncode != 0 or match is None:
        tail = (proc.stderr.strip().splitlines() or [f"exit status {proc.returncode}"])[-1]
        raise DdFailed(f"dd {' '.join(args)} failed: {tail}")
    return int(match.group(1)), float(match.group(2))


def dd_write_s(path: Path, nbytes: int, *, fsync: bool) -> float:
    """Seconds for dd to write ``nbytes`` to ``path`` (with ``conv=fsync`` if asked)."""
    args = ["if=/dev/zero", f"of={path}", f"bs={BLOCK}", f"count={int(nbytes)}",
            "iflag=count_bytes"] + (["conv=fsync"] if fsync else [])
    copied, seconds = _run(args)
    if copied != nbytes:
        raise DdFailed(f"dd wrote {copied} bytes, not {nbytes}")
    return seconds


def dd_read_s(path: Path) -> float:
    """Seconds for dd to read ``path`` to /dev/null (from the page cache when it is warm)."""
    return _run([f"if={path}", "of=/dev/null", f"bs={BLOCK}"])[1]
