"""The oracle's command line, as a user runs it (fresh processes)."""

from __future__ import annotations

import json

import pytest

KEYS = {"time_per_iteration_s", "compute_s", "communication_s", "memory_per_gpu_bytes",
        "feasible", "reason"}


def test_predict_json(cli):
    r = cli("oracle", "predict", "--system", "abci-v100", "--model", "resnet50", "--strategy",
            "ds", "--gpus", "64", "--global-batch", "1024", "--group-size", "4",
            "--input-shape", "3x224x224", "--json")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert KEYS <= data.keys()
    assert data["feasible"] is True and data["reason"] is None
    assert data["time_per_iteration_s"] > data["compute_s"] > 0


def test_predict_table_and_infeasible(cli):
    r = cli("oracle", "predict", "--system", "abci-v100", "--model", "vgg16", "--strategy",
            "filter", "--gpus", "4", "--global-batch", "4096")
    assert r.returncode == 0
    assert "INFEASIBLE" in r.stdout and "per GPU" in r.stdout


def test_paradl_mode_from_net_file(cli, paradl_inputs):
    r = cli("oracle", "predict", "--system", "abci-v100", "--model",
            str(paradl_inputs / "RESNET50_ImageNet_profall.net_sc"), "--strategy", "filter",
            "--gpus", "64", "--global-batch", "64", "--mode", "paradl",
            "--mask", str(paradl_inputs / "filter_resnet.lc"), "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["compute_epoch_s"] == pytest.approx(262.16, rel=0.01)


def test_sweep(cli):
    r = cli("oracle", "sweep", "--system", "abci-v100", "--model", "resnet50",
            "--global-batch", "1024", "--max-gpus", "256", "--json")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    ranked = data["ranked"]
    times = [e["time_per_iteration_s"] for e in ranked]
    assert times == sorted(times)
    assert {e["strategy"] for e in ranked} >= {"data", "pipeline"}
    assert all(e["bottleneck"] for e in ranked)
    assert data["infeasible"] and all(e["reason"] for e in data["infeasible"])
    # ChainerMNX's data+spatial runs ~5x slower than ideal on ABCI (calibration): below
    # half the best per-GPU rate, so it is left out, with the reason
    assert any(e["strategy"] == "ds" and "parallel efficiency" in e["reason"]
               for e in data["infeasible"])
    r = cli("oracle", "sweep", "--system", "abci-v100", "--model", "resnet50",
            "--global-batch", "1024", "--max-gpus", "256", "--min-efficiency", "0", "--json")
    assert "ds" in {e["strategy"] for e in json.loads(r.stdout)["ranked"]}
    r = cli("oracle", "sweep", "--system", "abci-v100", "--model", "resnet50", "--max-gpus", "64")
    assert r.returncode == 0 and "rank" in r.stdout and "bottleneck" in r.stdout


@pytest.mark.parametrize("args,needle", [
    (["--model", "resnet51"], "resnet51"),
    (["--strategy", "hybrid"], "hybrid"),
    (["--system", "abci-v200"], "abci-v200"),
    (["--gpus", "0"], "--gpus"),
    (["--gpus", "-4"], "--gpus"),
    (["--global-batch", "0"], "--global-batch"),
    (["--input-shape", "3xfoo"], "3xfoo"),
])
def test_bad_input_one_line_exit_2(cli, args, needle):
    base = {"--system": "abci-v100", "--model": "resnet50", "--strategy": "data",
            "--gpus": "4", "--global-batch": "64"}
    for i in range(0, len(args), 2):
        base[args[i]] = args[i + 1]
    flat = [x for kv in base.items() for x in kv]
    r = cli("oracle", "predict", *flat)
    assert r.returncode == 2
    assert "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    assert needle in r.stderr


def test_malformed_net_file(cli, tmp_path):
    bad = tmp_path / "broken.net"
    bad.write_text("Input|1x3x32x32\nCONV_1|3x32x32|3x8x3x3|8x3O\n")
    r = cli("oracle", "predict", "--system", "abci-v100", "--model", str(bad),
            "--strategy", "data", "--gpus", "2", "--global-batch", "8")
    assert r.returncode == 2
    assert "broken.net:2" in r.stderr and "Traceback" not in r.stderr


def test_calibrate_dry_run(cli, abci_csv):
    r = cli("calibrate", str(abci_csv), "--system", "abci-v100", "--dry-run", "--json")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["written"] is None
    assert data["calibration"]["accuracy"]["in_sample_mean"] > 0.9


def test_verify_against_measurements(cli, abci_csv):
    r = cli("oracle", "verify", str(abci_csv), "--system", "abci-v100", "--json")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert len(data["rows"]) == 31
    assert data["mean_accuracy"] == pytest.approx(
        sum(x["accuracy"] for x in data["rows"]) / 31)
    r = cli("oracle", "verify", "missing.csv", "--system", "abci-v100")
    assert r.returncode == 2 and "missing.csv" in r.stderr


def test_collective_json_matches_nccl_tests_definitions(cli):
    r = cli("oracle", "collective", "--system", "a100-cluster", "--op", "allreduce",
            "--bytes", "1GiB", "--gpus", "16", "--json")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["bytes"] == 2**30
    assert data["algbw_GBps"] == pytest.approx(2**30 / data["time_s"] / 1e9)
    assert data["busbw_GBps"] == pytest.approx(data["algbw_GBps"] * 2 * 15 / 16)
    r = cli("oracle", "collective", "--system", "h100-cluster", "--op", "broadcast",
            "--bytes", "64MB", "--gpus", "8")
    assert r.returncode == 0 and "busbw" in r.stdout


@pytest.mark.parametrize("args,needle", [
    (["--op", "alltoall"], "alltoall"),
    (["--bytes", "1GiX"], "--bytes"),
    (["--bytes", "0"], "--bytes"),
    (["--gpus", "100000"], "--gpus"),
])
def test_collective_bad_input(cli, args, needle):
    base = {"--system": "a100-cluster", "--op": "allreduce", "--bytes": "1GiB", "--gpus": "8"}
    for i in range(0, len(args), 2):
        base[args[i]] = args[i + 1]
    r = cli("oracle", "collective", *[x for kv in base.items() for x in kv])
    assert r.returncode == 2 and needle in r.stderr and "Traceback" not in r.stderr


def test_predict_shows_checkpoint_terms_and_input_bytes(cli):
    r = cli("oracle", "predict", "--system", "abci-v100", "--model", "resnet50", "--strategy",
            "data", "--gpus", "256", "--global-batch", "16384", "--input-precision", "fp16",
            "--json")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    c = data["checkpoint"]
    assert c["write_s"] == pytest.approx(sum(c[k] for k in (
        "device_to_host_s", "serialize_s", "transfer_s", "metadata_s", "fsync_s")))
    assert data["input_bytes_per_sample"] == 3 * 224 * 224 * 2
    r = cli("oracle", "predict", "--system", "abci-v100", "--model", "resnet50", "--strategy",
            "data", "--gpus", "4", "--global-batch", "64", "--input-precision", "fp17")
    assert r.returncode == 2 and "fp17" in r.stderr


def test_sweep_defaults_to_training_precision_and_names_skipped_points(cli):
    r = cli("oracle", "sweep", "--system", "h100-cluster", "--model", "resnet50",
            "--global-batch", "256", "--max-gpus", "64", "--json")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert {e["precision"] for e in data["ranked"]} == {"bf16"}
    reasons = [e["reason"] for e in data["infeasible"]]
    assert any("samples per GPU < the minimum of 16" in x for x in reasons)
    r = cli("oracle", "sweep", "--system", "h100-cluster", "--model", "resnet50",
            "--min-batch-per-gpu", "0")
    assert r.returncode == 2 and "min_batch_per_gpu" in r.stderr
