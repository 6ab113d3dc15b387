"""Real fault injection: SIGKILLs (one inside a checkpoint write) and damaged checkpoints,
and the run still ends bitwise identical to the uninterrupted one, in every framework."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from testbed import events as ev

pytestmark = [pytest.mark.frameworks, pytest.mark.timeout(300)]

TRACE = Path(__file__).resolve().parents[2] / "traces" / "kill" / "five-kills.jsonl"


@pytest.mark.parametrize("framework", ["torch", "tensorflow", "chainer"])
def test_five_kills_end_bitwise_identical(framework, tmp_path, cli):
    ckpt = tmp_path / "ckpt"
    proc = cli("train", "--framework", framework, "--model", "cnn", "--steps", "20",
                   "--checkpoint-every", "4", "--seed", "11", "--kill-trace", str(TRACE),
                   "--ckpt-dir", str(ckpt), "--verify", "--json")
    assert proc.returncode == 0, proc.stderr[-2000:]
    summary = json.loads(proc.stdout)
    for key in ("kills", "restarts", "wall_time_s", "lost_steps", "final_params_sha256",
                "identical_to_uninterrupted"):
        assert key in summary
    assert summary["kills"] == 5
    assert summary["restarts"] == 5
    assert summary["checkpoint_aborts"] == 2          # two kills landed inside a write
    assert summary["identical_to_uninterrupted"] is True
    assert summary["final_params_sha256"] == summary["reference_params_sha256"]
    # both damaged checkpoints were detected and an older one was loaded instead
    assert len(summary["corruptions_detected"]) == 2
    reasons = " ".join(c["reason"] for c in summary["corruptions_detected"])
    assert "sha256 mismatch" in reasons and "bytes" in reasons
    # per the trace (checkpoints every 4 steps): killed after 5, resumed from 4 → 1 lost;
    # killed writing 8 → 4; killed after 9, ckpt 8 bit-flipped so resumed from 4 → 5;
    # killed after 13, resumed from 12 → 1; killed writing 16 and ckpt 12 truncated,
    # so resumed from 8 → 8
    assert summary["lost_steps"] == 1 + 4 + 5 + 1 + 8
    loads = [c["step"] for c in summary["corruptions_detected"]]
    assert loads == [8, 12]

    with open(summary["timeline"], encoding="utf-8") as stream:
        timeline = ev.read_events(stream)
    kinds = [rec["event"] for rec in timeline]
    assert set(kinds) <= set(ev.EVENT_KINDS)
    assert kinds[0] == ev.JOB_START and kinds[-1] == ev.JOB_END
    assert kinds.count(ev.FAILURE) == 5
    assert kinds.count(ev.RESTART_BEGIN) == kinds.count(ev.RESTART_END) == 5
    assert kinds.count(ev.CHECKPOINT_ABORT) == 2
    assert kinds.count(ev.CORRUPTION_DETECTED) == 2
    times = [rec["t_s"] for rec in timeline]
    assert times == sorted(times)
    # every kill inside a write is directly preceded by its checkpoint_begin
    for i, kind in enumerate(kinds):
        if kind == ev.CHECKPOINT_ABORT:
            assert kinds[i - 1] == ev.CHECKPOINT_BEGIN
            assert timeline[i - 1]["step"] == timeline[i]["step"]
    # the steps ranges after the last restart reach the end
    assert max(rec["end_step"] for rec in timeline if rec["event"] == ev.STEPS) == 20
    # no temporary checkpoint is left behind, and only `keep` committed ones remain
    names = sorted(p.name for p in ckpt.iterdir() if p.is_dir())
    assert all(name.startswith("step-") for name in names)
    assert len(names) <= 3


def test_mtbf_kills_are_drawn_from_the_seed(tmp_path, cli):
    """--kill-mtbf draws kill times from the seeded exponential; the run still completes."""
    from real_runs.faults import mtbf_plan
    assert mtbf_plan(2.0, 5, 4) == mtbf_plan(2.0, 5, 4)
    assert mtbf_plan(2.0, 5, 4) != mtbf_plan(2.0, 6, 4)
    # seed 16 draws kills at 0.99 s, 0.59 s, 0.44 s (the registry's run.kills stream): all
    # shorter than an incarnation of
    # 1500 steps, so all three land (two of them while the framework is still importing)
    assert [round(k.at_s, 2) for k in mtbf_plan(1.5, 16, 3)] == [0.99, 0.59, 0.44]
    proc = cli("train", "--framework", "chainer", "--steps", "1500", "--checkpoint-every", "100",
                   "--seed", "16", "--kill-mtbf", "1.5s", "--max-kills", "3",
                   "--ckpt-dir", str(tmp_path / "c"), "--verify", "--json")
    assert proc.returncode == 0, proc.stderr[-2000:]
    summary = json.loads(proc.stdout)
    assert summary["kills"] == summary["restarts"] == 3
    assert summary["identical_to_uninterrupted"] is True
