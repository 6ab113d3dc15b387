"""sbatch scripts for running the harness runs on Slurm clusters (``testbed real-run slurm``).

Kinds of job (``--run``):

* ``train``: one supervised fault-injection run (``real_runs.slurm_train``) on one GPU
  (``--device cuda``) or the CPU, then a step-time profile (``real-run profile``);
* ``ddp``: data-parallel PyTorch under torchrun — NCCL on GPUs, gloo on CPUs;
  ``torchrun --standalone`` on one node, a c10d rendezvous on the first node of the
  allocation (a port below the ephemeral range) on several;
* ``mpi-bench``: the mpi4py collective benchmark, ``mpirun`` with one rank per task;
* ``chainer-mpi``: Chainer data parallelism over mpi4py (on CPUs: it trains with NumPy,
  so it asks for no GPU);
* ``calibration``: the calibration set part by part (``real_runs.slurm_calibration``:
  design ``gpu`` on GPU nodes, ``full``, ``quick`` or ``smoke`` on CPU nodes), the
  collectives of ``torch.distributed`` (NCCL on GPUs, gloo on CPUs) and of MPI over every task of the
  allocation, every record checked at the end;
* ``hpo``: a real HPO sweep on mpi4py.futures (``mpirun -np W+1 python -m
  mpi4py.futures -m testbed hpo run SCENARIO --executor mpi``: W workers and the
  manager), its state in SQLite so a rerun resumes it.

What every script does, and why:

* **Tasks per node = GPUs per node** (or ``--processes-per-node`` on CPUs), so that
  ``mpirun -np N×K --map-by ppr:K:node`` finds the K slots per node it maps to (Open
  MPI takes its slots from Slurm's tasks; one task per node gives one slot).
* **Results keyed by a name** (``--name``, default ``KIND-FRAMEWORK-MODEL``):
  ``results/NAME`` under the working folder, not the job id, so a resubmission with
  the same name resumes; the log ``results/NAME/job.log`` is opened in append mode
  (``--open-mode=append``), one ``== testbed job`` line per incarnation.
* **Every step resumable** (:mod:`real_runs.requeue`): a step that finished is skipped
  by a later incarnation; Slurm's time-limit warning (``--signal=B:USR1@S``, to the
  batch shell, which knows the steps) stops the running step at its next commit — a
  checkpoint, a finished part — and requeues the job (``--requeue``); the next
  incarnation resumes there. Records are appended as they are measured.
* **The communication stack recorded**: versions of Slurm, Open MPI and UCX at the
  job's start (``TESTBED_VERSION_*``), the GPU model, and every NCCL/UCX/MPI setting
  (:mod:`real_runs.stack`) land in each record's environment.
* **A clear error outside Slurm**: run with ``bash`` it says to use ``sbatch`` (one
  line, exit 2) instead of failing on an unset variable.
* **Its own environment**: ``module load`` lines (``--module``) and a virtual
  environment (``--venv``), the repository as working folder and on ``PYTHONPATH``;
  the testbed runs as ``"$PYTHON" -m testbed``, so nothing needs to be on ``PATH``.
  Values that end up in the script are checked: a partition, account, name or module
  line with a newline or a shell character is refused (it would run as a command),
  paths are quoted, and the paths in ``#SBATCH`` lines have no spaces or ``%``.

Rendering is pure (no I/O) so the scripts can be tested as text; ``tests/slurm``
submits them to a real Slurm.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, replace

from testbed.errors import InputError

RUN_KINDS = ("train", "ddp", "mpi-bench", "chainer-mpi", "calibration", "hpo")
#: Kinds whose processes train on the CPU whatever the node has (no GPU is asked for).
CPU_ONLY_KINDS = ("chainer-mpi", "hpo")
#: Calibration designs (``testbed.calibration.design.DESIGNS``) a job may measure.
DESIGN_NAMES = ("smoke", "quick", "full", "gpu")
#: What a Slurm partition, account or job-name word may contain.
_WORD = re.compile(r"^[A-Za-z0-9._:@%+=,-]+$")
#: What a results name may contain (it names a folder and the job).
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]*$")
#: What a ``module load`` line may contain: module names and versions, spaces between.
_MODULE = re.compile(r"^[A-Za-z0-9._/:@%+=,-]+( [A-Za-z0-9._/:@%+=,-]+)*$")
#: Characters never allowed in a path written into a script (quoted or not).
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
#: Characters not allowed in a path of an ``#SBATCH`` line (Slurm's own parsing and
#: its ``%j``-style file name patterns).
_SBATCH_PATH_BAD = re.compile(r"[\s%\\\"'#]")
#: Rendezvous ports of multi-node torchrun: PORT_BASE + job id mod PORT_SPAN, below the
#: Linux ephemeral range (32768–60999, ``net.ipv4.ip_local_port_range``) where the
#: kernel hands out client ports that could already hold the port.
PORT_BASE, PORT_SPAN = 15000, 15000
#: Seconds before the time limit that Slurm warns the job (``--signal``), and the part
#: of them the running step may use to reach its next commit (the rest is for the stop
#: and the requeue).
DEFAULT_SIGNAL_S = 90
STOP_MARGIN_S = 30


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


def check_sbatch_path(value: str | None, option: str) -> None:
    """A path that goes into an ``#SBATCH`` line (``--chdir``, ``--output``)."""
    check_path(value, option)
    if value is not None and _SBATCH_PATH_BAD.search(value):
        raise InputError(f"{value!r}: Slurm reads this path from an #SBATCH line, so it may "
                         "not hold spaces, quotes, '#', '\\' or '%'", field=option)


@dataclass(frozen=True)
class SlurmJob:
    """One sbatch job (see the module docstring); :meth:`validated` checks it."""

    framework: str = "torch"
    model: str = "mlp"
    run: str = "train"
    name: str | None = None
    nodes: int = 1
    gpus_per_node: int = 4
    processes_per_node: int = 2
    steps: int = 100
    checkpoint_every: int = 10
    profile_steps: int = 20
    width: int | None = None
    batch_size: int | None = None
    kill_trace: str | None = None
    design: str | None = None
    scenario: str | None = None
    hpo_workers: int | None = None
    collective_repeats: int | None = None
    time_s: float = 3600.0
    signal_s: int = DEFAULT_SIGNAL_S
    max_requeues: int = 10
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
            raise InputError(f"unknown run kind {job.run!r}; known: {', '.join(RUN_KINDS)}",
                             field="--run")
        _check_numbers(job)
        _check_kind(job)
        for value, option in ((job.partition, "--partition"), (job.account, "--account")):
            check_word(value, option)
        if job.name is not None and not _NAME.match(job.name):
            raise InputError(f"{job.name!r}: a name of letters, digits and ._+- (it names "
                             "the results folder and the job)", field="--name")
        for line in job.modules:
            check_module(line)
        for value, option in ((job.venv, "--venv"), (job.kill_trace, "--kill-trace"),
                              (job.scenario, "--scenario")):
            check_path(value, option)
        for value, option in ((job.workdir, "--workdir"), (job.results, "--results")):
            check_sbatch_path(value, option)
        return job

    @property
    def job_name(self) -> str:
        """The results key: the user's ``--name``, or what the job runs."""
        return self.name or f"{self.run}-{self.framework}-{self.model}"

    @property
    def results_dir(self) -> str:
        """The results folder (relative paths: to the job's working folder)."""
        return (self.results or f"results/{self.job_name}").rstrip("/") or "/"

    @property
    def gpus(self) -> int:
        """GPUs asked for per node: none for CPU-only kinds, one for a train run."""
        if self.run in CPU_ONLY_KINDS:
            return 0
        return min(self.gpus_per_node, 1) if self.run == "train" else self.gpus_per_node

    @property
    def tasks_per_node(self) -> int:
        """One task per GPU (per process on CPUs): Open MPI's slots per node."""
        if self.run == "train":
            return 1
        return self.gpus if self.gpus else self.processes_per_node

    @property
    def world_size(self) -> int:
        return self.nodes * self.tasks_per_node

    @property
    def workers(self) -> int:
        """HPO workers (one MPI rank each, besides the manager)."""
        return self.hpo_workers or self.world_size


def default_gpus(run: str, framework: str) -> int:
    """GPUs per node when the user gives none: 4 for PyTorch GPU runs, 0 for runs that
    train on the CPU (Chainer over MPI, HPO trials, TensorFlow and Chainer harness runs)."""
    from real_runs.harness import canonical_framework
    if run in CPU_ONLY_KINDS or canonical_framework(framework) != "torch":
        return 0
    return 4


def _check_numbers(job: SlurmJob) -> None:
    for name in ("nodes", "steps", "checkpoint_every", "cpus_per_task", "processes_per_node",
                 "profile_steps", "max_requeues"):
        if getattr(job, name) <= 0:
            raise InputError("must be positive", field=f"--{name.replace('_', '-')}")
    for name in ("width", "batch_size", "hpo_workers", "collective_repeats"):
        value = getattr(job, name)
        if value is not None and value <= 0:
            raise InputError("must be positive", field=f"--{name.replace('_', '-')}")
    if job.gpus_per_node < 0:
        raise InputError("must be >= 0", field="--gpus-per-node")
    _check_ranges(job)
    if job.time_s <= 0:
        raise InputError("must be positive", field="--time")
    if not STOP_MARGIN_S < job.signal_s < job.time_s:
        raise InputError(f"the warning must come more than {STOP_MARGIN_S} s before the time "
                         f"limit and after the start (0 < {STOP_MARGIN_S} < S < --time), got "
                         f"{job.signal_s} s", field="--signal-s")


def _check_ranges(job: SlurmJob) -> None:
    """The records' physical ranges (:mod:`testbed.measurements`): a job of 10²⁰ steps or
    10⁹ nodes measures nothing."""
    from testbed.measurements import MAX_PROCESSES, MAX_SAMPLES, MAX_STEPS
    for name, most in (("steps", MAX_STEPS), ("checkpoint_every", MAX_STEPS),
                       ("profile_steps", MAX_STEPS), ("nodes", MAX_PROCESSES),
                       ("gpus_per_node", MAX_PROCESSES), ("processes_per_node", MAX_PROCESSES),
                       ("cpus_per_task", MAX_PROCESSES), ("batch_size", MAX_SAMPLES),
                       ("max_requeues", MAX_PROCESSES)):
        value = getattr(job, name, None)
        if value is not None and value > most:
            raise InputError(f"must be at most {most:,}, got {value:,}",
                             field=f"--{name.replace('_', '-')}")


def _check_kind(job: SlurmJob) -> None:
    """What each kind of job needs (framework, GPUs, nodes, its own options)."""
    if job.run in ("ddp", "calibration") and job.framework != "torch":
        raise InputError(f"{job.run} runs are PyTorch runs", field="--framework")
    if job.run == "chainer-mpi" and job.framework != "chainer":
        raise InputError("chainer-mpi runs are Chainer runs", field="--framework")
    if job.run in CPU_ONLY_KINDS and job.gpus_per_node:
        what = "Chainer over MPI trains with NumPy" if job.run == "chainer-mpi" else \
            "the HPO trials train PyTorch on the CPU"
        raise InputError(f"{what}: a {job.run} job asks for no GPU; give --gpus-per-node 0 "
                         "(and --processes-per-node)", field="--gpus-per-node")
    if job.run == "train" and job.nodes != 1:
        raise InputError("a train run is one process on one node: give --nodes 1",
                         field="--nodes")
    if job.run == "train" and job.framework != "torch" and job.gpus_per_node:
        raise InputError("GPU runs of the harness are PyTorch runs: give --gpus-per-node 0 "
                         f"for {job.framework}", field="--gpus-per-node")
    if job.run == "hpo" and not job.scenario:
        raise InputError("an hpo job runs a scenario's hpo: section: give --scenario FILE",
                         field="--scenario")
    if job.kill_trace is not None and job.run != "train":
        raise InputError("--kill-trace is for train runs", field="--kill-trace")
    if job.design is not None:
        if job.run != "calibration":
            raise InputError("--design is for calibration runs", field="--design")
        if job.design not in DESIGN_NAMES:
            raise InputError(f"unknown design {job.design!r}; known: {', '.join(DESIGN_NAMES)}",
                             field="--design")
        if (job.design == "gpu") != bool(job.gpus_per_node):
            raise InputError("the gpu design measures GPUs, smoke, quick and full the CPU: "
                             "give --design gpu with --gpus-per-node, the others with 0",
                             field="--design")


def _hms(seconds: float) -> str:
    total = int(round(seconds))
    days, rest = divmod(total, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{days}-{hours:02d}:{minutes:02d}:{secs:02d}" if days else \
        f"{hours:02d}:{minutes:02d}:{secs:02d}"


def _header(job: SlurmJob) -> list[str]:
    tasks = (f"#SBATCH --ntasks={job.workers}" if job.run == "hpo"
             else f"#SBATCH --ntasks-per-node={job.tasks_per_node}")
    lines = ["#!/bin/bash", f"#SBATCH --job-name=testbed-{job.job_name}",
             f"#SBATCH --nodes={job.nodes}", tasks,
             f"#SBATCH --cpus-per-task={job.cpus_per_task}",
             f"#SBATCH --time={_hms(job.time_s)}",
             f"#SBATCH --output={job.results_dir}/job.log", "#SBATCH --open-mode=append",
             "#SBATCH --requeue", f"#SBATCH --signal=B:USR1@{job.signal_s}"]
    if job.gpus:
        lines.append(f"#SBATCH --gpus-per-node={job.gpus}")
    if job.workdir:
        lines.append(f"#SBATCH --chdir={job.workdir}")
    if job.partition:
        lines.append(f"#SBATCH --partition={job.partition}")
    if job.account:
        lines.append(f"#SBATCH --account={job.account}")
    return lines


def _environment(job: SlurmJob) -> list[str]:
    """Environment set-up: outside-Slurm check, modules, virtual environment, the
    repository, the results folder, the stack's versions."""
    q = shlex.quote
    lines = [f"# Generated by `testbed real-run slurm --run {job.run}`. Before sbatch, the log",
             f"# folder must exist: mkdir -p {q(job.results_dir)} (`-o FILE` makes it).",
             'if [ -z "${SLURM_JOB_ID:-}" ]; then',
             '  echo "testbed: error: $0 is a Slurm batch job: submit it with sbatch $0" >&2',
             "  exit 2", "fi",
             "set -eo pipefail   # -u after the modules and the venv (they use unset names)"]
    if job.modules:
        lines.append("module purge")
        lines += [f"module load {line}" for line in job.modules]
    if job.venv:
        lines.append(f"source {q(job.venv.rstrip('/') + '/bin/activate')}")
    workdir = q(job.workdir) if job.workdir else '"$SLURM_SUBMIT_DIR"'
    lines += ["set -u", f"cd {workdir}",
              'export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"',
              "export SETUPTOOLS_USE_DISTUTILS=stdlib TF_CPP_MIN_LOG_LEVEL=2 PYTHONHASHSEED=0",
              f"export OMP_NUM_THREADS={job.cpus_per_task}"]
    if job.gpus:
        lines.append("export CUBLAS_WORKSPACE_CONFIG=:4096:8   # deterministic cuBLAS "
                     "(PyTorch docs)")
    lines += [f"NAME={q(job.job_name)}", f"RESULTS={q(job.results_dir)}", 'mkdir -p "$RESULTS"',
              'PYTHON="${PYTHON:-python}"',
              '"$PYTHON" -c "import testbed, real_runs" || { echo "testbed: error: testbed is '
              'not importable by $PYTHON: check --venv/--module" >&2; exit 2; }',
              "# the cluster's tools, in every record's environment (real_runs.stack)",
              'export TESTBED_VERSION_SLURM="$(scontrol --version 2>/dev/null || true)"',
              'export TESTBED_VERSION_OPENMPI="$(mpirun --version 2>/dev/null | head -n 1 '
              '|| true)"',
              'export TESTBED_VERSION_UCX="$(ucx_info -v 2>/dev/null | head -n 1 || true)"']
    if job.gpus:
        lines += ['GPU_MODEL="$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null '
                  '| head -n 1 || true)"',
                  '[ -z "$GPU_MODEL" ] || export TESTBED_GPU_MODEL="$GPU_MODEL"']
    lines.append('echo "== testbed job $NAME: Slurm job $SLURM_JOB_ID, incarnation '
                 '${SLURM_RESTART_COUNT:-0}, $(hostname), $(date -u +%Y-%m-%dT%H:%M:%SZ)"')
    return lines


def _step_function(job: SlurmJob) -> list[str]:
    """The shell side of :mod:`real_runs.requeue`: Slurm's warning reaches the batch
    shell (``B:``), which passes it to the running step (or remembers it between steps)."""
    grace = job.signal_s - STOP_MARGIN_S
    return [
        "# step NAME [options] -- COMMAND: one resumable step (python -m real_runs.requeue):",
        "# skipped when an earlier incarnation finished it; stopped at its next commit and",
        "# the job requeued when Slurm warns of the time limit (USR1, passed on below)",
        'STEP_PID=""', 'PREEMPTED=""',
        "trap 'if [ -n \"$STEP_PID\" ]; then kill -USR1 \"$STEP_PID\" 2>/dev/null || true; "
        "else PREEMPTED=1; fi' USR1",
        "step() {",
        '  local name=$1 rc=0 again=0; shift',
        f'  "$PYTHON" -m real_runs.requeue --results "$RESULTS" --step "$name" --grace-s {grace} '
        f'--max-requeues {job.max_requeues} ${{PREEMPTED:+--preempted}} "$@" &',
        '  STEP_PID=$!',
        '  while :; do',
        '    rc=0; wait "$STEP_PID" || rc=$?',
        '    kill -0 "$STEP_PID" 2>/dev/null && continue   # the trap ran: wait on',
        '    if [ "$rc" -gt 128 ]; then again=0; wait "$STEP_PID" 2>/dev/null || again=$?; '
        '[ "$again" -eq 127 ] || rc=$again; fi',
        '    break',
        '  done',
        '  STEP_PID=""',
        '  [ "$rc" -eq 0 ] || exit "$rc"',
        "}"]


def _train(job: SlurmJob) -> list[str]:
    q = shlex.quote
    device = " --device cuda" if job.gpus else ""
    sizes = "".join(f" --{flag} {value}" for flag, value in (("width", job.width),
                                                             ("batch-size", job.batch_size))
                    if value is not None)
    kills = f" --kill-trace {q(job.kill_trace)}" if job.kill_trace else ""
    common = f"--framework {q(job.framework)} --model {q(job.model)}{sizes}{device}"
    return [
        "# 1. the supervised run: checkpoints, kills and restarts, resumed across requeues",
        'step train --commits "$RESULTS/timeline.jsonl" -- "$PYTHON" -m real_runs.slurm_train '
        f'--results "$RESULTS" --name "$NAME" {common} --steps {job.steps} '
        f"--checkpoint-every {job.checkpoint_every} --seed {job.seed}{kills}",
        "# 2. step times of the same configuration",
        'step profile --stdout "$RESULTS/profile.json" -- "$PYTHON" -m testbed real-run profile '
        f'{common} --steps {job.profile_steps} --seed {job.seed} '
        '--measurements "$RESULTS/measurements.jsonl" --json',
        '"$PYTHON" -m testbed records check "$RESULTS/measurements.jsonl"']


def _rendezvous() -> list[str]:
    return ['MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)',
            f"MASTER_PORT=$(({PORT_BASE} + SLURM_JOB_ID % {PORT_SPAN}))   # below the "
            "ephemeral ports"]


def _torchrun(job: SlurmJob, module_args: str) -> str:
    """torchrun (``torch.distributed.run``, by this Python) over the job's nodes:
    ``--standalone`` on one node, one launcher per node by srun on several."""
    per_node = job.tasks_per_node
    if job.nodes == 1:
        return (f'"$PYTHON" -m torch.distributed.run --standalone --nproc-per-node={per_node} '
                f"-m {module_args}")
    return (f"srun --nodes={job.nodes} --ntasks-per-node=1 "
            f"--cpus-per-task={per_node * job.cpus_per_task} "
            f'"$PYTHON" -m torch.distributed.run --nnodes={job.nodes} '
            f"--nproc-per-node={per_node} --rdzv-backend=c10d "
            '--rdzv-endpoint="$MASTER_ADDR:$MASTER_PORT" --rdzv-id="$SLURM_JOB_ID" '
            f"-m {module_args}")


def _mpirun(job: SlurmJob, module_args: str) -> str:
    return (f"mpirun -np {job.world_size} --map-by ppr:{job.tasks_per_node}:node "
            f'"$PYTHON" -m {module_args}')


def _repeats(job: SlurmJob) -> str:
    return f" --repeats {job.collective_repeats}" if job.collective_repeats else ""


def _calibration(job: SlurmJob) -> list[str]:
    design = job.design or ("gpu" if job.gpus else "full")
    backend = "nccl" if job.gpus else "gloo"
    single = replace(job, nodes=1)
    lines = [
        f"# 1. the calibration set (design {design}), committed part by part",
        'step calibration-set --commits "$RESULTS/parts.log" --commit-event part_commit -- '
        f'"$PYTHON" -m real_runs.slurm_calibration --design {design} --out "$RESULTS"',
        f"# 2. {backend} collectives (torchrun): inside one node, then over every node",
        f'step {backend}-node --stdout "$RESULTS/collbench-{backend}-node.out" -- '
        + _torchrun(single, (
            f"real_runs.collbench --torchrun --backend {backend} --nodes 1{_repeats(job)} "
            f'--out "$RESULTS/collectives-{backend}-node.jsonl"'))]
    if job.nodes > 1:
        lines += _rendezvous()
        lines.append(f'step {backend} --stdout "$RESULTS/collbench-{backend}.out" -- '
                     + _torchrun(job, (
            f"real_runs.collbench --torchrun --backend {backend} --nodes {job.nodes}"
            f'{_repeats(job)} --out "$RESULTS/collectives-{backend}.jsonl"')))
    lines += [
        f"# 3. MPI collectives, one rank per {'GPU' if job.gpus else 'task'}",
        'step mpi --stdout "$RESULTS/mpibench.json" -- ' + _mpirun(
            job, f"real_runs.mpibench --nodes {job.nodes}{_repeats(job)} "
                 '--out "$RESULTS/collectives-mpi.jsonl"'),
        "# 4. every record valid",
        '"$PYTHON" -m testbed records check "$RESULTS/fit.jsonl" "$RESULTS/holdout.jsonl" '
        '"$RESULTS"/collectives-*.jsonl',
        'echo "== calibration records in $RESULTS. Fit this cluster\'s profile, then check it '
        'on the held-out records:"',
        'echo "   testbed calibrate $RESULTS/fit.jsonl $RESULTS/collectives-*.jsonl '
        '--base PROFILE -o CLUSTER.yaml"',
        'echo "   testbed verify CLUSTER.yaml $RESULTS/holdout.jsonl"']
    return lines


def _hpo(job: SlurmJob) -> list[str]:
    q = shlex.quote
    assert job.scenario is not None       # validated(): an hpo job has a scenario
    return [
        f"# the sweep on {job.workers} MPI worker(s) and the mpi4py.futures manager (one more",
        "# rank, which only hands out trials: it shares a worker's slot); the SQLite store",
        "# keeps every finished trial, so a requeued or resubmitted job resumes the sweep",
        'step hpo --stdout "$RESULTS/hpo.json" -- '
        f'mpirun -np {job.workers + 1} --oversubscribe "$PYTHON" -m mpi4py.futures '
        f"-m testbed hpo run {q(job.scenario)} --executor mpi --seed {job.seed} "
        '--store "$RESULTS/hpo.db" --trace "$RESULTS/trace.jsonl" --json',
        'echo "== sweep done: $RESULTS/hpo.json; replay it with: testbed hpo replay '
        '$RESULTS/trace.jsonl"']


def _body(job: SlurmJob) -> list[str]:
    q = shlex.quote
    if job.run == "train":
        return _train(job)
    if job.run == "ddp":
        backend = "nccl" if job.gpus else "gloo"
        return (_rendezvous() if job.nodes > 1 else []) + [
            'step ddp --stdout "$RESULTS/ddp-events.jsonl" -- ' + _torchrun(job, (
            f"real_runs.ddp --torchrun --steps {job.steps} --checkpoint-every "
            f"{job.checkpoint_every} --seed {job.seed} --model {q(job.model)} --backend "
            f'{backend} --ckpt-dir "$RESULTS/ckpt" --out "$RESULTS/ddp.json"'))]
    if job.run == "mpi-bench":
        return ['step mpi-bench --stdout "$RESULTS/mpibench.json" -- ' + _mpirun(job, (
            f"real_runs.mpibench --nodes {job.nodes}{_repeats(job)} "
            '--out "$RESULTS/collectives-mpi.jsonl"')),
                '"$PYTHON" -m testbed records check "$RESULTS/collectives-mpi.jsonl"']
    if job.run == "chainer-mpi":
        return ['step chainer-mpi --stdout "$RESULTS/chainer_mpi.out" -- ' + _mpirun(job, (
            f"real_runs.chainer_mpi --model {q(job.model)} --steps {job.steps} "
            f'--seed {job.seed} --out "$RESULTS/chainer_mpi.json"'))]
    if job.run == "hpo":
        return _hpo(job)
    return _calibration(job)


def render_sbatch(job: SlurmJob) -> str:
    """The sbatch script text for ``job`` (validated)."""
    lines = _header(job) + _environment(job) + _step_function(job) + _body(job)
    lines.append('echo "== testbed job $NAME: complete"')
    return "\n".join(lines) + "\n"
