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
from real_runs.method import Method as _Method
from real_runs.slurm import RUN_KINDS as SLURM_RUN_KINDS
from testbed.app.cli.common import Names, emit_json, key_values, table
from testbed.errors import InputError
from testbed.io.write import check_writable_target
from testbed.units import parse_duration_s, parse_shape

#: Most checkpoints a run keeps (each is a full copy of the training state).
MAX_KEEP = 1000
#: Most repetitions of a format benchmark (each saves and loads the whole state).
MAX_REPEATS = 10_000
#: The one measurement method's defaults (warm-up, rounds, steps per round).
DEFAULT_METHOD = _Method()


def _echo_table(rows: list[tuple[str, object]]) -> None:
    click.echo(key_values(rows))


def in_range(value: int | None, option: str, lo: int, hi: int, what: str = "") -> None:
    """Refuse an option outside ``lo…hi`` (the physical ranges of the measurement
    records, :mod:`testbed.measurements`: a run of 10²⁰ steps is no measurement)."""
    if value is None:
        return
    if value < lo and lo == 1:
        raise InputError(f"{option.lstrip('-')} must be positive, got {value}", source=option)
    if not lo <= value <= hi:
        shown = f"{value:,}" if abs(value) < 10**30 else f"{value:.3g}"
        raise InputError(f"must be in {lo:,}…{hi:,}{' ' + what if what else ''}, got {shown}",
                         source=option)


def _run_config(framework: str, model: str, steps: int, seed: int, checkpoint_every: int,
                keep: int, processes: int = 1, **options):
    from real_runs.harness import RunConfig
    from testbed.measurements import MAX_SAMPLES, MAX_STEPS
    in_range(steps, "--steps", 1, MAX_STEPS, "(the records' range of a run's steps)")
    in_range(checkpoint_every, "--checkpoint-every", 0, MAX_STEPS)
    in_range(keep, "--keep", 1, MAX_KEEP)
    in_range(options.get("batch_size"), "--batch-size", 1, MAX_SAMPLES)
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
@click.option("--checkpoint-every", type=int, default=5, show_default=True,
              help="steps between checkpoints")
@click.option("--keep", type=int, default=3, show_default=True, help="checkpoints kept")
@click.option("--seed", type=int, default=0, show_default=True,
              help="seed of the model, the data order and the kill plan")
@click.option("--kill-mtbf", default=None, help="kill at exponential times, mean e.g. 20s")
@click.option("--kill-trace", type=click.Path(dir_okay=False), default=None,
              help="JSONL kill trace (see traces/kill/)")
@click.option("--max-kills", type=int, default=20, show_default=True,
              help="most kills the supervisor injects")
@click.option("--ckpt-dir", type=click.Path(file_okay=False), default=None,
              help="checkpoint directory (default: a new temporary one)")
@click.option("--timeline", type=click.Path(dir_okay=False), default=None,
              help="timeline JSONL (default: CKPT_DIR/timeline.jsonl)")
@click.option("--verify", is_flag=True, help="also run uninterrupted and compare bitwise")
@click.option("--measurements", type=click.Path(dir_okay=False), default=None,
              help="append a measurement record (JSONL) here")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@model_options
def train_cmd(framework, model, steps, checkpoint_every, keep, seed, kill_mtbf, kill_trace,
              max_kills, ckpt_dir, timeline, verify, measurements, as_json, **options) -> None:
    """Train under a supervisor that SIGKILLs and restarts the job from checkpoints."""
    from real_runs.ckpt_store import CheckpointStore
    from real_runs.faults import mtbf_plan, parse_kill_trace
    from real_runs.supervisor import default_timeline_path, supervise
    from testbed.measurements import MAX_PROCESSES

    if measurements:
        check_writable_target(measurements, field="--measurements")
    if timeline:
        check_writable_target(timeline, field="--timeline")
    cfg = _run_config(framework, model, steps, seed, checkpoint_every, keep, **options)
    if checkpoint_every <= 0:
        raise InputError("must be positive", field="--checkpoint-every")
    in_range(max_kills, "--max-kills", 0, MAX_PROCESSES)
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
    if ckpt_dir:
        CheckpointStore(Path(ckpt_dir), cfg.framework, cfg.model, keep=keep).check_usable()
    # every check has passed: only now is a folder made
    directory = Path(ckpt_dir) if ckpt_dir else Path(tempfile.mkdtemp(prefix="testbed-ckpt-"))
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
    for warning in summary.get("warnings", []):     # stderr, in both output modes
        click.echo(f"testbed: warning: {warning}", err=True)
    if as_json:
        emit_json(summary)
    else:
        _echo_table([(k, summary[k]) for k in (
            "framework", "model", "steps", "kills", "restarts", "checkpoint_restores",
            "lost_steps", "wall_time_s", "checkpoints_committed", "checkpoint_aborts",
            "final_params_sha256", "identical_to_uninterrupted", "timeline")] +
            [("corruptions_detected", len(summary["corruptions_detected"]))])


@real_run.command("checkpoint-bench")
@click.option("--framework", required=True, help="torch, tensorflow or chainer")
@click.option("--model", default="mlp", show_default=True, help="harness model (testbed model list)")
@click.option("--width", type=int, default=64, show_default=True, help="model width")
@click.option("--repeats", type=int, default=3, show_default=True,
              help="saves and loads per format (the fastest is reported)")
@click.option("--formats", default=None, help="comma-separated subset of the framework's formats")
@click.option("--measurements", type=click.Path(dir_okay=False), default=None,
              help="append the measurement records (JSONL) here")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def checkpoint_bench_cmd(framework, model, width, repeats, formats, measurements, as_json) -> None:
    """Save/load time and bytes on disk of each checkpoint format, vs predicted state size."""
    from real_runs.formats import run_bench_subprocess
    from real_runs.harness import RunConfig, canonical_framework, check_model
    fw = canonical_framework(framework)
    check_model(model)
    in_range(repeats, "--repeats", 1, MAX_REPEATS)
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


def _int_list(value: str | None, option: str) -> list[int | None]:
    """``"16,64"`` → ``[16, 64]`` (None: the option was not given)."""
    if value is None:
        return [None]
    out: list[int | None] = []
    for part in str(value).split(","):
        part = part.strip()
        if not part.lstrip("-").isdigit() or len(part) > 12:
            raise InputError(f"{part!r} is not a whole number (give one, or a list such as "
                             "16,64)", source=option)
        out.append(int(part))
    if len(out) > 64:
        raise InputError("at most 64 values per option", source=option)
    return out


@real_run.command("profile")
@click.option("--framework", required=True, help="torch, tensorflow or chainer")
@click.option("--model", default="mlp", show_default=True, help="harness model (testbed model list)")
@click.option("--batch-size", default=None,
              help="samples per step and process, or a list (16,64): every combination "
                   "with --width and --depth is profiled (default 16)")
@click.option("--width", default=None, help="model width, or a list (default: the model's)")
@click.option("--depth", default=None, help="layers / stages / blocks, or a list")
@click.option("--input-shape", default=None, help="per-sample input, e.g. 3x32x32")
@click.option("--precision", type=Names(PRECISIONS, "precision"), default=None,
              help="training precision (default fp32)")
@click.option("--device", type=Names(DEVICES, "device"), default=None,
              help="cuda: PyTorch on the first visible GPU")
@click.option("--steps", type=int, default=None,
              help=f"timed steps per round (default {DEFAULT_METHOD.steps})")
@click.option("--rounds", type=int, default=None,
              help=f"rounds of timed steps, round-robin over the configurations; the figure "
                   f"is the median of the round medians (default {DEFAULT_METHOD.rounds})")
@click.option("--warmup", type=int, default=None,
              help=f"steps run first and not timed (default {DEFAULT_METHOD.warmup})")
@click.option("--seed", type=int, default=0, show_default=True, help="seed of the model and data")
@click.option("--processes", type=int, default=1, show_default=True,
              help="N > 1: gloo data parallelism over N local processes (PyTorch)")
@click.option("--gradient-sync", type=click.Choice(["after-backward", "buckets"]),
              default="after-backward", show_default=True,
              help="data parallel: one all-reduce after backward, or DistributedDataParallel's "
                   "buckets overlapped with backward")
@click.option("--measurements", type=click.Path(dir_okay=False), default=None,
              help="append the measurement records (JSONL) here")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def profile_cmd(framework, model, batch_size, width, depth, steps, rounds, warmup, seed,
                processes, gradient_sync, measurements, as_json, **options) -> None:
    """Step times by the one measurement method (warm-up, rounds, median of the round
    medians, wall clock) — the method calibrate-local fits on — with the forward/backward/
    update split, per-layer times and peak memory; lists profile every combination."""
    from real_runs.env import PROCESSES_PER_CPU, max_local_processes
    from real_runs.method import Method
    from real_runs.profile import profile_grid
    most = max_local_processes()
    if not 1 <= processes <= most:
        raise InputError(f"must be in 1…{most} on this machine ({PROCESSES_PER_CPU} per CPU)",
                         field="--processes")
    if measurements:
        check_writable_target(measurements, field="--measurements")
    method = Method(warmup=DEFAULT_METHOD.warmup if warmup is None else warmup,
                    rounds=DEFAULT_METHOD.rounds if rounds is None else rounds,
                    steps=DEFAULT_METHOD.steps if steps is None else steps,
                    budget_s=1e9).checked()
    grid = [(b, w, d) for b in _int_list(batch_size, "--batch-size")
            for w in _int_list(width, "--width") for d in _int_list(depth, "--depth")]
    total = method.warmup + method.rounds * method.steps
    cfgs = [_run_config(framework, model, total, seed, 0, 1, processes, batch_size=b,
                        width=w, depth=d, **options) for b, w, d in grid]
    sync = gradient_sync.replace("-", "_")
    reports = profile_grid(cfgs, processes=processes, method=method,
                           gradient_sync=sync if processes > 1 else None)
    if measurements:
        _write_records(measurements, [r for rep in reports for r in _profile_records(
            rep, processes, sync)])
    for report in reports:
        report.pop("result", None)
    if as_json:
        emit_json(reports[0] if len(reports) == 1 else reports)
    elif len(reports) == 1:
        _echo_table(sorted((k, v) for k, v in reports[0]["summary"].items()))
    else:
        click.echo(table(["batch", "width", "depth", "step", "spread over rounds", "jitter"],
                         [(r["config"]["batch_size"], r["config"]["width"], r["config"]["depth"],
                           f"{r['summary']['step_s'] * 1e3:.3f} ms",
                           f"{r['summary']['step_round_lo_s'] * 1e3:.3f}–"
                           f"{r['summary']['step_round_hi_s'] * 1e3:.3f} ms",
                           f"{r['summary']['step_jitter_s'] * 1e3:.3f} ms") for r in reports],
                         align="rrrrrr"))


def _profile_records(report: dict, processes: int, sync: str) -> list:
    """The records of one profiled configuration: one ``train_step`` per timed step,
    then the ``train_summary`` (and ``layer_times``) of the method's figure."""
    from real_runs.records import step_records, train_config, utc_now
    from testbed.measurements import make_record
    backend = "gloo" if processes > 1 else "none"
    grad = sync if processes > 1 else None
    config = train_config(report["config"], processes, backend, grad)
    walls = report["wall_s"] or [sum(t) for t in report["timings"]]
    steps = [make_record("train_step", env=report["env"], config=config, step=i + 1,
                         method={**report["method"], "rounds": 1, "samples_per_round": 1,
                                 "statistic": "single"},
                         metrics=_step_metrics(t, w, processes))
             for i, (t, w) in enumerate(zip(report["timings"], walls, strict=False))]
    return steps + step_records(report["result"], measured_at=utc_now(),
                                source="testbed real-run profile", processes=processes,
                                backend=backend, gradient_sync=grad)


def _step_metrics(timing: list[float], wall_s: float, processes: int) -> dict:
    if processes > 1:
        return {"step_s": timing[0], "allreduce_s": timing[1]}
    f, b, u = timing
    return {"step_s": max(wall_s, 1e-7), "forward_s": f, "backward_s": b, "update_s": u}


@real_run.command("slurm")
@click.option("--framework", default="torch", show_default=True,
              help="torch, tensorflow or chainer (ddp and calibration: torch)")
@click.option("--model", default="mlp", show_default=True, help="mlp, cnn, resnet or resnet18")
@click.option("--run", "run_kind", type=click.Choice(list(SLURM_RUN_KINDS)), default="train",
              show_default=True, help="what the job runs (see `real_runs.slurm`)")
@click.option("--calibration", is_flag=True,
              help="the calibration job (= --run calibration)")
@click.option("--name", default=None,
              help="the results key: results/NAME, the job name (default KIND-FRAMEWORK-MODEL); "
                   "resubmitting with the same name resumes")
@click.option("--nodes", type=int, default=1, show_default=True, help="nodes of the job")
@click.option("--gpus-per-node", type=int, default=None,
              help="GPUs per node, one task each; 0: a CPU partition (default 4 for PyTorch "
                   "GPU runs, 0 for chainer-mpi, hpo and TensorFlow/Chainer runs)")
@click.option("--processes-per-node", type=int, default=2, show_default=True,
              help="on CPUs (--gpus-per-node 0): tasks (ranks, processes) per node")
@click.option("--cpus-per-task", type=int, default=8, show_default=True,
              help="CPUs of each task (and OMP_NUM_THREADS)")
@click.option("--steps", type=int, default=100, show_default=True, help="training steps")
@click.option("--checkpoint-every", type=int, default=10, show_default=True,
              help="steps between checkpoints")
@click.option("--profile-steps", type=int, default=20, show_default=True,
              help="train: timed steps per round of the step-time profile after the run "
                   "(the one measurement method: its warm-up, then its rounds)")
@click.option("--width", type=int, default=None, help="train: the model's width")
@click.option("--batch-size", type=int, default=None, help="train: samples per step")
@click.option("--kill-trace", default=None,
              help="train: JSONL kill plan of the whole run (path on the cluster)")
@click.option("--design", type=click.Choice(["smoke", "quick", "full", "gpu"]), default=None,
              help="calibration: the design measured (default gpu on GPUs, full on CPUs)")
@click.option("--scenario", default=None, help="hpo: the scenario whose hpo: section runs")
@click.option("--hpo-workers", type=int, default=None,
              help="hpo: MPI workers (default: the job's tasks)")
@click.option("--collective-repeats", type=int, default=None,
              help="repetitions of each collective benchmark point (default: the benchmark's)")
@click.option("--time", "time_limit", default="1h", show_default=True,
              help="the job's time limit, e.g. 30min, 12h")
@click.option("--signal-s", type=int, default=90, show_default=True,
              help="seconds before the limit that Slurm warns the job (checkpoint, requeue)")
@click.option("--max-requeues", type=int, default=10, show_default=True,
              help="requeue at most this many times after a time-limit warning")
@click.option("--partition", default=None, help="Slurm partition")
@click.option("--account", default=None, help="Slurm account")
@click.option("--seed", type=int, default=0, show_default=True, help="the run's seed")
@click.option("--venv", default=None, help="virtual environment to activate (its folder)")
@click.option("--module", "modules", multiple=True,
              help="a `module load` line (repeatable), e.g. --module cuda/12.4")
@click.option("--workdir", default=None,
              help="the testbed repository on the cluster (default: the submit folder)")
@click.option("--results", default=None, help="results folder (default results/NAME)")
@click.option("--output", "-o", type=click.Path(dir_okay=False), default=None,
              help="write the script here and make its results folder (default: stdout)")
@click.option("--json", "as_json", is_flag=True,
              help="with -o: what was written, as JSON (without -o the script is the output)")
def slurm_cmd(run_kind, calibration, time_limit, modules, output, as_json, gpus_per_node,
              **options) -> None:
    """Write an sbatch script for the same run on a Slurm cluster (train, ddp, mpi-bench,
    chainer-mpi, calibration, hpo): tasks per GPU, results under a name that resumes,
    requeue at the time-limit warning, its environment set up (--module, --venv)."""
    from real_runs.slurm import default_gpus, render_sbatch
    if calibration:
        if run_kind not in ("train", "calibration"):
            raise InputError("--calibration is a run of its own; drop --run", field="--run")
        run_kind = "calibration"
    job = _slurm_job(run_kind, time_limit, modules, gpus_per_node if gpus_per_node is not None
                     else default_gpus(run_kind, options["framework"]), options)
    script = render_sbatch(job)
    if not output:
        click.echo(script, nl=False)
        return
    from testbed.io.write import write_text
    target = check_writable_target(output, field="-o")
    logs, made = _results_folder(job)
    write_text(target, script, field="-o")
    if as_json:
        emit_json({"script": str(target), "results": logs, "results_made": made,
                   "name": job.job_name, "tasks_per_node": job.tasks_per_node,
                   "gpus_per_node": job.gpus})
        return
    click.echo(f"wrote {output}; results and job.log go to {logs}")
    click.echo(f"submit: sbatch {output}" if made else
               f"not on this machine: mkdir -p {logs} on the cluster, then sbatch {output}")


def _slurm_job(run_kind: str, time_limit: str, modules: tuple[str, ...], gpus: int,
               options: dict):
    from real_runs.slurm import SlurmJob
    return SlurmJob(run=run_kind, gpus_per_node=gpus, modules=tuple(modules),
                    time_s=parse_duration_s(time_limit, source="--time"), **options).validated()


def _results_folder(job) -> tuple[str, bool]:
    """Make the job's results folder (Slurm opens the log there before the script runs):
    a relative one under --workdir (or here, the submit folder), when that folder is on
    this machine; an absolute one when its parent is. The folder, and whether it exists."""
    folder = Path(job.results_dir)
    base = folder.parent if folder.is_absolute() else Path(job.workdir or ".")
    if not folder.is_absolute():
        folder = base / folder
    if not base.is_dir():
        return str(folder), False
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        from testbed.io.write import os_reason
        raise InputError(f"cannot make the results folder {folder}: {os_reason(exc)}",
                         field="--results") from None
    return str(folder), True
