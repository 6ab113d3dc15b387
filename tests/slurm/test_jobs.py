"""The generated jobs, submitted with ``sbatch`` to a real Slurm (``conftest.py``) and
waited for, on this machine's CPUs:

* the calibration job (the calibration set, gloo under ``torchrun --standalone``, Open
  MPI over the job's tasks — without Open MPI's oversubscription switch, so its slots
  are Slurm's) whose records calibrate a profile and verify it, and which a
  resubmission under the same name resumes (every step skipped, nothing measured twice);
* a fault-injected training job, warned of its time limit (the ``USR1`` Slurm sends
  with ``--signal=B:USR1@90``), which stops at its next checkpoint and requeues itself,
  then killed and requeued by Slurm (what a node failure does), and which resumes each
  time from its last checkpoint until it completes;
* an HPO sweep on mpi4py.futures with an injected trial failure;
* data parallelism on the CPU: PyTorch under ``torchrun --standalone`` (gloo), Chainer
  over ``mpirun`` (a job that asks for no GPU).

Small step counts on the CPU: the jobs take about two and a half minutes on 2 idle
cores (about three and a half when the machine is busy).
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest

from real_runs.method import DEFAULT_ROUNDS
from testbed.measurements import read_records
from tests.conftest import REPO, each, run_cli

pytestmark = [pytest.mark.slurm, pytest.mark.frameworks, pytest.mark.mpi]


def _script(tmp_path: Path, slurm, venv: Path, name: str, *options: str) -> tuple[Path, Path]:
    """``testbed real-run slurm … -o NAME.sbatch`` for this node's CPUs; (script, results)."""
    if slurm.cpus < 2:
        pytest.fail(f"the local Slurm node has {slurm.cpus} CPU: these jobs need 2")
    script, results = tmp_path / f"{name}.sbatch", tmp_path / name
    proc = run_cli("real-run", "slurm", *options, "--name", name, "--gpus-per-node", "0",
                   "--processes-per-node", str(slurm.cpus), "--cpus-per-task", "1",
                   "--time", "20min", "--venv", str(venv), "--workdir", str(REPO),
                   "--results", str(results), "-o", str(script))
    assert proc.returncode == 0, proc.stderr
    assert results.is_dir()                   # made by -o: Slurm opens job.log there
    return script, results


def _log(results: Path) -> str:
    path = results / "job.log"
    return path.read_text(errors="replace") if path.exists() else ""


def _completed(fields: dict, results: Path) -> None:
    assert fields.get("JobState") == "COMPLETED", (fields.get("JobState"), _log(results)[-4000:])


def _records(path: Path) -> list:
    return [r for _, r in read_records(path)]


def test_calibration_job_runs_its_mpi_step_and_its_records_calibrate_and_verify(
        slurm, venv, tmp_path):
    # the smoke design (seconds: PyTorch steps, 2-process gloo, one checkpoint format);
    # the quick one, every framework and its supervised runs, is calibrate-local's test
    script, results = _script(tmp_path, slurm, venv, "cal", "--calibration", "--design",
                              "smoke", "--collective-repeats", "10")
    job = slurm.submit(script)
    _completed(slurm.wait(job, 400, log=results / "job.log"), results)
    log = _log(results)
    for step in ("calibration-set", "gloo-node", "mpi"):
        assert (results / "steps" / f"{step}.done").exists() and f"{step}: done in" in log
    # Open MPI got one slot per task: mpirun -np K --map-by ppr:K:node ran K ranks
    mpi = _records(results / "collectives-mpi.jsonl")
    gloo = _records(results / "collectives-gloo-node.jsonl")
    for rec in each(mpi + gloo, at_least=4):
        assert rec.processes == slurm.cpus and rec.nodes == 1
    versions = mpi[0].env.versions
    assert re.search(r"slurm.* \d+\.\d+", versions["slurm"])   # "slurm-wlm 22.05.8"
    assert "Open MPI" in versions["openmpi"]
    assert versions["mpi"].startswith("Open MPI")             # the library the ranks loaded
    assert "env:OMPI_MCA_rmaps_base_oversubscribe" not in versions   # not passed to the job
    assert "slurm" in _records(results / "fit.jsonl")[0].env.versions
    manifest = json.loads((results / "MANIFEST.json").read_text())
    assert [p["part"] for p in manifest["parts"]][0] == "steps"
    # the records, gathered from the job, feed calibrate and verify unchanged
    profile = tmp_path / "cluster.yaml"
    fit = run_cli("calibrate", str(results / "fit.jsonl"), str(results / "collectives-mpi.jsonl"),
                  str(results / "collectives-gloo-node.jsonl"), "--base", "laptop-cpu", "-o",
                  str(profile), "--json", timeout=300)
    assert fit.returncode == 0, fit.stderr
    network = json.loads(fit.stdout)["profile"]
    assert profile.exists() and network
    verify = run_cli("verify", str(profile), str(results / "holdout.jsonl"), "--json",
                     timeout=300)
    assert verify.returncode == 0, verify.stderr
    scores = json.loads(verify.stdout)
    assert scores["predicted"] > 0 and scores["quantities"]
    # a resubmission under the same name resumes: every step is done, nothing reruns
    before = {p.name: p.read_bytes() for p in results.glob("*.jsonl")}
    again = slurm.submit(script)
    _completed(slurm.wait(again, 120, log=results / "job.log"), results)
    assert {p.name: p.read_bytes() for p in results.glob("*.jsonl")} == before
    log = _log(results)
    assert log.count("== testbed job cal: Slurm job") == 2 and f"Slurm job {again}," in log
    assert log.count("done in an earlier incarnation, skipped") == 3


def _timeline(results: Path) -> list[dict]:
    path = results / "timeline.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _segments(events: list[dict]) -> list[list[dict]]:
    """The timeline of each incarnation (each begins with its own job_start)."""
    out: list[list[dict]] = []
    for e in events:
        if e["event"] == "job_start":
            out.append([])
        if out:
            out[-1].append(e)
    return out


def _last_commit(segment: list[dict]) -> int:
    return max((e["step"] for e in segment if e["event"] == "checkpoint_commit"), default=0)


def _wait_for(what: str, check, timeout_s: float, results: Path, slurm, job: str) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.2)
    fields = slurm.job(job)
    raise AssertionError(
        f"{what}: not within {timeout_s:g} s (job {fields.get('JobState')}, restarts "
        f"{fields.get('Restarts')}, node {slurm.node_state()})\n{_log(results)[-3000:]}\n"
        f"slurmd:\n{slurm.log_tail('slurmd')}")


def _past(results: Path, incarnation: int, step: int):
    """True once incarnation ``incarnation`` committed a checkpoint at ``step`` or later."""
    def check() -> bool:
        segs = _segments(_timeline(results))
        return len(segs) > incarnation and _last_commit(segs[incarnation]) >= step
    return check


STEPS, EVERY, KILLS = 3000, 100, (40, 1200, 2200)


def test_training_job_requeued_at_its_time_limit_and_after_a_kill_resumes(slurm, venv,
                                                                          tmp_path):
    kills = tmp_path / "kills.jsonl"
    kills.write_text("".join(json.dumps({"at_step": k}) + "\n" for k in KILLS))
    script, results = _script(
        tmp_path, slurm, venv, "train", "--run", "train", "--steps", str(STEPS),
        "--checkpoint-every", str(EVERY), "--width", "256", "--batch-size", "64",
        "--profile-steps", "10", "--kill-trace", str(kills))
    job = slurm.submit(script)
    # incarnation 0: past its injected kill, Slurm warns of the time limit
    _wait_for("incarnation 0 past its kill", _past(results, 0, 200), 120, results, slurm, job)
    slurm.signal_batch(job, "USR1")
    slurm.wait(job, 120, log=results / "job.log",
               until=lambda f: f.get("Restarts") == "1" and f.get("JobState") == "RUNNING")
    # incarnation 1: past the second kill, the job is killed and requeued by Slurm
    _wait_for("incarnation 1 past its kill", _past(results, 1, KILLS[1] + EVERY), 120, results,
              slurm, job)
    slurm.requeue(job)
    fields = slurm.wait(job, 300, log=results / "job.log")
    _completed(fields, results)
    assert fields["Restarts"] == "2"
    segs = _segments(_timeline(results))
    assert len(segs) == 3
    # every incarnation resumed from the last checkpoint of the one before
    for before, after in zip(segs, segs[1:], strict=False):
        load = next(e for e in after if e["event"] in ("load", "failure"))
        assert load["event"] == "load" and load["step"] == _last_commit(before)
        first = next(e for e in after if e["event"] == "steps")
        assert first["start_step"] == load["step"] + 1
    assert segs[-1][-1]["event"] == "job_end" and segs[-1][-1]["step"] == STEPS
    # one kill plan for the whole run: each kill fired once, in its incarnation
    fired = [[e["at_step"] for e in seg if e["event"] == "failure"] for seg in segs]
    assert fired == [[KILLS[0]], [KILLS[1]], [KILLS[2]]]
    # the log is appended: one header per incarnation, the warning, both requeues
    log = _log(results)
    headers = [line for line in log.splitlines() if line.startswith("== testbed job train: Slurm")]
    assert [h.split("incarnation ")[1].split(",")[0] for h in headers] == ["0", "1", "2"]
    assert "Slurm warns of the time limit" in log and f"requeued job {job}" in log
    # slurmstepd's notice of each requeue: it writes it as it ends the step, and under
    # load it can lose that race (one of two once, in a fresh-clone run beside another);
    # the requeues themselves are the Restarts count and the three segments above
    assert 1 <= log.count("DUE TO JOB REQUEUE") <= 2
    # the records of every incarnation: each one's restart, then the profile's steps
    recs = _records(results / "measurements.jsonl")
    restarts = [r for r in recs if r.kind == "restart"]
    assert [r.incarnation for r in restarts] == [1, 2, 3]
    assert {r.run_id for r in restarts} == {"train"}
    # the profile measures by the one method: --profile-steps per round, its rounds
    assert sum(r.kind == "train_step" for r in recs) == 10 * DEFAULT_ROUNDS
    assert not [r for r in recs if r.kind == "supervised_run"]   # resumed: see slurm_train
    check = run_cli("records", "check", str(results / "measurements.jsonl"), "--json")
    assert check.returncode == 0 and json.loads(check.stdout)["ok"]
    summary = json.loads((results / "summary.json").read_text())
    assert summary["resumed_from_step"] == _last_commit(segs[1]) and summary["kills"] == 1


HPO_SCENARIO = """\
name: hpo-slurm
cluster: {nodes: 1, gpus_per_node: 2}
hpo:
  search: grid
  space:
    optimizer: [adam, sgd]
    lr: [0.03]
    epochs: [2]
  trial_resources: {gpus: 1}
  epoch_time: 0.1s
  scheduler: fifo
  on_failure: retry
  checkpoint_every_epochs: 1
  inject_failures: [{trial: 1, at_epoch: 1}]
"""


def test_hpo_job_runs_a_sweep_on_mpi4py_futures(slurm, venv, tmp_path):
    scenario = tmp_path / "hpo.yaml"
    scenario.write_text(HPO_SCENARIO)
    script, results = _script(tmp_path, slurm, venv, "hpo", "--run", "hpo", "--scenario",
                              str(scenario))
    assert f"#SBATCH --ntasks={slurm.cpus}" in script.read_text()
    job = slurm.submit(script)
    _completed(slurm.wait(job, 300, log=results / "job.log"), results)
    out = json.loads((results / "hpo.json").read_text())
    assert out["executor"] == "mpi" and out["workers"] == slurm.cpus
    assert out["trials_completed"] == 2 and out["trials_failed"] == 0 and out["retries"] == 1
    trace = [json.loads(line) for line in (results / "trace.jsonl").read_text().splitlines()]
    failed = [e for e in trace if e["event"] == "trial_failed"]
    assert len(failed) == 1 and failed[0]["cause"] == "injected" and failed[0]["trial"] == 1
    replay = run_cli("hpo", "replay", str(results / "trace.jsonl"), "--json")
    assert replay.returncode == 0 and json.loads(replay.stdout)["trials_completed"] == 2


def test_cpu_data_parallel_jobs_ddp_under_torchrun_and_chainer_over_mpi(slurm, venv, tmp_path):
    """`torchrun --standalone` with gloo, and Chainer over `mpirun --map-by ppr:K:node`,
    each on the job's K tasks; chainer-mpi asks Slurm for no GPU."""
    ddp, ddp_out = _script(tmp_path, slurm, venv, "ddp", "--run", "ddp", "--steps", "6",
                           "--checkpoint-every", "3")
    chainer, chainer_out = _script(tmp_path, slurm, venv, "chainer", "--run", "chainer-mpi",
                                   "--framework", "chainer", "--steps", "4")
    assert "gpus-per-node" not in chainer.read_text()
    jobs = [(slurm.submit(ddp), ddp_out), (slurm.submit(chainer), chainer_out)]
    for job, results in jobs:
        _completed(slurm.wait(job, 240, log=results / "job.log"), results)
    rank0 = json.loads((ddp_out / "ddp.json").read_text())
    assert rank0["rank"] == 0 and rank0["step"] == 6 and len(rank0["losses"]) == 6
    ranks = [json.loads(line) for line in (ddp_out / "ddp-events.jsonl").read_text().splitlines()
             if '"result"' in line]
    assert sorted(r["rank"] for r in ranks) == list(range(slurm.cpus))
    assert len({r["params_sha256"] for r in ranks}) == 1          # replicas identical
    out = json.loads((chainer_out / "chainer_mpi.json").read_text())
    assert out["replicas_identical"] and len(out["ranks"]) == slurm.cpus
