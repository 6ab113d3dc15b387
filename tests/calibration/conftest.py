"""Fixtures of the calibration tests: record builders and the quick local loop (run once)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from real_runs.env import child_env
from testbed.measurements import SCHEMA_VERSION, make_record

REPO = Path(__file__).resolve().parents[2]
#: A machine of the synthetic records (a CPU "device", as the laptop-cpu profile is).
ENV = {"host": "testhost", "os": "Linux", "python": "3.11", "cpu_model": "Test CPU",
       "cpu_count": 2, "gpu_model": "none", "framework": "torch",
       "framework_version": "2.13.0", "world_size": 1}


def env(**changes) -> dict:
    return {**ENV, **changes}


def train_record(model: str, width: int, batch: int, cpu_s: float, *, precision: str = "fp32",
                 stamp: str = "2025-01-01T00:00:00Z", **env_changes):
    return make_record(
        "train_summary", env=env(**env_changes), measured_at=stamp,
        config={"framework": "torch", "model": model, "model_options": {"width": width},
                "input_shape": "1x8x8", "precision": precision, "batch_size": batch},
        metrics={"steps": 10, "step_s": cpu_s * 1.1, "step_cpu_s": cpu_s})


def collective_record(nbytes: int, t: float, op: str = "allreduce", processes: int = 2):
    return make_record("collective", env=env(world_size=processes),
                       measured_at="2025-01-01T00:00:00Z", op=op, backend="gloo",
                       processes=processes,
                       metrics={"message_bytes": nbytes, "time_s": t * 1.2, "min_time_s": t,
                                "repeats": 10})


def checkpoint_record(nbytes: int, save_s: float, load_s: float, fmt: str = "harness",
                      params: int = 1000):
    return make_record("checkpoint", env=env(), measured_at="2025-01-01T00:00:00Z",
                       framework="torch", format=fmt, model="mlp", parameters=params,
                       metrics={"ckpt_bytes": nbytes, "files": 3, "state_bytes": 8 * params,
                                "save_s": save_s, "load_s": load_s})


def write_lines(path: Path, records) -> Path:
    from testbed.measurements import write_records
    write_records(path, records)
    return path


def raw_line(**fields) -> str:
    data = {"schema_version": SCHEMA_VERSION, **fields}
    return json.dumps(data)


def run_testbed(*args: str, timeout: float = 300, cwd: Path | None = None
                ) -> subprocess.CompletedProcess:
    """``python -m testbed ARGS`` in a fresh process, with the harness environment."""
    return subprocess.run([sys.executable, "-m", "testbed", *args], capture_output=True,
                          text=True, env=child_env(), timeout=timeout, cwd=cwd or REPO)


def one_line_error(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode == 2, (proc.stdout[-2000:], proc.stderr[-2000:])
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    return lines[0]


@pytest.fixture(scope="session")
def quick_loop(tmp_path_factory):
    """``testbed calibrate-local --quick`` once per session: its folder, profile and JSON."""
    root = tmp_path_factory.mktemp("quick-loop")
    profile = root / "local.yaml"
    proc = run_testbed("calibrate-local", "--quick", "-o", str(profile), "--records",
                       str(root / "records"), "--json", timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return {"root": root, "profile": profile, "records": root / "records",
            "summary": json.loads(proc.stdout)}
