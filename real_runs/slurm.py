"""sbatch scripts for running the same harness runs on GPU clusters.

* ``train``: one supervised single-process run per job (``srun`` one task, one GPU:
  the harness trains on it with ``--device cuda``; on a CPU partition,
  ``--gpus-per-node 0``).
* ``ddp``: data-parallel PyTorch, one ``torchrun`` per node started by ``srun``
  (NCCL on GPUs), rendezvous on the first node of the allocation.
* ``mpi-bench`` and ``chainer-mpi``: ``mpirun`` with one rank per GPU.
* ``calibration``: the calibration set (``real_runs.calibration_set --design gpu``)
  on the first GPU of the first node, the NCCL collectives over every GPU of the
  allocation (``torchrun … real_runs.collbench --backend nccl``) and the MPI ones
  (``mpirun … real_runs.mpibench``), all records in one folder, checked at the end.
  ``testbed calibrate RESULTS/*.jsonl --base PROFILE -o CLUSTER.yaml`` then fits it.

Every script sets up its environment first — ``module load`` lines (``--module``) and
or a virtual environment (``--venv``), the repository as working directory and on
``PYTHONPATH`` — and runs the testbed as ``"$PYTHON" -m testbed``, so nothing needs to
be on ``PATH``. Values that end up in the script are checked: a partition, account or
module line with a newline or a shell metacharacter is refused (it would run as a
command), paths are quoted.

Rendering is pure (no I/O) so the scripts can be tested as text.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, replace

from testbed.errors import InputError

RUN_KINDS = ("train", "ddp", "mpi-bench", "chainer-mpi", "calibration")
#: What a Slurm partition, account or job-name word may contain.
_WORD = re.compile(r"^[A-Za-z0-9._:@%+=,-]+$")
#: What a ``module load`` line may contain: module names and versions, spaces between.
_MODULE = re.compile(r"^[A-Za-z0-9._/:@%+=,-]+( [A-Za-z0-9._/:@%+=,-]+)*$")
#: Characters never allowed in a path written into a script (quoted or not).
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def check_word(value: str | None, option: str) -> None:
    """Refuse a value that is not one plain word (newline, space, ``;``, ``$``, …)."""
    if value is not None and not _WORD.match(value):
        raise InputError(f"{value!r} is not a plain name (letters, digits, ._:@%+=,- only; "
                         "no spaces, newlines or shell characters)", field=option)


def check_module(line: str) -> None:
    if not _MODULE.match(line):
        raise InputError(f"{line!r} is not a module name list (no newlines or shell "
                         "characters)", field="--module")


def check_path(value: str | None, option: str) -> None:
    if value is not None and (not value or _CONTROL.search(value)):
        raise InputError(f"{value!r}: a path without newlines or control characters",
                         field=option)


@dataclass(frozen=True)
class SlurmJob:
    framework: str
    model: str = "mlp"
    run: str = "train"
    nodes: int = 1
    gpus_per_node: int = 4
    steps: int = 100
    checkpoint_every: int = 10
    time_s: float = 3600.0
    partition: str | None = None
    account: str | None = None
    seed: int = 0
    cpus_per_task: int = 8
    venv: str | None = None
    modules: tuple[str, ...] = ()
    workdir: str | None = None
    results: str | None = None

    def validated(self) -> SlurmJob:
        from real_runs.harness import canonical_framework, check_model
        job = replace(self, framework=canonical_framework(self.framework),
                      modules=tuple(self.modules))
        check_model(job.model)
        if job.run not in RUN_KINDS:
            raise InputError(f"unknown run kind {job.run!r}", field="--run")
        for name in ("nodes", "steps", "checkpoint_every", "cpus_per_task"):
            if getattr(job, name) <= 0:
                raise InputError("must be positive", field=f"--{name.replace('_', '-')}")
        if job.gpus_per_node < 0:
            raise InputError("must be >= 0", field="--gpus-per-node")
        if job.time_s <= 0:
            raise InputError("must be positive", field="--time")
        if job.run in ("ddp", "calibration") and job.framework != "torch":
            raise InputError(f"{job.run} runs are PyTorch runs", field="--framework")
        if job.run == "ddp" and job.gpus_per_node == 0:
            raise InputError("a ddp run uses NCCL, which needs GPUs: give --gpus-per-node >= 1",
                             field="--gpus-per-node")
        if job.run == "calibration" and job.gpus_per_node == 0:
            raise InputError("the calibration job measures GPUs: give --gpus-per-node",
                             field="--gpus-per-node")
        if job.run == "chainer-mpi" and job.framework != "chainer":
            raise InputError("chainer-mpi runs are Chainer runs", field="--framework")
        check_word(job.partition, "--partition")
        check_word(job.account, "--account")
        for line in job.modules:
            check_module(line)
        for value, option in ((job.venv, "--venv"), (job.workdir, "--workdir"),
                              (job.results, "--results")):
            check_path(value, option)
        return job

    @property
    def world_size(self) -> int:
        return self.nodes * max(self.gpus_per_node, 1)


def _hms(seconds: float) -> str:
    total = int(round(seconds))
    days, rest = divmod(total, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{days}-{hours:02d}:{minutes:02d}:{secs:02d}" if days else \
        f"{hours:02d}:{minutes:02d}:{secs:02d}"


def _header(job: SlurmJob) -> list[str]:
    name = f"testbed-{job.run}-{job.framework}-{job.model}"
    per_node = {"train": 1, "ddp": 1, "calibration": 1}.get(job.run, max(job.gpus_per_node, 1))
    gpus = min(job.gpus_per_node, 1) if job.run == "train" else job.gpus_per_node
    lines = ["#!/bin/bash", f"#SBATCH --job-name={name}", f"#SBATCH --nodes={job.nodes}",
             f"#SBATCH --ntasks-per-node={per_node}",
             f"#SBATCH --cpus-per-task={job.cpus_per_task}",
             f"#SBATCH --time={_hms(job.time_s)}", "#SBATCH --output=%x-%j.out"]
    if gpus:
        lines.append(f"#SBATCH --gpus-per-node={gpus}")
    if job.partition:
        lines.append(f"#SBATCH --partition={job.partition}")
    if job.account:
        lines.append(f"#SBATCH --account={job.account}")
    return lines


def _environment(job: SlurmJob) -> list[str]:
    """Environment set-up: modules, virtual environment, the repository, the results."""
    q = shlex.quote
    lines = ["# Generated by `testbed real-run slurm`; every measurement record written by the",
             "# run carries host, CPU/GPU model, framework versions and world size.",
             "set -euo pipefail"]
    if job.modules:
        lines.append("module purge")
        lines += [f"module load {line}" for line in job.modules]
    if job.venv:
        lines.append(f"source {q(job.venv.rstrip('/') + '/bin/activate')}")
    workdir = q(job.workdir) if job.workdir else '"${SLURM_SUBMIT_DIR:-$PWD}"'
    results = q(job.results) if job.results else '"results/${SLURM_JOB_ID:-local}"'
    lines += [
        f"cd {workdir}",
        'export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"',
        "export SETUPTOOLS_USE_DISTUTILS=stdlib TF_CPP_MIN_LOG_LEVEL=2 PYTHONHASHSEED=0",
        "export CUBLAS_WORKSPACE_CONFIG=:4096:8   # deterministic cuBLAS (PyTorch docs)",
        f"export OMP_NUM_THREADS={job.cpus_per_task}",
        f'RESULTS={results}',
        'mkdir -p "$RESULTS"',
        'PYTHON="${PYTHON:-python}"',
        '"$PYTHON" -c "import testbed, real_runs" || { echo "testbed is not importable '
        'here: check --venv/--module" >&2; exit 2; }',
    ]
    return lines


def _train(job: SlurmJob) -> list[str]:
    q = shlex.quote
    device = " --device cuda" if job.gpus_per_node else ""
    common = f"--framework {q(job.framework)} --model {q(job.model)}{device}"
    return [
        f'srun --ntasks=1 "$PYTHON" -m testbed real-run train {common} --steps {job.steps} '
        f'--checkpoint-every {job.checkpoint_every} --seed {job.seed} --ckpt-dir '
        f'"$RESULTS/ckpt" --measurements "$RESULTS/measurements.jsonl" --verify --json '
        f'> "$RESULTS/summary.json"',
        f'srun --ntasks=1 "$PYTHON" -m testbed real-run profile {common} --steps {job.steps} '
        f'--measurements "$RESULTS/measurements.jsonl" --json > "$RESULTS/profile.json"']


def _rendezvous() -> list[str]:
    return ['MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)',
            "MASTER_PORT=$((20000 + SLURM_JOB_ID % 20000))"]


def _torchrun(job: SlurmJob, module_args: str) -> str:
    # torch.distributed.run is torchrun (its console script), run by this Python
    return (f"srun --ntasks-per-node=1 \"$PYTHON\" -m torch.distributed.run "
            f"--nnodes={job.nodes} --nproc-per-node={max(job.gpus_per_node, 1)} "
            '--rdzv-backend=c10d --rdzv-endpoint="$MASTER_ADDR:$MASTER_PORT" '
            f'--rdzv-id="$SLURM_JOB_ID" -m {module_args}')


def _calibration(job: SlurmJob) -> list[str]:
    ranks = job.world_size
    per_node = max(job.gpus_per_node, 1)
    return [
        "# 1. step times, checkpoints and supervised runs on one GPU",
        'srun --nodes=1 --ntasks=1 "$PYTHON" -m real_runs.calibration_set --design gpu '
        '--out "$RESULTS"',
        "# 2. NCCL collectives (torchrun): inside one node, then over every GPU",
        *_rendezvous(),
        _torchrun(replace(job, nodes=1), 'real_runs.collbench --torchrun --backend nccl '
                  '--nodes 1 --out "$RESULTS/collectives-nccl-node.jsonl"').replace(
                      "srun --ntasks-per-node=1", "srun --nodes=1 --ntasks=1", 1),
        *([_torchrun(job, f'real_runs.collbench --torchrun --backend nccl --nodes {job.nodes} '
                          '--out "$RESULTS/collectives-nccl.jsonl"')] if job.nodes > 1 else []),
        "# 3. MPI collectives, one rank per GPU",
        f'mpirun -np {ranks} --map-by ppr:{per_node}:node "$PYTHON" -m real_runs.mpibench '
        f'--nodes {job.nodes} --out "$RESULTS/collectives-mpi.jsonl"',
        "# 4. every record valid; then fit this cluster's profile and verify it:",
        '#    testbed calibrate "$RESULTS"/fit.jsonl "$RESULTS"/collectives-*.jsonl \\',
        '#        --base PROFILE -o CLUSTER.yaml',
        '#    testbed verify CLUSTER.yaml "$RESULTS/holdout.jsonl"',
        '"$PYTHON" -m testbed records check "$RESULTS"/*.jsonl']


def render_sbatch(job: SlurmJob) -> str:
    """The sbatch script text for ``job`` (validated)."""
    q = shlex.quote
    lines = _header(job) + _environment(job)
    tasks_per_node = max(job.gpus_per_node, 1)
    if job.run == "train":
        lines += _train(job)
    elif job.run == "ddp":
        lines += _rendezvous()
        lines.append(_torchrun(job, f"real_runs.ddp --torchrun --steps {job.steps} "
                                    f"--checkpoint-every {job.checkpoint_every} --seed {job.seed} "
                                    f"--model {q(job.model)} --backend nccl "
                                    '--ckpt-dir "$RESULTS/ckpt" --out "$RESULTS/ddp.json"'))
    elif job.run == "mpi-bench":
        lines.append(f'mpirun -np {job.world_size} --map-by ppr:{tasks_per_node}:node '
                     f'"$PYTHON" -m real_runs.mpibench --nodes {job.nodes} '
                     '--out "$RESULTS/measurements.jsonl"')
    elif job.run == "chainer-mpi":
        lines.append(f'mpirun -np {job.world_size} --map-by ppr:{tasks_per_node}:node '
                     f'"$PYTHON" -m real_runs.chainer_mpi --model {q(job.model)} '
                     f'--steps {job.steps} --seed {job.seed} --out "$RESULTS/chainer_mpi.json"')
    else:
        lines += _calibration(job)
    return "\n".join(lines) + "\n"
