"""`testbed traces`: FTA import round trip and one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_import_fta_then_check(cli, tmp_path):
    out = tmp_path / "fta.csv"
    r = cli("traces", "import-fta", str(REPO / "traces" / "fta_event_trace_sample.tab"),
            "-o", str(out))
    assert r.returncode == 0, r.stderr
    r = cli("traces", "check", str(out), "--json")
    assert r.returncode == 0, r.stderr
    info = json.loads(r.stdout)
    assert info["failures"] == 3 and info["nodes"] >= 1


def test_bad_inputs(cli, tmp_path):
    r = cli("traces", "check", str(tmp_path / "missing.csv"))
    assert r.returncode == 2 and "missing.csv" in r.stderr and "Traceback" not in r.stderr
    target = tmp_path / "x.csv"
    r = cli("traces", "import-fta", str(REPO / "README.md"), "-o", str(target))
    assert r.returncode == 2 and "README.md" in r.stderr and "Traceback" not in r.stderr
    assert not target.exists()
