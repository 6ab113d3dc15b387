"""The harnesses' results as measurement records (:mod:`testbed.measurements`).

One function per kind of run: step-time benchmarks (``train_summary`` and, with layer
timing, ``layer_times``), collective benchmarks (``collective``), checkpoint-format
benchmarks (``checkpoint``), supervised fault-injection runs (``supervised_run`` and
one ``restart`` per restart). Every record carries the environment the harness
captured and, where the caller gives one, the run's time (``measured_at``) and id.
"""

from __future__ import annotations

import time
from typing import Any

from testbed.measurements import Environment, Record, make_record


def utc_now() -> str:
    """The current time as a record timestamp (harness side: the wall clock is allowed
    here, never in the core)."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _env(env: Environment | dict) -> dict:
    return env.to_dict() if isinstance(env, Environment) else dict(env)


def train_config(cfg: dict[str, Any], processes: int = 1, backend: str = "none",
                 gradient_sync: str | None = None) -> dict:
    """``TrainConfig`` fields of a :class:`~real_runs.harness.RunConfig` dict (a
    data-parallel run's gradient synchronisation: ``after_backward`` or ``buckets``)."""
    shape = cfg.get("input_shape") or (1, 8, 8)
    out = {"framework": cfg["framework"], "model": cfg["model"],
           "model_options": {k: int(cfg[k]) for k in ("width", "depth") if cfg.get(k)},
           "input_shape": "x".join(str(int(d)) for d in shape),
           "precision": cfg.get("precision", "fp32"), "batch_size": int(cfg["batch_size"]),
           "processes": processes, "backend": backend,
           "device": "gpu" if cfg.get("device") == "cuda" else "cpu"}
    if processes > 1:
        out["gradient_sync"] = gradient_sync or "after_backward"
    return out


#: Step-time figures a benchmark result may carry (``SummaryMetrics`` fields).
STEP_KEYS = ("steps", "step_s", "step_mean_s", "step_min_s", "step_cpu_s", "step_round_lo_s",
             "step_round_hi_s", "step_jitter_s", "first_step_s", "forward_s", "backward_s",
             "update_s", "allreduce_s", "peak_memory_bytes", "parameters", "final_loss")


def step_records(result: dict[str, Any], *, measured_at: str | None = None,
                 run_id: str = "", source: str = "real_runs.stepbench",
                 processes: int = 1, backend: str = "none",
                 gradient_sync: str | None = None) -> list[Record]:
    """A step-time benchmark result (``real_runs.stepbench``, ``real_runs.profile``) as
    records, with the method it was measured by."""
    config = train_config(result["cfg"], processes, backend, gradient_sync)
    metrics = {k: result[k] for k in STEP_KEYS if result.get(k) is not None}
    common = {"env": _env(result["env"]), "measured_at": measured_at, "source": source,
              "run_id": run_id, "method": result.get("method")}
    out = [make_record("train_summary", config=config, metrics=metrics, **common)]
    if result.get("layer_s"):
        out.append(make_record("layer_times", config=config,
                               metrics={"steps": 1, "layer_s": result["layer_s"]}, **common))
    return out


def collective_records(rows: list[dict[str, Any]], env: Environment | dict, *,
                       measured_at: str | None = None, source: str = "",
                       nodes: int = 1) -> list[Record]:
    """Collective micro-benchmark rows (``real_runs.collbench``, ``real_runs.mpibench``),
    each with the method it was measured by (its ``method`` entry)."""
    return [make_record("collective", env=_env(env), measured_at=measured_at, source=source,
                        op=row["op"], backend=row["backend"], processes=row["processes"],
                        nodes=nodes, method=row.get("method"),
                        metrics={"message_bytes": row["message_bytes"], "time_s": row["time_s"],
                                 "min_time_s": row.get("min_time_s"),
                                 "repeats": row.get("repeats", 1)})
            for row in rows]


def checkpoint_records(report: dict[str, Any], *, measured_at: str | None = None,
                       source: str = "real_runs.formats") -> list[Record]:
    """A checkpoint-format benchmark report (``real_runs.formats``) as records."""
    options = {k: int(report[k]) for k in ("width", "depth") if report.get(k)}
    return [make_record("checkpoint", env=_env(report["env"]), measured_at=measured_at,
                        source=source, method=report.get("method"),
                        framework=report["framework"], format=row["format"],
                        model=report["model"], model_options=options,
                        parameters=report["parameters"],
                        includes_optimizer=row["includes_optimizer"],
                        compressed=row["compressed"],
                        metrics={"ckpt_bytes": row["ckpt_bytes"], "files": row.get("files", 1),
                                 "state_bytes": row["predicted_bytes"], "save_s": row["save_s"],
                                 "load_s": row["load_s"], "save_min_s": row.get("save_min_s"),
                                 "load_min_s": row.get("load_min_s"),
                                 "repeats": report.get("repeats", 1)})
            for row in report["formats"]]


def _mean_part(parts: list[dict[str, Any]], key: str) -> float | None:
    """Mean of ``key`` over a run's restarts (None: not read)."""
    seen = [float(p[key]) for p in parts if p.get(key) is not None]
    return round(sum(seen) / len(seen), 4) if seen else None


def supervised_records(summary: dict[str, Any], *, measured_at: str | None = None,
                       run_id: str = "", source: str = "testbed real-run train") -> list[Record]:
    """A supervised run (``real_runs.supervisor.supervise``): the run and its restarts."""
    from real_runs.method import load_1m, method_fields
    env = _env(summary["env"])
    kills = [{k: v for k, v in spec.items() if v not in (None, False)}
             for spec in summary.get("kill_plan", [])]
    parts = summary.get("restart_parts", [])
    # one run, one figure each (its wall time; each restart), on the wall clock
    method = method_fields(warmup=0, rounds=1, samples_per_round=1, statistic="single",
                           load=load_1m())
    run = make_record(
        "supervised_run", env=env, measured_at=measured_at, source=source, run_id=run_id,
        method=method,
        config=summary["config"], steps=summary["steps"],
        checkpoint_every=summary["checkpoint_every"], kills=kills,
        keep=int(summary.get("keep") or 3),
        metrics={**{k: summary[k] for k in ("wall_time_s", "kills", "restarts", "lost_steps",
                                            "checkpoints_committed", "checkpoint_aborts")},
                 "kills_during_restart": int(summary.get("kills_during_restart") or 0),
                 "fallbacks": len(summary.get("corruptions_detected") or []),
                 "restart_runnable_tasks": _mean_part(parts, "runnable_tasks"),
                 "train_runnable_tasks": summary.get("train_runnable_tasks"),
                 "restart_cpu_stretch": _mean_part(parts, "cpu_stretch"),
                 "restart_core_probe_ms": _mean_part(parts, "core_probe_ms"),
                 **{k: summary.get(k) for k in ("start_s", "end_s", "start_on_cpu_s",
                                                "start_cpu_stretch", "train_cpu_stretch",
                                                "start_core_probe_ms",
                                                "train_core_probe_ms")}},
        timeline=summary.get("timeline_records", []))
    restarts = [make_record(
        "restart", env=env, measured_at=measured_at, source=source, run_id=run_id,
        method=method,
        framework=summary["framework"], model=summary["model"],
        incarnation=part["incarnation"],
        metrics={"restart_s": part["restart_s"], "process_start_s": part["process_start_s"],
                 "setup_s": part["setup_s"], "import_s": part.get("import_s"),
                 "load_s": part["load_s"],
                 "first_step_s": part["first_step_s"],
                 "ckpt_bytes": part.get("ckpt_bytes", 0),
                 "runnable_tasks": part.get("runnable_tasks"),
                 "cpu_stretch": part.get("cpu_stretch"),
                 "on_cpu_s": part.get("on_cpu_s"),
                 "core_probe_ms": part.get("core_probe_ms")})
        for part in summary.get("restart_parts", []) if part.get("restart_s", 0) > 0]
    return [run, *restarts]
