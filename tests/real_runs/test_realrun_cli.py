"""Bad input to ``testbed real-run``: one line, exit status 2, checkpoints untouched;
plus the sbatch scripts, measurement records and the import discipline."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys

import pytest

from real_runs.env import capture_environment, child_env
from testbed.errors import InputError
from testbed.measurements import encode_record, make_record, read_records, write_records


def _one_line_error(proc) -> str:
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    return lines[0]


@pytest.mark.parametrize("args,match", [
    (["--framework", "torchh", "--steps", "3"], "unknown framework"),
    (["--framework", "torch", "--model", "vgg99", "--steps", "3"], "unknown model"),
    (["--framework", "chainer", "--steps", "0"], "steps must be positive"),
    (["--framework", "chainer", "--steps", "-4"], "steps must be positive"),
    (["--framework", "chainer", "--steps", "4", "--checkpoint-every", "0"], "checkpoint-every"),
    (["--framework", "chainer", "--steps", "4", "--kill-mtbf", "soon"], "kill-mtbf"),
])
def test_bad_train_input(cli, args, match):
    assert match in _one_line_error(cli("train", *args))


def _tree_digest(root) -> str:
    digest = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        digest.update(str(path.relative_to(root)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


@pytest.mark.frameworks
def test_checkpoint_from_another_run_is_refused_and_kept(cli, tmp_path):
    ckpt = tmp_path / "ckpt"
    first = cli("train", "--framework", "chainer", "--model", "mlp", "--steps", "6",
                "--checkpoint-every", "2", "--ckpt-dir", str(ckpt), "--json")
    assert first.returncode == 0, first.stderr
    before = _tree_digest(ckpt)
    for args in (["--framework", "torch", "--model", "mlp"],
                 ["--framework", "chainer", "--model", "cnn"]):
        line = _one_line_error(cli("train", *args, "--steps", "6", "--ckpt-dir", str(ckpt)))
        assert "checkpoint step-" in line and "not framework" in line
    # same framework and model, different seed: refused by the worker on load
    line = _one_line_error(cli("train", "--framework", "chainer", "--model", "mlp", "--steps",
                               "8", "--checkpoint-every", "2", "--seed", "9", "--ckpt-dir",
                               str(ckpt)))
    assert "different run configuration" in line and "seed" in line
    assert _tree_digest(ckpt) == before


@pytest.mark.frameworks
def test_a_run_whose_kills_restored_nothing_says_so(cli, tmp_path):
    # one kill at step 1, the first checkpoint at step 4: the restart starts from
    # scratch, so "identical to uninterrupted" does not test a restore — a warning says so
    kills = tmp_path / "kills.jsonl"
    kills.write_text('{"at_step": 1}\n')
    proc = cli("train", "--framework", "chainer", "--model", "mlp", "--steps", "6",
               "--checkpoint-every", "4", "--kill-trace", str(kills), "--verify",
               "--ckpt-dir", str(tmp_path / "ckpt"), "--json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["kills"] == 1 and out["checkpoint_restores"] == 0
    assert out["identical_to_uninterrupted"] is True
    assert len(out["warnings"]) == 1 and "nothing was restored" in out["warnings"][0]
    assert "testbed: warning: nothing was restored" in proc.stderr
    # a kill after the first checkpoint restores it: no warning
    kills.write_text('{"at_step": 5}\n')
    proc = cli("train", "--framework", "chainer", "--model", "mlp", "--steps", "6",
               "--checkpoint-every", "4", "--kill-trace", str(kills),
               "--ckpt-dir", str(tmp_path / "ckpt2"), "--json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["checkpoint_restores"] == 1 and out["warnings"] == []
    assert "warning" not in proc.stderr


def test_unwritable_checkpoint_dir(cli, tmp_path):
    blocker = tmp_path / "plain-file"
    blocker.write_text("")
    line = _one_line_error(cli("train", "--framework", "torch", "--steps", "3", "--ckpt-dir",
                               str(blocker / "sub")))
    assert "not writable" in line


def test_bad_kill_trace_names_file_and_line(cli, tmp_path):
    trace = tmp_path / "k.jsonl"
    trace.write_text('{"at_step": 2}\n{"at_step": "x"}\n')
    line = _one_line_error(cli("train", "--framework", "torch", "--steps", "3", "--kill-trace",
                               str(trace)))
    assert f"{trace}:2" in line


def test_bench_bad_input(cli):
    assert "unknown framework" in _one_line_error(cli("checkpoint-bench", "--framework", "jax"))
    assert "unknown model" in _one_line_error(cli("checkpoint-bench", "--framework", "torch",
                                                  "--model", "gpt"))


def test_slurm_cli_writes_file(cli, tmp_path):
    out = tmp_path / "run.sbatch"
    proc = cli("slurm", "--framework", "torch", "--run", "mpi-bench", "--nodes", "2",
               "--gpus-per-node", "4", "--results", str(tmp_path / "results"), "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "mpirun -np 8" in out.read_text()
    assert "unknown framework" in _one_line_error(cli("slurm", "--framework", "mxnet"))


def test_measurement_records_round_trip_with_environment(tmp_path):
    env = capture_environment("none", world_size=2)
    assert env.host and env.cpu_model and env.cpu_count >= 1 and env.world_size == 2
    record = make_record("collective", env=env.to_dict(), op="allreduce", backend="gloo",
                         processes=2, metrics={"message_bytes": 1024, "time_s": 1.5e-5})
    path = tmp_path / "m.jsonl"
    write_records(path, [record, record])
    back = [r for _, r in read_records(path)]
    assert back == [record, record]
    assert encode_record(back[0]) == encode_record(record)
    path.write_text('{"schema_version": 1, "kind": "collective", "op": "allreduce"}\n')
    with pytest.raises(InputError, match="env"):
        read_records(path)


def test_real_runs_imports_without_frameworks():
    code = ("import sys, real_runs, real_runs.harness, real_runs.ckpt_store, real_runs.supervisor, "
            "real_runs.faults, real_runs.formats, real_runs.pool, real_runs.slurm, "
            "real_runs.profile, real_runs.ddp, real_runs.mpibench, real_runs.chainer_mpi, "
            "testbed.app.cli.realrun, testbed.measurements\n"
            "bad = [m for m in ('torch', 'tensorflow', 'keras', 'chainer', 'mpi4py') "
            "if m in sys.modules]\nprint(bad)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=child_env(), timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout.strip().replace("'", '"')) == []


@pytest.mark.frameworks
def test_profile_splits_step_time_and_records_environment(cli, tmp_path):
    out = tmp_path / "m.jsonl"
    proc = cli("profile", "--framework", "torch", "--model", "cnn", "--steps", "6",
               "--rounds", "2", "--warmup", "1", "--measurements", str(out), "--json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    summary = report["summary"]
    # the one method: 2 rounds of 6 timed steps after 1 warm-up step, the median of the
    # round medians on the wall clock; the split is the median step's, inside its wall
    assert summary["steps"] == 12 and summary["peak_memory_bytes"] > 0
    assert summary["step_round_lo_s"] <= summary["step_s"] <= summary["step_round_hi_s"]
    assert summary["forward_s"] + summary["backward_s"] + summary["update_s"] <= (
        summary["step_round_hi_s"] * 1.05)
    assert report["method"]["warmup"] == 1 and report["method"]["rounds"] == 2
    # PyTorch hooks time every layer (per step, in 5 extra steps after the timed ones,
    # each layer the median of its 5, so one stalled step does not move it); their sum
    # is part of a step's forward time
    assert any(name.endswith(":Conv2d") for name in report["layer_s"])
    assert sum(report["layer_s"].values()) <= max(t[0] for t in report["timings"]) * 3
    records = [r for _, r in read_records(out)]
    assert [r.kind for r in records] == ["train_step"] * 12 + ["train_summary", "layer_times"]
    assert all(r.env.framework == "torch" and r.env.framework_version for r in records)
    assert records[12].config.model == "cnn" and records[12].metrics.step_cpu_s > 0
    method = records[12].method
    assert (method.warmup, method.rounds, method.samples_per_round, method.statistic,
            method.clock) == (1, 2, 6, "median of round medians", "wall")
