"""``testbed study …``: the studies the testbed is built from, rerun as commands.

* ``checkpoint``: checkpoint formats, sizes, save/load against ``dd``, writers 1…N,
  the oracle beyond this machine, deterministic restart;
* ``precision``: reduced-precision inputs against baselines, with bootstrap intervals
  and paired tests;
* ``oracle``: the oracle's accuracy per strategy and model against measured records
  (ParaDL's ABCI runs or the testbed's own), fitted and held-out rows apart;
* ``hpo-scaling``: HPO makespan, speed-up and efficiency against nodes and GPUs per
  trial, simulated through the sweep machinery and measured on local workers.

Each prints its tables and its claims with a verdict — supported, contradicted or
undecided by the data — and with ``-o DIR`` writes PNG plots and CSV/JSON files;
``--quick`` (checkpoint, precision) is a small version that runs in seconds to a
minute. Frameworks are imported by the child processes, never when the CLI loads.
"""

from __future__ import annotations

from dataclasses import replace

import click

from testbed.app.progress import Progress, wanted
from testbed.errors import InputError
from testbed.units import parse_duration_s


@click.group("study")
def study_group() -> None:
    """Rerun a study of the testbed: its table, figures and the verdict on its claim."""


def names(value: str | None, option: str) -> tuple[str, ...] | None:
    """A comma list of names (None when the option was not given)."""
    if value is None:
        return None
    out = tuple(dict.fromkeys(v.strip() for v in value.split(",") if v.strip()))
    if not out:
        raise InputError("give at least one name", field=option)
    return out


def counts(value: str | None, option: str, *, low: int = 1) -> tuple[int, ...] | None:
    """A comma list of integers ≥ ``low`` (None when the option was not given)."""
    items = names(value, option)
    if items is None:
        return None
    try:
        out = tuple(sorted({int(v) for v in items}))
    except ValueError:
        raise InputError(f"must be whole numbers separated by commas, got {value!r}",
                         field=option) from None
    if out[0] < low:
        raise InputError(f"must be ≥ {low}, got {out[0]}", field=option)
    return out


def _positive_float(value: float | None, option: str) -> float | None:
    if value is not None and not value > 0:
        raise InputError(f"must be > 0, got {value}", field=option)
    return value


def _checkpoint_options(o: dict):
    from testbed.app.study.ckpt_options import QUICK, CheckpointOptions, validate
    base = QUICK if o["quick"] else CheckpointOptions()
    given = {
        "frameworks": names(o["frameworks"], "--frameworks"),
        "models": names(o["models"], "--models"),
        "formats": names(o["formats"], "--formats"),
        "repeats": o["repeats"], "writers": counts(o["writers"], "--writers"),
        "modes": names(o["modes"], "--modes"),
        "scaling_frameworks": names(o["scaling_frameworks"], "--scaling-frameworks"),
        "scaling_model": o["scaling_model"],
        "restart_models": names(o["restart_models"], "--restart-models"),
        "restart_steps": o["restart_steps"], "restart_k": o["restart_k"],
        "system": o["system"], "gpus": counts(o["gpus"], "--gpus"),
        "interval_s": (parse_duration_s(o["interval"], source="--interval")
                       if o["interval"] is not None else None),
        "bound_factor": _positive_float(o["bound_factor"], "--bound-factor"),
        "min_speedup": _positive_float(o["min_speedup"], "--min-speedup"),
        "ckpt_dir": o["ckpt_dir"], "seed": o["seed"]}
    opts = replace(base, **{k: v for k, v in given.items() if v is not None})
    if o["omit"] is not None:
        opts = replace(opts, omit=None if o["omit"] == "none" else o["omit"])
    if o["fresh_interpreter"]:
        opts = replace(opts, fresh_interpreter=True)
    return validate(opts)


@study_group.command("checkpoint", short_help="The checkpointing study: formats, sizes, "
                     "dd, writers, restart.")
@click.option("--quick", is_flag=True,
              help="Small run for tests (the harness MLP, 1 repetition, 1–2 writers; about a "
                   "minute): sizes, claims and plots, but no checkpoint of real size.")
@click.option("--frameworks", metavar="LIST", help="Comma list of torch, tensorflow, chainer "
              "(default all three).")
@click.option("--models", metavar="LIST", help="Comma list of resnet50 (25.6 M parameters), mlp, "
              "cnn, resnet, resnet18 (default all).")
@click.option("--formats", metavar="LIST", help="Only these formats (e.g. torch.save,save_npz; "
              "default every format of each framework).")
@click.option("--repeats", type=int, help="Repetitions of every save and load (default 3; the "
              "fastest is compared with dd's fastest).")
@click.option("--writers", metavar="LIST", help="Writer process counts to measure together "
              "(default 1,2,4,8).")
@click.option("--modes", metavar="LIST", help="sharded (each writer saves 1/N), all (each saves "
              "a whole copy); default both.")
@click.option("--scaling-frameworks", metavar="LIST", help="Frameworks of the writers "
              "measurement (default all three).")
@click.option("--scaling-model", metavar="MODEL", help="Model whose state the writers save "
              "(default resnet50).")
@click.option("--restart-models", metavar="LIST", help="Harness models of the restart check "
              "(default mlp,cnn,resnet,resnet18).")
@click.option("--restart-steps", type=int, help="Steps of each restart run (default 8).")
@click.option("--restart-k", type=int, help="Step of the checkpoint the restore starts from "
              "(default 3).")
@click.option("--omit", type=click.Choice(["rng", "optimizer", "data", "none"]),
              help="State one extra restore leaves out, to show the check has teeth "
                   "(default rng; none: skip).")
@click.option("--fresh-interpreter", is_flag=True, help="Restore in freshly spawned "
              "interpreters instead of processes forked from a framework-importing zygote.")
@click.option("--system", metavar="NAME|FILE", help="System profile of the projection beyond "
              "this machine (default abci-v100).")
@click.option("--gpus", metavar="LIST", help="GPU counts of the projection (default powers of "
              "4 up to the system's size).")
@click.option("--interval", metavar="DURATION", help="Checkpoint interval the projected save "
              "is a share of (default 30min).")
@click.option("--bound-factor", type=float, help="A durable save this many times dd of the "
              "same bytes counts as a framework bottleneck (default 2).")
@click.option("--min-speedup", type=float, help="Speed-up of a sharded save that counts as "
              "sharding helping (default 1.2).")
@click.option("--ckpt-dir", type=click.Path(file_okay=False), help="Folder on the storage to "
              "test (default the system's temporary folder); a subfolder is made and removed.")
@click.option("--seed", type=int, help="Seed of the models, payloads and restart runs "
              "(default 0).")
@click.option("-o", "--output", "out_dir", type=click.Path(file_okay=False),
              help="Write plots (PNG) and data (CSV, JSON) to this folder.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.option("--quiet", "-q", is_flag=True, help="No progress bar.")
def checkpoint_cmd(**o) -> None:
    """Checkpoint formats, sizes, save/load vs dd, writers 1…N, restart; verdicts."""
    from testbed.app.study.checkpoint import run_checkpoint_study, steps_of
    opts = _checkpoint_options(o)
    if o["out_dir"]:
        from testbed.app.report.common import check_report_target
        check_report_target(o["out_dir"])
    with Progress(steps_of(opts), unit="step", desc="study checkpoint",
                  enabled=wanted(o["quiet"], o["as_json"])) as bar:
        study = run_checkpoint_study(opts, progress=lambda _what: bar.update())
    files = None
    if o["out_dir"]:
        from testbed.app.study.outputs import write_checkpoint_outputs
        files = write_checkpoint_outputs(study, o["out_dir"])
    _emit_checkpoint(study, files, o["as_json"])


def _emit_checkpoint(study, files, as_json: bool) -> None:
    from testbed.app.cli.common import emit_json, table
    from testbed.app.study import ckpt_tables as t
    if as_json:
        emit_json({**study.to_dict(), "outputs": files.to_dict() if files else None})
        return
    parts = [("Checkpoint formats (fastest of the repetitions; durable = save + the store's "
              "commit)", t.formats_table(study)),
             ("Writers saving at once on this machine", t.scaling_table(study)),
             ("Beyond this machine: the oracle's checkpoint write time (predicted)",
              t.oracle_table(study)),
             ("Deterministic restart: straight through vs checkpoint at k + restore in a new "
              "process", t.restart_table(study))]
    for title, (headers, rows, align) in parts:
        if rows:
            click.echo(f"{title}\n{table(headers, rows, align)}")
            if title.startswith("Checkpoint formats"):
                click.echo(t.FORMATS_NOTE)
            click.echo()
    click.echo("Bottlenecks")
    for f in study.findings:
        click.echo(f"  {f.text}")
    click.echo("\nClaims")
    click.echo("\n".join(f"  {line}" for line in t.verdict_lines(study.claims)))
    if study.advice:
        click.echo("\nAdvice")
        click.echo("\n".join(f"  - {a}" for a in study.advice))
    if files:
        click.echo(f"\noutputs: {files.out_dir} ({len(files.plots)} plots, "
                   f"{len(files.data)} data files)")


def _precision_options(o: dict):
    from testbed.app.study.precision import QUICK, PrecisionOptions, validate
    base = QUICK if o["quick"] else PrecisionOptions()
    given = {"tasks": names(o["tasks"], "--tasks"),
             "precisions": names(o["precisions"], "--precisions"),
             "claim_precisions": names(o["claim_precisions"], "--claim-precisions"),
             "seeds": o["seeds"], "framework": o["framework"], "rounding": o["rounding"],
             "per_feature": None if o["scale"] is None else o["scale"] == "per-feature",
             "tolerance_pp": o["tolerance"], "skill_margin_pp": o["skill_margin"],
             "resamples": o["resamples"], "permutations": o["permutations"],
             "seed": o["seed"]}
    opts = replace(base, **{k: v for k, v in given.items() if v is not None})
    if o["no_curves"]:
        opts = replace(opts, curves=False)
    if o["no_sensitivity"]:
        opts = replace(opts, sensitivity=False)
    return validate(opts)


@study_group.command("precision", short_help="The low-precision input study: baselines, "
                     "intervals, verdicts.")
@click.option("--quick", is_flag=True, help="Small run for tests: fp16, int8, int2 against "
              "fp64, 2 seeds, fewer resamples (seconds).")
@click.option("--tasks", metavar="LIST", help="Comma list of hurricanes (monthly hurricane "
              "counts), digits (scikit-learn's bundled 8×8 digits), breast-cancer "
              "(scikit-learn's bundled tumour measurements); default all three.")
@click.option("--precisions", metavar="LIST", help="Input precisions (fp64, fp32, fp16, bf16, "
              "intK, intA..intB, mantM; default fp32,fp16,bf16,int8,int6,int4,int3,int2).")
@click.option("--claim-precisions", metavar="LIST", help="Precisions the claim is about (default "
              "those of fp16, bf16, int8 that run).")
@click.option("--seeds", type=int, help="Seeds 0…N−1, each one network per precision (default "
              "10; 2 with --quick).")
@click.option("--framework", type=click.Choice(["torch", "tensorflow", "chainer"]),
              help="Framework that trains the networks (default torch).")
@click.option("--rounding", type=click.Choice(["nearest", "truncate", "stochastic"]),
              help="Rounding of intK quantisation (default nearest).")
@click.option("--scale", type=click.Choice(["per-feature", "global"]),
              help="Scale of intK quantisation (default per-feature).")
@click.option("--tolerance", type=float, help="The claim's tolerance: accuracy lost, in "
              "percentage points (default 2).")
@click.option("--skill-margin", type=float, help="Percentage points the fp64 network's "
              "interval must clear over its best baseline to count as skill (default 0).")
@click.option("--resamples", type=int, help="Bootstrap resamples per interval (default 2000).")
@click.option("--permutations", type=int, help="Sign flips of the permutation test (default "
              "5000; exact when the blocks are few).")
@click.option("--no-curves", is_flag=True, help="Skip the learning curves.")
@click.option("--no-sensitivity", is_flag=True, help="Skip the hurricane network trained "
              "without the years before 1979.")
@click.option("--seed", type=int, help="Seed of the bootstrap and permutation draws "
              "(default 0).")
@click.option("-o", "--output", "out_dir", type=click.Path(file_okay=False),
              help="Write plots (PNG) and data (CSV, JSON) to this folder.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.option("--quiet", "-q", is_flag=True, help="No progress bar.")
def precision_cmd(**o) -> None:
    """Low-precision inputs vs baselines: intervals, paired tests, curves; verdicts."""
    from testbed.app.study.precision import run_precision_study, steps_of
    opts = _precision_options(o)
    if o["out_dir"]:
        from testbed.app.report.common import check_report_target
        check_report_target(o["out_dir"])
    with Progress(steps_of(opts), unit="net", desc="study precision",
                  enabled=wanted(o["quiet"], o["as_json"])) as bar:
        study = run_precision_study(opts, progress=lambda _p, _s: bar.update())
    files = None
    if o["out_dir"]:
        from testbed.app.study.outputs import write_precision_outputs
        files = write_precision_outputs(study, o["out_dir"])
    _emit_precision(study, files, o["as_json"])


def _emit_precision(study, files, as_json: bool) -> None:
    from testbed.app.cli.common import emit_json, table
    from testbed.app.study import prec_tables as t
    from testbed.app.study.ckpt_tables import verdict_lines
    if as_json:
        emit_json({**study.to_dict(), "outputs": files.to_dict() if files else None})
        return
    for task in study.tasks:
        click.echo("\n".join(task.description))
        click.echo(table(*t.baselines_table(task)))
        click.echo()
        click.echo(table(*t.precisions_table(task, study.tolerance_pp)))
        if task.skill_pp is not None:
            verdict = "skill" if task.has_skill else "no skill"
            click.echo(f"network (fp64) − {task.best_baseline}: {t.change(task.skill_pp)} pp, "
                       f"p = {t.p_value(task.skill_pp)} → {verdict}")
        for s in task.sensitivity:
            click.echo(f"sensitivity: {s.name} ({s.split}): accuracy {t.pct(s.accuracy)} %, "
                       f"change {t.change(s.change_pp)} pp, p = {t.p_value(s.change_pp)}")
        click.echo("what the data cannot show:")
        click.echo("\n".join(f"  - {d}" for d in task.disclosures))
        click.echo()
    click.echo("Claims (* in the tables: the precisions the claim is about)")
    click.echo("\n".join(f"  {line}" for line in verdict_lines(study.claims)))
    if files:
        click.echo(f"\noutputs: {files.out_dir} ({len(files.plots)} plots, "
                   f"{len(files.data)} data files)")


@study_group.command("oracle", short_help="The oracle study: accuracy per strategy and model "
                     "against measured runs.")
@click.argument("records", nargs=-1, type=click.Path(dir_okay=False))
@click.option("--profile", metavar="NAME|FILE", help="Calibrated profile that predicts the "
              "records (default abci-v100 for ParaDL records; required for others, e.g. "
              "traces/measurements/vm/profile.yaml).")
@click.option("--holdout", type=click.Choice(["by-gpus", "loo", "none"]), default="by-gpus",
              show_default=True, help="How fitted ParaDL runs are re-predicted by a refit "
              "that has not seen them: by-gpus (fit ≤ --max-fit-gpus, predict the larger "
              "runs), loo (leave each run out; about a minute), none (the profile as is).")
@click.option("--max-fit-gpus", type=int, default=8, show_default=True,
              help="by-gpus: the largest run (GPUs) the refit sees.")
@click.option("--target", type=float, default=0.8674, show_default=True,
              help="The claim's average accuracy (ParaDL's 86.74%, Kahira et al. HPDC'21).")
@click.option("-o", "--output", "out_dir", type=click.Path(file_okay=False),
              help="Write plots (PNG) and data (CSV, JSON) to this folder.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def oracle_cmd(records, profile, holdout, max_fit_gpus, target, out_dir, as_json) -> None:
    """Score the oracle against measured RECORDS (ParaDL CSV or .jsonl; default the
    shipped ABCI runs) per strategy and model, fitted and held out apart; verdict."""
    from testbed.app.cli.verify import simulate_replay
    from testbed.app.study.oracle import OracleOptions, run_oracle_study
    if not records:
        records = (_default_paradl_csv(),)
    opts = OracleOptions(records=tuple(records), profile=profile, holdout=holdout,
                         max_fit_gpus=max_fit_gpus, target=target)
    if out_dir:
        from testbed.app.report.common import check_report_target
        check_report_target(out_dir)
    study = run_oracle_study(opts, simulate=simulate_replay)
    files = None
    if out_dir:
        from testbed.app.study.oracle_tables import write_oracle_outputs
        files = write_oracle_outputs(study, out_dir)
    _emit_oracle(study, files, as_json)


def _default_paradl_csv() -> str:
    """The shipped ABCI/ParaDL runs (``../shared/data/abci-paradl/calibration.csv``)."""
    from pathlib import Path
    repo = Path(__file__).resolve().parents[3]
    path = repo.parent / "shared" / "data" / "abci-paradl" / "calibration.csv"
    if not path.is_file():
        raise InputError("give the record files or ParaDL CSV to score (the ABCI runs of "
                         "../shared/data/abci-paradl are not at hand)", field="RECORDS")
    return str(path)


def _emit_oracle(study, files, as_json: bool) -> None:
    from testbed.app.cli.common import emit_json, table
    from testbed.app.study import oracle_tables as t
    from testbed.app.study.ckpt_tables import verdict_lines
    if as_json:
        emit_json({**study.to_dict(), "outputs": files.to_dict() if files else None})
        return
    click.echo(f"Oracle vs measurement ({study.mode} mode): profile {study.profile}, "
               f"{study.records} record(s), {len(study.rows)} prediction(s), "
               f"{study.not_covered} not covered")
    click.echo(f"fit set: {study.fit_set}; hold-out: {study.holdout}")
    click.echo("metric: ParaDL's accuracy = mean of min(pred, meas)/max(pred, meas); "
               "1−|err| = mean of 1 − |pred − meas|/meas\n")
    click.echo("Training steps per strategy and model")
    click.echo(table(*t.accuracy_table(study)))
    other = t.other_table(study)
    if other[1]:
        click.echo("\nOther quantities the profile predicts")
        click.echo(table(*other))
    worst = t.worst_table(study)
    if worst[1]:
        click.echo("\nWorst held-out predictions")
        click.echo(table(*worst))
    click.echo("\nClaim")
    click.echo("\n".join(f"  {line}" for line in verdict_lines(study.claims)))
    if study.notes:
        click.echo("\n".join(f"note: {n}" for n in study.notes))
    if files:
        click.echo(f"\noutputs: {files.out_dir} ({len(files.plots)} plots, "
                   f"{len(files.data)} data files)")


@study_group.command("hpo-scaling", short_help="The HPO scaling study: makespan, speed-up, "
                     "efficiency vs nodes.")
@click.argument("scenario", required=False)
@click.option("--nodes", metavar="LIST", help="Node counts to simulate (default 1,2,4,8,16).")
@click.option("--gpus-per-trial", metavar="LIST", help="GPUs each trial holds (default 1, 2, "
              "4, 8 up to the GPUs per node).")
@click.option("--replications", "-r", type=int, help="Replications per point (default 1; "
              "more for scenarios with sampled failures).")
@click.option("--seed", type=int, help="Seed (default hpo.seed, else simulation.seed).")
@click.option("--min-efficiency", type=float, help="Efficiency that counts as near-linear "
              "(default 0.8).")
@click.option("--no-measure", is_flag=True, help="Skip the real trials (simulation only, "
              "about a second).")
@click.option("--executor", type=click.Choice(["local", "mpi"]), default="local",
              show_default=True, help="Workers of the real sweeps: a local process pool, or "
              "MPI ranks (the study starts mpiexec -n W+1 python -m mpi4py.futures).")
@click.option("--workers", metavar="LIST", help="Worker counts of the real sweeps "
              "(default 1,2).")
@click.option("--measure-trials", type=int, help="Equal real trials per measured sweep "
              "(default 4).")
@click.option("--measure-epochs", type=int, help="Epochs of each real trial (default 3).")
@click.option("-o", "--output", "out_dir", type=click.Path(file_okay=False),
              help="Write the plot (PNG) and data (CSV, JSON) to this folder.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.option("--quiet", "-q", is_flag=True, help="No progress bar.")
def hpo_scaling_cmd(scenario, nodes, gpus_per_trial, replications, seed, min_efficiency,
                    no_measure, executor, workers, measure_trials, measure_epochs, out_dir,
                    as_json, quiet) -> None:
    """Makespan, speed-up and efficiency of SCENARIO's HPO sweep (default
    scenarios/hpo-cifar-grid.yaml) vs nodes and GPUs per trial: simulated through the
    sweep machinery, measured with real trials on 1…W local workers; verdict."""
    from testbed.app.study.hpo_scaling import (
        DEFAULT_SCENARIO,
        HpoScalingOptions,
        run_hpo_scaling_study,
        steps_of,
    )
    from testbed.scenario.schema import check_overrides
    check_overrides(None, seed)
    path = scenario or _default_hpo_scenario(DEFAULT_SCENARIO)
    given = {"nodes": counts(nodes, "--nodes"),
             "gpus_per_trial": counts(gpus_per_trial, "--gpus-per-trial"),
             "replications": replications, "seed": seed,
             "min_efficiency": min_efficiency, "workers": counts(workers, "--workers"),
             "measure_trials": measure_trials, "measure_epochs": measure_epochs}
    opts = replace(HpoScalingOptions(scenario=str(path), measure=not no_measure,
                                     executor=executor),
                   **{k: v for k, v in given.items() if v is not None})
    if out_dir:
        from testbed.app.report.common import check_report_target
        check_report_target(out_dir)
    with Progress(steps_of(opts), unit="part", desc="study hpo-scaling",
                  enabled=wanted(quiet, as_json)) as bar:
        study = run_hpo_scaling_study(opts, progress=lambda _what: bar.update())
    files = None
    if out_dir:
        from testbed.app.study.hpo_report import write_hpo_scaling_outputs
        files = write_hpo_scaling_outputs(study, out_dir)
    if as_json:
        from testbed.app.cli.common import emit_json
        emit_json({**study.to_dict(), "outputs": files.to_dict() if files else None})
        return
    from testbed.app.study.hpo_report import summary_text
    click.echo(summary_text(study), nl=False)
    if files:
        click.echo(f"\noutputs: {files.out_dir} ({len(files.plots)} plots, "
                   f"{len(files.data)} data files)")


def _default_hpo_scenario(relative: str) -> str:
    """The repository's HPO scenario (from the working folder, else the checkout)."""
    from pathlib import Path
    if Path(relative).is_file():
        return relative
    repo_path = Path(__file__).resolve().parents[3] / relative
    if not repo_path.is_file():
        raise InputError(f"give an HPO scenario ({relative} is not at hand)", field="SCENARIO")
    return str(repo_path)
