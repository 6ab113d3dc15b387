"""sbatch scripts: valid bash, their own environment set-up, the GPU they ask for is the
GPU they train on, and nothing a user types can become a command."""

from __future__ import annotations

import subprocess

import pytest

from real_runs.slurm import SlurmJob, render_sbatch
from testbed.errors import InputError


def _bash_ok(script: str, tmp_path) -> None:
    path = tmp_path / "job.sbatch"
    path.write_text(script)
    proc = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("run", ["train", "ddp", "mpi-bench", "chainer-mpi", "calibration"])
def test_every_script_is_bash_and_sets_up_its_environment(run, tmp_path):
    framework = "chainer" if run == "chainer-mpi" else "torch"
    script = render_sbatch(SlurmJob(framework=framework, run=run, nodes=2, gpus_per_node=4,
                                    modules=("cuda/12.4", "python/3.11"), venv="/opt/my env",
                                    workdir="/home/u/testbed").validated())
    _bash_ok(script, tmp_path)
    lines = script.splitlines()
    assert "module load cuda/12.4" in lines and "module load python/3.11" in lines
    assert "source '/opt/my env/bin/activate'" in lines          # quoted path
    assert "cd /home/u/testbed" in lines
    assert 'export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"' in lines
    # the testbed runs through the environment's Python, never a `testbed` on PATH
    assert not any(line.split()[:2] == ["srun", "testbed"] or line.startswith("testbed ")
                   for line in lines)
    assert lines.index("module load cuda/12.4") < lines.index("set -euo pipefail") + 3


def test_train_asks_for_the_gpu_it_trains_on():
    script = render_sbatch(SlurmJob(framework="torch", run="train", gpus_per_node=4).validated())
    assert "#SBATCH --gpus-per-node=1" in script and "--device cuda" in script
    assert "#SBATCH --ntasks-per-node=1" in script
    cpu = render_sbatch(SlurmJob(framework="tf", model="resnet", run="train", gpus_per_node=0,
                                 time_s=2 * 86400).validated())
    assert "gpus-per-node" not in cpu and "--device" not in cpu
    assert "--framework tensorflow --model resnet" in cpu and "#SBATCH --time=2-00:00:00" in cpu


def test_ddp_and_mpi_scripts():
    ddp = render_sbatch(SlurmJob(framework="pytorch", run="ddp", nodes=4, gpus_per_node=8,
                                 time_s=5400, model="cnn").validated())
    assert "#SBATCH --nodes=4" in ddp and "#SBATCH --gpus-per-node=8" in ddp
    assert "#SBATCH --time=01:30:00" in ddp
    assert "-m torch.distributed.run --nnodes=4 --nproc-per-node=8" in ddp   # torchrun
    assert "--backend nccl" in ddp and "--model cnn" in ddp
    mpi = render_sbatch(SlurmJob(framework="chainer", run="chainer-mpi", nodes=2,
                                 gpus_per_node=4).validated())
    assert "mpirun -np 8 --map-by ppr:4:node" in mpi and "real_runs.chainer_mpi" in mpi


def test_calibration_job_collects_every_record_in_one_folder():
    script = render_sbatch(SlurmJob(framework="torch", run="calibration", nodes=2,
                                    gpus_per_node=4, results="/scratch/calib").validated())
    assert "RESULTS=/scratch/calib" in script
    assert "real_runs.calibration_set --design gpu --out \"$RESULTS\"" in script
    assert script.count("real_runs.collbench --torchrun --backend nccl") == 2   # node, all
    assert "--nnodes=1 --nproc-per-node=4" in script and "--nnodes=2 --nproc-per-node=4" in script
    assert 'mpirun -np 8 --map-by ppr:4:node "$PYTHON" -m real_runs.mpibench --nodes 2' in script
    assert script.rstrip().endswith('records check "$RESULTS"/*.jsonl')
    one_node = render_sbatch(SlurmJob(framework="torch", run="calibration",
                                      gpus_per_node=8).validated())
    assert one_node.count("real_runs.collbench") == 1


@pytest.mark.parametrize(("field", "value"), [
    ("partition", "gpu\nrm -rf ~"), ("partition", "gpu;reboot"), ("partition", "a b"),
    ("account", "$(id)"), ("account", "`id`"), ("modules", ("cuda\nid",)),
    ("modules", ("cuda; id",)), ("modules", ("cuda && id",)), ("venv", "/opt/v\nid"),
    ("workdir", "/tmp/\x00x"), ("results", "r\n"),
])
def test_values_that_could_run_commands_are_refused(field, value):
    with pytest.raises(InputError) as info:
        SlurmJob(framework="torch", **{field: value}).validated()
    assert info.value.field == f"--{'module' if field == 'modules' else field}"


def test_other_bad_jobs():
    with pytest.raises(InputError):
        SlurmJob(framework="tensorflow", run="ddp").validated()
    with pytest.raises(InputError):
        SlurmJob(framework="torch", nodes=0).validated()
    with pytest.raises(InputError, match="GPUs"):
        SlurmJob(framework="torch", run="calibration", gpus_per_node=0).validated()


def test_slurm_cli(cli, tmp_path):
    out = tmp_path / "calib.sbatch"
    proc = cli("slurm", "--calibration", "--nodes", "2", "--gpus-per-node", "4", "--module",
               "cuda/12.4", "--venv", "/opt/venv", "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    _bash_ok(out.read_text(), tmp_path)
    proc = cli("slurm", "--calibration", "--partition", "gpu\nid")
    assert proc.returncode == 2 and "--partition" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
