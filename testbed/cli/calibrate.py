"""``testbed calibrate``: fit a system profile's calibration from measurements."""

from __future__ import annotations

import click

from testbed.cli.common import emit_json, table
from testbed.errors import InputError
from testbed.systems import load_system, profile_path


@click.command("calibrate")
@click.argument("measurements", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--system", help="Profile to calibrate (name or YAML path).")
@click.option("--base", help="Records form: the profile to start from (testbed.cli.records).")
@click.option("-o", "--output", type=click.Path(dir_okay=False),
              help="Records form: the calibrated profile to write.")
@click.option("--force", is_flag=True, help="Records form: accept another machine's records.")
@click.option("--dry-run", is_flag=True, help="Fit and report, do not write the profile.")
@click.option("--json", "as_json", is_flag=True)
def calibrate_cmd(measurements, system, base, output, force, dry_run, as_json) -> None:
    """Fit compute times, network efficiencies and strategy factors from a CSV of
    measured seconds per iteration, and write them into the profile's calibration block;
    or, given record files (.jsonl) with --base and -o, write a calibrated profile."""
    if base or output or force or any(str(m).endswith(".jsonl") for m in measurements):
        from testbed.cli.records import calibrate_records
        return calibrate_records(measurements, base or system, output, force, dry_run, as_json)
    if len(measurements) != 1 or not system:
        raise InputError("give one CSV and --system NAME (or record files with --base and -o)")
    measurements = measurements[0]
    from pathlib import Path

    from testbed.calibrate import calibrate, write_calibration

    profile = load_system(system)
    path = profile_path(system)
    if not Path(measurements).exists():
        raise InputError("no such file", source=measurements)
    cal, rows, held = calibrate(measurements, profile)
    if not dry_run:
        write_calibration(path, cal)
    if as_json:
        emit_json({"calibration": cal.model_dump(mode="json"), "rows": rows,
                   "written": None if dry_run else str(path)})
        return
    click.echo(table(["model", "strategy", "gpus", "batch", "measured", "predicted", "accuracy"],
                     [(r["model"], r["strategy"], r["gpus"], r["global_batch"],
                       f"{r['measured_s']:.4f}", f"{r['predicted_s']:.4f}",
                       f"{r['accuracy']:.3f}") for r in rows], align="llrrrrr"))
    click.echo(f"\nmean accuracy in sample: {cal.accuracy['in_sample_mean']:.4f}; "
               f"16-GPU runs predicted from a ≤8-GPU fit: "
               f"{cal.accuracy['holdout_16_from_le8_mean']:.4f}")
    click.echo("dry run: profile not written" if dry_run else f"wrote calibration to {path}")


def register(cli) -> None:
    cli.add_command(calibrate_cmd)
