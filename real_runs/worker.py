"""The training child process: ``python -m real_runs.worker``.

It speaks JSON lines on its original standard output (libraries that print are moved
to standard error), one record per event — ``ready``, ``load``,
``corruption_detected``, ``step``, ``checkpoint_begin``, ``checkpoint_commit`` — and a
final ``result`` record. A supervisor reads these to time the run and to decide when
to kill it.

Two ways to run:

* ``--request JSON``: one training job, then exit (what the supervisor starts).
* ``--serve [--max-requests N]``: import the framework, then read requests from
  standard input, one per line. A server with ``--max-requests 1`` is a *fresh
  process* that was started early so that its import overlaps other work.
* ``--serve --zygote``: import the framework, then fork a new child process for each
  request (the zygote itself never trains).

A request: ``{"cfg": RunConfig fields, "ckpt_dir": path or null, "resume": bool,
"until": step, "save_final": bool, "omit": [...], "write_delay_s": float}``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TextIO

from testbed.errors import InputError

if TYPE_CHECKING:      # imported lazily at run time (this process starts light)
    from real_runs.ckpt_store import CheckpointStore
    from real_runs.harness import Trainer

#: How long a paused worker sleeps (the supervisor kills it meanwhile).
PAUSE_S = 60.0
#: Wall-clock time this process reached its own code (interpreter start and the imports
#: above behind it): the supervisor subtracts its spawn time to get the process start.
STARTED_WALL = time.time()


def _protocol_stream() -> TextIO:
    """Keep the real stdout for the protocol; send anything else printed to stderr."""
    sys.stdout.flush()
    proto = os.fdopen(os.dup(1), "w", buffering=1, encoding="utf-8")
    os.dup2(2, 1)
    return proto


Emit = Callable[[dict[str, Any]], None]


def _pausing(emit: Emit, pause_after: int | None) -> Emit:
    """``emit``, holding still after step ``pause_after`` (fault injection: the
    supervisor's SIGKILL lands exactly there, not a few steps later past a checkpoint)."""
    if not pause_after:
        return emit

    def paused(record: dict[str, Any]) -> None:
        emit(record)
        if record.get("event") == "step" and record["step"] == pause_after:
            time.sleep(PAUSE_S)

    return paused


def _resume(trainer: Trainer, store: CheckpointStore, omit: frozenset[str], emit: Emit) -> int:
    """Remove partial checkpoints and restore the newest valid one; the step loaded
    (0: none)."""
    for name in store.clean_partial():
        emit({"event": "partial_removed", "name": name})

    def on_corrupt(entry, reason):
        emit({"event": "corruption_detected", "step": entry.step, "reason": reason})

    entry = store.latest_valid(on_corrupt)
    if entry is None:
        return 0
    t0 = time.perf_counter()
    trainer.restore(entry.path, omit)
    emit({"event": "load", "step": trainer.step, "duration_s": time.perf_counter() - t0})
    return trainer.step


def run_request(request: dict[str, Any], emit: Emit) -> dict[str, Any]:
    """Run one training request; returns the result record."""
    from real_runs.ckpt_store import CheckpointStore
    from real_runs.env import capture_environment
    from real_runs.harness import OMITTABLE, RunConfig, Trainer, import_framework, make_backend

    cfg = RunConfig.from_dict(request["cfg"]).validated()
    omit = frozenset(request.get("omit", ()))
    unknown = omit - set(OMITTABLE)
    if unknown:
        raise InputError(f"cannot omit {sorted(unknown)}; choose from {list(OMITTABLE)}",
                         field="omit")
    until = int(request.get("until") or cfg.steps)
    store = None
    if request.get("ckpt_dir"):
        store = CheckpointStore(request["ckpt_dir"], cfg.framework, cfg.model, keep=cfg.keep,
                                write_delay_s=float(request.get("write_delay_s", 0.0)))
        store.check_usable()
    emit = _pausing(emit, request.get("pause_after_step"))
    started = time.perf_counter()
    import_s = import_framework(cfg.framework)
    trainer = Trainer(cfg, make_backend(cfg.framework), emit=emit)
    emit({"event": "ready", "setup_s": time.perf_counter() - started, "import_s": import_s,
          "started_wall": STARTED_WALL})
    loaded_step = 0
    if store is not None and request.get("resume", True):
        loaded_step = _resume(trainer, store, omit, emit)
    trainer.train_until(until, store)
    if store is not None and request.get("save_final"):
        trainer.checkpoint(store)
    result = trainer.result()
    result.update({"type": "result", "loaded_step": loaded_step, "framework": cfg.framework,
                   "pid": os.getpid(),
                   "model": cfg.model,
                   "peak_memory_bytes": trainer.backend.peak_memory_bytes()})
    if request.get("timings"):
        result["timings"] = [[t.forward_s, t.backward_s, t.update_s] for t in trainer.timings]
        result["layer_s"] = trainer.backend.layer_times()
        result["parameter_count"] = trainer.backend.parameter_count()
    # captured here, where the framework is loaded (so the GPU name is known)
    result["env"] = capture_environment(cfg.framework).to_dict()
    return result


def _fork_and_run(request: dict[str, Any], emit, proto: TextIO) -> None:
    """Run ``request`` in a forked child: a new process whose memory holds nothing but
    the imported framework (the zygote never trains), so a restore there reads
    everything from the checkpoint. The zygote has one thread, so forking is safe."""
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            emit(run_request(request, emit))
        except InputError as exc:
            emit({"type": "error", "message": exc.format()})
        except BaseException as exc:  # report, never fall back into the zygote's loop
            emit({"type": "error", "message": f"{type(exc).__name__}: {exc}"})
            code = 1
        finally:
            proto.flush()
            sys.stderr.flush()
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    if status != 0:
        emit({"type": "error", "message": f"child {pid} exited with status {status}"})


def main(argv: list[str] | None = None) -> int:
    warnings.filterwarnings("ignore")
    parser = argparse.ArgumentParser(prog="real_runs.worker")
    parser.add_argument("--request")
    parser.add_argument("--serve", action="store_true")
    parser.add_argument("--max-requests", type=int, default=0)
    parser.add_argument("--preload", default="")
    parser.add_argument("--zygote", action="store_true",
                        help="with --serve: fork a new child process for every request")
    args = parser.parse_args(argv)
    proto = _protocol_stream()

    def emit(record: dict[str, Any]) -> None:
        record.setdefault("type", "event")
        if record["type"] == "event":
            # when it happened (the system-wide monotonic clock the supervisor reads
            # too): the supervisor books the event then, not when it got to reading it
            record.setdefault("at", time.perf_counter())
        proto.write(json.dumps(record) + "\n")
        proto.flush()

    if args.serve:
        if args.preload:
            from real_runs.harness import make_backend
            make_backend(args.preload)  # pay the framework import before the first request
            if args.preload == "tensorflow":
                import tensorflow  # noqa: F401
            elif args.preload == "torch":
                # torch.optim's first call imports torch._dynamo (about 2.5 s): pay it now
                import torch._dynamo  # noqa: F401
            elif args.preload == "chainer":
                from real_runs.backends.chainer_backend import import_chainer
                import_chainer()
        emit({"event": "serving"})
        served = 0
        for line in sys.stdin:
            if not line.strip():
                continue
            if args.zygote:
                _fork_and_run(json.loads(line), emit, proto)
            else:
                try:
                    emit(run_request(json.loads(line), emit))
                except InputError as exc:
                    emit({"type": "error", "message": exc.format()})
            served += 1
            if args.max_requests and served >= args.max_requests:
                break
        proto.flush()
        os._exit(0)  # skip interpreter teardown (about a second with a framework loaded)
    try:
        emit(run_request(json.loads(args.request), emit))
    except InputError as exc:
        print(f"testbed: error: {exc.format()}", file=sys.stderr)
        sys.stderr.flush()
        os._exit(2)
    proto.flush()
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
