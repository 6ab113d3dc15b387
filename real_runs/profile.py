"""Step-time profile of a run: forward / backward / update split, layer times, peak memory.

The run happens in a fresh single-threaded worker process; the first step (graph
building, allocator warm-up) is reported but left out of the means.
"""

from __future__ import annotations

import json
import statistics
import subprocess
from typing import Any

from real_runs.env import child_env, python_cmd
from real_runs.harness import RunConfig
from testbed.errors import InputError


def profile_run(cfg: RunConfig, timeout_s: float = 600.0) -> dict[str, Any]:
    cfg = cfg.validated()
    request = {"cfg": cfg.to_dict(), "ckpt_dir": None, "timings": True}
    proc = subprocess.run(python_cmd("real_runs.worker", "--request", json.dumps(request)),
                          capture_output=True, text=True, env=child_env(), timeout=timeout_s)
    lines = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    results = [rec for rec in lines if rec.get("type") == "result"]
    if proc.returncode != 0 or not results:
        tail = proc.stderr.strip().splitlines()
        message = tail[-1] if tail else f"exit status {proc.returncode}"
        if proc.returncode == 2:
            raise InputError(message.removeprefix("testbed: error: "))
        raise RuntimeError(f"profile run failed: {message}")
    result = results[0]
    timings = result["timings"]
    steady = timings[1:] or timings
    summary = {
        "steps": len(timings),
        "parameters": result["parameter_count"],
        "first_step_s": sum(timings[0]),
        "forward_s": statistics.fmean(t[0] for t in steady),
        "backward_s": statistics.fmean(t[1] for t in steady),
        "update_s": statistics.fmean(t[2] for t in steady),
        "step_s": statistics.fmean(sum(t) for t in steady),
        "peak_memory_bytes": result["peak_memory_bytes"],
        "final_loss": result["losses"][-1],
    }
    env = result["env"]
    return {"framework": cfg.framework, "model": cfg.model, "summary": summary,
            "timings": timings, "layer_s": result["layer_s"], "env": env}
