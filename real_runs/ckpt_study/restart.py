"""Deterministic restart, shown: straight through vs checkpoint at k + restore in a new
process, compared bit for bit (the property ``tests/real_runs/test_realrun_determinism.py``
proves with hypothesis, run here on chosen cases so that the study can print it).

Per framework one :class:`~real_runs.pool.WorkerServer` runs the straight-through runs
and the first halves (every request reseeds everything and builds a new model), and a
pool hands out *new* processes for the restores — forked from a zygote that has only
imported the framework (:class:`~real_runs.pool.ForkPool`), or freshly spawned
interpreters (:class:`~real_runs.pool.FreshPool`). A restore that leaves out one kind of
state (``omit``: ``rng``, ``optimizer`` or ``data``) shows that the comparison has
teeth: it must differ.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from real_runs.pool import ForkPool, FreshPool, WorkerServer

#: Width and batch of the restart runs (the determinism test's).
WIDTH, BATCH = 16, 8


@dataclass(frozen=True)
class RestartCase:
    """One comparison: ``steps`` straight vs ``k`` + restore + ``steps − k``."""

    model: str
    seed: int
    steps: int
    k: int
    omit: str | None = None


def _cfg(framework: str, case: RestartCase) -> dict[str, Any]:
    return {"framework": framework, "model": case.model, "seed": case.seed,
            "steps": case.steps, "width": WIDTH, "batch_size": BATCH}


def run_cases(framework: str, cases: list[RestartCase], *, fresh_interpreter: bool = False,
              on_case=None) -> list[dict[str, Any]]:
    """One row per case (module doc); ``on_case(row)`` after each."""
    server = WorkerServer(framework)
    pool: ForkPool | FreshPool = FreshPool(framework) if fresh_interpreter else ForkPool(framework)
    rows = []
    try:
        with tempfile.TemporaryDirectory(prefix="ckpt-restart-") as root:
            for i, case in enumerate(cases):
                rows.append(_one(framework, case, server, pool, Path(root) / f"case-{i}"))
                if on_case is not None:
                    on_case(rows[-1])
    finally:
        server.close()
        pool.close()
    return rows


def _one(framework: str, case: RestartCase, server: WorkerServer, pool, ckpt: Path
         ) -> dict[str, Any]:
    cfg = _cfg(framework, case)
    straight = server.request({"cfg": cfg, "ckpt_dir": None})
    first = server.request({"cfg": cfg, "ckpt_dir": str(ckpt), "until": case.k,
                            "save_final": True, "resume": False})
    request: dict[str, Any] = {"cfg": cfg, "ckpt_dir": str(ckpt)}
    if case.omit:
        request["omit"] = [case.omit]
    resumed = pool.run_fresh(request)
    return {"framework": framework, "model": case.model, "seed": case.seed,
            "steps": case.steps, "k": case.k, "omit": case.omit,
            "first_half_step": int(first["step"]), "loaded_step": int(resumed["loaded_step"]),
            "straight_sha256": straight["params_sha256"],
            "restored_sha256": resumed["params_sha256"],
            "losses_equal": resumed["losses"] == straight["losses"],
            "params_equal": resumed["params_sha256"] == straight["params_sha256"],
            "parameters": int(straight["parameters"]),
            "server_pid": server.pid, "restore_pid": int(resumed["pid"]),
            "new_process": int(resumed["pid"]) != server.pid,
            "fresh_interpreter": isinstance(pool, FreshPool)}
