"""Step-time profile of a run: forward / backward / update split, layer times, memory.

One process: the configuration runs in a fresh single-threaded child
(``real_runs.stepbench``): warm-up steps, then timed steps (their split, wall and CPU
time), then a few more with per-layer hooks (hooks cost microseconds per layer, so
they never touch the timed steps). ``processes > 1``: a gloo data-parallel run of that
many local ranks (``real_runs.ddp``), each step's wall time and its gradient
all-reduce from rank 0. The first steps (graph building, allocator warm-up) are left
out of the figures.
"""

from __future__ import annotations

import json
import statistics
from dataclasses import replace
from typing import Any

from real_runs.env import ChildFailed, run_json_child
from real_runs.harness import RunConfig
from testbed.errors import InputError

#: Steps timed with per-layer hooks after the timed steps.
LAYER_STEPS = 3
#: Steps of a data-parallel profile left out as warm-up.
DP_WARMUP = 2


def _stepbench(cfg: RunConfig, warmup: int, layer_steps: int, timeout_s: float) -> dict:
    args = ["--configs", json.dumps([cfg.to_dict()]), "--warmup", str(warmup), "--steps",
            str(cfg.steps), "--budget-s", "1e9", "--layer-steps", str(layer_steps)]
    lines = run_json_child("real_runs.stepbench", args, timeout_s=timeout_s, what="profile run")
    if not lines:
        raise ChildFailed("profile run failed: it wrote no result")
    return lines[0]


def profile_run(cfg: RunConfig, processes: int = 1, timeout_s: float = 600.0,
                warmup: int = 1) -> dict[str, Any]:
    """Profile ``cfg`` (``cfg.steps`` timed steps); see the module docstring."""
    cfg = cfg.validated()
    if processes < 1:
        raise InputError("must be >= 1", field="--processes")
    if processes > 1:
        return _profile_dp(cfg, processes, timeout_s)
    result = _stepbench(cfg, warmup, LAYER_STEPS, timeout_s)
    summary = {k: result[k] for k in ("steps", "parameters", "first_step_s", "forward_s",
                                      "backward_s", "update_s", "step_s", "step_cpu_s",
                                      "step_min_s", "step_mean_s", "peak_memory_bytes",
                                      "final_loss")}
    return {"framework": cfg.framework, "model": cfg.model, "processes": 1,
            "summary": summary, "timings": result["timings"], "layer_s": result["layer_s"],
            "env": result["env"], "result": result}


def _profile_dp(cfg: RunConfig, processes: int, timeout_s: float) -> dict[str, Any]:
    from real_runs.ddp import supervise_group
    from real_runs.env import capture_environment
    if cfg.framework != "torch":
        raise InputError("data-parallel profiles are PyTorch (gloo) runs", field="--framework")
    run = replace(cfg, steps=cfg.steps + DP_WARMUP)
    out = supervise_group(run, None, [], world=processes, timeout_s=timeout_s)
    steady = out["timings"][DP_WARMUP:] or out["timings"]
    steps = [t[0] for t in steady]
    summary = {"steps": len(steps), "parameters": out["parameters"],
               "step_s": statistics.median(steps), "step_mean_s": statistics.fmean(steps),
               "step_min_s": min(steps), "allreduce_s": statistics.median(t[1] for t in steady),
               "final_loss": out["losses"][-1]}
    env = capture_environment("torch", world_size=processes).to_dict()
    result = {"cfg": cfg.to_dict(), "env": env, **summary}
    return {"framework": cfg.framework, "model": cfg.model, "processes": processes,
            "summary": summary, "timings": steady, "layer_s": {}, "env": env, "result": result}
