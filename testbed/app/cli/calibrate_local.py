"""``testbed calibrate-local -o PROFILE.yaml``: the whole loop on this machine.

Runs the designed calibration set (:mod:`testbed.calibration.design`) with the
harnesses, writes the records and a manifest to ``--records DIR`` (default
``calibration/<host>/`` under the current folder — a folder of the user's, never the
package nor the shipped reference records under ``traces/measurements``, which are
refused), fits a profile from the fitted part over ``--base`` (default
``laptop-cpu``), and verifies it on the held-out part — configurations the fit never
saw. ``--quick`` runs the few-minute subset that CI runs.
"""

from __future__ import annotations

import socket
import time
from pathlib import Path

import click

from testbed.app.cli.common import emit_json
from testbed.errors import InputError
from testbed.io.write import check_writable_target, write_json, write_text

#: Where the records go by default (one folder per host, under the current folder).
DEFAULT_ROOT = Path("calibration")


def _protected() -> list[Path]:
    """Folders calibrate-local never writes into: the installed packages and the shipped
    reference measurements (``traces/measurements`` of the source tree)."""
    import real_runs
    import simulators
    import testbed
    packages = [Path(str(m.__file__)).resolve().parent
                for m in (testbed, real_runs, simulators)]
    return packages + [packages[0].parent / "traces" / "measurements"]


def _records_dir(records: str | None) -> Path:
    folder = Path(records) if records else Path.cwd() / DEFAULT_ROOT / socket.gethostname()
    resolved = folder.resolve()
    for root in _protected():
        if resolved == root or root in resolved.parents:
            raise InputError(f"is inside {root} (the package or the shipped reference "
                             "records): give a folder of your own", source=str(folder),
                             field="--records")
    if folder.exists() and not folder.is_dir():
        raise InputError("is not a folder", source=str(folder), field="--records")
    probe = folder
    while not probe.exists():
        probe = probe.parent
    import os
    if not os.access(probe, os.W_OK | os.X_OK):
        raise InputError("the folder is not writable", source=str(folder), field="--records")
    return folder


@click.command("calibrate-local")
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False),
              help="the calibrated profile to write")
@click.option("--records", type=click.Path(file_okay=False), default=None,
              help="folder for records and manifest (default ./calibration/<host>/)")
@click.option("--base", default="laptop-cpu", show_default=True,
              help="profile to start from (name or YAML)")
@click.option("--quick", is_flag=True, help="the few-minute subset (what CI runs)")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def calibrate_local_cmd(output, records, base, quick, as_json) -> None:
    """Measure this machine, fit a profile, verify it on configurations left out."""
    from real_runs.calibration_set import FIT_FILE, HOLDOUT_FILE, run_design
    from testbed.app.cli.verify import print_report, run_verify
    from testbed.calibration.design import design
    from testbed.calibration.fit import fit_records
    from testbed.calibration.profile import load_calibrated
    from testbed.calibration.records import load_records

    target = check_writable_target(output, field="-o")
    folder = _records_dir(records)
    base_profile = load_calibrated(base)          # bad --base fails before measuring
    t0 = time.perf_counter()
    say = (lambda _m: None) if as_json else (lambda m: click.echo(f"  {m}", err=True))
    manifest = run_design(design(quick), folder, say)
    fit_path, holdout_path = folder / FIT_FILE, folder / HOLDOUT_FILE
    result = fit_records(load_records([str(fit_path)]), base_profile)
    write_text(target, result.text, field="-o")
    report = run_verify(str(target), (str(holdout_path),), "none")
    wall_s = time.perf_counter() - t0
    summary = {"profile": str(target), "records": str(folder), "design": manifest["design"]["name"],
               "measure_s": manifest["wall_s"], "wall_s": round(wall_s, 3),
               "fit_records": manifest["files"][0]["records"],
               "holdout_records": manifest["files"][1]["records"],
               "verify": report.to_dict()}
    write_json(folder / "verify.json", summary)
    if as_json:
        emit_json(summary)
        return
    click.echo(f"measured {summary['fit_records']} + {summary['holdout_records']} record(s) "
               f"in {manifest['wall_s']:.1f} s ({folder}); profile: {target}")
    print_report(report)
    click.echo(f"\nlocal loop: {wall_s:.1f} s")
