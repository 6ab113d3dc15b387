"""The local loop end to end (``calibrate-local --quick``, what CI runs): real runs on
this machine → records → profile → verified on configurations the fit never saw.

The thresholds here are for two busy CI cores and the quick design; the README's
figures come from the full design (``testbed calibrate-local``)."""

from __future__ import annotations

import hashlib
import json

import pytest

from testbed.calibration.profile import load_calibrated
from testbed.measurements import read_records
from tests.calibration.conftest import run_testbed

pytestmark = [pytest.mark.frameworks, pytest.mark.timeout(900)]

#: Least accuracy (ParaDL's mean of min/max) out of sample on the quick design.
QUICK_FLOOR = {"torch_step_s": 0.80, "checkpoint_save_s": 0.60, "gloo_allreduce_2p_s": 0.60,
               "run_wall_s": 0.60}


def test_quick_loop_writes_records_manifest_and_profile(quick_loop):
    folder = quick_loop["records"]
    manifest = json.loads((folder / "MANIFEST.json").read_text())
    assert manifest["design"]["name"] == "quick"
    for entry in manifest["files"]:
        data = (folder / entry["file"]).read_bytes()
        assert hashlib.sha256(data).hexdigest() == entry["sha256"]
        assert len(read_records(folder / entry["file"])) == entry["records"] > 0
    prof = load_calibrated(quick_loop["profile"])
    assert prof.fit.machine.host == manifest["machine"]["host"]
    assert {c.framework for c in prof.fit.compute} == {"torch"}
    assert prof.fit.storage and prof.fit.restart and prof.fit.network


def test_quick_loop_verifies_out_of_sample(quick_loop):
    quantities = quick_loop["summary"]["verify"]["quantities"]
    for name, floor in QUICK_FLOOR.items():
        assert quantities[name]["n"] > 0, name
        assert quantities[name]["accuracy"] >= floor, (name, quantities[name])


def test_recalibrating_from_the_loops_records_gives_the_same_bytes(quick_loop, tmp_path):
    fit = quick_loop["records"] / "fit.jsonl"
    again = tmp_path / "again.yaml"
    proc = run_testbed("calibrate", str(fit), "--base", "laptop-cpu", "-o", str(again))
    assert proc.returncode == 0, proc.stderr
    assert again.read_bytes() == quick_loop["profile"].read_bytes()


def test_replay_of_the_held_out_run(quick_loop):
    holdout = quick_loop["records"] / "holdout.jsonl"
    proc = run_testbed("simulate", "--replay-run", str(holdout), "--system",
                       str(quick_loop["profile"]), "--json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["predicted"]["kills"] == out["measured"]["kills"] == len(out["kills"]) == 2
    assert out["predicted"]["wall_time_s"] == pytest.approx(out["schedule_wall_s"], rel=1e-9)
    assert out["wall_time_accuracy"] >= QUICK_FLOOR["run_wall_s"]
    text = run_testbed("simulate", "--replay-run", str(holdout), "--system",
                       str(quick_loop["profile"]))
    assert text.returncode == 0 and "wall time" in text.stdout and "measured" in text.stdout


def test_calibrate_local_checks_its_targets_first(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    proc = run_testbed("calibrate-local", "--quick", "-o", str(tmp_path / "p.yaml"),
                       "--records", str(blocker))
    assert proc.returncode == 2 and "--records" in proc.stderr
    proc = run_testbed("calibrate-local", "--quick", "-o", str(tmp_path / "no" / "p.yaml"))
    assert proc.returncode == 2 and "-o" in proc.stderr
    proc = run_testbed("calibrate-local", "--quick", "-o", str(tmp_path / "p.yaml"), "--base",
                       "no-such-system", "--records", str(tmp_path / "r"))
    assert proc.returncode == 2 and "unknown system" in proc.stderr
    assert not (tmp_path / "r").exists()
