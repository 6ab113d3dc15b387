"""The generated sbatch scripts as text: valid bash, their own environment set-up, the
resources they ask Slurm for, and nothing a user types can become a command.

The CPU jobs are also *run* under a real Slurm (``test_jobs.py``). What is checked
here as text only is marked **GPU-only path**: NCCL collectives, ``--device cuda``,
multi-node rendezvous — this machine has no GPU and one node, so those lines cannot
run here.
"""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from real_runs.slurm import PORT_BASE, PORT_SPAN, SlurmJob, default_gpus, render_sbatch
from testbed.errors import InputError
from tests.conftest import each


def _bash_ok(script: str, tmp_path) -> None:
    path = tmp_path / "job.sbatch"
    path.write_text(script)
    proc = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def _job(run: str, **fields) -> SlurmJob:
    framework = "chainer" if run == "chainer-mpi" else fields.pop("framework", "torch")
    fields.setdefault("gpus_per_node", default_gpus(run, framework))
    if run == "hpo":
        fields.setdefault("scenario", "scenarios/hpo-digits-real.yaml")
    return SlurmJob(framework=framework, run=run, **fields).validated()


def _sbatch(script: str) -> dict[str, str]:
    return dict(line[len("#SBATCH --"):].split("=", 1) for line in script.splitlines()
                if line.startswith("#SBATCH --") and "=" in line)


@pytest.mark.parametrize("run", ["train", "ddp", "mpi-bench", "chainer-mpi", "calibration",
                                 "hpo"])
def test_every_script_is_bash_and_sets_up_its_environment(run, tmp_path):
    script = render_sbatch(_job(run, modules=("cuda/12.4", "python/3.11"), venv="/opt/my env",
                                workdir="/home/u/testbed"))
    _bash_ok(script, tmp_path)
    lines = script.splitlines()
    assert "module load cuda/12.4" in lines and "module load python/3.11" in lines
    assert "source '/opt/my env/bin/activate'" in lines          # quoted path
    assert "cd /home/u/testbed" in lines and "#SBATCH --chdir=/home/u/testbed" in lines
    assert 'export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"' in lines
    # the testbed runs through the environment's Python, never a `testbed` on PATH
    assert not any(line.split()[:2] == ["srun", "testbed"] or line.startswith("testbed ")
                   for line in lines)
    # modules and venv before `set -u` (module scripts use unset variables)
    assert lines.index("module load python/3.11") < lines.index("set -u")
    assert lines.index("set -eo pipefail   # -u after the modules and the venv (they use "
                       "unset names)") < lines.index("module purge")
    opts = _sbatch(script)
    assert opts["open-mode"] == "append" and opts["signal"] == "B:USR1@90"
    assert "#SBATCH --requeue" in lines
    name = opts["job-name"].removeprefix("testbed-")
    assert opts["output"] == f"results/{name}/job.log"            # keyed by name, not job id
    assert "%j" not in script and "SLURM_JOB_ID:-local" not in script


@pytest.mark.parametrize(("run", "gpus", "procs", "tasks"), [
    ("calibration", 4, 2, 4), ("calibration", 0, 3, 3), ("mpi-bench", 8, 2, 8),
    ("mpi-bench", 0, 5, 5), ("ddp", 2, 2, 2), ("ddp", 0, 3, 3), ("chainer-mpi", 0, 4, 4)])
def test_tasks_per_node_are_gpus_or_processes_so_mpirun_has_its_slots(run, gpus, procs, tasks):
    """Open MPI's slots per node are Slurm's tasks per node: `mpirun -np N×K --map-by
    ppr:K:node` needs K tasks per node (one task per node gave one slot, and the MPI
    step of the calibration job was refused)."""
    job = _job(run, nodes=2, gpus_per_node=gpus, processes_per_node=procs)
    script = render_sbatch(job)
    opts = _sbatch(script)
    assert opts["ntasks-per-node"] == str(tasks) and opts["nodes"] == "2"
    assert opts.get("gpus-per-node") == (str(gpus) if gpus else None)
    if run in ("calibration", "mpi-bench", "chainer-mpi"):
        assert f"mpirun -np {2 * tasks} --map-by ppr:{tasks}:node" in script


def test_train_asks_for_the_gpu_it_trains_on():
    script = render_sbatch(_job("train", gpus_per_node=4))     # GPU-only path: --device cuda
    assert _sbatch(script)["gpus-per-node"] == "1" and "--device cuda" in script
    assert _sbatch(script)["ntasks-per-node"] == "1"
    assert "real_runs.slurm_train" in script and 'step train --commits "$RESULTS/timeline.jsonl"' \
        in script
    cpu = render_sbatch(_job("train", framework="tf", model="resnet", time_s=2 * 86400))
    assert "gpus-per-node" not in cpu and "--device" not in cpu
    assert "--framework tensorflow --model resnet" in cpu and "#SBATCH --time=2-00:00:00" in cpu
    with pytest.raises(InputError, match="one node"):
        _job("train", nodes=2)


def test_gpu_only_paths_ddp_and_nccl_calibration_as_text():
    """GPU-only path (no GPU here): NCCL under torchrun, --standalone on one node, a
    c10d rendezvous on a port below the ephemeral range on several."""
    ddp = render_sbatch(_job("ddp", nodes=4, gpus_per_node=8, time_s=5400, model="cnn"))
    assert "#SBATCH --nodes=4" in ddp and "#SBATCH --gpus-per-node=8" in ddp
    assert "#SBATCH --time=01:30:00" in ddp and "#SBATCH --ntasks-per-node=8" in ddp
    assert "-m torch.distributed.run --nnodes=4 --nproc-per-node=8" in ddp   # torchrun
    assert "srun --nodes=4 --ntasks-per-node=1 --cpus-per-task=64" in ddp
    assert "--backend nccl" in ddp and "--model cnn" in ddp
    assert f"MASTER_PORT=$(({PORT_BASE} + SLURM_JOB_ID % {PORT_SPAN}))" in ddp
    assert PORT_BASE + PORT_SPAN - 1 < 32768          # Linux ephemeral ports: 32768–60999
    one = render_sbatch(_job("ddp", gpus_per_node=4))
    assert "-m torch.distributed.run --standalone --nproc-per-node=4" in one
    assert "MASTER_PORT" not in one and "srun" not in one
    cal = render_sbatch(_job("calibration", nodes=2, gpus_per_node=4, results="/scratch/calib"))
    assert "RESULTS=/scratch/calib" in cal and "#SBATCH --output=/scratch/calib/job.log" in cal
    assert "real_runs.slurm_calibration --design gpu --out \"$RESULTS\"" in cal
    assert cal.count("real_runs.collbench --torchrun --backend nccl") == 2   # node, all
    assert "--standalone --nproc-per-node=4" in cal and "--nnodes=2 --nproc-per-node=4" in cal
    assert 'mpirun -np 8 --map-by ppr:4:node "$PYTHON" -m real_runs.mpibench --nodes 2' in cal
    assert "TESTBED_GPU_MODEL" in cal and "CUBLAS_WORKSPACE_CONFIG" in cal
    one_node = render_sbatch(_job("calibration", gpus_per_node=8))
    assert one_node.count("real_runs.collbench") == 1


def test_cpu_jobs_ask_for_no_gpu():
    chainer = render_sbatch(_job("chainer-mpi", nodes=2, gpus_per_node=0, processes_per_node=4))
    assert "gpus-per-node" not in chainer and "mpirun -np 8 --map-by ppr:4:node" in chainer
    with pytest.raises(InputError, match="NumPy") as info:
        _job("chainer-mpi", gpus_per_node=4)
    assert info.value.field == "--gpus-per-node"
    hpo = render_sbatch(_job("hpo", hpo_workers=6))
    assert "#SBATCH --ntasks=6" in hpo and "gpus-per-node" not in hpo
    assert "mpirun -np 7 --oversubscribe \"$PYTHON\" -m mpi4py.futures -m testbed hpo run " \
           "scenarios/hpo-digits-real.yaml --executor mpi" in hpo
    cal = render_sbatch(_job("calibration", gpus_per_node=0))
    assert "--design full" in cal and "--backend gloo" in cal and "nccl" not in cal


def test_records_and_versions_of_the_stack_are_kept():
    script = render_sbatch(_job("calibration", gpus_per_node=0))
    for name in ("SLURM", "OPENMPI", "UCX"):
        assert f"export TESTBED_VERSION_{name}=" in script
    assert '"$RESULTS"/collectives-*.jsonl' in script and "records check" in script


def test_outside_slurm_the_script_says_so_in_one_line(tmp_path):
    path = tmp_path / "job.sbatch"
    path.write_text(render_sbatch(_job("calibration", gpus_per_node=0)))
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    proc = subprocess.run(["bash", str(path)], capture_output=True, text=True, env=env,
                          cwd=tmp_path, timeout=30)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        f"testbed: error: {path} is a Slurm batch job: submit it with sbatch {path}"]
    assert "unbound variable" not in proc.stderr and not list(tmp_path.glob("results"))


@pytest.mark.parametrize(("field", "value"), [
    ("partition", "gpu\nrm -rf ~"), ("partition", "gpu;reboot"), ("partition", "a b"),
    ("account", "$(id)"), ("account", "`id`"), ("modules", ("cuda\nid",)),
    ("modules", ("cuda; id",)), ("modules", ("cuda && id",)), ("venv", "/opt/v\nid"),
    ("workdir", "/tmp/\x00x"), ("results", "r\n"), ("results", "r/%j"), ("results", "my r"),
    ("workdir", "/home/u/my repo"), ("name", "a/b"), ("name", "x;id"), ("name", "-x"),
    ("kill_trace", "k\n"), ("scenario", "s\x00"),
])
def test_values_that_could_run_commands_are_refused(field, value):
    extra = {"kill_trace": {}, "scenario": {"run": "hpo", "gpus_per_node": 0}}.get(field, {})
    with pytest.raises(InputError) as info:
        SlurmJob(framework="torch", **{field: value, **extra}).validated()
    assert info.value.field == f"--{'module' if field == 'modules' else field.replace('_', '-')}"


@pytest.mark.parametrize(("fields", "option"), [
    ({"run": "ddp", "framework": "tensorflow"}, "--framework"),
    ({"nodes": 0}, "--nodes"), ({"processes_per_node": 0}, "--processes-per-node"),
    ({"run": "hpo", "gpus_per_node": 0}, "--scenario"),
    ({"run": "calibration", "design": "gpu", "gpus_per_node": 0}, "--design"),
    ({"run": "calibration", "design": "quick", "gpus_per_node": 4}, "--design"),
    ({"run": "ddp", "kill_trace": "k.jsonl"}, "--kill-trace"),
    ({"signal_s": 20}, "--signal-s"), ({"signal_s": 4000}, "--signal-s"),
    ({"run": "train", "framework": "chainer", "gpus_per_node": 1}, "--gpus-per-node"),
])
def test_other_bad_jobs(fields, option):
    with pytest.raises(InputError) as info:
        SlurmJob(**{"framework": "torch", **fields}).validated()
    assert info.value.field == option


def test_slurm_cli(cli, tmp_path):
    out, results = tmp_path / "calib.sbatch", tmp_path / "results"
    proc = cli("real-run", "slurm", "--calibration", "--nodes", "2", "--gpus-per-node", "4",
               "--module", "cuda/12.4", "--venv", "/opt/venv", "--results", str(results),
               "-o", str(out), "--json")
    assert proc.returncode == 0, proc.stderr
    written = json.loads(proc.stdout)
    assert written["results_made"] and results.is_dir()     # Slurm opens job.log there
    assert written["tasks_per_node"] == 4 and written["gpus_per_node"] == 4
    _bash_ok(out.read_text(), tmp_path)
    printed = cli("real-run", "slurm", "--run", "chainer-mpi", "--framework", "chainer")
    assert printed.returncode == 0 and "gpus-per-node" not in printed.stdout
    for bad in (["--calibration", "--partition", "gpu\nid"], ["--run", "hpo"],
                ["--run", "chainer-mpi", "--framework", "chainer", "--gpus-per-node", "2"],
                ["--framework", "mxnet"]):
        proc = cli("real-run", "slurm", *bad)
        assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, bad
        assert proc.stderr.startswith("testbed: error: ")
    names = {p.name for p in each(list(tmp_path.iterdir()), at_least=3)}
    assert names == {"calib.sbatch", "results", "job.sbatch"}    # nothing else written
