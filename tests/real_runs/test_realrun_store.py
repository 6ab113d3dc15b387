"""The atomic checkpoint store: manifests, keep-last-k, damage detection and fallback,
and a writer SIGKILLed in the middle of a commit (no framework needed)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

import pytest

from real_runs.ckpt_store import MANIFEST, CheckpointStore, sha256_file
from real_runs.env import child_env
from real_runs.faults import damage_checkpoint, damage_file, parse_kill_trace
from testbed.errors import InputError


def _write(store: CheckpointStore, step: int, payload: bytes) -> None:
    tmp = store.begin(step)
    (tmp / "data.bin").write_bytes(payload)
    (tmp / "state.json").write_text(json.dumps({"step": step}))
    store.commit(tmp, step)


def test_commit_writes_manifest_with_sha256(tmp_path):
    store = CheckpointStore(tmp_path, "torch", "mlp", keep=2)
    _write(store, 4, b"x" * 1000)
    (entry,) = store.committed()
    manifest = json.loads((entry.path / MANIFEST).read_text())
    assert manifest["framework"] == "torch" and manifest["model"] == "mlp"
    assert manifest["step"] == 4
    assert manifest["files"]["data.bin"] == {"sha256": sha256_file(entry.path / "data.bin"),
                                             "bytes": 1000}
    assert store.verify(entry) is None


def test_keep_last_k(tmp_path):
    store = CheckpointStore(tmp_path, "torch", "mlp", keep=2)
    for step in (3, 6, 9, 12):
        _write(store, step, bytes([step]) * 64)
    assert [c.step for c in store.committed()] == [9, 12]


def test_a_pruned_checkpoint_leaves_the_store_in_one_rename(tmp_path):
    """Pruning renames a checkpoint out of the store before removing its files, so a
    writer killed half-way through the removal (a Slurm requeue did it: the next process
    found step-00001100 without its manifest and refused the whole run) leaves only a
    partial folder, which the next start removes."""
    store = CheckpointStore(tmp_path, "torch", "mlp", keep=2)
    for step in (3, 6):
        _write(store, step, bytes([step]) * 64)
    oldest = store.committed()[0]
    aside = store.retire(oldest)          # what a kill right after the rename leaves
    assert not oldest.path.exists() and (aside / MANIFEST).exists()
    assert [c.step for c in store.committed()] == [6]
    store.check_usable()                  # the next process starts
    assert store.clean_partial() == [aside.name] and not aside.exists()


@pytest.mark.parametrize("mode", ["truncate", "bitflip", "manifest"])
def test_damaged_newest_falls_back_to_previous(tmp_path, mode):
    store = CheckpointStore(tmp_path, "chainer", "cnn", keep=3)
    for step in (2, 4, 6):
        _write(store, step, bytes(range(256)) * 8)
    newest = store.committed()[-1]
    if mode == "manifest":
        (newest.path / MANIFEST).write_text("{truncated")
    else:
        damage_checkpoint(newest.path, mode, seed=1)
    seen = []
    entry = store.latest_valid(lambda e, reason: seen.append((e.step, reason)))
    assert entry is not None and entry.step == 4
    assert [s for s, _ in seen] == [6]
    # damage detection does not delete anything
    assert [c.step for c in store.committed()] == [2, 4, 6]


def test_damage_file_changes_exactly_what_it_says(tmp_path):
    path = tmp_path / "f"
    original = bytes(range(200))
    path.write_bytes(original)
    damage_file(path, "bitflip", seed=3)
    flipped = path.read_bytes()
    diff = [i for i, (a, b) in enumerate(zip(original, flipped, strict=True)) if a != b]
    assert len(diff) == 1 and bin(original[diff[0]] ^ flipped[diff[0]]).count("1") == 1
    damage_file(path, "truncate")
    assert len(path.read_bytes()) == 100


def test_kill_during_commit_leaves_previous_checkpoints_intact(tmp_path):
    store = CheckpointStore(tmp_path, "torch", "mlp", keep=3)
    _write(store, 5, b"a" * 100)
    writer = (
        "import sys, time; from real_runs.ckpt_store import CheckpointStore\n"
        f"s = CheckpointStore({str(tmp_path)!r}, 'torch', 'mlp', keep=3, write_delay_s=60)\n"
        "t = s.begin(10); (t / 'data.bin').write_bytes(b'b' * 100)\n"
        "print('writing', flush=True); s.commit(t, 10)\n")
    proc = subprocess.Popen([sys.executable, "-c", writer], stdout=subprocess.PIPE, text=True,
                            env=child_env())
    assert proc.stdout.readline().strip() == "writing"
    time.sleep(0.2)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    assert proc.returncode == -signal.SIGKILL
    assert [c.step for c in store.committed()] == [5]
    assert store.latest_valid().step == 5
    assert len(store.clean_partial()) == 1
    assert [p.name for p in tmp_path.iterdir()] == ["step-00000005"]


def test_store_refuses_other_runs_checkpoints_without_touching_them(tmp_path):
    store = CheckpointStore(tmp_path, "torch", "mlp")
    _write(store, 3, b"z" * 10)
    before = {p.name: p.read_bytes() for p in (tmp_path / "step-00000003").iterdir()}
    for framework, model in (("chainer", "mlp"), ("torch", "cnn")):
        with pytest.raises(InputError, match="not framework"):
            CheckpointStore(tmp_path, framework, model).check_usable()
    after = {p.name: p.read_bytes() for p in (tmp_path / "step-00000003").iterdir()}
    assert before == after


def test_unwritable_directory_is_an_input_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(InputError, match="not writable"):
        CheckpointStore(blocker / "ckpt", "torch", "mlp").check_usable()
    with pytest.raises(InputError, match="not a directory"):
        CheckpointStore(blocker, "torch", "mlp").check_usable()


def test_kill_trace_parsing(tmp_path):
    good = tmp_path / "t.jsonl"
    good.write_text('{"at_step": 3}\n# comment\n{"during_checkpoint": true, "damage": "bitflip"}\n'
                    '{"at_s": 2.5}\n')
    specs = parse_kill_trace(good)
    assert [s.describe() for s in specs] == ["after step 3", "during checkpoint write",
                                             "at 2.500 s"]
    assert specs[1].damage == "bitflip"
    for text, match in (('{"at_step": 0}', "positive"), ('{"at_step": 1, "at_s": 2}', "exactly"),
                        ('{"bogus": 1}', "unknown"), ('{"at_s": 1, "damage": "x"}', "damage"),
                        ("nope", "not JSON")):
        bad = tmp_path / "bad.jsonl"
        bad.write_text(text + "\n")
        with pytest.raises(InputError, match=match) as info:
            parse_kill_trace(bad)
        assert ":1" in info.value.format()
