"""torch.distributed collective micro-benchmark (gloo on CPUs, NCCL on GPUs).

``python -m real_runs.collbench --world 2`` starts ``world`` rank processes on this
machine (rendezvous over TCP on localhost); under torchrun, ``--torchrun`` takes rank
and world from its environment. For every message size (bytes per rank) and operation
(all-reduce of float32 sums, all-gather), each repetition starts after a barrier and
its time is the slowest rank's (a max all-reduce of the elapsed times); the median
over repetitions is reported with the minimum. The first repetitions warm up the
connections and buffers and are not counted. Rank 0 prints one JSON line per
(operation, size), which ``real_runs.records`` turns into ``collective`` records.
The sweep over all sizes runs ``--rounds`` times and every round's repetitions count.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

from real_runs.distributed import init_process_group
from real_runs.env import ChildFailed

#: 4 B … 4 MiB in steps of ×4: the latency-bound and the bandwidth-bound regimes.
DEFAULT_SIZES = tuple(4 * 4**k for k in range(11))
OPS = ("allreduce", "allgather")
#: Repetitions of each (operation, size) run first and not counted (connection set-up).
WARMUP = 3
#: How long a rank waits for the others to join the group.
GROUP_TIMEOUT_S = 120.0


#: Fewest repetitions of one (operation, size), however large the message.
MIN_REPEATS = 10


def _repeats(size: int, base: int) -> int:
    """Fewer repetitions for large messages (each takes longer), at least MIN_REPEATS."""
    return max(MIN_REPEATS, min(base, int(base * 262144 / max(size, 262144))))


def bench_rank(rank: int, world: int, init_method: str, backend: str, sizes: tuple[int, ...],
               repeats: int, ops: tuple[str, ...], rounds: int = 1) -> list[dict] | None:
    import torch
    import torch.distributed as dist

    from real_runs.method import load_1m, method_fields
    torch.set_num_threads(1)
    load = load_1m()
    device = init_process_group(backend, rank, world, init_method, timeout_s=GROUP_TIMEOUT_S)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    samples: dict[tuple[str, int], list[float]] = {}
    # whole sweeps in rounds: a burst of load on a shared machine spoils one round of
    # a size, not every repetition of it
    for _ in range(rounds):
        for size in sizes:
            count = max(size // 4, 1)
            send = torch.full((count,), float(rank + 1), device=device)
            out = [torch.empty(count, device=device) for _ in range(world)]
            reps = _repeats(count * 4, repeats)
            for op in ops:
                got = samples.setdefault((op, count * 4), [])
                for i in range(reps + WARMUP):
                    dist.barrier()
                    t0 = time.perf_counter()
                    if op == "allreduce":
                        buf = send.clone()
                        dist.all_reduce(buf)
                    else:
                        dist.all_gather(out, send)
                    sync()
                    elapsed = torch.tensor([time.perf_counter() - t0], dtype=torch.float64)
                    dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)
                    if i >= WARMUP:
                        got.append(float(elapsed))
    rows = [{"op": op, "message_bytes": nbytes, "time_s": statistics.median(times),
             "min_time_s": min(times), "repeats": len(times), "processes": world,
             "backend": backend,
             "method": method_fields(warmup=WARMUP * rounds, rounds=rounds,
                                     samples_per_round=max(len(times) // rounds, 1),
                                     statistic="median", load=load)}
            for (op, nbytes), times in samples.items()]
    dist.barrier()
    dist.destroy_process_group()
    return rows if rank == 0 else None


def run_local(world: int, sizes: tuple[int, ...], repeats: int, backend: str = "gloo",
              timeout_s: float = 600.0, rounds: int = 1) -> list[dict]:
    """Start ``world`` ranks here and return rank 0's rows."""
    from real_runs.ddp import free_port
    from real_runs.env import child_env, python_cmd
    port = free_port()
    args = ["--world", str(world), "--master-port", str(port), "--sizes",
            ",".join(map(str, sizes)), "--repeats", str(repeats), "--backend", backend,
            "--rounds", str(rounds)]
    procs = [subprocess.Popen(python_cmd("real_runs.collbench", *args, "--rank", str(r)),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=child_env()) for r in range(world)]
    outputs = []
    try:
        for proc in procs:
            out, err = proc.communicate(timeout=timeout_s)
            if proc.returncode != 0:
                tail = err.strip().splitlines()
                raise ChildFailed(f"collective benchmark rank failed: {tail[-1] if tail else proc.returncode}")
            outputs.append(out)
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
    return [json.loads(line) for line in outputs[0].splitlines() if line.startswith("{")]


def main(argv: list[str] | None = None) -> int:
    import warnings
    warnings.filterwarnings("ignore")
    parser = argparse.ArgumentParser(prog="real_runs.collbench")
    parser.add_argument("--rank", type=int, default=None)
    parser.add_argument("--world", type=int, default=2)
    parser.add_argument("--master-port", type=int, default=None)
    parser.add_argument("--torchrun", action="store_true", help="rank and world from torchrun")
    parser.add_argument("--backend", default="gloo", choices=["gloo", "nccl"])
    parser.add_argument("--sizes", default=",".join(map(str, DEFAULT_SIZES)))
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--out", default=None, help="rank 0 writes collective records here")
    parser.add_argument("--nodes", type=int, default=1, help="nodes the ranks span (records)")
    parser.add_argument("--rounds", type=int, default=2, help="sweeps over all sizes")
    args = parser.parse_args(argv)
    sizes = tuple(int(s) for s in args.sizes.split(",") if s)
    if args.torchrun:
        rank, world, init = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), "env://"
    elif args.rank is None:
        rows = run_local(args.world, sizes, args.repeats, args.backend, rounds=args.rounds)
        return _report(rows, args.out, args.nodes)
    else:
        rank, world = args.rank, args.world
        init = f"tcp://127.0.0.1:{args.master_port}"
    ranked = bench_rank(rank, world, init, args.backend, sizes, args.repeats, OPS,
                        max(args.rounds, 1))
    if ranked is None:          # not rank 0: rank 0 reports
        return 0
    return _report(ranked, args.out, args.nodes)


def _report(rows: list[dict], out: str | None, nodes: int = 1) -> int:
    if out:
        from real_runs.env import capture_environment
        from real_runs.records import collective_records, utc_now
        from testbed.measurements import write_records
        env = capture_environment("torch", world_size=rows[0]["processes"])
        write_records(out, collective_records(rows, env, measured_at=utc_now(),
                                              source="real_runs.collbench", nodes=nodes),
                      append=True)
    for row in rows:
        sys.stdout.write(json.dumps(row) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
