"""Step-time micro-benchmark: many training configurations timed in one process.

``python -m real_runs.stepbench --configs JSON`` imports the framework once, then for
every configuration (a :class:`~real_runs.harness.RunConfig` as JSON) builds the model
and data, runs ``warmup`` steps (allocator and kernel selection; never reported) and
times ``steps`` more, each as forward / backward / update, in ``rounds`` round-robin
rounds over all configurations. It writes one JSON line per configuration with the
median step time and its split from its least disturbed round. Running every configuration
in one process keeps the framework import (seconds) out of the design's wall time;
each configuration still gets a freshly built model and optimizer.

The step time is capped by a time budget per configuration (``budget_s``): a large
model runs fewer timed steps (never fewer than :data:`MIN_STEPS`).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import warnings
from typing import Any

#: Fewest timed steps of a configuration, whatever its budget.
MIN_STEPS = 3


class Timed:
    """One configuration built and warmed up, timed in rounds."""

    def __init__(self, cfg_data: dict[str, Any], warmup: int, steps: int, budget_s: float):
        from real_runs.harness import RunConfig, Trainer, make_backend

        self.cfg = RunConfig.from_dict(cfg_data).validated()
        self.trainer = Trainer(self.cfg, make_backend(self.cfg.framework))
        t0 = time.perf_counter()
        self.trainer.train_until(warmup)
        first = self.trainer.timings[0] if self.trainer.timings else None
        self.first_step_s = (first.forward_s + first.backward_s + first.update_s) if first else None
        per_step = (time.perf_counter() - t0) / max(warmup, 1)
        self.steps = max(MIN_STEPS, min(steps, int(budget_s / max(per_step, 1e-6))))
        self.trainer.timings.clear()
        self.rounds: list[tuple[list, list[float]]] = []

    def round(self) -> None:
        """Time ``steps`` more steps (wall split per step, process CPU time per step)."""
        trainer = self.trainer
        start = len(trainer.timings)
        cpu: list[float] = []
        for _ in range(self.steps):
            c0 = time.process_time()
            trainer.train_until(trainer.step + 1)
            cpu.append(time.process_time() - c0)
        self.rounds.append((trainer.timings[start:], cpu))

    def result(self, layer_steps: int = 0) -> dict[str, Any]:
        """Figures of the round with the lowest median CPU time (the least disturbed by
        other users of the machine), and per-layer times if asked."""
        timings, cpu = min(self.rounds, key=lambda r: statistics.median(r[1]))
        totals = [t.forward_s + t.backward_s + t.update_s for t in timings]
        backend = self.trainer.backend
        layer_s: dict[str, float] = {}
        if layer_steps and hasattr(backend, "enable_layer_timing"):
            backend.enable_layer_timing()
            before = dict(backend.layer_times())
            self.trainer.train_until(self.trainer.step + layer_steps)
            layer_s = {k: (v - before.get(k, 0.0)) / layer_steps
                       for k, v in backend.layer_times().items()}
        # the median step (the lower one of an even count) with its own split, so
        # forward + backward + update is the step time exactly
        mid = timings[totals.index(statistics.median_low(totals))]
        return {
            "cfg": self.cfg.to_dict(), "steps": len(totals), "rounds": len(self.rounds),
            "step_s": mid.forward_s + mid.backward_s + mid.update_s,
            "step_mean_s": statistics.fmean(totals),
            "step_min_s": min(totals), "step_cpu_s": statistics.median(cpu),
            "first_step_s": self.first_step_s,
            "forward_s": mid.forward_s, "backward_s": mid.backward_s, "update_s": mid.update_s,
            "parameters": int(backend.parameter_count()),
            "peak_memory_bytes": int(backend.peak_memory_bytes()),
            "final_loss": float(self.trainer.losses[-1]),
            "timings": [[t.forward_s, t.backward_s, t.update_s] for t in timings],
            "layer_s": layer_s,
        }


def time_configs(configs: list[dict[str, Any]], warmup: int, steps: int, budget_s: float,
                 rounds: int = 1, layer_steps: int = 0) -> list[dict[str, Any]]:
    """Build every configuration, then time them round-robin ``rounds`` times, so a
    burst of load on a shared machine spoils one round of a configuration, not all."""
    timed = [Timed(c, warmup, steps, budget_s) for c in configs]
    for _ in range(rounds):
        for t in timed:
            t.round()
    return [t.result(layer_steps) for t in timed]


def main(argv: list[str] | None = None) -> int:
    warnings.filterwarnings("ignore")
    parser = argparse.ArgumentParser(prog="real_runs.stepbench")
    parser.add_argument("--configs", required=True, help="JSON list of RunConfig dicts")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--budget-s", type=float, default=2.0)
    parser.add_argument("--layer-steps", type=int, default=0)
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args(argv)
    from real_runs.env import capture_environment, write_json_lines

    def results() -> list[dict[str, Any]]:
        out = time_configs(json.loads(args.configs), args.warmup, args.steps, args.budget_s,
                           max(args.rounds, 1), args.layer_steps)
        env = None
        for result in out:
            if env is None:   # after the builds: the framework is loaded
                env = capture_environment(result["cfg"]["framework"]).to_dict()
            result["env"] = env
        return out

    return write_json_lines(results)


if __name__ == "__main__":
    sys.exit(main())
