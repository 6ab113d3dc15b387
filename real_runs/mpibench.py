"""mpi4py all-reduce / all-gather micro-benchmark over message sizes.

Run under MPI: ``mpirun -np 2 python -m real_runs.mpibench [--out FILE]``. For each
message size (bytes per rank) it times ``Allreduce`` (sum of float32) and ``Allgather``
with a barrier before each repetition and reports the median over repetitions of the
slowest rank's time. Rank 0 writes one measurement record per (operation, size), with
the environment, and a least-squares fit ``time_s = latency_s + bytes / bw_Bps``
(Hockney model, relative least squares) per operation — the input calibration needs.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from typing import Any

import numpy as np

DEFAULT_SIZES = tuple(4 * 2**k for k in range(0, 21, 2))   # 4 B .. 4 MiB


def fit_latency_bandwidth(sizes_bytes: list[int], times_s: list[float]) -> dict[str, float]:
    """Fit of ``t = a + n / b`` minimising *relative* squared error (so the microsecond
    points count as much as the millisecond ones); returns latency ``a`` and bandwidth
    ``b``."""
    n = np.asarray(sizes_bytes, dtype=float)
    t = np.asarray(times_s, dtype=float)
    design = np.column_stack([np.ones_like(n), n]) / t[:, None]
    (latency_s, inv_bw), *_ = np.linalg.lstsq(design, np.ones_like(t), rcond=None)
    bw = float(1.0 / inv_bw) if inv_bw > 0 else float("inf")
    return {"latency_s": float(latency_s), "bw_Bps": bw}


def bench(sizes: tuple[int, ...], repeats: int) -> list[dict[str, Any]] | None:
    from mpi4py import MPI

    from real_runs.method import load_1m, method_fields
    comm = MPI.COMM_WORLD
    load = load_1m()
    rank, world = comm.Get_rank(), comm.Get_size()
    rows = []
    for size in sizes:
        count = max(size // 4, 1)
        send = np.full(count, rank + 1, dtype=np.float32)
        recv = np.empty(count, dtype=np.float32)
        gathered = np.empty(count * world, dtype=np.float32)
        for op in ("allreduce", "allgather"):
            samples = []
            for i in range(repeats + 1):
                comm.Barrier()
                t0 = time.perf_counter()
                if op == "allreduce":
                    comm.Allreduce(send, recv, op=MPI.SUM)
                else:
                    comm.Allgather(send, gathered)
                elapsed = comm.allreduce(time.perf_counter() - t0, op=MPI.MAX)
                if i:  # the first repetition warms up connections and buffers
                    samples.append(elapsed)
            if op == "allreduce":
                assert recv[0] == world * (world + 1) / 2
            else:
                assert gathered[-1] == world
            rows.append({"op": op, "message_bytes": count * 4, "time_s": statistics.median(samples),
                         "min_time_s": min(samples), "repeats": repeats, "world_size": world,
                         "method": method_fields(warmup=1, rounds=1, samples_per_round=repeats,
                                                 statistic="median", load=load)})
    return rows if rank == 0 else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="real_runs.mpibench")
    parser.add_argument("--sizes", default=",".join(str(s) for s in DEFAULT_SIZES))
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--out", default=None, help="append measurement records (JSONL)")
    parser.add_argument("--nodes", type=int, default=1, help="nodes the ranks span (records)")
    args = parser.parse_args(argv)
    sizes = tuple(int(s) for s in args.sizes.split(",") if s)
    rows = bench(sizes, args.repeats)
    if rows is None:
        return 0
    from real_runs.env import capture_environment
    from real_runs.records import collective_records, utc_now
    from testbed.measurements import write_records
    env = capture_environment("mpi4py", world_size=rows[0]["world_size"])
    fits = {}
    for op in ("allreduce", "allgather"):
        mine = [r for r in rows if r["op"] == op]
        fits[op] = fit_latency_bandwidth([r["message_bytes"] for r in mine],
                                         [r["time_s"] for r in mine])
    if args.out:
        write_records(args.out, collective_records(
            [{**r, "backend": "mpi", "processes": r["world_size"]} for r in rows], env,
            measured_at=utc_now(), source="real_runs.mpibench",
            nodes=args.nodes), append=True)
    sys.stdout.write(json.dumps({"rows": rows, "fit": fits, "env": env.to_dict()}) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
