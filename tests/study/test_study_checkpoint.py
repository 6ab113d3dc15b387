"""``testbed study checkpoint --quick`` end to end as a user runs it (real PyTorch and
Chainer saves, real dd, real writer processes, real restores in new processes), and
its bad options refused in one line."""

from __future__ import annotations

import json

import pytest

from real_runs.ckpt_study.bench import study_formats
from testbed.app.study.ckpt_analysis import MIN_SPEEDUP
from tests.conftest import each, run_cli

pytestmark = [pytest.mark.frameworks, pytest.mark.timeout(300)]


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    out = tmp_path_factory.mktemp("study") / "ckpt"
    r = run_cli("study", "checkpoint", "--quick", "--frameworks", "torch,chainer", "-o",
                str(out), timeout=240)
    assert r.returncode == 0, r.stderr
    return r.stdout, json.loads((out / "study.json").read_text()), out


def test_every_format_is_measured_against_dd(quick):
    text, study, _ = quick
    rows = study["formats"]
    for fw in ("torch", "chainer"):
        assert {r["format"] for r in rows if r["framework"] == fw} == set(study_formats(fw))
    for r in each(rows, 7):
        assert r["model"] == "mlp" and r["parameters"] == 3466
        assert r["save_min_s"] > 0 and r["load_min_s"] > 0 and r["dd_fsync_s"] > 0
        assert r["durable_s"] >= r["save_min_s"]
        if not r["compressed"]:
            assert r["ckpt_bytes"] > r["state_bytes"]      # weights + momentum + the format
        framework_durable = r["durable_s"] - r["sha256_s"]
        assert r["framework_vs_dd"] == pytest.approx(framework_durable / r["dd_fsync_s"])
        # the table shows the same figures
        line = next(line for line in text.splitlines()
                    if f" {r['format']} " in f" {line} " and line.startswith(r["framework"]))
        assert f"{r['ckpt_bytes'] / 1e6:.3f}" in line and f"{r['framework_vs_dd']:.1f}×" in line


def test_writers_and_restarts(quick):
    _, study, _ = quick
    scaling = study["scaling"]
    assert [(r["framework"], r["writers"]) for r in scaling] == [("torch", 1), ("torch", 2)]
    assert scaling[0]["speedup"] == 1.0
    assert scaling[1]["bytes_per_writer"] * 2 == pytest.approx(scaling[1]["bytes_total"], abs=8)
    ratios = sorted(a / b for a in scaling[0]["durable_runs_s"]
                    for b in scaling[1]["durable_runs_s"])
    assert scaling[1]["speedup"] == pytest.approx((ratios[7] * ratios[8]) ** 0.5)  # in logs
    assert scaling[1]["speedup_low"] <= scaling[1]["speedup"] <= scaling[1]["speedup_high"]
    restarts = study["restarts"]
    complete = [r for r in restarts if r["omit"] is None]
    omitted = [r for r in restarts if r["omit"] == "rng"]
    assert {r["framework"] for r in each(complete, 2)} == {"torch", "chainer"}
    for r in complete:
        assert r["identical"] and r["new_process"] and r["loaded_step"] == 3
        assert r["restored_sha256"] == r["straight_sha256"]
    for r in each(omitted, 2):
        assert not r["identical"] and r["new_process"]


def test_claims_follow_the_data(quick):
    text, study, _ = quick
    claims = {c["claim"].split(":")[0]: c for c in study["claims"]}
    restart = next(c for k, c in claims.items() if k.startswith("Restarting"))
    # complete restores identical, the omission differs, but TensorFlow was not run
    assert restart["verdict"] == "undecided" and "tensorflow" in restart["evidence"]
    bottleneck = next(c for k, c in claims.items() if k.startswith("Framework"))
    assert bottleneck["verdict"] == "undecided"            # no checkpoint of real size
    shard = next(c for k, c in claims.items() if k.startswith("One writer"))
    two = study["scaling"][1]
    assert two["speedup_confidence"] == pytest.approx(1 - 2 / 70)   # 4 rounds a side
    expected = ("supported" if two["speedup_low"] >= MIN_SPEEDUP else
                "contradicted" if two["speedup_high"] <= 1.0 else "undecided")
    assert shard["verdict"] == expected and shard["scope"].startswith("torch; this machine")
    for c in study["claims"]:
        assert f"{c['verdict'].upper():<12} {c['claim']}" in text


def test_the_projection_and_the_output_folder(quick):
    text, study, out = quick
    oracle = study["oracle"]
    single = sorted((r for r in oracle if r["writers"] == "single"), key=lambda r: r["gpus"])
    shard = sorted((r for r in oracle if r["writers"] == "dp-shard"), key=lambda r: r["gpus"])
    assert single[0]["write_s"] == pytest.approx(single[-1]["write_s"])   # one writer: flat
    assert shard[-1]["write_s"] < shard[0]["write_s"]                      # sharded: falls
    assert {r["serialise_source"] for r in oracle} == {"profile"}          # no real size
    for name in ("formats.png", "sizes.png", "scaling.png", "oracle.png"):
        assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    for name in ("formats.csv", "scaling.csv", "oracle.csv", "restarts.csv", "summary.txt"):
        assert (out / name).stat().st_size > 0
    assert f"outputs: {out}" in text


@pytest.mark.parametrize("args, field", [
    (["--frameworks", "jax"], "--frameworks"),
    (["--models", "vgg"], "--models"),
    (["--formats", "pickle"], "--formats"),
    (["--writers", "0"], "--writers"),
    (["--writers", "1,x"], "--writers"),
    (["--writers", "100000"], "--writers"),
    (["--restart-k", "9"], "--restart-k"),
    (["--restart-models", "resnet50"], "--restart-models"),
    (["--system", "nowhere"], "--system"),
    (["--interval", "-5min"], "--interval"),
    (["--repeats", "0"], "--repeats"),
])
def test_bad_options_exit_2_in_one_line(args, field, tmp_path):
    r = run_cli("study", "checkpoint", "--quick", *args, "-o", str(tmp_path / "never"))
    assert r.returncode == 2, r.stdout + r.stderr
    assert field in r.stderr and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "never").exists()
