"""Joining a ``torch.distributed`` process group, shared by the data-parallel job
(:mod:`real_runs.ddp`) and the collective benchmark (:mod:`real_runs.collbench`).

gloo runs on the CPU; NCCL on the GPU of the rank's ``LOCAL_RANK`` (torchrun sets it;
else the rank itself, one process per GPU of one node). PyTorch is imported lazily.
"""

from __future__ import annotations

import os
from datetime import timedelta
from typing import Any


def init_process_group(backend: str, rank: int, world: int, init_method: str | None, *,
                       timeout_s: float) -> Any:
    """Join the group (waiting at most ``timeout_s`` for the others); the rank's
    ``torch.device``."""
    import torch
    import torch.distributed as dist

    dist.init_process_group(backend, rank=rank, world_size=world, init_method=init_method,
                            timeout=timedelta(seconds=timeout_s))
    device = torch.device("cpu")
    if backend == "nccl":
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", rank)))
        torch.cuda.set_device(device)
    return device
