"""Data-parallel PyTorch (torch.distributed: gloo on CPU, NCCL on GPUs) with group
checkpoint-restart, and a supervisor that kills one rank and restarts the whole group.

Every rank builds the same model (same seed), then reseeds its own generator with
``seed + rank`` so that dropout differs per rank, as in real data-parallel training.
Each step the global batch is split by rank and the gradients are averaged over the
group: by one flat ``all_reduce`` (the default here: importing DistributedDataParallel
costs about 5 s per process on a laptop CPU) or by ``DistributedDataParallel``
(``--wrapper ddp``, the default under torchrun). A group checkpoint is one directory: ``model.pt`` (model, optimizer,
scheduler; rank 0) and ``rank<R>.pt`` + ``rank<R>.json`` (that rank's torch, Python
and NumPy RNG states and the data-iterator position), committed by rank 0 after a
barrier, with the usual manifest and atomic rename. On restart each rank restores its
own RNG state.

Rank process: ``python -m real_runs.ddp --rank R --world-size W --master-port P ...``
(or ``--torchrun``, reading RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT from torchrun).
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from real_runs.ckpt_store import CheckpointStore
from real_runs.distributed import init_process_group
from real_runs.env import ChildFailed, child_env, python_cmd
from real_runs.harness import (
    DataIterator,
    RunConfig,
    dataset_samples,
    framework_seed,
    make_dataset,
    numpy_global_state,
    params_sha256,
    python_state,
    restore_numpy_global,
    restore_python,
    seed_process_globals,
    streams,
)

FRAMEWORK = "torch-ddp"
#: How long a paused rank sleeps (the supervisor kills it meanwhile).
PAUSE_S = 60.0
#: How long a rank waits for the others to join the group.
GROUP_TIMEOUT_S = 60.0


def _emit(record: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(record) + "\n")
    sys.stdout.flush()


@dataclass
class _Rank:
    """One rank's training state: what a step and a group checkpoint read and write."""

    rank: int
    world: int
    cfg: RunConfig
    wrapper: str
    device: Any
    model: Any
    forward: Any            # the model, or its DistributedDataParallel wrapper
    optimizer: Any
    scheduler: Any
    x_all: np.ndarray
    y_all: np.ndarray
    iterator: DataIterator
    step: int = 0
    losses: list[float] = field(default_factory=list)


def _build_rank(rank: int, world: int, cfg: RunConfig, backend: str, init_method: str | None,
                wrapper: str) -> _Rank:
    """Join the process group and build the model, optimizer, schedule and data (the
    same on every rank, then a per-rank dropout stream)."""
    import torch

    from real_runs.backends.torch_backend import build_model, setup_determinism

    device = init_process_group(backend, rank, world, init_method, timeout_s=GROUP_TIMEOUT_S)
    seed_process_globals(cfg.seed + rank)
    setup_determinism(framework_seed(cfg.seed))
    model = build_model(cfg.model, cfg.width, cfg.dropout, depth=cfg.depth,
                        input_shape=cfg.input_shape).to(device)
    torch.manual_seed(framework_seed(cfg.seed) + rank)       # per-rank dropout stream
    if wrapper == "ddp":
        # DistributedDataParallel (bucketed all-reduce overlapped with backward); its
        # import pulls in torch._dynamo/_inductor, about 5 s on a laptop CPU.
        from torch.nn.parallel import DistributedDataParallel
        forward = DistributedDataParallel(model)
    else:
        forward = model
    optimizer = torch.optim.SGD(model.parameters(), lr=cfg.lr, momentum=cfg.momentum)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=cfg.lr_every,
                                                gamma=cfg.lr_gamma)
    x_all, y_all = make_dataset(cfg.seed, dataset_samples(cfg.batch_size, world), cfg.shape)
    iterator = DataIterator(len(x_all), cfg.batch_size * world, streams(cfg.seed)["shuffle"])
    return _Rank(rank, world, cfg, wrapper, device, model, forward, optimizer, scheduler,
                 x_all, y_all, iterator)


def _restore(r: _Rank, store: CheckpointStore) -> None:
    """Resume from the newest valid group checkpoint, if any (each rank its own RNGs)."""
    import torch
    import torch.distributed as dist

    if r.rank == 0:
        store.check_usable()
        store.clean_partial()
    dist.barrier()

    def on_corrupt(entry, reason):
        if r.rank == 0:
            _emit({"event": "corruption_detected", "step": entry.step, "reason": reason})

    entry = store.latest_valid(on_corrupt)
    if entry is None:
        return
    payload = torch.load(entry.path / "model.pt", weights_only=True, map_location=r.device)
    r.model.load_state_dict(payload["model"])
    r.optimizer.load_state_dict(payload["optimizer"])
    r.scheduler.load_state_dict(payload["scheduler"])
    mine = torch.load(entry.path / f"rank{r.rank}.pt", weights_only=True)
    torch.set_rng_state(mine["cpu_rng"])
    if r.device.type == "cuda" and "cuda_rng" in mine:
        torch.cuda.set_rng_state(mine["cuda_rng"], r.device)
    with open(entry.path / f"rank{r.rank}.json", encoding="utf-8") as stream:
        state = json.load(stream)
    restore_python(state["python_random"])
    restore_numpy_global(state["numpy_global"])
    r.iterator.restore(state["data"])
    r.step, r.losses = int(state["step"]), [float(v) for v in state["losses"]]
    if r.rank == 0:
        _emit({"event": "load", "step": r.step, "duration_s": 0.0})


def _checkpoint(r: _Rank, store: CheckpointStore) -> None:
    """One group checkpoint: rank 0 the model, every rank its RNGs and data position;
    rank 0 commits after a barrier."""
    import torch
    import torch.distributed as dist

    step = r.step
    if r.rank == 0:
        _emit({"event": "checkpoint_begin", "step": step})
        store.begin(step, tag="group")
    dist.barrier()
    tmp = store.root / f".tmp-step-{step:08d}-group"
    if r.rank == 0:
        torch.save({"model": r.model.state_dict(), "optimizer": r.optimizer.state_dict(),
                    "scheduler": r.scheduler.state_dict()}, tmp / "model.pt")
    rng = {"cpu_rng": torch.get_rng_state()}
    if r.device.type == "cuda":
        rng["cuda_rng"] = torch.cuda.get_rng_state(r.device)
    torch.save(rng, tmp / f"rank{r.rank}.pt")
    with open(tmp / f"rank{r.rank}.json", "w", encoding="utf-8") as stream:
        json.dump({"step": step, "losses": r.losses, "python_random": python_state(),
                   "numpy_global": numpy_global_state(), "data": r.iterator.state()}, stream)
    dist.barrier()
    if r.rank == 0:
        entry = store.commit(tmp, step, meta={"world_size": r.world, "seed": r.cfg.seed})
        _emit({"event": "checkpoint_commit", "step": step,
               "bytes": store.bytes_on_disk(entry), "duration_s": 0.0})
    dist.barrier()


def _average_gradients(model: Any, world: int) -> float:
    """What DDP does, in one bucket: flatten, all-reduce (sum), average, unflatten; the
    seconds of the all-reduce."""
    import torch
    import torch.distributed as dist

    grads = [p.grad for p in model.parameters()]
    flat = torch.cat([g.reshape(-1) for g in grads])
    t_comm = time.perf_counter()
    dist.all_reduce(flat)
    comm_s = time.perf_counter() - t_comm
    flat /= world
    offset = 0
    for g in grads:
        g.copy_(flat[offset:offset + g.numel()].view_as(g))
        offset += g.numel()
    return comm_s


def _train_step(r: _Rank, loss_fn: Any) -> float:
    """One data-parallel step on this rank's share of the global batch; the seconds of
    the gradient all-reduce (0 under DDP, which overlaps it with backward)."""
    import torch
    import torch.distributed as dist

    idx = r.iterator.next_indices()[r.rank::r.world]
    xb = torch.from_numpy(r.x_all[idx]).to(r.device)
    yb = torch.from_numpy(r.y_all[idx]).to(r.device)
    loss = loss_fn(r.forward(xb), yb)
    r.optimizer.zero_grad(set_to_none=True)
    loss.backward()
    comm_s = _average_gradients(r.model, r.world) if r.wrapper != "ddp" else 0.0
    r.optimizer.step()
    r.scheduler.step()
    mean_loss = loss.detach().clone()
    dist.all_reduce(mean_loss)
    r.step += 1
    r.losses.append(float(mean_loss) / r.world)
    return comm_s


def run_rank(rank: int, world: int, cfg: RunConfig, ckpt_dir: str | None, backend: str,
             init_method: str | None, pause_after_step: int | None,
             wrapper: str = "allreduce") -> dict[str, Any]:
    """One rank of the data-parallel job; returns its result record."""
    import torch
    import torch.distributed as dist

    r = _build_rank(rank, world, cfg, backend, init_method, wrapper)
    loss_fn = torch.nn.CrossEntropyLoss()
    store = CheckpointStore(ckpt_dir, FRAMEWORK, cfg.model, keep=cfg.keep) if ckpt_dir else None
    if store is not None:
        _restore(r, store)
    timings: list[list[float]] = []    # per step: wall seconds, of which all-reduce
    while r.step < cfg.steps:
        t_step = time.perf_counter()
        comm_s = _train_step(r, loss_fn)
        timings.append([time.perf_counter() - t_step, comm_s])
        _emit({"event": "step", "step": r.step, "rank": rank})
        if pause_after_step and r.step == pause_after_step:
            time.sleep(PAUSE_S)
        if store is not None and cfg.checkpoint_every and r.step % cfg.checkpoint_every == 0 \
                and r.step < cfg.steps:
            _checkpoint(r, store)
    params = [(name, t.detach().cpu().numpy()) for name, t in r.model.state_dict().items()
              if t.is_floating_point()]
    dist.barrier()
    dist.destroy_process_group()
    return {"type": "result", "rank": rank, "step": r.step, "losses": r.losses,
            "params_sha256": params_sha256(params), "timings": timings,
            "parameters": int(sum(p.numel() for p in r.model.parameters()))}


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass(frozen=True)
class RankKill:
    """Kill ``rank`` once it has finished global step ``at_step``."""

    rank: int
    at_step: int


def _reader(rank: int, stream, out: queue.Queue) -> None:
    for line in stream:
        if line.startswith("{"):
            try:
                out.put((rank, json.loads(line)))
            except json.JSONDecodeError:
                continue
    out.put((rank, None))


def _launch(world: int, cfg: RunConfig, ckpt_dir: str | None, kill: RankKill | None,
            wrapper: str = "allreduce"
            ) -> tuple[list[subprocess.Popen[str]], queue.Queue[tuple[int, Any]]]:
    """Start the group's rank processes; their JSON lines arrive as (rank, record),
    (rank, None) when a rank's output ends."""
    port = free_port()
    procs: list[subprocess.Popen[str]] = []
    lines: queue.Queue[tuple[int, Any]] = queue.Queue()
    for rank in range(world):
        args = ["--rank", str(rank), "--world-size", str(world), "--master-port", str(port),
                "--cfg", json.dumps(cfg.to_dict()), "--wrapper", wrapper]
        if ckpt_dir:
            args += ["--ckpt-dir", ckpt_dir]
        if kill is not None and kill.rank == rank:
            args += ["--pause-after-step", str(kill.at_step)]
        proc = subprocess.Popen(python_cmd("real_runs.ddp", *args), stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, text=True, env=child_env())
        threading.Thread(target=_reader, args=(rank, proc.stdout, lines), daemon=True).start()
        procs.append(proc)
    return procs, lines


def supervise_group(cfg: RunConfig, ckpt_dir: Path | None, kills: list[RankKill], *,
                    world: int = 2, timeout_s: float = 300.0,
                    wrapper: str = "allreduce") -> dict[str, Any]:
    """Run a ``world``-process gloo job (gradients averaged by ``wrapper``: one
    all-reduce after backward, or ``ddp``); each kill takes down one rank, and the whole
    group is then torn down and restarted from the newest intact group checkpoint."""
    cfg = cfg.validated()
    t0 = time.perf_counter()
    deadline = t0 + timeout_s
    incarnation, killed_ranks, loads, corrupt = 0, [], [], []
    while True:
        kill = kills[incarnation] if incarnation < len(kills) else None
        procs, lines = _launch(world, cfg, str(ckpt_dir) if ckpt_dir else None, kill, wrapper)
        results: dict[int, dict] = {}
        finished = 0
        victim_killed = False
        while finished < world:
            try:
                rank, rec = lines.get(timeout=0.5)
            except queue.Empty:
                rank, rec = -1, {}
            if time.perf_counter() > deadline:
                for proc in procs:
                    proc.kill()
                raise ChildFailed("distributed run exceeded its time limit")
            if rec is None:
                finished += 1
                continue
            if rec.get("type") == "result":
                results[rank] = rec
            elif rec.get("event") == "load":
                loads.append(rec["step"])
            elif rec.get("event") == "corruption_detected":
                corrupt.append(rec["step"])
            elif (kill is not None and rec.get("event") == "step" and rank == kill.rank
                  and rec["step"] >= kill.at_step and not victim_killed):
                procs[kill.rank].send_signal(signal.SIGKILL)
                victim_killed = True
                killed_ranks.append(kill.rank)
                # the scheduler sees a dead rank and tears the whole group down
                for proc in procs:
                    if proc.poll() is None:
                        proc.send_signal(signal.SIGKILL)
        codes = [proc.wait() for proc in procs]
        if victim_killed:
            incarnation += 1
            continue
        if any(codes) or len(results) != world:
            raise ChildFailed(f"distributed run failed: exit codes {codes}")
        break
    shas = {rec["params_sha256"] for rec in results.values()}
    return {"world_size": world, "kills": len(killed_ranks), "killed_ranks": killed_ranks,
            "restarts": incarnation, "loads": loads, "corruptions_detected": corrupt,
            "ranks_agree": len(shas) == 1, "final_params_sha256": results[0]["params_sha256"],
            "losses": results[0]["losses"], "wall_time_s": time.perf_counter() - t0,
            "timings": results[0].get("timings", []),
            "parameters": results[0].get("parameters")}


def main(argv: list[str] | None = None) -> int:
    import warnings
    warnings.filterwarnings("ignore")
    parser = argparse.ArgumentParser(prog="real_runs.ddp")
    parser.add_argument("--rank", type=int, default=None)
    parser.add_argument("--world-size", type=int, default=None)
    parser.add_argument("--master-port", type=int, default=None)
    parser.add_argument("--torchrun", action="store_true", help="take rank/world from torchrun")
    parser.add_argument("--cfg", default=None, help="RunConfig as JSON")
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--checkpoint-every", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--model", default="mlp")
    parser.add_argument("--backend", default="gloo")
    parser.add_argument("--ckpt-dir", default=None)
    parser.add_argument("--pause-after-step", type=int, default=None)
    parser.add_argument("--wrapper", choices=["allreduce", "ddp"], default=None,
                        help="gradient averaging: explicit all-reduce, or "
                             "DistributedDataParallel (default with --torchrun)")
    parser.add_argument("--out", default=None, help="rank 0 writes its result JSON here")
    args = parser.parse_args(argv)
    if args.cfg:
        cfg = RunConfig.from_dict(json.loads(args.cfg))
    else:
        cfg = RunConfig(framework="torch", model=args.model, steps=args.steps, seed=args.seed,
                        checkpoint_every=args.checkpoint_every)
    if args.torchrun:
        rank, world, init = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), "env://"
    else:
        rank, world = args.rank, args.world_size
        init = f"tcp://127.0.0.1:{args.master_port}"
    wrapper = args.wrapper or ("ddp" if args.torchrun else "allreduce")
    result = run_rank(rank, world, cfg.validated(), args.ckpt_dir, args.backend, init,
                      args.pause_after_step, wrapper)
    _emit(result)
    if args.out and rank == 0:
        Path(args.out).write_text(json.dumps(result), encoding="utf-8")
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())

