"""``testbed run [SCENARIO]``: the main job for one scenario.

Prints the oracle's strategy comparison for the scenario's model and system (every
strategy at the scenario's global batch on 1 … its GPU count), then the simulated run
when the scenario describes a workload, and writes the report folder (HTML page, PNG
plots, CSV) to ``report/<scenario name>`` or ``-o DIR``. Without SCENARIO it runs the
built-in quickstart (package data, so it works from an installed wheel too); a bare
name (``quickstart``) is a built-in scenario.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

import click

from testbed.app.cli.common import emit_json, scenario_path, table
from testbed.errors import InputError
from testbed.io.write import os_reason
from testbed.units import format_bytes, format_duration

if TYPE_CHECKING:      # the resolver (and with it the schema and numpy) loads when a run starts
    from testbed.app.resolve import OracleComparison

DEFAULT_SCENARIO = "quickstart"
#: Folder that holds one report folder per scenario name.
REPORTS_DIR = Path("report")


def resolve_scenario_path(path: str | None) -> Path:
    """A scenario given as a path, or the name of a shipped scenario (default: the
    quickstart)."""
    return scenario_path(path or DEFAULT_SCENARIO)


def report_slug(name: str, source: str | None) -> str:
    """The scenario name as one safe folder name under ``report/`` (never a path)."""
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-.")
    if not slug:
        raise InputError(f"name {name!r} gives no usable report folder name; use letters, "
                         "digits, '.', '_' or '-' (or pass -o DIR)", source=source, field="name")
    return slug


def print_comparison(c: OracleComparison) -> None:
    from testbed.app.cli.oracle import print_estimate

    click.echo(f"\nOracle: best configuration of each strategy for {c.model} on "
               f"{c.system}, global batch {c.global_batch}, up to {c.max_gpus} GPUs")
    click.echo(table(["strategy", "gpus", "time/iter", "samples/s", "memory/GPU", "bottleneck"],
                     [(e.strategy, e.gpus, format_duration(e.iteration_s),
                       f"{e.samples_per_s:,.0f}", format_bytes(e.memory_per_gpu_bytes or 0),
                       e.bottleneck) for e in c.best_per_strategy], align="lrrrrl"))
    if c.chosen is not None:
        click.echo("\nThe scenario's configuration:")
        print_estimate(c.chosen)


def print_input_precision(c) -> None:
    """The scenario's input precision against fp32 inputs, side by side."""
    a, b = c.scenario, c.baseline
    click.echo(f"\nInput precision {a.input_precision} against {b.input_precision} "
               "(same seed and replications):")
    click.echo(table(["", a.input_precision, b.input_precision], [
        ("bytes per sample", format_bytes(a.input_bytes_per_sample),
         format_bytes(b.input_bytes_per_sample)),
        ("dataset", format_bytes(a.dataset_bytes), format_bytes(b.dataset_bytes)),
        ("time per iteration", format_duration(a.time_per_iteration_s),
         format_duration(b.time_per_iteration_s)),
        ("  exposed input I/O", format_duration(a.io_s), format_duration(b.io_s)),
        ("bottleneck", a.bottleneck, b.bottleneck),
        ("simulated wall time", format_duration(a.wall_time_s), format_duration(b.wall_time_s)),
    ], align="lrr"))
    click.echo(f"speed-up of {a.input_precision} inputs: {c.speedup:.2f}x")


def _report_target(sc, out_dir: str | None) -> Path:
    """``-o DIR`` or ``report/<scenario name>``, checked (and ``report/`` made) now."""
    from testbed.app.report.common import check_report_target

    target = Path(out_dir) if out_dir else REPORTS_DIR / report_slug(sc.name, sc.source)
    if out_dir is None and not REPORTS_DIR.exists():
        try:
            here = Path.cwd()
        except OSError:
            raise InputError("the current folder no longer exists (pass -o DIR)",
                             field="-o") from None
        check_report_target(here / REPORTS_DIR)      # the current folder
        try:
            REPORTS_DIR.mkdir()
        except OSError as exc:
            raise InputError(f"cannot make the report folder: {os_reason(exc)} (pass "
                             "-o DIR or --no-report)", source=str(REPORTS_DIR.resolve()),
                             field="-o") from None
    check_report_target(target)
    return target


def _run_hpo(sc, path: Path, out_dir: str | None, no_report: bool, seed: int | None,
             as_json: bool) -> None:
    """An HPO scenario: its schedule simulated on the cluster (``testbed hpo simulate``)
    and the HPO report (``testbed hpo report``) in the report folder."""
    from simulators.hpo.engine import simulate_hpo
    from testbed.app.cli.hpo import echo_summary, plan_title
    from testbed.app.report.hpo_report import write_hpo_report
    from testbed.app.resolve import hpo_plan

    target = None if no_report else _report_target(sc, out_dir)
    plan = hpo_plan(sc, seed=seed)
    run = simulate_hpo(plan)
    files = write_hpo_report(str(path), str(target), seed=seed) if target is not None else None
    out = {"scenario": sc.name, "kind": "hpo", "seed": plan.seed,
           "scheduler": plan.spec.scheduler, "search": plan.spec.search,
           "metric": plan.spec.metric.name, "mode": plan.spec.metric.mode,
           **run.summary.to_dict(), "report": files.to_dict() if files else None}
    if as_json:
        emit_json(out)
        return
    click.echo(f"scenario {sc.name}: {sc.description or ''}".rstrip(": "))
    echo_summary(plan_title(sc, plan), out)
    if files is not None:
        click.echo(f"\nreport: {files.html} ({len(files.plots)} plots, {len(files.data)} data "
                   "files)")


@click.command("run")
@click.argument("scenario", required=False)
@click.option("-o", "--output", "out_dir", help="Report folder (default report/<scenario name>).")
@click.option("--no-report", is_flag=True, help="Only print the summary; write no report.")
@click.option("-r", "--replications", type=int, help="Override the scenario's replications.")
@click.option("--seed", type=int, help="Override the scenario's seed.")
@click.option("-q", "--quiet", is_flag=True, help="No progress bars.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def run_cmd(scenario, out_dir, no_report, replications, seed, quiet, as_json) -> None:
    """Run a scenario (default: the built-in quickstart): the oracle's strategy
    comparison, the simulated run with replications, and a report folder (HTML page,
    PNG plots, CSV). SCENARIO is a file or the name of a shipped scenario (`testbed
    scenarios` lists them); an HPO scenario's schedule is simulated and reported."""
    from testbed.app.cli.simulate import print_summary
    from testbed.app.progress import wanted
    from testbed.app.report import build_report
    from testbed.app.sweep.studies import run_scenario
    from testbed.scenario.schema import check_overrides, load_scenario

    check_overrides(replications, seed)
    path = resolve_scenario_path(scenario)
    sc = load_scenario(path)
    if sc.hpo is not None and sc.workload is None:
        if replications is not None:
            raise InputError("an HPO scenario has no replications (its schedule is one "
                             "simulation per seed)", source="--replications")
        _run_hpo(sc, path, out_dir, no_report, seed, as_json)
        return
    target = None if no_report else _report_target(sc, out_dir)
    run = run_scenario(sc, replications=replications, seed=seed, study=not no_report,
                       events=not no_report, progress=wanted(quiet, as_json))
    files = build_report(target, run) if target is not None else None
    if as_json:
        out = run.to_dict()
        out["report"] = files.to_dict() if files else None
        emit_json(out)
        return
    click.echo(f"scenario {sc.name}: {sc.description or ''}".rstrip(": "))
    if run.comparison is not None:
        print_comparison(run.comparison)
    if run.summary is not None:
        print_summary(run.summary)
    if run.input_precision is not None:
        print_input_precision(run.input_precision)
    if files is not None:
        click.echo(f"\nreport: {files.html} ({len(files.plots)} plots, {len(files.data)} data "
                   "files)")
