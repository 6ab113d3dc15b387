"""Step-time micro-benchmark: many training configurations timed in one process.

``python -m real_runs.stepbench --configs JSON`` imports the framework once, then for
every configuration (a :class:`~real_runs.harness.RunConfig` as JSON) builds the model
and data and times it by the one measurement method (:mod:`real_runs.method`): warm-up
steps, then rounds of timed steps round-robin over every configuration, each step on
the wall clock as a run lives it (the batch fetched, forward, backward, the optimizer),
the figure the median of the round medians. It writes one JSON line per configuration
with that figure, its spread and jitter, the split of the median step and the method.
Running every configuration in one process keeps the framework import (seconds) out of
the design's wall time; each configuration still gets a freshly built model and
optimizer.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import warnings
from typing import Any

from real_runs.method import MIN_STEPS, Method, summarise


class Timed:
    """One configuration built and warmed up, timed in rounds."""

    def __init__(self, cfg_data: dict[str, Any], method: Method):
        from real_runs.harness import RunConfig, Trainer, make_backend

        self.cfg = RunConfig.from_dict(cfg_data).validated()
        self.trainer = Trainer(self.cfg, make_backend(self.cfg.framework))
        warm: list[float] = []
        for _ in range(max(method.warmup, 1)):
            t0 = time.perf_counter()
            self.trainer.train_until(self.trainer.step + 1)
            warm.append(time.perf_counter() - t0)
        self.first_step_s = warm[0]
        # the budget from the last warm-up step (the first holds the warm-up itself)
        per_step = warm[-1]
        self.steps = max(MIN_STEPS, min(method.steps, int(method.budget_s / max(per_step, 1e-6))))
        self.trainer.timings.clear()
        self.rounds: list[tuple[list, list[float], list[float]]] = []

    def round(self) -> None:
        """Time ``steps`` more steps: each one's wall time (the whole step), its process
        CPU time, and the back end's forward / backward / update split."""
        trainer = self.trainer
        start = len(trainer.timings)
        wall: list[float] = []
        cpu: list[float] = []
        for _ in range(self.steps):
            c0, w0 = time.process_time(), time.perf_counter()
            trainer.train_until(trainer.step + 1)
            wall.append(time.perf_counter() - w0)
            cpu.append(time.process_time() - c0)
        self.rounds.append((trainer.timings[start:], wall, cpu))

    def result(self, method: Method, layer_steps: int = 0) -> dict[str, Any]:
        """The figures of the rounds (:func:`real_runs.method.summarise`), the split of
        the median step of the median round, and per-layer times if asked."""
        summary = summarise([wall for _, wall, _ in self.rounds])
        by_median = sorted(self.rounds, key=lambda r: statistics.median(r[1]))
        timings, wall, cpu = by_median[(len(by_median) - 1) // 2]
        mid = wall.index(statistics.median_low(wall))
        split = timings[mid]
        backend = self.trainer.backend
        layer_s: dict[str, float] = {}
        if layer_steps and hasattr(backend, "enable_layer_timing"):
            layer_s = self._layer_medians(layer_steps)
        return {
            "cfg": self.cfg.to_dict(), "steps": summary.samples, "rounds": len(self.rounds),
            "steps_per_round": self.steps,
            "step_s": summary.value, "step_round_lo_s": summary.round_lo,
            "step_round_hi_s": summary.round_hi, "step_jitter_s": summary.jitter,
            "step_mean_s": statistics.fmean(w for _, ws, _ in self.rounds for w in ws),
            "step_min_s": min(w for _, ws, _ in self.rounds for w in ws),
            "step_cpu_s": statistics.median(c for _, _, cs in self.rounds for c in cs),
            "first_step_s": self.first_step_s,
            "forward_s": split.forward_s, "backward_s": split.backward_s,
            "update_s": split.update_s,
            "parameters": int(backend.parameter_count()),
            "peak_memory_bytes": int(backend.peak_memory_bytes()),
            "final_loss": float(self.trainer.losses[-1]),
            "timings": [[t.forward_s, t.backward_s, t.update_s] for r in self.rounds
                        for t in r[0]],
            "wall_s": [w for _, ws, _ in self.rounds for w in ws],
            "layer_s": layer_s,
        }

    def _layer_medians(self, layer_steps: int) -> dict[str, float]:
        """Forward seconds per layer, the median over ``layer_steps`` extra steps (the
        statistic of the step time: one step a co-runner stalls does not move it, where
        a mean over the steps would carry that stall into the layer it hit)."""
        backend = self.trainer.backend
        backend.enable_layer_timing()  # type: ignore[attr-defined]
        per_step: dict[str, list[float]] = {}
        before = dict(backend.layer_times())
        for _ in range(layer_steps):
            self.trainer.train_until(self.trainer.step + 1)
            now = backend.layer_times()
            for name, total in now.items():
                per_step.setdefault(name, []).append(total - before.get(name, 0.0))
            before = dict(now)
        return {name: statistics.median(times) for name, times in per_step.items()}


def time_configs(configs: list[dict[str, Any]], method: Method,
                 layer_steps: int = 0) -> list[dict[str, Any]]:
    """Build and warm up every configuration, then time them round-robin
    ``method.rounds`` times, so a burst of load on a shared machine spoils one round of
    a configuration, not all (see :mod:`real_runs.method`)."""
    from real_runs.method import load_1m, method_fields
    load = load_1m()
    timed = [Timed(c, method) for c in configs]
    for _ in range(method.rounds):
        for t in timed:
            t.round()
    out = []
    for t in timed:
        result = t.result(method, layer_steps)
        result["method"] = method_fields(
            warmup=max(method.warmup, 1), rounds=method.rounds, samples_per_round=t.steps,
            statistic="median of round medians", load=load)
        out.append(result)
    return out


def main(argv: list[str] | None = None) -> int:
    warnings.filterwarnings("ignore")
    parser = argparse.ArgumentParser(prog="real_runs.stepbench")
    parser.add_argument("--configs", required=True, help="JSON list of RunConfig dicts")
    parser.add_argument("--warmup", type=int, default=Method.warmup)
    parser.add_argument("--steps", type=int, default=Method.steps)
    parser.add_argument("--budget-s", type=float, default=Method.budget_s)
    parser.add_argument("--layer-steps", type=int, default=0)
    parser.add_argument("--rounds", type=int, default=Method.rounds)
    args = parser.parse_args(argv)
    from real_runs.env import capture_environment, write_json_lines
    method = Method(warmup=args.warmup, rounds=max(args.rounds, 1), steps=args.steps,
                    budget_s=args.budget_s)

    def results() -> list[dict[str, Any]]:
        out = time_configs(json.loads(args.configs), method, args.layer_steps)
        env = None
        for result in out:
            if env is None:   # after the builds: the framework is loaded
                env = capture_environment(result["cfg"]["framework"]).to_dict()
            result["env"] = env
        return out

    return write_json_lines(results)


if __name__ == "__main__":
    sys.exit(main())
