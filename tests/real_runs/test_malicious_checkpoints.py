"""A crafted malicious checkpoint, per framework, is refused and runs nothing.

The attack: a checkpoint folder whose framework file is replaced by one that executes a
command when unpickled (``os.system("touch …/pwned")``), with its manifest regenerated
so the SHA-256 check passes — the manifest guards against accidents, not tampering.
Resuming from it must exit 2 with one line naming the checkpoint, leave the folder
byte-identical and never create the marker file: PyTorch loads with
``weights_only=True``, NumPy archives (Keras state, Chainer ``save_npz``) are opened
with ``allow_pickle=False``.
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

from real_runs.env import child_env

REPO = Path(__file__).resolve().parents[2]
FILES = {"torch": "torch_state.pt", "tensorflow": "keras_state.npz",
         "chainer": "chainer_model.npz"}


class _Payload:
    """Unpickling this runs a shell command (the attack; never executed by the test)."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def _train(tmp: Path, framework: str, steps: int) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "testbed", "real-run", "train", "--framework", framework,
         "--steps", str(steps), "--checkpoint-every", "2", "--ckpt-dir", str(tmp / "ck")],
        cwd=tmp, env={**child_env(), "PYTHONPATH": str(REPO)}, capture_output=True, text=True,
        timeout=300)


def _poison(step_dir: Path, framework: str, marker: Path) -> None:
    target = step_dir / FILES[framework]
    if framework == "torch":
        # a torch.save-style zip whose data.pkl unpickles to os.system(...)
        with zipfile.ZipFile(target, "w") as zf:
            zf.writestr("archive/data.pkl", pickle.dumps({"model": _Payload(marker)}))
            zf.writestr("archive/version", "3\n")
    else:
        arrays = {"evil": np.array([_Payload(marker)], dtype=object)}
        with open(target, "wb") as fh:
            np.savez(fh, **arrays)          # object arrays are stored as pickles
    manifest = json.loads((step_dir / "MANIFEST.json").read_text())
    for name, entry in manifest["files"].items():
        data = (step_dir / name).read_bytes()
        entry["sha256"] = hashlib.sha256(data).hexdigest()
        entry["bytes"] = len(data)
    (step_dir / "MANIFEST.json").write_text(json.dumps(manifest, sort_keys=True, indent=1))


def _digest(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file() and p.name != "timeline.jsonl"}


@pytest.mark.frameworks
@pytest.mark.parametrize("framework", ["torch", "tensorflow", "chainer"])
def test_a_tampered_checkpoint_is_refused_and_runs_nothing(tmp_path, framework):
    first = _train(tmp_path, framework, 3)
    assert first.returncode == 0, first.stderr
    step_dir = next((tmp_path / "ck").glob("step-*"))
    marker = tmp_path / "pwned"
    _poison(step_dir, framework, marker)
    before = _digest(tmp_path / "ck")
    resumed = _train(tmp_path, framework, 5)
    assert resumed.returncode == 2, (resumed.stdout, resumed.stderr[-2000:])
    lines = [ln for ln in resumed.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in resumed.stderr, resumed.stderr[-2000:]
    assert step_dir.name in lines[0] and "refused to load" in lines[0]
    assert not marker.exists(), "the checkpoint ran code"
    assert _digest(tmp_path / "ck") == before
