"""The record format: versioned, validated line by line, one clear error per bad line."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from testbed.calibration.records import import_paradl, load_records
from testbed.errors import InputError
from testbed.measurements import (
    MIN_DURATION_S,
    encode_record,
    parse_record,
    read_records,
    record_dict,
)
from tests.calibration.conftest import (
    ENV,
    collective_record,
    one_line_error,
    raw_line,
    run_testbed,
    train_record,
    write_lines,
)

GOOD = dict(kind="collective", env=ENV, op="allreduce", backend="gloo", processes=2,
            metrics={"message_bytes": 64, "time_s": 1e-4})


def test_records_round_trip_byte_for_byte(tmp_path):
    recs = [train_record("mlp", 64, 16, 4e-4), collective_record(1024, 2e-4)]
    path = write_lines(tmp_path / "r.jsonl", recs)
    back = [r for _, r in read_records(path)]
    assert back == recs
    assert path.read_text() == "".join(encode_record(r) + "\n" for r in recs)


@pytest.mark.parametrize(("line", "field", "message"), [
    (raw_line(**{**GOOD, "schema_version": 7}), "schema_version", "unknown schema version 7"),
    (json.dumps({k: v for k, v in GOOD.items()}), "schema_version", "no schema_version"),
    (raw_line(**{**GOOD, "kind": "gossip"}), "kind", "unknown record kind"),
    (raw_line(**{k: v for k, v in GOOD.items() if k != "env"}), "env", "required key"),
    (raw_line(**{**GOOD, "metrics": {"message_bytes": 64}}), "metrics.time_s", "required"),
    (raw_line(**GOOD).replace('"time_s": 0.0001', '"time_s": 1e999'), "metrics.time_s",
     "finite"),
    (raw_line(**{**GOOD, "metrics": {"message_bytes": 64, "time_s": -1.0}}),
     "metrics.time_s", "greater than 0"),
    (raw_line(**{**GOOD, "colour": "red"}), "colour", "unknown key"),
])
def test_bad_record_is_one_error_naming_file_line_and_field(tmp_path, line, field, message):
    path = tmp_path / "bad.jsonl"
    good = raw_line(**GOOD)
    path.write_text(good + "\n" + line + "\n")
    with pytest.raises(InputError) as info:
        read_records(path)
    err = info.value
    assert err.source == str(path) and err.line == 2 and err.field == field
    assert message in err.format()


def test_nan_is_not_json(tmp_path):
    path = tmp_path / "nan.jsonl"
    path.write_text(raw_line(**GOOD).replace("0.0001", "NaN") + "\n")
    with pytest.raises(InputError, match=":1: not JSON"):
        read_records(path)


def test_records_check_cli(tmp_path):
    good = write_lines(tmp_path / "good.jsonl", [collective_record(64, 1e-4)])
    proc = run_testbed("records", "check", str(good), "--json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["ok"] and data["files"][0]["kinds"] == {"collective": 1}
    bad = tmp_path / "bad.jsonl"
    bad.write_text(raw_line(**GOOD) + "\n" + raw_line(**{**GOOD, "schema_version": 2}) + "\n")
    line = one_line_error(run_testbed("records", "check", str(good), str(bad)))
    assert f"{bad}:2" in line and "schema_version" in line


def test_import_paradl_keeps_every_run(abci_csv, tmp_path):
    out = tmp_path / "abci.jsonl"
    proc = run_testbed("records", "import-paradl", str(abci_csv), "-o", str(out), "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["records"] == 31
    recs = [r for _, r in read_records(out)]
    assert recs == import_paradl(abci_csv)
    first = recs[0]
    # alexnet data, 1 GPU, 512 samples: 0.4607636539136773 s per iteration (the CSV's median)
    assert first.config.model == "alexnet" and first.config.processes == 1
    assert first.metrics.step_s == 0.4607636539136773 and first.metrics.steps == 9
    assert first.measured_at == "2020-01-21T20:20:54Z"
    assert first.env.gpu_model == "Tesla V100-SXM2-16GB"
    assert sum(r.measured_at is None for r in recs) == 11        # logs named "log"


def test_import_paradl_bad_csv(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("model,strategy\nresnet50,data\n")
    line = one_line_error(run_testbed("records", "import-paradl", str(bad), "-o",
                                      str(tmp_path / "o.jsonl")))
    assert str(bad) in line and "missing column" in line
    assert not (tmp_path / "o.jsonl").exists()


def test_load_records_hashes_what_it_read(tmp_path):
    path = write_lines(tmp_path / "r.jsonl", [collective_record(64, 1e-4)])
    import hashlib
    rs = load_records([path])
    assert rs.files[0].sha256 == hashlib.sha256(path.read_bytes()).hexdigest()


@given(t=st.floats(min_value=MIN_DURATION_S, max_value=1e6, allow_nan=False),
       nbytes=st.integers(min_value=1, max_value=2**40))
def test_any_valid_record_survives_encoding(t, nbytes):
    rec = collective_record(nbytes, t)
    assert parse_record(json.loads(encode_record(rec)), source="x") == rec
    assert record_dict(rec)["metrics"]["min_time_s"] == t


def test_calibrate_with_a_bad_record_leaves_the_profile_untouched(tmp_path):
    good = raw_line(**GOOD)
    bad = tmp_path / "r.jsonl"
    bad.write_text(good + "\n" + good.replace('"time_s": 0.0001', '"time_s": "fast"') + "\n")
    out = tmp_path / "p.yaml"
    out.write_text("untouched\n")
    line = one_line_error(run_testbed("calibrate", str(bad), "--base", "laptop-cpu", "-o",
                                      str(out)))
    assert f"{bad}:2" in line and "metrics.time_s" in line
    assert out.read_text() == "untouched\n"
