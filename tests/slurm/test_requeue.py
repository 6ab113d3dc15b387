"""The pieces of a resumable job, on their own (no Slurm needed, seconds):

* the step wrapper (:mod:`real_runs.requeue`): its command never sees SIGUSR1; the
  warning stops the command right after its next commit, not before; a grace without
  a commit stops it anyway; done steps are skipped; failures and SIGTERM pass through;
* the calibration runner's bookkeeping (:mod:`real_runs.slurm_calibration`): another
  design's folder is refused, records of a part that never committed are dropped;
* the training runner's (:mod:`real_runs.slurm_train`): restarts and the resumed step
  read back from a timeline, another run's folder refused by name of the option.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from real_runs import requeue, slurm_calibration, slurm_train
from testbed.calibration.design import quick_design
from testbed.errors import InputError
from tests.conftest import REPO, each

#: A command that writes a line every 0.1 s to FILE, a commit at line COMMIT_AT, and
#: on SIGTERM notes where it was: the test reads when it was stopped.
WRITER = """
import json, signal, sys, time
path, commit_at = sys.argv[1], int(sys.argv[2])
def stop(*_):
    open(path + ".stopped", "w").write(str(i)); sys.exit(0)
signal.signal(signal.SIGTERM, stop)
print("usr1", signal.getsignal(signal.SIGUSR1) == signal.SIG_IGN, flush=True)
for i in range(200):
    event = "checkpoint_commit" if i == commit_at else "steps"
    with open(path, "a") as f:
        f.write(json.dumps({"event": event, "i": i}) + "\\n")
    time.sleep(0.1)
"""


def _env() -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    env["PYTHONPATH"] = str(REPO)
    return env


def _wrapper(tmp_path: Path, *command: str, commits: Path | None = None, grace_s: float = 20,
             step: str = "s") -> subprocess.Popen:
    args = [sys.executable, "-m", "real_runs.requeue", "--results", str(tmp_path / "r"),
            "--step", step, "--grace-s", str(grace_s),
            "--stdout", str(tmp_path / f"{step}.out")]
    if commits is not None:
        args += ["--commits", str(commits)]
    return subprocess.Popen([*args, "--", *command], stderr=subprocess.PIPE, text=True,
                            env=_env())


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _wait_lines(path: Path, count: int) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if path.exists() and len(_lines(path)) >= count:
            return
        time.sleep(0.05)
    raise AssertionError(f"{path} has fewer than {count} lines")


def test_the_warning_stops_the_command_right_after_its_next_commit(tmp_path):
    log = tmp_path / "timeline.jsonl"
    proc = _wrapper(tmp_path, sys.executable, "-c", WRITER, str(log), "12", commits=log)
    _wait_lines(log, 3)
    proc.send_signal(signal.SIGUSR1)       # what the batch shell passes on from Slurm
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == requeue.REQUEUED_STATUS, err
    stopped_at = int((tmp_path / "timeline.jsonl.stopped").read_text())
    assert 12 <= stopped_at <= 14          # after its commit (line 12), within a poll or two
    assert (tmp_path / "s.out").read_text().split() == ["usr1", "True"]   # it ignored USR1
    assert "not in a Slurm job, so not requeued" in err
    assert not (tmp_path / "r" / "steps" / "s.done").exists()     # it did not finish


def test_without_a_commit_the_grace_ends_the_wait(tmp_path):
    log = tmp_path / "timeline.jsonl"
    proc = _wrapper(tmp_path, sys.executable, "-c", WRITER, str(log), "-1", commits=log,
                    grace_s=0.5)
    _wait_lines(log, 2)
    t0 = time.monotonic()
    proc.send_signal(signal.SIGUSR1)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == requeue.REQUEUED_STATUS and "no commit within 0.5 s" in err
    assert time.monotonic() - t0 < 10


def test_done_steps_are_skipped_and_failures_pass_through(tmp_path):
    ok = _wrapper(tmp_path, sys.executable, "-c", "print('ran')")
    assert ok.wait(timeout=60) == 0
    marker = json.loads((tmp_path / "r" / "steps" / "s.done").read_text())
    assert marker["step"] == "s" and marker["job_id"] is None and marker["wall_s"] >= 0
    again = _wrapper(tmp_path, sys.executable, "-c", "raise SystemExit(3)")
    _, err = again.communicate(timeout=60)
    assert again.returncode == 0 and "skipped" in err
    assert (tmp_path / "s.out").read_text() == "ran\n"    # not truncated by the skip
    bad = _wrapper(tmp_path, sys.executable, "-c", "raise SystemExit(3)", step="t")
    _, err = bad.communicate(timeout=60)
    assert bad.returncode == 3 and "t: failed with status 3" in err
    assert not (tmp_path / "r" / "steps" / "t.done").exists()


def test_sigterm_is_passed_on_and_the_step_is_not_done(tmp_path):
    log = tmp_path / "timeline.jsonl"
    proc = _wrapper(tmp_path, sys.executable, "-c", WRITER, str(log), "-1", commits=log)
    _wait_lines(log, 2)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == requeue.TERMINATED_STATUS and "passing SIGTERM on" in err
    assert (tmp_path / "timeline.jsonl.stopped").exists()
    assert not (tmp_path / "r" / "steps" / "s.done").exists()


def test_a_warning_before_the_step_requeues_at_once(tmp_path):
    out = requeue.run_step("s", [sys.executable, "-c", "raise SystemExit(9)"], tmp_path,
                           commits=requeue.CommitWatch(None, "x"), grace_s=1,
                           max_requeues=3, preempted=True)
    assert out == requeue.REQUEUED_STATUS


def test_commit_watch_counts_only_complete_lines_after_it_is_armed(tmp_path):
    path = tmp_path / "c.jsonl"
    path.write_text('{"event": "checkpoint_commit"}\n')
    watch = requeue.CommitWatch(path, "checkpoint_commit")
    assert not watch.committed()                  # not armed
    watch.arm()
    assert not watch.committed()                  # the old commit does not count
    with open(path, "a") as stream:
        stream.write('{"event": "steps"}\n{"event": "checkpoint_co')
    assert not watch.committed()                  # half a line is no commit
    with open(path, "a") as stream:
        stream.write('mmit"}\n')
    assert watch.committed()


def test_calibration_folder_of_another_design_is_refused(tmp_path):
    design = quick_design()
    (tmp_path / slurm_calibration.PARTS_FILE).write_text(json.dumps(
        {"event": "design", "design": "full", "sha256": "0" * 64}) + "\n")
    with pytest.raises(InputError, match="another design"):
        slurm_calibration.committed_parts(tmp_path, design)


def test_records_of_an_uncommitted_part_are_dropped(tmp_path):
    path = tmp_path / "fit.jsonl"
    path.write_text("".join(f'{{"n": {i}}}\n' for i in range(5)))
    slurm_calibration._trim(path, 3)
    assert path.read_text().splitlines() == ['{"n": 0}', '{"n": 1}', '{"n": 2}']
    design = quick_design()
    names = [name for name, _ in slurm_calibration.design_parts(design, print)]
    parts = 1 + len(design.collectives) + len(design.checkpoints) + len(design.supervised)
    assert names[0] == "steps" and len(set(names)) == len(names) == parts


TIMELINE = [
    {"t_s": 0.0, "event": "job_start"}, {"t_s": 3.0, "event": "steps", "start_step": 1,
                                         "end_step": 4},
    {"t_s": 3.1, "event": "failure", "at_step": 4, "step": 4},
    {"t_s": 3.2, "event": "restart_begin", "incarnation": 1},
    {"t_s": 4.0, "event": "load", "step": 2, "duration_s": 0.01},
    {"t_s": 6.5, "event": "restart_end", "step": 2, "process_start_s": 0.05, "setup_s": 2.5,
     "import_s": 1.5, "load_s": 0.01, "first_step_s": 0.002, "ckpt_bytes": 100},
]


def test_restarts_and_the_resumed_step_read_back_from_a_timeline():
    parts = slurm_train.restart_parts(TIMELINE)
    assert len(each(parts)) == 1 and parts[0]["restart_s"] == pytest.approx(3.4)
    assert parts[0]["ckpt_bytes"] == 100 and parts[0]["setup_s"] == 2.5
    assert slurm_train.resumed_from(TIMELINE) == 0              # the load came after a kill
    assert slurm_train.resumed_from([{"event": "job_start"}, {"event": "load", "step": 7}]) == 7
    env = {"host": "h", "os": "Linux", "python": "3.11", "cpu_model": "c", "cpu_count": 2,
           "gpu_model": "none", "framework": "torch", "framework_version": "2"}
    recs = slurm_train.restart_records(parts, first=4, framework="torch", model="mlp",
                                       env=env, run_id="r", measured_at="2026-01-01T00:00:00Z")
    assert [r.incarnation for r in recs] == [4] and recs[0].run_id == "r"


def test_a_results_folder_holds_one_run(tmp_path):
    slurm_train.check_same_run(tmp_path, {"name": "a", "config": {"width": 64}})
    slurm_train.check_same_run(tmp_path, {"name": "a", "config": {"width": 64}})
    with pytest.raises(InputError) as info:
        slurm_train.check_same_run(tmp_path, {"name": "a", "config": {"width": 128}})
    assert info.value.field == "config.width" and "another --name" in str(info.value)
