"""``testbed real-run ...``: real training runs with fault injection, format and
collective benchmarks, and sbatch scripts for clusters.

Frameworks are imported only inside the child processes the commands start (and in
``checkpoint-bench``, inside the command), never when the CLI loads.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import click

from testbed.errors import InputError
from testbed.units import parse_duration_s


def _echo_json(data) -> None:
    click.echo(json.dumps(data, indent=2, sort_keys=True))


def _echo_table(rows: list[tuple[str, object]]) -> None:
    width = max(len(k) for k, _ in rows)
    for key, value in rows:
        click.echo(f"{key:<{width}}  {value}")


def _run_config(framework: str, model: str, steps: int, seed: int, checkpoint_every: int,
                keep: int):
    from real_runs.harness import RunConfig
    if steps <= 0:
        raise InputError(f"steps must be positive, got {steps}", field="--steps")
    return RunConfig(framework=framework, model=model, seed=seed, steps=steps,
                     checkpoint_every=checkpoint_every, keep=keep).validated()




@click.group("real-run")
def real_run() -> None:
    """Real training runs on PyTorch, TensorFlow/Keras and Chainer."""


@real_run.command("train")
@click.option("--framework", required=True, help="torch, tensorflow or chainer")
@click.option("--model", default="mlp", show_default=True, help="mlp, cnn or resnet")
@click.option("--steps", type=int, required=True, help="total training steps")
@click.option("--checkpoint-every", type=int, default=5, show_default=True)
@click.option("--keep", type=int, default=3, show_default=True, help="checkpoints kept")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--kill-mtbf", default=None, help="kill at exponential times, mean e.g. 20s")
@click.option("--kill-trace", type=click.Path(dir_okay=False), default=None,
              help="JSONL kill trace (see traces/kill/)")
@click.option("--max-kills", type=int, default=20, show_default=True)
@click.option("--ckpt-dir", type=click.Path(file_okay=False), default=None,
              help="checkpoint directory (default: a new temporary one)")
@click.option("--timeline", type=click.Path(dir_okay=False), default=None,
              help="timeline JSONL (default: CKPT_DIR/timeline.jsonl)")
@click.option("--verify", is_flag=True, help="also run uninterrupted and compare bitwise")
@click.option("--measurements", type=click.Path(dir_okay=False), default=None,
              help="append a measurement record (JSONL) here")
@click.option("--json", "as_json", is_flag=True)
def train_cmd(framework, model, steps, checkpoint_every, keep, seed, kill_mtbf, kill_trace,
              max_kills, ckpt_dir, timeline, verify, measurements, as_json) -> None:
    """Train under a supervisor that SIGKILLs and restarts the job from checkpoints."""
    from real_runs.faults import mtbf_plan, parse_kill_trace
    from real_runs.store import CheckpointStore
    from real_runs.supervisor import default_timeline_path, supervise

    cfg = _run_config(framework, model, steps, seed, checkpoint_every, keep)
    if checkpoint_every <= 0:
        raise InputError("must be positive", field="--checkpoint-every")
    if max_kills < 0:
        raise InputError("must be >= 0", field="--max-kills")
    if kill_mtbf and kill_trace:
        raise InputError("give --kill-mtbf or --kill-trace, not both")
    plan = []
    if kill_trace:
        plan = parse_kill_trace(kill_trace)
    elif kill_mtbf:
        mtbf_s = parse_duration_s(kill_mtbf, source="--kill-mtbf")
        if mtbf_s <= 0:
            raise InputError("must be positive", field="--kill-mtbf")
        plan = mtbf_plan(mtbf_s, seed, max_kills)
    directory = Path(ckpt_dir) if ckpt_dir else Path(tempfile.mkdtemp(prefix="testbed-ckpt-"))
    CheckpointStore(directory, cfg.framework, cfg.model, keep=keep).check_usable()
    timeline_path = Path(timeline) if timeline else default_timeline_path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    summary = supervise(cfg, directory, plan, timeline_path=timeline_path, max_kills=max_kills,
                        verify=verify)
    summary["ckpt_dir"] = str(directory)
    if measurements:
        from testbed.measurements import Environment, Measurement, write_measurements
        record = Measurement(
            kind="supervised_run", env=Environment.from_dict(summary["env"]),
            params={"model": cfg.model, "steps": steps, "checkpoint_every": checkpoint_every,
                    "seed": seed, "kill_mtbf": kill_mtbf, "kill_trace": kill_trace},
            metrics={k: summary[k] for k in ("kills", "restarts", "wall_time_s", "lost_steps",
                                             "checkpoints_committed", "checkpoint_aborts")})
        write_measurements([record], measurements)
    if as_json:
        _echo_json(summary)
    else:
        _echo_table([(k, summary[k]) for k in (
            "framework", "model", "steps", "kills", "restarts", "lost_steps", "wall_time_s",
            "checkpoints_committed", "checkpoint_aborts", "final_params_sha256",
            "identical_to_uninterrupted", "timeline")] +
            [("corruptions_detected", len(summary["corruptions_detected"]))])


@real_run.command("checkpoint-bench")
@click.option("--framework", required=True)
@click.option("--model", default="mlp", show_default=True)
@click.option("--width", type=int, default=64, show_default=True)
@click.option("--repeats", type=int, default=3, show_default=True)
@click.option("--formats", default=None, help="comma-separated subset of the framework's formats")
@click.option("--measurements", type=click.Path(dir_okay=False), default=None)
@click.option("--json", "as_json", is_flag=True)
def checkpoint_bench_cmd(framework, model, width, repeats, formats, measurements, as_json) -> None:
    """Save/load time and bytes on disk of each checkpoint format, vs predicted state size."""
    from real_runs.formats import run_bench_subprocess
    from real_runs.harness import canonical_framework, check_model
    fw = canonical_framework(framework)
    check_model(model)
    if width <= 0 or repeats <= 0:
        raise InputError("width and repeats must be positive")
    report = run_bench_subprocess(fw, model, width, repeats,
                                  formats.split(",") if formats else None)
    if measurements:
        from testbed.measurements import Environment, Measurement, write_measurements
        env = Environment.from_dict(report["env"])
        write_measurements([Measurement(kind="checkpoint_format", env=env,
                                        params={"model": model, "width": width,
                                                "format": row["format"]},
                                        metrics={k: v for k, v in row.items() if k != "format"})
                            for row in report["formats"]], measurements)
    if as_json:
        _echo_json(report)
        return
    click.echo(f"{fw} {model}: {report['parameters']} parameters, predicted state "
               f"{report['predicted_state_bytes']} B (with optimizer)")
    click.echo(f"{'format':<28}{'bytes':>10}{'predicted':>11}{'overhead':>10}{'save_s':>10}"
               f"{'load_s':>10}")
    for row in report["formats"]:
        click.echo(f"{row['format']:<28}{row['ckpt_bytes']:>10}{row['predicted_bytes']:>11}"
                   f"{row['overhead_bytes']:>10}{row['save_s']:>10.4f}{row['load_s']:>10.4f}")


@real_run.command("profile")
@click.option("--framework", required=True)
@click.option("--model", default="mlp", show_default=True)
@click.option("--steps", type=int, default=20, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--measurements", type=click.Path(dir_okay=False), default=None)
@click.option("--json", "as_json", is_flag=True)
def profile_cmd(framework, model, steps, seed, measurements, as_json) -> None:
    """Per-step forward/backward/update times, per-layer times and peak memory."""
    from real_runs.profile import profile_run
    cfg = _run_config(framework, model, steps, seed, 0, 1)
    report = profile_run(cfg)
    if measurements:
        from testbed.measurements import Environment, Measurement, write_measurements
        env = Environment.from_dict(report["env"])
        records = [Measurement(kind="train_step", env=env,
                               params={"model": model, "step": i + 1, "seed": seed},
                               metrics={"forward_s": f, "backward_s": b, "update_s": u,
                                        "step_s": f + b + u})
                   for i, (f, b, u) in enumerate(report["timings"])]
        records.append(Measurement(kind="train_summary", env=env,
                                   params={"model": model, "steps": steps, "seed": seed},
                                   metrics=report["summary"]))
        write_measurements(records, measurements)
    if as_json:
        _echo_json(report)
    else:
        _echo_table(sorted(report["summary"].items()))


@real_run.command("slurm")
@click.option("--framework", required=True)
@click.option("--model", default="mlp", show_default=True)
@click.option("--run", "run_kind", type=click.Choice(["train", "ddp", "mpi-bench",
                                                      "chainer-mpi"]),
              default="train", show_default=True)
@click.option("--nodes", type=int, default=1, show_default=True)
@click.option("--gpus-per-node", type=int, default=4, show_default=True)
@click.option("--steps", type=int, default=100, show_default=True)
@click.option("--checkpoint-every", type=int, default=10, show_default=True)
@click.option("--time", "time_limit", default="1h", show_default=True)
@click.option("--partition", default=None)
@click.option("--account", default=None)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--output", "-o", type=click.Path(dir_okay=False), default=None,
              help="write the script here (default: stdout)")
def slurm_cmd(framework, model, run_kind, nodes, gpus_per_node, steps, checkpoint_every,
              time_limit, partition, account, seed, output) -> None:
    """Write an sbatch script for the same run on a GPU cluster (srun/torchrun, mpirun)."""
    from real_runs.slurm import SlurmJob, render_sbatch
    job = SlurmJob(framework=framework, model=model, run=run_kind, nodes=nodes,
                   gpus_per_node=gpus_per_node, steps=steps, checkpoint_every=checkpoint_every,
                   time_s=parse_duration_s(time_limit, source="--time"), partition=partition,
                   account=account, seed=seed).validated()
    script = render_sbatch(job)
    if output:
        Path(output).write_text(script, encoding="utf-8")
        click.echo(f"wrote {output}")
    else:
        click.echo(script, nl=False)


def register(cli: click.Group) -> None:
    cli.add_command(real_run)
