"""Step-time profile of a run: its steps by the one measurement method, their
forward / backward / update split, layer times, memory.

One process: the configurations run in a fresh single-threaded child
(``real_runs.stepbench``) by the method of :mod:`real_runs.method` — warm-up steps,
rounds of timed steps round-robin over the configurations, the median of the round
medians on the wall clock — then a few more steps with per-layer hooks (hooks cost
microseconds per layer, so they never touch the timed steps). This is exactly how
``testbed calibrate-local`` and the Slurm calibration job measure, so a profile and a
calibration of the same configuration agree.

``processes > 1``: a gloo data-parallel run of that many local ranks
(``real_runs.ddp``), timed by the same method: the warm-up steps left out, the rest in
rounds of consecutive steps (a group cannot interleave with other configurations),
each step's wall time and its gradient all-reduce from rank 0.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from real_runs.env import ChildFailed, run_json_child
from real_runs.harness import RunConfig
from real_runs.method import Method, load_1m, method_fields, split_rounds, summarise
from testbed.errors import InputError

#: Steps timed with per-layer hooks after the timed steps (each layer: their median).
LAYER_STEPS = 5
#: Keys of a step benchmark's result that make its summary.
SUMMARY_KEYS = ("steps", "parameters", "first_step_s", "forward_s", "backward_s", "update_s",
                "step_s", "step_cpu_s", "step_min_s", "step_mean_s", "step_round_lo_s",
                "step_round_hi_s", "step_jitter_s", "peak_memory_bytes", "final_loss")


def _stepbench(cfgs: list[RunConfig], method: Method, layer_steps: int,
               timeout_s: float) -> list[dict]:
    args = ["--configs", json.dumps([c.to_dict() for c in cfgs]), "--warmup",
            str(method.warmup), "--steps", str(method.steps), "--rounds", str(method.rounds),
            "--budget-s", str(method.budget_s), "--layer-steps", str(layer_steps)]
    lines = run_json_child("real_runs.stepbench", args, timeout_s=timeout_s, what="profile run")
    if len(lines) != len(cfgs):
        raise ChildFailed(f"profile run failed: it wrote {len(lines)} of {len(cfgs)} results")
    return lines


def _report(cfg: RunConfig, result: dict, processes: int = 1) -> dict[str, Any]:
    summary = {k: result[k] for k in SUMMARY_KEYS if k in result}
    return {"framework": cfg.framework, "model": cfg.model, "processes": processes,
            "config": cfg.to_dict(), "summary": summary, "timings": result["timings"],
            "wall_s": result.get("wall_s", []), "layer_s": result.get("layer_s", {}),
            "env": result["env"], "method": result["method"], "result": result}


def profile_run(cfg: RunConfig, processes: int = 1, timeout_s: float = 600.0,
                method: Method | None = None) -> dict[str, Any]:
    """Profile ``cfg`` by ``method`` (default :class:`~real_runs.method.Method`); see the
    module docstring."""
    return profile_grid([cfg], processes, timeout_s, method)[0]


def profile_grid(cfgs: list[RunConfig], processes: int = 1, timeout_s: float = 600.0,
                 method: Method | None = None,
                 gradient_sync: str | None = None) -> list[dict[str, Any]]:
    """Profile several configurations of one framework together (single-process: one
    child, rounds round-robin over them; data parallel: one group after another, its
    gradients all-reduced ``after_backward`` — the default — or in DDP ``buckets``)."""
    method = (method or Method()).checked()
    cfgs = [c.validated() for c in cfgs]
    if not cfgs:
        raise InputError("no configuration to profile")
    if processes < 1:
        raise InputError("must be >= 1", field="--processes")
    if len({c.framework for c in cfgs}) > 1:
        raise InputError("one framework per profile", field="--framework")
    if processes > 1:
        return [_profile_dp(c, processes, timeout_s, method, gradient_sync or "after_backward")
                for c in cfgs]
    results = _stepbench(cfgs, method, LAYER_STEPS, timeout_s)
    return [_report(c, r) for c, r in zip(cfgs, results, strict=True)]


def _profile_dp(cfg: RunConfig, processes: int, timeout_s: float,
                method: Method, gradient_sync: str) -> dict[str, Any]:
    from real_runs.ddp import supervise_group
    from real_runs.env import capture_environment
    if cfg.framework != "torch":
        raise InputError("data-parallel profiles are PyTorch (gloo) runs", field="--framework")
    warmup = max(method.warmup, 1)
    run = replace(cfg, steps=warmup + method.rounds * method.steps)
    load = load_1m()
    wrapper = "ddp" if gradient_sync == "buckets" else "allreduce"
    out = supervise_group(run, None, [], world=processes, timeout_s=timeout_s,
                          wrapper=wrapper)
    steady = out["timings"][warmup:] or out["timings"]
    rounds = split_rounds([t[0] for t in steady], method.rounds)
    figure = summarise(rounds)
    comm = summarise(split_rounds([t[1] for t in steady], method.rounds))
    summary = {"steps": figure.samples, "parameters": out["parameters"],
               "step_s": figure.value, "step_round_lo_s": figure.round_lo,
               "step_round_hi_s": figure.round_hi, "step_jitter_s": figure.jitter,
               "step_mean_s": sum(t[0] for t in steady) / len(steady),
               "step_min_s": min(t[0] for t in steady), "allreduce_s": comm.value,
               "first_step_s": out["timings"][0][0] if out["timings"] else None,
               "final_loss": out["losses"][-1]}
    env = capture_environment("torch", world_size=processes).to_dict()
    mfields = method_fields(warmup=warmup, rounds=len(rounds),
                            samples_per_round=max(len(r) for r in rounds),
                            statistic="median of round medians", load=load)
    result = {"cfg": cfg.to_dict(), "env": env, "method": mfields, "timings": steady,
              "wall_s": [t[0] for t in steady], **summary}
    return _report(cfg, result, processes)
