"""The supervised run's timeline is written as it happens: a Ctrl-C keeps what happened
so far (and exits 130), and a resume in the same folder appends its run after the
earlier history instead of overwriting it."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from real_runs.env import child_env

REPO = Path(__file__).resolve().parents[2]


def _cmd(tmp: Path, steps: int) -> list[str]:
    return [sys.executable, "-m", "testbed", "real-run", "train", "--framework", "chainer",
            "--steps", str(steps), "--checkpoint-every", "2", "--ckpt-dir", str(tmp / "ck")]


def _events(path: Path) -> list[str]:
    return [json.loads(line)["event"] for line in path.read_text().splitlines() if line]


@pytest.mark.frameworks
def test_resume_appends_to_the_timeline(tmp_path):
    env = {**child_env(), "PYTHONPATH": str(REPO)}
    first = subprocess.run(_cmd(tmp_path, 3), cwd=tmp_path, env=env, capture_output=True,
                           text=True, timeout=300)
    assert first.returncode == 0, first.stderr
    timeline = tmp_path / "ck" / "timeline.jsonl"
    before = timeline.read_text()
    assert _events(timeline)[0] == "job_start" and _events(timeline)[-1] == "job_end"
    second = subprocess.run(_cmd(tmp_path, 5), cwd=tmp_path, env=env, capture_output=True,
                            text=True, timeout=300)
    assert second.returncode == 0, second.stderr
    after = timeline.read_text()
    assert after.startswith(before) and len(after) > len(before)
    assert _events(timeline).count("job_start") == 2


@pytest.mark.frameworks
def test_ctrl_c_keeps_the_timeline_so_far_and_exits_130(tmp_path):
    env = {**child_env(), "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(_cmd(tmp_path, 100000), cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    timeline = tmp_path / "ck" / "timeline.jsonl"
    deadline = time.monotonic() + 120
    while not list((tmp_path / "ck").glob("step-*")):      # training is under way
        assert proc.poll() is None, proc.stderr.read()
        assert time.monotonic() < deadline
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    events = _events(timeline)
    assert events[0] == "job_start" and "steps" in events
