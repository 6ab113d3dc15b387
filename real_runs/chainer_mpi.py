"""Chainer data parallelism with mpi4py: every rank computes gradients on its share of
the global batch, the gradients are summed with ``Allreduce`` and averaged, and every
rank applies the same MomentumSGD update, so the replicas stay identical.

Run: ``mpirun -np 2 python -m real_runs.chainer_mpi --steps 20 [--out FILE]``. With
``--serial`` it runs the same global batches in one process (for comparison: the
parallel run matches it up to float rounding of the gradient sum). Dropout is off by
default here so the two are comparable.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings

import numpy as np

from real_runs.harness import (
    DataIterator,
    RunConfig,
    dataset_samples,
    make_dataset,
    params_sha256,
    seed_process_globals,
    streams,
)

#: Models up to this width put their parameters in the result (to compare replicas).
SMALL_WIDTH = 16


def train(cfg: RunConfig, comm=None) -> dict:
    from real_runs.backends.chainer_backend import build_model, import_chainer, model_arrays
    chainer = import_chainer()
    rank, world = (comm.Get_rank(), comm.Get_size()) if comm is not None else (0, 1)
    seed_process_globals(cfg.seed)            # same initial weights on every rank
    model = build_model(cfg.model, cfg.width, cfg.dropout, depth=cfg.depth,
                        input_shape=cfg.input_shape)
    optimizer = chainer.optimizers.MomentumSGD(lr=cfg.lr, momentum=cfg.momentum)
    optimizer.setup(model)
    global_batch = cfg.batch_size * 2
    x_all, y_all = make_dataset(cfg.seed, dataset_samples(global_batch), cfg.shape)
    iterator = DataIterator(len(x_all), global_batch, streams(cfg.seed)["shuffle"])
    losses, comm_s = [], 0.0
    params = sorted(model.namedparams())
    t_start = time.perf_counter()
    for _ in range(cfg.steps):
        idx = iterator.next_indices()
        mine = idx[rank::world]
        optimizer.lr = cfg.lr * cfg.lr_gamma ** (optimizer.t // cfg.lr_every)
        loss = chainer.functions.softmax_cross_entropy(model(x_all[mine]),
                                                       y_all[mine].astype(np.int32))
        model.cleargrads()
        loss.backward()
        local_loss = float(loss.array)
        if comm is not None:
            from mpi4py import MPI
            t0 = time.perf_counter()
            flat = np.concatenate([p.grad.ravel() for _, p in params]).astype(np.float32)
            total = np.empty_like(flat)
            comm.Allreduce(flat, total, op=MPI.SUM)
            total /= world
            offset = 0
            for _, p in params:
                p.grad[...] = total[offset:offset + p.grad.size].reshape(p.grad.shape)
                offset += p.grad.size
            local_loss = comm.allreduce(local_loss, op=MPI.SUM) / world
            comm_s += time.perf_counter() - t0
        optimizer.update()
        losses.append(local_loss)
    arrays = sorted(model_arrays(model).items())
    return {"rank": rank, "world_size": world, "steps": cfg.steps, "losses": losses,
            "params_sha256": params_sha256(arrays),
            "params": ({k: v.tolist() for k, v in arrays}
                       if cfg.width is not None and cfg.width <= SMALL_WIDTH else None),
            "wall_time_s": time.perf_counter() - t_start, "allreduce_s": comm_s}


def main(argv: list[str] | None = None) -> int:
    warnings.filterwarnings("ignore")
    parser = argparse.ArgumentParser(prog="real_runs.chainer_mpi")
    parser.add_argument("--model", default="mlp")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--width", type=int, default=16)
    parser.add_argument("--dropout", type=float, default=0.0)
    parser.add_argument("--serial", action="store_true")
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    cfg = RunConfig(framework="chainer", model=args.model, steps=args.steps, seed=args.seed,
                    width=args.width, dropout=args.dropout).validated()
    comm = None
    if not args.serial:
        from mpi4py import MPI
        comm = MPI.COMM_WORLD
    result = train(cfg, comm)
    results = comm.gather(result, root=0) if comm is not None else [result]
    if result["rank"] == 0 and results is not None:     # the root gathered every rank's
        summary = {"ranks": results,
                   "replicas_identical": len({r["params_sha256"] for r in results}) == 1}
        text = json.dumps(summary)
        sys.stdout.write(text + "\n")
        if args.out:
            with open(args.out, "w", encoding="utf-8") as stream:
                stream.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
