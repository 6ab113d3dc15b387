"""The shipped scenarios: package data, listed by ``testbed scenarios``, each runnable
by name from any folder (``testbed run NAME``)."""

from __future__ import annotations

import filecmp
import json

import pytest

from testbed.io.packaged import data_dir, names
from tests.cli import in_process
from tests.conftest import REPO, each

SHIPPED = sorted(p.stem for p in (REPO / "scenarios").glob("*.yaml"))



def test_every_checkout_scenario_is_the_package_file():
    """scenarios/NAME.yaml links to testbed/data/scenarios/NAME.yaml (one copy, shipped
    in the wheel by the package-data glob), and the trace a scenario names beside it is
    shipped too."""
    assert names("scenarios") == SHIPPED and len(SHIPPED) >= 20
    for name in each(SHIPPED, at_least=20):
        link = REPO / "scenarios" / f"{name}.yaml"
        assert link.resolve() == (data_dir("scenarios") / f"{name}.yaml").resolve(), name
    shipped_trace = data_dir("scenarios").parent / "traces" / "example_failures.csv"
    assert filecmp.cmp(shipped_trace, REPO / "traces" / "example_failures.csv", shallow=False)


def test_scenarios_lists_name_kind_and_description(capsys):
    code, out, err = in_process(["scenarios", "--json"], capsys)
    assert code == 0, err
    rows = json.loads(out)
    assert [r["name"] for r in rows] == SHIPPED
    kinds = {r["name"]: r["kind"] for r in rows}
    assert kinds["quickstart"] == "simulation" and kinds["daly-6h"] == "simulation"
    assert {n for n, k in kinds.items() if k == "hpo"} == {n for n in SHIPPED
                                                           if n.startswith("hpo-")}
    for r in each(rows, at_least=20):
        assert r["description"] and "\n" not in r["description"], r["name"]
    code, out, _ = in_process(["scenarios", "--kind", "hpo"], capsys)
    assert code == 0
    body = out.splitlines()
    assert body[0].split() == ["name", "kind", "description"]
    assert sum(1 for ln in body if ln.startswith("hpo-")) == 4
    assert "testbed run NAME" in out


@pytest.mark.parametrize("name", SHIPPED)
def test_every_shipped_scenario_runs_by_name_from_any_folder(name, tmp_path, monkeypatch,
                                                               capsys):
    monkeypatch.chdir(tmp_path)              # no scenarios/ here: the package data is read
    args = ["run", name, "--no-report", "--json", "-q"]
    if not name.startswith("hpo-"):
        args += ["-r", "2"]
    code, out, err = in_process(args, capsys)
    assert code == 0, err[-2000:]
    doc = json.loads(out)
    if name.startswith("hpo-"):
        assert doc["kind"] == "hpo" and doc["makespan_s"] > 0 and doc["trials"] > 0
        assert doc["metric"] and doc["mode"] in ("min", "max")
    else:
        assert doc["simulation"]["replications"] == 2 and doc["simulation"]["work_s"] > 0
    assert list(tmp_path.iterdir()) == []     # --no-report writes nothing


def test_an_hpo_scenario_by_name_writes_the_hpo_report(tmp_path, capsys):
    code, out, err = in_process(["run", "hpo-cifar-grid", "-o", str(tmp_path / "r")], capsys)
    assert code == 0, err
    assert "best val_loss (lowest of any epoch)" in out
    for name in ("index.html", "gantt.png", "best_so_far.png", "attempts.csv"):
        assert (tmp_path / "r" / name).is_file(), name


def test_an_unknown_name_lists_the_shipped_ones(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    code, _, err = in_process(["run", "quickstrat", "--no-report"], capsys)
    assert code == 2
    line, = err.strip().splitlines()
    assert line.startswith("testbed: error: quickstrat: no such scenario") and \
        "quickstart" in line and "testbed scenarios" in line


def test_report_of_an_hpo_scenario_by_name_is_the_hpo_report(tmp_path, capsys):
    code, out, err = in_process(["report", "hpo-cifar-grid", "-o", str(tmp_path / "r"),
                                  "--json"], capsys)
    assert code == 0, err
    plots = {p.rsplit("/", 1)[-1] for p in json.loads(out)["plots"]}
    assert plots == {"gantt.png", "utilisation.png", "best_so_far.png"}
