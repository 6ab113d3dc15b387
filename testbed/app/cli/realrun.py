"""``testbed real-run ...``: real training runs with fault injection, format and
collective benchmarks, and sbatch scripts for clusters.

Frameworks are imported only inside the child processes the commands start (and in
``checkpoint-bench``, inside the command), never when the CLI loads.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import click

from real_runs.harness import DEVICES, PRECISIONS
from testbed.app.cli.common import Names, emit_json, key_values
from testbed.errors import InputError
from testbed.io.write import check_writable_target
from testbed.units import parse_duration_s, parse_shape


def _echo_table(rows: list[tuple[str, object]]) -> None:
    click.echo(key_values(rows))


def _run_config(framework: str, model: str, steps: int, seed: int, checkpoint_every: int,
                keep: int, processes: int = 1, **options):
    from real_runs.harness import RunConfig
    if steps <= 0:
        raise InputError(f"steps must be positive, got {steps}", field="--steps")
    shape = options.pop("input_shape", None)
    if shape is not None:
        options["input_shape"] = parse_shape(shape, source="--input-shape")
    options = {k: v for k, v in options.items() if v is not None}
    cfg = RunConfig(framework=framework, model=model, seed=seed, steps=steps,
                    checkpoint_every=checkpoint_every, keep=keep, **options).validated()
    cfg.check_fits(processes)
    return cfg


def model_options(func):
    """The harness model's size and training options shared by the run commands."""
    for decorator in reversed((
            click.option("--batch-size", type=int, default=None,
                         help="samples per step and process (default 16)"),
            click.option("--width", type=int, default=None, help="model width (default: the model's)"),
            click.option("--depth", type=int, default=None, help="layers / stages / blocks"),
            click.option("--input-shape", default=None, help="per-sample input, e.g. 3x32x32"),
            click.option("--precision", type=Names(PRECISIONS, "precision"),
                         default=None, help="training precision (default fp32)"),
            click.option("--device", type=Names(DEVICES, "device"), default=None,
                         help="cuda: PyTorch on the first visible GPU"))):
        func = decorator(func)
    return func


def _write_records(path: str, records) -> None:
    from testbed.measurements import write_records
    write_records(path, records, append=True, field="--measurements")


@click.group("real-run")
def real_run() -> None:
    """Real training runs on PyTorch, TensorFlow/Keras and Chainer."""


@real_run.command("train")
@click.option("--framework", required=True, help="torch, tensorflow or chainer")
@click.option("--model", default="mlp", show_default=True, help="mlp, cnn, resnet or resnet18")
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
@model_options
def train_cmd(framework, model, steps, checkpoint_every, keep, seed, kill_mtbf, kill_trace,
              max_kills, ckpt_dir, timeline, verify, measurements, as_json, **options) -> None:
    """Train under a supervisor that SIGKILLs and restarts the job from checkpoints."""
    from real_runs.ckpt_store import CheckpointStore
    from real_runs.faults import mtbf_plan, parse_kill_trace
    from real_runs.supervisor import default_timeline_path, supervise

    if measurements:
        check_writable_target(measurements, field="--measurements")
    cfg = _run_config(framework, model, steps, seed, checkpoint_every, keep, **options)
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
        from real_runs.records import supervised_records, utc_now
        _write_records(measurements, supervised_records(
            summary, measured_at=utc_now(), run_id=f"{cfg.framework}-{cfg.model}-s{seed}-"
            f"{len(plan)}k-{directory.name}"))
    summary.pop("timeline_records", None)
    if as_json:
        emit_json(summary)
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
    from real_runs.harness import RunConfig, canonical_framework, check_model
    fw = canonical_framework(framework)
    check_model(model)
    if repeats <= 0:
        raise InputError("must be positive", field="--repeats")
    RunConfig(framework=fw, model=model, width=width, steps=1).validated().check_fits()
    if measurements:
        check_writable_target(measurements, field="--measurements")
    report = run_bench_subprocess(fw, model, width, repeats,
                                  formats.split(",") if formats else None)
    if measurements:
        from real_runs.records import checkpoint_records, utc_now
        _write_records(measurements, checkpoint_records(report, measured_at=utc_now()))
    if as_json:
        emit_json(report)
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
@click.option("--processes", type=int, default=1, show_default=True,
              help="N > 1: gloo data parallelism over N local processes (PyTorch)")
@click.option("--measurements", type=click.Path(dir_okay=False), default=None)
@click.option("--json", "as_json", is_flag=True)
@model_options
def profile_cmd(framework, model, steps, seed, processes, measurements, as_json,
                **options) -> None:
    """Per-step forward/backward/update times, per-layer times and peak memory."""
    from real_runs.env import PROCESSES_PER_CPU, max_local_processes
    from real_runs.profile import profile_run
    most = max_local_processes()
    if not 1 <= processes <= most:
        raise InputError(f"must be in 1…{most} on this machine ({PROCESSES_PER_CPU} per CPU)",
                         field="--processes")
    if measurements:
        check_writable_target(measurements, field="--measurements")
    cfg = _run_config(framework, model, steps, seed, 0, 1, processes, **options)
    report = profile_run(cfg, processes=processes)
    if measurements:
        from real_runs.records import step_records, train_config, utc_now
        from testbed.measurements import make_record
        env = report["env"]
        config = train_config(cfg.to_dict(), processes, "gloo" if processes > 1 else "none")
        steps_recs = [make_record("train_step", env=env, config=config, step=i + 1,
                                  metrics=_step_metrics(t, processes))
                      for i, t in enumerate(report["timings"])]
        _write_records(measurements, steps_recs + step_records(
            report["result"], measured_at=utc_now(), source="testbed real-run profile",
            processes=processes, backend="gloo" if processes > 1 else "none"))
    report.pop("result", None)
    if as_json:
        emit_json(report)
    else:
        _echo_table(sorted((k, v) for k, v in report["summary"].items()))


def _step_metrics(timing: list[float], processes: int) -> dict:
    if processes > 1:
        return {"step_s": timing[0], "allreduce_s": timing[1]}
    f, b, u = timing
    return {"step_s": f + b + u, "forward_s": f, "backward_s": b, "update_s": u}


@real_run.command("slurm")
@click.option("--framework", default="torch", show_default=True)
@click.option("--model", default="mlp", show_default=True)
@click.option("--run", "run_kind", type=click.Choice(["train", "ddp", "mpi-bench",
                                                      "chainer-mpi", "calibration"]),
              default="train", show_default=True)
@click.option("--calibration", is_flag=True,
              help="the calibration set on real GPUs (= --run calibration)")
@click.option("--nodes", type=int, default=1, show_default=True)
@click.option("--gpus-per-node", type=int, default=4, show_default=True)
@click.option("--steps", type=int, default=100, show_default=True)
@click.option("--checkpoint-every", type=int, default=10, show_default=True)
@click.option("--time", "time_limit", default="1h", show_default=True)
@click.option("--partition", default=None)
@click.option("--account", default=None)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--venv", default=None, help="virtual environment to activate (its folder)")
@click.option("--module", "modules", multiple=True,
              help="a `module load` line (repeatable), e.g. --module cuda/12.4")
@click.option("--workdir", default=None,
              help="the testbed repository on the cluster (default: the submit folder)")
@click.option("--results", default=None, help="records folder (default results/JOBID)")
@click.option("--output", "-o", type=click.Path(dir_okay=False), default=None,
              help="write the script here (default: stdout)")
def slurm_cmd(framework, model, run_kind, calibration, nodes, gpus_per_node, steps,
              checkpoint_every, time_limit, partition, account, seed, venv, modules, workdir,
              results, output) -> None:
    """Write an sbatch script for the same run on a GPU cluster (srun/torchrun, mpirun),
    with its environment set up (--module, --venv)."""
    from real_runs.slurm import SlurmJob, render_sbatch
    if calibration:
        if run_kind not in ("train", "calibration"):
            raise InputError("--calibration is a run of its own; drop --run", field="--run")
        run_kind = "calibration"
    job = SlurmJob(framework=framework, model=model, run=run_kind, nodes=nodes,
                   gpus_per_node=gpus_per_node, steps=steps, checkpoint_every=checkpoint_every,
                   time_s=parse_duration_s(time_limit, source="--time"), partition=partition,
                   account=account, seed=seed, venv=venv, modules=tuple(modules),
                   workdir=workdir, results=results).validated()
    script = render_sbatch(job)
    if output:
        from testbed.io.write import write_text
        write_text(check_writable_target(output, field="-o"), script, field="-o")
        click.echo(f"wrote {output}")
    else:
        click.echo(script, nl=False)
