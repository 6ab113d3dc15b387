"""``testbed run [SCENARIO]``: the main job for one scenario.

Prints the oracle's strategy comparison for the scenario's model and system (every
strategy at the scenario's global batch on 1 … its GPU count), then the simulated run
when the scenario describes failures.
"""

from __future__ import annotations

from pathlib import Path

import click

from testbed.cli.common import emit_json
from testbed.errors import InputError

REPO = Path(__file__).resolve().parents[2]
DEFAULT_SCENARIO = "scenarios/quickstart.yaml"


def resolve_scenario_path(path: str | None) -> Path:
    """A scenario path as given, else relative to the repository (for the default)."""
    p = Path(path or DEFAULT_SCENARIO)
    if p.exists():
        return p
    if not p.is_absolute() and (REPO / p).exists():
        return REPO / p
    raise InputError("no such scenario file", source=str(p))


def oracle_comparison(scenario) -> dict | None:
    """The oracle's ranked strategies for the scenario's model, system and batch."""
    if scenario.model is None or scenario.system is None:
        return None
    from testbed.oracle import predict, resolve_model
    from testbed.oracle.sweep import sweep
    from testbed.systems import load_system
    from testbed.units import parse_shape

    shape = scenario.model.input_shape
    if isinstance(shape, str):
        shape = parse_shape(shape, source=scenario.source, field="model.input_shape")
    elif shape is not None:
        shape = tuple(shape)
    model = resolve_model(scenario.model.name, shape)
    system = load_system(scenario.system)
    par = scenario.parallelism
    batch = par.global_batch if par else 256
    max_gpus = par.gpus if par else system.node.gpus_per_node
    result = sweep(model, system, [batch], max_gpus=max_gpus, group_size=par.group_size if par else None,
                   precision=scenario.model.precision, optimizer=scenario.model.optimizer)
    chosen = None
    if par is not None:
        chosen = predict(system, model, par.strategy, par.gpus, par.global_batch,
                         group_size=par.group_size, precision=scenario.model.precision,
                         optimizer=scenario.model.optimizer, micro_batches=par.micro_batches,
                         schedule=par.schedule or "1f1b")
    return {"model": model.name, "system": system.name, "global_batch": batch,
            "max_gpus": max_gpus, "result": result, "chosen": chosen}


@click.command("run")
@click.argument("scenario", required=False)
@click.option("-o", "--output", "out_dir", help="Report folder (default report/<scenario name>).")
@click.option("--no-report", is_flag=True, help="Only print the summary; write no report.")
@click.option("-r", "--replications", type=int, help="Override the scenario's replications.")
@click.option("--seed", type=int, help="Override the scenario's seed.")
@click.option("--quiet", is_flag=True, help="No progress bars.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def run_cmd(scenario, out_dir, no_report, replications, seed, quiet, as_json) -> None:
    """Run a scenario (default scenarios/quickstart.yaml): the oracle's strategy
    comparison, the simulated run with replications, and a report folder (HTML page,
    PNG plots, CSV)."""
    from testbed.progress import wanted
    from testbed.scenario import check_overrides, load_scenario

    check_overrides(replications, seed)
    path = resolve_scenario_path(scenario)
    sc = load_scenario(path)
    progress = wanted(quiet, as_json)
    comparison = oracle_comparison(sc)
    out: dict = {"scenario": sc.name, "source": str(path)}
    if comparison is not None:
        best = comparison["result"].best_per_strategy(comparison["global_batch"])
        out["oracle"] = {
            "model": comparison["model"], "system": comparison["system"],
            "global_batch": comparison["global_batch"],
            "best_per_strategy": [e.to_dict() for e in best],
            "chosen": comparison["chosen"].to_dict() if comparison["chosen"] else None,
        }
    simulation = None
    if sc.workload is not None:
        from testbed.cli.simulate import run_simulation
        simulation = run_simulation(sc, replications=replications, seed=seed, progress=progress)
        out["simulation"] = simulation
    files = None
    if not no_report:
        from testbed.report import build_report
        target = Path(out_dir) if out_dir else Path("report") / sc.name
        if out_dir is None:
            target.parent.mkdir(exist_ok=True)
        files = build_report(target, scenario=sc, oracle=comparison, simulation=simulation,
                             progress=progress)
        out["report"] = files.to_dict()
    if as_json:
        emit_json(out)
        return
    click.echo(f"scenario {sc.name}: {sc.description or ''}".rstrip(": "))
    if comparison is not None:
        _print_comparison(comparison)
    if simulation is not None:
        from testbed.cli.simulate import print_summary
        print_summary(simulation)
    if files is not None:
        click.echo(f"\nreport: {files.html} ({len(files.plots)} plots, {len(files.data)} CSV files)")


def _print_comparison(comparison: dict) -> None:
    from testbed.cli.common import table
    from testbed.cli.oracle import print_estimate
    from testbed.units import format_bytes, format_duration

    batch = comparison["global_batch"]
    best = comparison["result"].best_per_strategy(batch)
    click.echo(f"\nOracle: best configuration of each strategy for {comparison['model']} on "
               f"{comparison['system']}, global batch {batch}, up to {comparison['max_gpus']} GPUs")
    click.echo(table(["strategy", "gpus", "time/iter", "samples/s", "memory/GPU", "bottleneck"],
                     [(e.strategy, e.gpus, format_duration(e.time_per_iteration_s),
                       f"{e.samples_per_s:,.0f}", format_bytes(e.memory_per_gpu_bytes),
                       e.bottleneck) for e in best], align="lrrrrl"))
    if comparison["chosen"] is not None:
        click.echo("\nThe scenario's configuration:")
        print_estimate(comparison["chosen"])


def register(cli) -> None:
    cli.add_command(run_cmd)
