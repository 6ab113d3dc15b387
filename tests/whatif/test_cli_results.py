"""``testbed results export`` (CSV and Parquet) and ``testbed report`` on a small sweep."""

from __future__ import annotations

import csv
import json
import subprocess
import sys

from tests.conftest import each
from tests.whatif.conftest import REPO, env, run_testbed


def test_export_csv_and_parquet_and_report(tmp_path, sweep_scenario):
    db = tmp_path / "r.db"
    proc = run_testbed("sweep", str(sweep_scenario), "--grid", "checkpoint.interval=30min,2h",
                       "--grid", "failures.mtbf=4h,8h", "-r", "7", "--store", str(db), "--json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["points"] == 4 and out["rows"] == 28 and proc.stderr == ""   # no bar in --json

    csv_path = tmp_path / "r.csv"
    proc = run_testbed("results", "export", str(db), "-o", str(csv_path))
    assert proc.returncode == 0, proc.stderr
    rows = list(csv.DictReader(csv_path.open()))
    assert len(rows) == 28
    assert {r["checkpoint.interval"] for r in rows} == {"30min", "2h"}
    assert {r["replication"] for r in rows} == {str(i) for i in range(7)}
    assert all(0 < float(r["ettr"]) <= 1 for r in rows)

    pq_path = tmp_path / "r.parquet"
    proc = run_testbed("results", "export", str(db), "--format", "parquet", "-o", str(pq_path))
    assert proc.returncode == 0, proc.stderr
    check = ("import sys, json; sys.modules['numpy'] = None; import pyarrow.parquet as pq;"
             f"t = pq.read_table({str(pq_path)!r}); print(json.dumps([t.num_rows, t.column_names,"
             " sum(t.column('failures').to_pylist())]))")
    got = json.loads(subprocess.run([sys.executable, "-c", check], capture_output=True,
                                    text=True, env=env(), cwd=REPO, check=True).stdout)
    assert got[0] == 28 and "failures.mtbf" in got[1]
    assert got[2] == sum(int(r["failures"]) for r in rows)

    proc = run_testbed("report", str(db), "-o", str(tmp_path / "rep"), "--json")
    assert proc.returncode == 0, proc.stderr
    files = json.loads(proc.stdout)
    assert len(files["plots"]) == 2
    points = list(csv.DictReader((tmp_path / "rep" / "points.csv").open()))
    assert len(points) == 4 and all(p["replications"] == "7" for p in points)


def test_cli_errors_are_one_line_exit_2(tmp_path, sweep_scenario):
    cases = [
        ("results", "export", str(tmp_path / "nope.db"), "-o", str(tmp_path / "x.csv")),
        ("report", str(tmp_path / "nope.db")),
        ("sweep", str(sweep_scenario), "--grid", "checkpoint.interval"),
        ("sweep", str(sweep_scenario), "--grid", "checkpoint.interval=1h", "-r", "0"),
        ("sweep", str(sweep_scenario), "--store", str(tmp_path / "no" / "dir.db")),
        ("sweep", str(sweep_scenario), "--workers", "0", "--store", str(tmp_path / "w.db")),
    ]
    for args in each(cases):
        proc = run_testbed(*args)
        assert proc.returncode == 2, (args, proc.stderr)
        assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr, proc.stderr
