"""``testbed simulate SCENARIO``: failures and checkpoint-restart of a whole training run.

Replicates the scenario's job R times (fast exact path by default, or the
step-by-step SimPy engine) and prints the mean wall time, ETTR and where the time
went, each with a 95% confidence interval and the analytical estimate next to it.
``--events FILE`` writes replication 0's event log (SimPy engine, canonical JSONL).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import click

from testbed.cli.common import emit_json, progress_enabled, table
from testbed.errors import InputError
from testbed.units import format_duration


def _atomic_write(path: Path, write) -> None:
    """Write through a temporary file in the same folder, then rename: never half a file."""
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        raise InputError("folder does not exist", source=str(path), field="--events")
    fd, tmp = tempfile.mkstemp(dir=parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w") as fh:
            write(fh)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def run_simulation(scenario, replications: int | None = None, seed: int | None = None,
                   engine: str | None = None, events_path: str | None = None,
                   progress: bool = False) -> dict:
    """Resolve and simulate a loaded scenario; optionally write replication 0's event log."""
    from simulators.engine import run_simpy
    from simulators.run import simulate
    from testbed.events import write_events
    from testbed.resilience.spec import resolve

    spec = resolve(scenario)
    reps = replications or scenario.simulation.replications
    seed = scenario.simulation.seed if seed is None else seed
    engine = engine or scenario.simulation.engine
    bar = None
    if progress:
        from tqdm import tqdm
        bar = tqdm(total=reps, unit="rep", leave=False)
    try:
        summary = simulate(spec, reps, seed, engine, progress=bar.update if bar else None)
    finally:
        if bar is not None:
            bar.close()
    if events_path is not None:
        log: list[dict] = []
        run_simpy(spec, seed, 0, log)
        _atomic_write(Path(events_path), lambda fh: write_events(log, fh))
        summary["events_file"] = str(events_path)
    return summary


def print_summary(s: dict) -> None:
    """Readable report of a simulation summary."""
    wall = s["wall_time_s"]
    an = s["analytical"]
    click.echo(f"\nSimulation: {s['replications']} replication(s), seed {s['seed']}, "
               f"{s['engine']} engine, policy {s['policy']}")
    bits = [f"work {format_duration(s['work_s'])}", f"{s['nodes']} node(s)"]
    if s.get("job_mtbf_s"):
        bits.append(f"job MTBF {format_duration(s['job_mtbf_s'])}")
    if s.get("checkpoint_interval_s"):
        bits.append(f"checkpoint every {format_duration(s['checkpoint_interval_s'])} of compute, "
                    f"cost {format_duration(s['checkpoint_cost_s'])}")
    bits.append(f"restart {format_duration(s['restart_s'])}")
    click.echo("  " + ", ".join(bits))

    def ci(d, scale=1.0, fmt=format_duration):
        return (fmt(d["mean"] * scale), f"[{fmt(d['ci95_low'] * scale)}, "
                f"{fmt(d['ci95_high'] * scale)}]")

    rows = [("wall time", *ci(wall),
             format_duration(an["wall_time_s"]) if an.get("wall_time_s") else "-")]
    pct = lambda v: f"{100 * v:.2f}%"  # noqa: E731
    rows.append(("ETTR", *ci(s["ettr"], fmt=pct), pct(an["ettr"]) if an.get("ettr") else "-"))
    rows.append(("failures", f"{s['failures']['mean']:.2f}",
                 f"[{s['failures']['ci95_low']:.2f}, {s['failures']['ci95_high']:.2f}]", "-"))
    click.echo(table(["figure", "mean", "95% CI", "analytical"], rows, align="lrrr"))
    b = s["breakdown_s"]
    total = sum(b.values()) or 1.0
    click.echo(table(["where the time went", "mean", "share"],
                     [(k.replace("_", " "), format_duration(v), f"{100 * v / total:.2f}%")
                      for k, v in b.items()], align="lrr"))
    if s["failures_by_cause"] and len(s["failures_by_cause"]) > 1:
        top = sorted(s["failures_by_cause"].items(), key=lambda kv: -kv[1])
        click.echo(table(["failures by cause", "mean per run"],
                         [(k, f"{v:.2f}") for k, v in top], align="lr"))
    if s.get("events_file"):
        click.echo(f"event log of replication 0: {s['events_file']}")


@click.command("simulate")
@click.argument("scenario")
@click.option("--replications", "-r", type=int, help="Replications (default: the scenario's).")
@click.option("--seed", type=int, help="Run seed (default: the scenario's).")
@click.option("--engine", type=click.Choice(["fast", "simpy"]),
              help="fast exact path (default) or the step-by-step SimPy engine.")
@click.option("--events", "events_path", help="Write replication 0's event log (JSONL) here.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.option("--quiet", "-q", is_flag=True, help="No progress bar.")
def simulate_cmd(scenario, replications, seed, engine, events_path, as_json, quiet) -> None:
    """Simulate failures and checkpoint-restart of a training run described by SCENARIO."""
    from testbed.scenario import check_overrides, load_scenario

    check_overrides(replications, seed)
    sc = load_scenario(scenario)
    summary = run_simulation(sc, replications, seed, engine, events_path,
                             progress=progress_enabled(quiet, as_json))
    if as_json:
        emit_json(summary)
        return
    click.echo(f"scenario {sc.name}" + (f": {sc.description}" if sc.description else ""))
    print_summary(summary)


def register(cli) -> None:
    cli.add_command(simulate_cmd)
