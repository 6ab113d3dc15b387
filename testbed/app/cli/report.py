"""``testbed report results.db -o report/`` (a sweep) or ``testbed report SCENARIO.yaml``.

A results database gives the sweep report (ETTR across the grid, where the time goes,
``points.csv``); a scenario file gives the scenario report that ``testbed run`` writes
(where the time goes, ETTR vs checkpoint interval with the Young/Daly optima, a
timeline of one replication, the oracle's strategy comparison). Either way the
folder holds ``index.html``, PNG plots and CSV files.
"""

from __future__ import annotations

from pathlib import Path

import click

from testbed.app.cli.common import emit_json, scenario_path
from testbed.app.progress import wanted
from testbed.errors import InputError


@click.command("report")
@click.argument("source")
@click.option("-o", "--output", "out_dir", default="report", show_default=True,
              help="Folder to write (created; its parent must exist).")
@click.option("--sweep", "sweep_id", help="Sweep id or prefix (default: the latest).")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.option("--quiet", "-q", is_flag=True, help="No progress bar.")
def report_cmd(source, out_dir, sweep_id, as_json, quiet) -> None:
    """Write an HTML report (PNG plots, CSV) of a results database or a scenario (a file
    or a shipped scenario's name; an HPO scenario gets the HPO report)."""
    from testbed.app.report import build_report, report_from_store
    from testbed.app.report.common import check_report_target
    from testbed.app.sweep.studies import run_scenario
    from testbed.scenario.schema import load_scenario

    path = Path(source)
    if not path.exists() and not path.suffix:
        path = scenario_path(source)           # a shipped scenario by name
    if not path.is_file():
        raise InputError("no such file", source=source)
    if path.suffix.lower() in (".yaml", ".yml"):
        if sweep_id is not None:
            raise InputError("--sweep applies to a results database", source="--sweep")
        sc = load_scenario(path)
        check_report_target(out_dir)
        if sc.hpo is not None and sc.workload is None:      # as `testbed run` does
            from testbed.app.report.hpo_report import write_hpo_report
            files = write_hpo_report(str(path), out_dir)
        else:
            files = build_report(out_dir, run_scenario(sc, progress=wanted(quiet, as_json)))
    else:
        files = report_from_store(path, out_dir, sweep_id=sweep_id)
    if as_json:
        emit_json(files.to_dict())
    else:
        click.echo(f"report: {files.html} ({len(files.plots)} plots, {len(files.data)} data "
                   "files)")
