"""Checkpoint-restart is bitwise deterministic, in every framework (hypothesis property).

For a random seed, model, total steps n and checkpoint step k < n: n steps straight
through, and k steps + checkpoint + restore *in a new process* + n - k steps, give
bitwise-identical parameters and loss sequences. Straight-through runs and the first
halves share a long-lived server (every run reseeds everything and builds a new model,
so any leak between runs would make the property fail, not pass); every restore runs
in a new process that has run nothing else: in CI a child forked from a zygote that
has only imported the framework (saves the 2–5 s import per example), with ``--slow``
a freshly spawned interpreter.

A second test shows that the property depends on the complete checkpoint: leaving out
the RNG states, the optimizer state or the data-iterator position breaks it.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from real_runs.harness import MODELS
from real_runs.pool import ForkPool, FreshPool, WorkerServer

pytestmark = [pytest.mark.frameworks, pytest.mark.timeout(400)]

FRAMEWORKS = ("torch", "tensorflow", "chainer")


@pytest.fixture(scope="module", params=FRAMEWORKS)
def workers(request, slow_mode):
    server = WorkerServer(request.param)
    pool = FreshPool(request.param) if slow_mode else ForkPool(request.param)
    yield request.param, server, pool
    server.close()
    pool.close()


def _cfg(framework: str, model: str, seed: int, n: int) -> dict:
    return {"framework": framework, "model": model, "seed": seed, "steps": n, "width": 16,
            "batch_size": 8}


def test_restart_in_new_process_is_bitwise_identical(workers, examples, tmp_path_factory):
    framework, server, pool = workers
    seen: list[tuple] = []

    @settings(max_examples=examples, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(seed=st.integers(0, 2**31 - 1), model=st.sampled_from(MODELS),
           n=st.integers(2, 10), data=st.data())
    def prop(seed, model, n, data):
        k = data.draw(st.integers(1, n - 1), label="k")
        cfg = _cfg(framework, model, seed, n)
        ckpt = tmp_path_factory.mktemp(f"{framework}-ckpt")
        straight = server.request({"cfg": cfg, "ckpt_dir": None})
        first = server.request({"cfg": cfg, "ckpt_dir": str(ckpt), "until": k,
                                "save_final": True, "resume": False})
        assert first["step"] == k
        resumed = pool.run_fresh({"cfg": cfg, "ckpt_dir": str(ckpt)})
        assert resumed["loaded_step"] == k
        assert resumed["step"] == straight["step"] == n
        assert resumed["losses"] == straight["losses"]
        assert resumed["params_sha256"] == straight["params_sha256"]
        seen.append((seed, model, n, k))

    prop()
    assert len(seen) >= examples
    # every restore ran in its own new process
    assert len(set(pool.pids)) == len(pool.pids) >= examples
    assert server.pid not in pool.pids
    assert getattr(pool, "zygote", server).pid not in pool.pids


OMISSIONS = [("torch", "rng"), ("torch", "optimizer"), ("torch", "data"),
             ("tensorflow", "rng"), ("chainer", "rng"), ("chainer", "optimizer")]


@pytest.mark.parametrize("framework,omit", OMISSIONS)
def test_omitted_state_breaks_determinism(framework, omit, tmp_path):
    """Restoring everything but one kind of state gives a different run."""
    cfg = _cfg(framework, "mlp", 1234, 8)
    server = WorkerServer(framework)
    pool = ForkPool(framework)
    try:
        straight = server.request({"cfg": cfg, "ckpt_dir": None})
        server.request({"cfg": cfg, "ckpt_dir": str(tmp_path), "until": 4, "save_final": True,
                        "resume": False})
        complete = pool.run_fresh({"cfg": cfg, "ckpt_dir": str(tmp_path)})
        broken = pool.run_fresh({"cfg": cfg, "ckpt_dir": str(tmp_path), "omit": [omit]})
    finally:
        server.close()
        pool.close()
    assert complete["params_sha256"] == straight["params_sha256"]
    assert complete["losses"] == straight["losses"]
    assert broken["losses"][:4] == straight["losses"][:4]  # history comes from the checkpoint
    assert broken["losses"][4:] != straight["losses"][4:]
    assert broken["params_sha256"] != straight["params_sha256"]
