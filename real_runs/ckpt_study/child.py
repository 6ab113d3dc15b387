"""Run a study child process and hand each JSON record it writes to a callback as it
arrives (so the parent can show progress), with the harness's single-threaded
environment (:func:`real_runs.env.child_env`); bad input in the child comes back as
an :class:`~testbed.errors.InputError`, any other failure as one line."""

from __future__ import annotations

import json
import subprocess
import tempfile
from collections.abc import Callable
from typing import Any

from real_runs.env import ChildFailed, child_env, child_error, python_cmd

Record = dict[str, Any]


def stream_json_child(module: str, args: list[str], *, timeout_s: float, what: str,
                      on_record: Callable[[Record], None] | None = None) -> list[Record]:
    """``python -m module args``; every ``{…}`` line of its stdout, in order."""
    records: list[Record] = []
    with tempfile.TemporaryFile(mode="w+", encoding="utf-8") as err:
        proc = subprocess.Popen(python_cmd(module, *args), stdout=subprocess.PIPE, stderr=err,
                                text=True, env=child_env())
        assert proc.stdout is not None   # opened with stdout=PIPE
        try:
            for line in proc.stdout:
                if line.startswith("{"):
                    record = json.loads(line)
                    records.append(record)
                    if on_record is not None:
                        on_record(record)
            code = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            raise ChildFailed(f"{what} failed: no result within {timeout_s:g} s") from None
        except BaseException:
            proc.kill()
            proc.wait()
            raise
        if code != 0:
            err.seek(0)
            raise child_error(code, err.read(), what)
    return records
