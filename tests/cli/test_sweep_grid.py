"""A grid value is checked as the same text in the scenario file would be: an edit the
file refuses is refused on the grid, in one line naming the grid option."""

from __future__ import annotations

import sqlite3

import pytest

from testbed.app.cli.main import main
from tests.conftest import REPO

DALY = REPO / "scenarios" / "daly-6h.yaml"


def _in_process(args, capsys):
    try:
        main([str(a) for a in args])
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    out = capsys.readouterr()
    return code, out.out, out.err


def _file_error(tmp_path, capsys, old: str, new: str) -> str:
    """The message the file gives for the same edit written into it."""
    edited = tmp_path / "edited.yaml"
    text = DALY.read_text()
    assert old in text
    edited.write_text(text.replace(old, new))
    code, _, err = _in_process(["run", edited, "--no-report"], capsys)
    assert code == 2
    return err.strip().split(": ", 3)[-1]          # after "testbed: error: FILE:LINE: KEY"


@pytest.mark.parametrize("grid, old, new, hint", [
    ("checkpoint.interval=10min,1h", "  policy: daly\n", "  policy: daly\n  interval: 10min\n",
     "--grid checkpoint.policy=fixed"),
    ("failures.node_mtbf=10d", "  mtbf: 6h\n", "  mtbf: 6h\n  node_mtbf: 10d\n",
     "--grid failures.mtbf=null"),
])
def test_an_edit_the_file_refuses_is_refused_on_the_grid(tmp_path, capsys, grid, old, new,
                                                          hint):
    db = tmp_path / "s.db"
    code, out, err = _in_process(["sweep", DALY, "--grid", grid, "--store", db, "-q", "-r",
                                  "2"], capsys)
    assert code == 2 and out == ""
    line, = err.strip().splitlines()
    key, first = grid.split("=")[0], grid.split("=")[1].split(",")[0]
    assert line.startswith(f"testbed: error: --grid {key}={first}: ")
    assert _file_error(tmp_path, capsys, old, new) in line
    assert hint in line
    assert not db.exists()                         # refused before the store is made


def test_the_grid_runs_once_the_policy_is_on_it_too(tmp_path, capsys):
    db = tmp_path / "s.db"
    code, _, err = _in_process(["sweep", "daly-6h", "--grid", "checkpoint.interval=10min,1h",
                                "--grid", "checkpoint.policy=fixed", "--store", db, "-q",
                                "-r", "2"], capsys)
    assert code == 0, err
    con = sqlite3.connect(db)
    assert con.execute("SELECT COUNT(*) FROM results").fetchone()[0] == 4
    con.close()


def test_a_daly_grid_on_another_key_keeps_the_daly_policy(tmp_path, capsys):
    """Nothing else is implied: a grid over the MTBF keeps Daly's interval per point."""
    db = tmp_path / "s.db"
    code, out, err = _in_process(["sweep", "daly-6h", "--grid", "failures.mtbf=3h,24h",
                                  "--store", db, "-q", "-r", "2", "--json"], capsys)
    assert code == 0, err
    import json
    points = json.loads(out)["results"]
    intervals = {p["params"]["failures.mtbf"]: p["facts"]["interval_s"] for p in points}
    assert intervals["3h"] < intervals["24h"]       # Daly's interval grows with the MTBF


def test_on_a_fixed_policy_the_hint_is_the_key_the_grid_excludes(tmp_path, capsys):
    """A fixed-interval file with ``interval``: a grid on ``every_steps`` is refused as the
    file would refuse both keys, and the hint is to null the file's ``interval``."""
    fixed = tmp_path / "fixed.yaml"
    fixed.write_text(DALY.read_text().replace("  policy: daly\n",
                                              "  policy: fixed\n  interval: 1h\n")
                     .replace("compute_time: 500h", "steps: 100000\n  step_time: 1s"))
    code, _, err = _in_process(["sweep", fixed, "--grid", "checkpoint.every_steps=600",
                                "--store", tmp_path / "s.db", "-q"], capsys)
    assert code == 2, err
    line, = err.strip().splitlines()
    assert line.startswith("testbed: error: --grid checkpoint.every_steps=600: ")
    assert "exactly one of 'interval' or 'every_steps'" in line
    assert "add --grid checkpoint.interval=null" in line
    code, _, err = _in_process(["sweep", fixed, "--grid", "checkpoint.every_steps=600",
                                "--grid", "checkpoint.interval=null", "--store",
                                tmp_path / "s.db", "-q", "-r", "2"], capsys)
    assert code == 0, err
