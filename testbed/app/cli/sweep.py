"""``testbed sweep SCENARIO --grid key=v1,v2 …``: many simulations, resumable, into SQLite.

Every grid point is the scenario with the grid's values applied; each is simulated
with R replications on a local process pool (``--executor local``, 2 workers by
default) or an MPI allocation (``mpiexec -n K python -m mpi4py.futures -m testbed
sweep … --executor mpi``). Finished points land in the results store (``--store``,
default ``results.db``) one transaction each; rerunning the same command skips them.
"""

from __future__ import annotations

import sys

import click

from testbed.app.cli.common import Names, emit_json, scenario_path, table
from testbed.app.progress import wanted
from testbed.errors import InputError
from testbed.resilience.spec import ENGINES
from testbed.units import format_duration


def _fmt_params(params: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in params.items()) or "(base scenario)"


#: Grid keys whose value the file's rules tie to another key (a fixed-interval policy;
#: exactly one of a job and a per-node MTBF), and the axis that would make the edit valid.
_TIED = {"checkpoint.interval": "checkpoint.every_steps=null",
         "checkpoint.every_steps": "checkpoint.interval=null",
         "failures.mtbf": "failures.node_mtbf=null",
         "failures.node_mtbf": "failures.mtbf=null"}


def _hint(key: str, data: dict, overrides: dict) -> str:
    """The grid axis that makes the edit valid: the fixed policy an interval needs, or
    the key the file gives that the grid's key excludes, set to null."""
    raw = data.get("checkpoint")
    ck: dict = raw if isinstance(raw, dict) else {}
    if key.startswith("checkpoint.") and "checkpoint.policy" not in overrides and \
            ck.get("policy", "fixed") != "fixed":
        return "checkpoint.policy=fixed"
    return _TIED[key]


def check_grid_like_file(path: str, grid) -> None:
    """Refuse a grid point that the same edit written in the file would make invalid.

    A grid value means what the same text in the file means, and is refused where the
    file would be: ``--grid checkpoint.interval=1h`` on a Daly scenario is refused (the
    file says ``'interval' applies to policy 'fixed' only``) instead of quietly turning
    the scenario into a fixed-interval one. The error names the grid option, the value
    and the key, and says which axis to add (``--grid checkpoint.policy=fixed``).
    """
    from testbed.app.sweep.grid import apply_implications, apply_overrides, expand, parse_grid
    from testbed.errors import ScenarioError
    from testbed.io.read import load_yaml
    from testbed.scenario.schema import scenario_from_dict

    axes = parse_grid(list(grid))
    tied = [a for a in axes if a.key in _TIED]
    if not tied:
        return
    doc = load_yaml(path)
    if not isinstance(doc.data, dict):
        return                                  # plan_sweep reports the file itself
    for overrides in expand(axes):
        data = apply_overrides(doc.data, overrides)
        if apply_implications(apply_overrides(doc.data, overrides), overrides) == data:
            continue
        try:
            scenario_from_dict(data, source=path, lines=doc.lines)
        except ScenarioError as exc:
            axis = next((a for a in tied if exc.field and (exc.field == a.key or
                         a.key.startswith(exc.field + "."))), tied[0])
            text = axis.texts[axis.values.index(overrides[axis.key])]
            raise InputError(f"{exc.message} (as in the scenario file; add "
                             f"--grid {_hint(axis.key, data, overrides)})",
                             source=f"--grid {axis.key}={text}", field=exc.field) from None


@click.command("sweep")
@click.argument("scenario")
@click.option("--grid", "grid", multiple=True, metavar="KEY.PATH=V1,V2,...",
              help="A grid axis: key path in the scenario and its values (repeatable).")
@click.option("--replications", "-r", type=int, help="Replications per point "
              "(default: the scenario's).")
@click.option("--seed", type=int, help="Base seed (default: the scenario's).")
@click.option("--engine", type=Names(ENGINES, "engine"), help="Simulator engine.")
@click.option("--executor", type=click.Choice(["local", "mpi"]), default="local",
              show_default=True, help="Local process pool or MPI (mpi4py.futures).")
@click.option("--workers", type=int, help="Local pool size (default 2).")
@click.option("--store", "store_path", default="results.db", show_default=True,
              help="SQLite results database.")
@click.option("--common-random-numbers", "common", is_flag=True,
              help="Same seed for every point (compare points with less noise).")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.option("--quiet", "-q", is_flag=True, help="No progress bar.")
def sweep_cmd(scenario, grid, replications, seed, engine, executor, workers, store_path,
              common, as_json, quiet) -> None:
    """Simulate SCENARIO (a file or a shipped scenario's name) at every point of the
    --grid cross product, into --store. A grid value is read and checked as the same
    text in the file would be."""
    from testbed.app.results_db import Store
    from testbed.app.sweep import aggregate, plan_sweep, run_sweep
    from testbed.app.sweep.executors import require_mpi_launch, worker_count
    from testbed.app.sweep.runner import SweepInterrupted

    if executor == "mpi":
        require_mpi_launch("sweep")
    elif workers is not None:
        worker_count(workers, 1)       # refused before the store exists
    path = str(scenario_path(scenario))
    check_grid_like_file(path, grid)
    plan = plan_sweep(path, grid, replications=replications, seed=seed, engine=engine,
                      common_seed=common)
    with Store(store_path) as store:
        try:
            stats = run_sweep(plan, store, executor=executor, workers=workers,
                              progress=wanted(quiet, as_json))
        except SweepInterrupted as stop:
            s = stop.stats
            click.echo(f"testbed: interrupted: {s.skipped + s.ran} of {s.points - s.infeasible}"
                       f" point(s) are stored in {store_path}; run the same command again to "
                       "resume", err=True)
            sys.exit(130)
        agg = aggregate(store, plan.sweep_id)
    total_rows = sum(r.finished.replications for r in agg if r.done)
    out = {"sweep_id": stats.sweep_id, "store": store_path, "points": stats.points,
           "skipped": stats.skipped, "ran": stats.ran, "infeasible": stats.infeasible,
           "older_code": stats.older_code, "in_flight_elsewhere": stats.elsewhere,
           "rows": total_rows, "elapsed_s": stats.elapsed_s,
           "points_per_s": stats.points_per_s, "workers": stats.workers, "executor": executor,
           "results": [r.to_dict() for r in agg]}
    if as_json:
        emit_json(out)
        return
    click.echo(f"sweep {stats.sweep_id} of {plan.name}: {stats.points} point(s), "
               f"{stats.skipped} already done, {stats.ran} run on {stats.workers} "
               f"{executor} worker(s) in {format_duration(stats.elapsed_s)}; "
               f"{total_rows} rows in {store_path}")
    if stats.older_code:
        click.echo(f"note: {stats.older_code} finished point(s) were computed by another "
                   "code version (see the code_version column); use a new --store to "
                   "recompute them", err=True)
    if stats.elsewhere:
        click.echo(f"{stats.elsewhere} point(s) were being computed by another sweep on "
                   f"{store_path} and were left to it; rerun later to collect them", err=True)
    if stats.infeasible:
        click.echo(f"{stats.infeasible} point(s) the oracle finds infeasible were skipped "
                   "(see `testbed report`)")
    ranked = sorted((r for r in agg if r.done),
                    key=lambda r: (r.finished.wall_time_s.mean, r.idx))
    show = ranked[:15]
    click.echo(table(["point", "ETTR", "95% CI", "wall time", "failures"],
                     [(_fmt_params(r.params), f"{100 * r.finished.ettr.mean:.2f}%",
                       f"[{100 * r.finished.ettr.ci95_low:.2f}, "
                       f"{100 * r.finished.ettr.ci95_high:.2f}]",
                       format_duration(r.finished.wall_time_s.mean),
                       f"{r.finished.failures.mean:.2f}") for r in show], align="lrrrr"))
    if len(ranked) > len(show):
        click.echo(f"… {len(ranked) - len(show)} more; `testbed report {store_path}` "
                   "for all of them")
