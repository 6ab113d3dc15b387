"""The 200 × 100 sweep under ``mpiexec -n 3 python -m mpi4py.futures -m testbed sweep``
gives exactly the rows of the local process pool: same seeds, same values."""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
import sys

import pytest

from tests.whatif.conftest import INTERVALS, MTBFS, REPO, env, outcomes, run_testbed

pytestmark = pytest.mark.mpi


def _grid(scenario, db):
    return ["sweep", str(scenario), "--grid", f"checkpoint.interval={INTERVALS}",
            "--grid", f"failures.mtbf={MTBFS}", "-r", "100", "--store", str(db), "-q"]


@pytest.mark.timeout(300)
def test_mpi_executor_matches_local(tmp_path, sweep_scenario):
    mpiexec = shutil.which("mpiexec") or shutil.which("mpirun")
    if mpiexec is None:
        pytest.fail("mpiexec not found: install openmpi-bin (make setup does)")
    mpi_db, local_db = tmp_path / "mpi.db", tmp_path / "local.db"
    proc = subprocess.run(
        [mpiexec, "-n", "3", "--oversubscribe", sys.executable, "-m", "mpi4py.futures",
         "-m", "testbed", *_grid(sweep_scenario, mpi_db), "--executor", "mpi"],
        cwd=REPO, env=env(), capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "run on 2 mpi worker(s)" in proc.stdout
    local = run_testbed(*_grid(sweep_scenario, local_db), "--executor", "local", timeout=240)
    assert local.returncode == 0, local.stderr
    got, want = outcomes(mpi_db), outcomes(local_db)
    assert len(want) == 200 * 100
    assert got == want
    con = sqlite3.connect(mpi_db)
    workers = {w for (w,) in con.execute("SELECT DISTINCT worker FROM points")}
    sweeps = con.execute("SELECT sweep_id FROM sweeps").fetchall()
    con.close()
    assert len(workers) == 2, "both MPI worker ranks should have run points"
    con = sqlite3.connect(local_db)
    assert con.execute("SELECT sweep_id FROM sweeps").fetchall() == sweeps
    con.close()
