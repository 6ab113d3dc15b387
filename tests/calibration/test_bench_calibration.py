"""Benchmarks: fitting a profile from records and verifying it (``make bench``)."""

from __future__ import annotations

import pytest

from testbed.calibration.compute import law_time_s
from testbed.calibration.fit import fit_records
from testbed.calibration.profile import load_calibrated
from testbed.calibration.records import load_records
from testbed.calibration.verify import verify
from testbed.model.zoo.harness import harness_model
from tests.calibration.conftest import (
    checkpoint_record,
    collective_record,
    train_record,
    write_lines,
)
from tests.calibration.test_fits import TRUE_LAW

#: A design the size of ``calibrate-local``'s full one: 4 families × 4 widths × 5 batches.
MODELS = [(m, w) for m in ("mlp", "cnn", "resnet") for w in (16, 32, 64, 128)] + [
    ("resnet18", 8), ("resnet18", 16)]
BATCHES = (4, 8, 16, 32, 64)


@pytest.fixture(scope="module")
def records(tmp_path_factory):
    root = tmp_path_factory.mktemp("bench")
    recs = [train_record(m, w, b, law_time_s(TRUE_LAW, harness_model(m, width=w), b))
            for m, w in MODELS for b in BATCHES]
    recs += [collective_record(4 * 2**k, 1e-4 + 4 * 2**k / 1e9) for k in range(22)]
    recs += [checkpoint_record(n, 0.004 + n / 5e8, 0.002 + n / 2e9, fmt=f, params=n // 8)
             for f in ("harness", "torch.save") for n in (10**4, 10**5, 10**6, 10**7)]
    return write_lines(root / "records.jsonl", recs)


def test_bench_fit_profile(benchmark, records):
    base = load_calibrated("laptop-cpu")
    rs = load_records([records])
    result = benchmark(fit_records, rs, base)
    assert len(result.section.compute[0].models) == len(MODELS)


def test_bench_verify_by_model(benchmark, records, tmp_path):
    rs = load_records([records])
    profile = tmp_path / "p.yaml"
    profile.write_text(fit_records(rs, load_calibrated("laptop-cpu")).text)
    prof = load_calibrated(profile)
    report = benchmark(verify, rs, prof.system, prof.fit, holdout="by-model")
    assert report.quantities["torch_step_s"].n == len(MODELS) * len(BATCHES)
