"""``testbed scenarios``: the shipped scenarios, by name, with what ``testbed run`` does.

The scenarios ship as package data (``testbed/data/scenarios``; ``scenarios/`` in the
checkout links to the same files), so ``testbed run NAME`` works from an installed
wheel as well as from the checkout. Each is listed with its kind — what ``testbed run``
does with it — and the one-line description the file gives:

* ``simulation``: a workload with failures and checkpoints (oracle comparison first
  when it names a model and a system);
* ``hpo``: a hyperparameter-optimisation schedule (simulated on the cluster);
* ``oracle``: a model and a system only (the strategy comparison).
"""

from __future__ import annotations

import click

from testbed.app.cli.common import emit_json, table

#: What ``testbed run`` does with each kind.
KINDS = {
    "simulation": "simulates failures, checkpoints and restarts with replications",
    "hpo": "simulates the hyperparameter-optimisation schedule",
    "oracle": "compares parallel strategies with the oracle",
}


def scenario_kind(sc) -> str:
    """``hpo``, ``simulation`` or ``oracle`` (see the module docstring)."""
    if sc.hpo is not None and sc.workload is None:
        return "hpo"
    if sc.workload is not None:
        return "simulation"
    return "oracle"


def one_line(text: str | None, width: int = 100) -> str:
    """A description on one line of at most ``width`` characters."""
    line = " ".join((text or "").split())
    return line if len(line) <= width else line[: width - 1].rstrip() + "…"


def shipped() -> list[dict]:
    """Every shipped scenario: name, kind, description and the file it is read from."""
    from testbed.io.packaged import named_file, names
    from testbed.scenario.schema import load_scenario

    rows = []
    for name in names("scenarios"):
        path = named_file("scenarios", name)
        assert path is not None        # names() lists only files that exist
        sc = load_scenario(path)
        rows.append({"name": name, "kind": scenario_kind(sc),
                     "description": " ".join((sc.description or "").split()), "path": str(path)})
    return rows


@click.command("scenarios")
@click.option("--kind", type=click.Choice(sorted(KINDS)),
              help="Only the scenarios of this kind.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def scenarios_cmd(kind, as_json) -> None:
    """List the shipped scenarios (run one with `testbed run NAME`)."""
    rows = [r for r in shipped() if kind is None or r["kind"] == kind]
    if as_json:
        emit_json(rows)
        return
    click.echo(table(["name", "kind", "description"],
                     [(r["name"], r["kind"], one_line(r["description"], 90)) for r in rows],
                     align="lll"))
    click.echo(f"\n{len(rows)} scenario(s); `testbed run NAME` runs one ("
               + "; ".join(f"{k}: {v}" for k, v in KINDS.items()
                           if any(r["kind"] == k for r in rows)) + ")")
