"""``testbed calibrate``: fit a system profile's calibration from measurements."""

from __future__ import annotations

import click

from testbed.app.cli.common import emit_json, table
from testbed.errors import InputError
from testbed.systems.profile import load_system, profile_path


@click.command("calibrate")
@click.argument("measurements", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--system", help="Profile to calibrate (name or YAML path).")
@click.option("--base", help="Records form: the profile to start from (testbed.app.cli.records).")
@click.option("-o", "--output", type=click.Path(dir_okay=False),
              help="Records form: the calibrated profile to write.")
@click.option("--force", is_flag=True, help="Records form: accept another machine's records.")
@click.option("--dry-run", is_flag=True, help="Fit and report, do not write the profile.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def calibrate_cmd(measurements, system, base, output, force, dry_run, as_json) -> None:
    """Fit compute times, network efficiencies and strategy factors from a CSV of
    measured seconds per iteration, and write them into the profile's calibration block;
    or, given record files (.jsonl) with --base and -o, write a calibrated profile.
    Says which models it fitted, which it dropped (and why) and which it kept from the
    profile's previous calibration."""
    if base or output or force or any(str(m).endswith(".jsonl") for m in measurements):
        from testbed.app.cli.records import calibrate_records
        return calibrate_records(measurements, base or system, output, force, dry_run, as_json)
    if len(measurements) != 1 or not system:
        raise InputError("give one CSV and --system NAME (or record files with --base and -o)")
    _calibrate_csv(measurements[0], system, dry_run, as_json)


def _calibrate_csv(measurements: str, system: str, dry_run: bool, as_json: bool) -> None:
    from testbed.calibration.abci_csv import merged, model_report, write_calibration
    from testbed.calibration.paradl import paradl_calibration
    from testbed.calibration.records import import_paradl

    profile = load_system(system)
    path = profile_path(system)
    records = import_paradl(measurements)
    fitted, rows, _ = paradl_calibration(records, profile, str(measurements))
    cal, kept = merged(fitted, profile)
    report = model_report(records, fitted, kept)
    if not dry_run:
        write_calibration(path, cal)
    if as_json:
        emit_json({"calibration": cal.to_data(), "rows": rows,
                   "written": None if dry_run else str(path)})
        click.echo(f"models: {report.line()}", err=True)
        return
    click.echo(table(["model", "strategy", "gpus", "batch", "measured", "predicted", "accuracy"],
                     [(r["model"], r["strategy"], r["gpus"], r["global_batch"],
                       f"{r['measured_s']:.4f}",
                       "infeasible" if r["predicted_s"] is None else f"{r['predicted_s']:.4f}",
                       f"{r['accuracy']:.3f}") for r in rows], align="llrrrrr"))
    acc = cal.accuracy
    held = acc.get("holdout_16_from_le8_mean")
    click.echo(f"\nmean accuracy in sample: {acc['in_sample_mean']:.4f}; "
               + ("16-GPU runs predicted from a ≤8-GPU fit: "
                  f"{held:.4f}" if held is not None else "no runs beyond 8 GPUs to hold out"))
    click.echo(f"models: {report.line()}")
    click.echo("dry run: profile not written" if dry_run else f"wrote calibration to {path}")
