"""``testbed records …`` and the records form of ``testbed calibrate``.

* ``testbed records import-paradl CSV -o FILE.jsonl`` — the ABCI/ParaDL calibration CSV
  as measurement records;
* ``testbed records check FILE...`` — validate record files (one error naming the file,
  line and key; exit 2);
* ``testbed calibrate RECORDS.jsonl... --base PROFILE -o PROFILE.yaml [--force]`` — fit
  a profile from records (``testbed.app.cli.calibrate`` dispatches here when it is given
  record files, ``--base`` or ``-o``).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import click

from testbed.app.cli.common import emit_json, table
from testbed.errors import InputError
from testbed.io.write import check_writable_target, write_text


@click.group("records")
def records_group() -> None:
    """Measurement records: import and check."""


@records_group.command("import-paradl")
@click.argument("csv_path", metavar="CSV", type=click.Path(dir_okay=False))
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False),
              help="the JSONL record file to write")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def import_paradl_cmd(csv_path: str, output: str, as_json: bool) -> None:
    """Turn the ParaDL/ABCI calibration CSV into measurement records."""
    from testbed.calibration.records import import_paradl
    from testbed.measurements import records_text
    target = check_writable_target(output, field="-o")
    records = import_paradl(csv_path)
    write_text(target, records_text(records), field="-o")
    if as_json:
        emit_json({"written": str(target), "records": len(records)})
    else:
        click.echo(f"wrote {target} ({len(records)} records)")


@records_group.command("check")
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def check_cmd(files: tuple[str, ...], as_json: bool) -> None:
    """Validate record files: schema version, kinds, fields, finite numbers."""
    from testbed.calibration.records import load_records
    rs = load_records(list(files))
    rows: list[dict[str, Any]] = []
    for f in rs.files:
        kinds = Counter(r.kind for _, r in f.records)
        machines = sorted({r.env.machine for _, r in f.records})
        rows.append({"file": f.path, "records": len(f.records), "sha256": f.sha256,
                     "kinds": dict(sorted(kinds.items())), "machines": machines})
    if as_json:
        emit_json({"ok": True, "files": rows})
        return
    click.echo(table(["file", "records", "kinds", "machines"],
                     [(r["file"], r["records"],
                       ", ".join(f"{k} {n}" for k, n in r["kinds"].items()),
                       "; ".join(r["machines"])) for r in rows], align="lrll"))
    click.echo("all records valid")


def calibrate_records(records: tuple[str, ...], base: str | None, output: str | None,
                      force: bool, dry_run: bool, as_json: bool) -> None:
    """``testbed calibrate RECORDS... --base PROFILE -o PROFILE.yaml``."""
    from testbed.calibration.fit import fit_records
    from testbed.calibration.profile import load_calibrated
    from testbed.calibration.records import load_records
    if not records:
        raise InputError("give the record files (.jsonl) to calibrate from")
    if base is None:
        raise InputError("records calibration needs --base PROFILE (name or YAML)",
                         field="--base")
    if output is None and not dry_run:
        raise InputError("give -o PROFILE.yaml (or --dry-run)", field="-o")
    target = check_writable_target(output, field="-o") if output else None
    records = tuple(p for p in records if not _held_out(p))
    if not records:
        raise InputError("every record file given is a hold-out set: give the fit records "
                         "(e.g. fit.jsonl)")
    result = fit_records(load_records(list(records)), load_calibrated(base), force=force)
    if target is not None and not dry_run:
        write_text(target, result.text, field="-o")
    written = None if dry_run or target is None else str(target)
    if as_json:
        emit_json({"profile": result.data, "written": written,
                   "calibration": result.calibration.to_data() if result.calibration else None,
                   "rows": result.paradl_rows,
                   "models": result.models.to_dict() if result.models else None})
        return
    _summary(result)
    if result.models is not None:
        click.echo(f"models: {result.models.line()}")
    click.echo("dry run: profile not written" if written is None else f"wrote {written}")


def _held_out(path: str) -> bool:
    """Whether ``path`` is the hold-out set of a calibration folder (``holdout.jsonl``
    beside the folder's ``MANIFEST.json`` or ``parts.log``, as ``calibrate-local`` and the
    sbatch job write them): fitting on it would make the verify that follows in sample,
    so it is left out, saying so (``FOLDER/*.jsonl`` as a shell expands it includes it)."""
    from testbed.calibration.design import HOLDOUT_FILE, MANIFEST_FILE
    p = Path(path)
    if p.name != HOLDOUT_FILE or not any((p.parent / name).exists()
                                         for name in (MANIFEST_FILE, "parts.log")):
        return False
    click.echo(f"testbed: note: {path} left out: it is the hold-out set of its calibration "
               "folder (verify the profile with it)", err=True)
    return True


def _summary(result) -> None:
    sec = result.section
    rows = []
    for c in sec.compute:
        for name, line in c.models.items():
            rows.append((f"compute {c.framework} {c.precision}", name,
                         f"{line.fixed_s * 1e3:.3f} ms + {line.s_per_sample * 1e6:.2f} µs/sample",
                         f"{line.residuals.accuracy:.3f}"))
        if c.law:
            rows.append((f"compute {c.framework} {c.precision}", "law (all models)", "",
                         f"{c.law.residuals.accuracy:.3f}"))
    for ab in sec.network:
        rows.append((f"network {ab.backend} {ab.op} ×{ab.processes}", ab.tier,
                     f"α {ab.latency_us:.1f} µs, {ab.bandwidth_GBps:.3f} GB/s",
                     f"{ab.residuals.accuracy:.3f}"))
    for st in sec.storage:
        rows.append((f"storage {st.framework}", st.format,
                     f"{st.save_latency_s * 1e3:.2f} ms + {st.write_GBps:.3f} GB/s",
                     f"{st.residuals.accuracy:.3f}"))
    for rf in sec.restart:
        rows.append((f"restart {rf.framework}", f"{rf.points} restart(s)",
                     f"start {rf.process_start_s:.2f} s, set-up {rf.setup_s:.2f} s"
                     + (f" (import {rf.import_s:.2f} s)" if rf.import_s is not None else ""),
                     f"{rf.residuals.accuracy:.3f}"))
    if sec.paradl:
        rows.append(("ABCI/ParaDL fit", f"{sec.paradl.n} runs", "calibration.models",
                     f"{sec.paradl.accuracy:.3f}"))
    click.echo(table(["fit", "of", "value", "accuracy in sample"], rows, align="lllr"))
    click.echo(f"machine: {sec.machine.host if sec.machine else '?'}; fitted at "
               f"{sec.fitted_at or 'unknown'} (newest record); inputs: "
               + ", ".join(f"{Path(i.path).name} ({i.records})" for i in sec.inputs))
