"""The ABCI fit as one instance of calibration from records: the imported CSV gives the
same calibration as ``testbed calibrate CSV --system abci-v100``; the machine check."""

from __future__ import annotations

import hashlib
import json

from testbed.calibration.abci_csv import calibrate
from testbed.calibration.fit import fit_records
from testbed.calibration.profile import load_calibrated
from testbed.calibration.records import import_paradl, load_records
from testbed.measurements import write_records
from testbed.systems.profile import load_system
from tests.calibration.conftest import one_line_error, run_testbed


def _without_source(cal: dict) -> dict:
    return {k: v for k, v in cal.items() if k != "source"}


def test_records_fit_equals_todays_abci_calibration(abci_csv, tmp_path):
    records = tmp_path / "abci.jsonl"
    write_records(records, import_paradl(abci_csv))
    result = fit_records(load_records([records]), load_calibrated("abci-v100"))
    today, _, _ = calibrate(abci_csv, load_system("abci-v100"))
    assert _without_source(result.calibration.model_dump(mode="json")) == \
        _without_source(today.model_dump(mode="json"))
    section = result.section
    assert section.paradl.n == 31 and section.machine.host == "abci"
    assert section.fitted_at == "2020-01-24T08:08:02Z"     # the newest run's log time
    assert section.inputs[0].sha256 == hashlib.sha256(records.read_bytes()).hexdigest()


def test_calibrate_cli_from_records_writes_a_loadable_profile(abci_csv, tmp_path):
    records = tmp_path / "abci.jsonl"
    assert run_testbed("records", "import-paradl", str(abci_csv), "-o", str(records)).returncode == 0
    out = tmp_path / "abci-fitted.yaml"
    proc = run_testbed("calibrate", str(records), "--base", "abci-v100", "-o", str(out), "--json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    today = json.loads(run_testbed("calibrate", str(abci_csv), "--system", "abci-v100",
                                   "--dry-run", "--json").stdout)["calibration"]
    assert _without_source(data["calibration"]) == _without_source(today)
    prof = load_calibrated(out)
    assert prof.fit is not None and prof.system.calibration.accuracy == today["accuracy"]
    # verify predicts every run through the oracle: ParaDL's accuracy in sample is the fit's
    report = json.loads(run_testbed("verify", str(out), str(records), "--in-sample",
                                   "--json").stdout)
    q = report["quantities"]["paradl_iteration_s"]
    assert q["n"] == 31 and q["accuracy"] == today["accuracy"]["in_sample_mean"]
    again = tmp_path / "again.yaml"
    assert run_testbed("calibrate", str(records), "--base", "abci-v100", "-o",
                       str(again)).returncode == 0
    assert again.read_bytes() == out.read_bytes()       # same records, same bytes


def test_records_of_another_machine_are_refused_unless_forced(abci_csv, tmp_path):
    records = tmp_path / "abci.jsonl"
    write_records(records, import_paradl(abci_csv))
    out = tmp_path / "p.yaml"
    out.write_text("untouched\n")
    # V100 records against the laptop profile (a CPU device)
    line = one_line_error(run_testbed("calibrate", str(records), "--base", "laptop-cpu",
                                      "-o", str(out)))
    assert f"{records}:1" in line and "--force" in line and "env" in line
    assert out.read_text() == "untouched\n"
    # records of two machines in one fit: the second machine's line is named
    text = records.read_text().splitlines()
    text[3] = text[3].replace('"host":"abci"', '"host":"other"')
    mixed = tmp_path / "mixed.jsonl"
    mixed.write_text("\n".join(text) + "\n")
    line = one_line_error(run_testbed("calibrate", str(mixed), "--base", "abci-v100", "-o",
                                      str(out)))
    assert f"{mixed}:4" in line and "another machine" in line
    proc = run_testbed("calibrate", str(mixed), "--base", "abci-v100", "-o", str(out), "--force")
    assert proc.returncode == 0, proc.stderr


def test_a_profile_fitted_on_one_host_refuses_another_hosts_records(abci_csv, tmp_path):
    records = tmp_path / "abci.jsonl"
    write_records(records, import_paradl(abci_csv))
    fitted = tmp_path / "fitted.yaml"
    assert run_testbed("calibrate", str(records), "--base", "abci-v100", "-o",
                       str(fitted)).returncode == 0
    moved = tmp_path / "moved.jsonl"
    moved.write_text(records.read_text().replace('"host":"abci"', '"host":"abci-2"'))
    line = one_line_error(run_testbed("calibrate", str(moved), "--base", str(fitted), "-o",
                                      str(tmp_path / "x.yaml")))
    assert "the profile was fitted on abci" in line
