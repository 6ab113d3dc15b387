"""``testbed results export results.db --format csv|parquet -o FILE``.

Writes every replication row of the store (or of one ``--sweep``) joined with its
point: sweep id, point index, the grid values (one column per grid key, plus the
overrides as JSON in ``params``), seed, scenario hash, code version, the outcome
columns and the timing column ``run_s``. Files are written to a temporary name and
renamed, so an interrupted export never leaves half a file; the database is
opened read-only and never changed.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click

from testbed.app.cli.common import emit_json
from testbed.io.write import atomic_write, check_writable_target, write_csv


def export_table(store, sweep_id: str | None = None) -> tuple[list[str], list[list]]:
    """Header and rows of the export (grid keys expanded into their own columns)."""
    from testbed.app.results_db import EXPORT_COLUMNS

    raw = store.export_rows(sweep_id).fetchall()
    keys: list[str] = []
    for s in (store.sweeps() if sweep_id is None else [store.sweep(sweep_id)]):
        for key, _texts in s["grid"]:
            if key not in keys:
                keys.append(key)
    header = list(EXPORT_COLUMNS[:3]) + keys + list(EXPORT_COLUMNS[3:])
    rows = []
    for r in raw:
        params = store.point_params(r[2])
        rows.append(list(r[:3]) + [_cell(params.get(k)) for k in keys] + list(r[3:]))
    return header, rows


def _cell(value):
    if value is None or isinstance(value, (int, float, str)):
        return value
    return json.dumps(value)


def write_parquet(path: Path, header: list[str], rows: list[list]) -> None:
    """Write Parquet with pyarrow (atomically, through :func:`testbed.io.write.atomic_write`)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    columns: list[Sequence[Any]] = (list(zip(*rows, strict=True)) if rows
                                    else [[] for _ in header])
    arrays = {}
    for name, col in zip(header, columns, strict=True):
        kinds = {type(v) for v in col if v is not None}
        values: list[Any] = list(col)
        if kinds and kinds <= {int, float} and float in kinds:
            values = [None if v is None else float(v) for v in col]
        elif len(kinds) > 1:
            values = [None if v is None else str(v) for v in col]
        arrays[name] = pa.array(values, type=pa.string() if not kinds else None)
    table = pa.table(arrays)
    atomic_write(path, lambda fh: pq.write_table(table, fh), binary=True, field="-o")


@click.group("results")
def results_group() -> None:
    """Work with a sweep's results database."""


@results_group.command("export")
@click.argument("database")
@click.option("--format", "fmt", type=click.Choice(["csv", "parquet"]), default="csv",
              show_default=True, help="File format of the export.")
@click.option("-o", "--output", required=True, help="File to write.")
@click.option("--sweep", "sweep_id", help="Only this sweep (id or prefix).")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def export_cmd(database, fmt, output, sweep_id, as_json) -> None:
    """Export every replication row of DATABASE as CSV or Parquet."""
    from testbed.app.results_db import Store

    check_writable_target(output, field="-o")
    with Store.open_readonly(database) as store:
        if sweep_id is not None:
            sweep_id = store.sweep(sweep_id)["sweep_id"]
        header, rows = export_table(store, sweep_id)
    if fmt == "csv":
        write_csv(output, header, rows, field="-o")
    else:
        write_parquet(Path(output), header, rows)
    if as_json:
        emit_json({"output": output, "format": fmt, "rows": len(rows), "columns": header})
    else:
        click.echo(f"{len(rows)} rows × {len(header)} columns → {output}")
