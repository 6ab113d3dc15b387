"""Worker processes for many short runs: a reusable server and single-use fresh processes.

* :class:`WorkerServer` runs many requests in one process. Each request reseeds every
  generator and builds a new model, so a server is fit for runs that start from the
  seed (straight-through runs, the first half of a checkpoint/restart pair).
* :class:`FreshPool` hands out *fresh* processes, each used for exactly one request and
  then retired: a restore there cannot lean on anything left in memory. The next one is
  started as soon as one is taken, so its framework import overlaps the current work.
* :class:`ForkPool` forks each fresh process from a zygote that has imported the
  framework and done nothing else (a new process, with a new pid, whose memory holds no
  training state), which saves the 2–5 s framework import per process.
"""

from __future__ import annotations

import json
import subprocess
from typing import IO, Any

from real_runs.env import ChildFailed, child_env, python_cmd


class WorkerError(ChildFailed):
    """A pooled worker failed (one line, exit 1 in the CLI)."""


class WorkerServer:
    """A ``real_runs.worker --serve`` child process."""

    def __init__(self, framework: str, max_requests: int = 0, zygote: bool = False) -> None:
        args = ["--serve", "--preload", framework] + (["--zygote"] if zygote else [])
        if max_requests:
            args += ["--max-requests", str(max_requests)]
        self.proc = subprocess.Popen(python_cmd("real_runs.worker", *args),
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, text=True, env=child_env())
        self.pid = self.proc.pid
        self.used = 0

    @property
    def _stdin(self) -> IO[str]:
        assert self.proc.stdin is not None     # opened with stdin=PIPE
        return self.proc.stdin

    def _read_record(self) -> dict[str, Any]:
        assert self.proc.stdout is not None    # opened with stdout=PIPE
        line = self.proc.stdout.readline()
        if not line:
            code = self.proc.wait()
            raise WorkerError(f"worker {self.pid} exited with status {code}")
        return json.loads(line)

    def request(self, request: dict[str, Any]) -> dict[str, Any]:
        """Send one request and return its result record (events are skipped)."""
        self._stdin.write(json.dumps(request) + "\n")
        self._stdin.flush()
        self.used += 1
        while True:
            rec = self._read_record()
            if rec.get("type") == "result":
                return rec
            if rec.get("type") == "error":
                raise WorkerError(rec["message"])

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self._stdin.close()
                self.proc.wait(timeout=30)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()


class FreshPool:
    """Single-use worker processes, one started ahead."""

    def __init__(self, framework: str) -> None:
        self.framework = framework
        self.pids: list[int] = []
        self._next = WorkerServer(framework, max_requests=1)

    def run_fresh(self, request: dict[str, Any]) -> dict[str, Any]:
        """Run ``request`` in a process that has run nothing else, then retire it."""
        worker, self._next = self._next, WorkerServer(self.framework, max_requests=1)
        self.pids.append(worker.pid)
        try:
            return worker.request(request)
        finally:
            worker.close()

    def close(self) -> None:
        self._next.close()


class ForkPool:
    """Fresh processes forked from a framework-importing zygote, one per request."""

    def __init__(self, framework: str) -> None:
        self.zygote = WorkerServer(framework, zygote=True)
        self.pids: list[int] = []

    def run_fresh(self, request: dict[str, Any]) -> dict[str, Any]:
        result = self.zygote.request(request)
        self.pids.append(int(result["pid"]))
        return result

    def close(self) -> None:
        self.zygote.close()
