"""``testbed traces``: check a failure trace, import public formats into ours."""

from __future__ import annotations

import click

from testbed.app.cli.common import emit_json
from testbed.io.read import read_text
from testbed.io.write import check_writable_target


def _read(path: str) -> str:
    return read_text(path)


@click.group("traces")
def traces() -> None:
    """Failure traces: the testbed CSV format and importers (see traces/MANIFEST.md)."""


@traces.command("check")
@click.argument("trace")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def check_cmd(trace, as_json) -> None:
    """Validate a trace in the testbed CSV format (time_s,node,cause,repair_s)."""
    from testbed.traces import load_trace

    rows = load_trace(trace)
    causes: dict[str, int] = {}
    for r in rows:
        causes[r.cause] = causes.get(r.cause, 0) + 1
    span = rows[-1].t_s - rows[0].t_s if rows else 0.0
    info = {"trace": trace, "failures": len(rows), "nodes": len({r.node for r in rows}),
            "span_s": span, "by_cause": causes}
    if as_json:
        emit_json(info)
    else:
        click.echo(f"{trace}: {len(rows)} failures on {info['nodes']} node(s) over "
                   f"{span / 3600:.1f} h; causes: "
                   + ", ".join(f"{k} {v}" for k, v in sorted(causes.items())))


@traces.command("import-fta")
@click.argument("event_trace")
@click.option("-o", "--output", required=True, help="Testbed CSV trace to write.")
@click.option("--platform-id", type=int, help="Keep only this FTA platform_id.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def import_fta_cmd(event_trace, output, platform_id, as_json) -> None:
    """Convert a Failure Trace Archive event_trace table into the testbed CSV format
    (written atomically: a failed import leaves no file behind)."""
    from testbed.traces import import_fta_event_trace, write_trace

    check_writable_target(output, field="-o")
    rows = import_fta_event_trace(_read(event_trace), source=event_trace,
                                  platform_id=platform_id)
    write_trace(rows, check_writable_target(output, field="-o"), field="-o")
    if as_json:
        emit_json({"source": event_trace, "output": output, "platform_id": platform_id,
                   "failures": len(rows), "nodes": len({r.node for r in rows})})
        return
    click.echo(f"wrote {len(rows)} failures to {output}")
