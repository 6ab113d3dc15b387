"""A real Slurm on this machine, for the tests that submit the generated jobs.

The session fixture :func:`slurm` starts Debian's ``munge`` and ``slurm-wlm`` (``make
setup`` installs them) in a temporary folder — no systemd, no files outside it:

* ``munged`` with a fresh key (``munge.key``, 1 KiB from ``os.urandom``) and its own
  socket;
* ``slurmctld`` and ``slurmd`` (both in the foreground, as child processes) with a
  minimal ``slurm.conf``: one node, this machine, with the CPUs ``slurmd -C`` finds as
  its slots; no cgroups (``proctrack/linuxproc``, ``task/none``), no accounting
  (``accounting_storage/none``, ``jobacct_gather/none``), ``select/cons_tres`` with
  ``CR_Core``, one partition ``testbed`` with the node; ports found free outside the
  ephemeral range; ``KillWait=5`` so a requeue's kill is quick;
* it waits until ``sinfo`` shows the node ``idle``.

It works as root (CI) and as an ordinary user (Slurm then runs every job as that
user, which is the only user such a ``slurmd`` can run jobs as). When Slurm is missing
or does not come up, every test that needs it fails with one reason and the daemons'
log tail — never a silent skip. At the end every job is cancelled and every daemon
(and any ``slurmstepd`` they left) is stopped; the teardown fails if one survives.

:class:`Cluster` submits scripts with ``sbatch`` (in a clean environment: the job sets
up its own, and Open MPI's oversubscription switch of the suite is *not* passed, so
a job gets exactly the slots it asked Slurm for) and waits for them. A requeued job
is held by Slurm for about two minutes before it is eligible again (its guard against
requeue loops); :meth:`Cluster.wait` releases such a hold at once (``scontrol update
StartTime=now``), which a user may do the same way.
"""

from __future__ import annotations

import getpass
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.conftest import REPO

DAEMONS = ("munged", "slurmctld", "slurmd")
CLIENTS = ("sbatch", "sinfo", "scontrol", "scancel", "squeue")
#: Job states after which a job does nothing more.
FINAL_STATES = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY",
                "BOOT_FAIL", "DEADLINE", "PREEMPTED"}
PARTITION = "testbed"
START_TIMEOUT_S = 60.0
#: Set this variable to keep the cluster's folder (its daemons' logs) after the tests.
KEEP_ENV = "TESTBED_KEEP_SLURM"
#: Environment variables a job inherits from the test (sbatch's default is all of them;
#: the job script sets up the rest itself, as on a cluster).
PASSED_ENV = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "USER", "LOGNAME",
              "OMPI_ALLOW_RUN_AS_ROOT", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM")


def pytest_configure(config):
    config.addinivalue_line("markers", "slurm: submits jobs to the local Slurm started by "
                                       "tests/slurm/conftest.py (make setup installs it)")


def search_path() -> str:
    """PATH with the system folders of the daemons (an ordinary user's PATH on Debian
    has no /usr/sbin, where slurmctld, slurmd and munged are)."""
    parts = os.environ.get("PATH", "/usr/bin:/bin").split(os.pathsep)
    return os.pathsep.join(parts + [p for p in ("/usr/sbin", "/sbin") if p not in parts])


def _free_port(start: int) -> int:
    """The first port from ``start`` that nothing listens on (below the ephemeral range)."""
    for port in range(start, start + 2000):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port in {start}…{start + 2000}")


def node_line(name: str) -> str:
    """This machine as a Slurm node: ``slurmd -C``'s hardware (without RealMemory, which
    would drain the node when memory is short), addressed on the loopback."""
    proc = subprocess.run(["slurmd", "-C"], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PATH": search_path()})
    first = proc.stdout.splitlines()[0] if proc.returncode == 0 and proc.stdout else ""
    keys = ("CPUs", "Boards", "SocketsPerBoard", "CoresPerSocket", "ThreadsPerCore")
    found = dict(part.split("=", 1) for part in first.split() if "=" in part)
    hardware = " ".join(f"{k}={found[k]}" for k in keys if k in found) or \
        f"CPUs={os.cpu_count() or 1}"
    return f"NodeName={name} NodeAddr=127.0.0.1 {hardware} State=UNKNOWN"


def slurm_conf(folder: Path, host: str, user: str, ports: tuple[int, int]) -> str:
    """The minimal slurm.conf of one node without cgroups or accounting."""
    return "\n".join([
        "ClusterName=testbed", f"SlurmctldHost={host}(127.0.0.1)",
        f"SlurmctldPort={ports[0]}", f"SlurmdPort={ports[1]}",
        f"SlurmUser={user}", f"SlurmdUser={user}",
        "AuthType=auth/munge", "CredType=cred/munge",
        f"AuthInfo=socket={folder}/munge/munge.socket",
        f"StateSaveLocation={folder}/state", f"SlurmdSpoolDir={folder}/spool",
        f"SlurmctldPidFile={folder}/slurmctld.pid", f"SlurmdPidFile={folder}/slurmd.pid",
        f"SlurmctldLogFile={folder}/log/slurmctld.log", f"SlurmdLogFile={folder}/log/slurmd.log",
        "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none",
        "SelectType=select/cons_tres", "SelectTypeParameters=CR_Core",
        "SchedulerType=sched/builtin", "AccountingStorageType=accounting_storage/none",
        "JobAcctGatherType=jobacct_gather/none", "JobCompType=jobcomp/none",
        "MpiDefault=none", "ReturnToService=2", "KillWait=5", "InactiveLimit=0",
        "SlurmctldDebug=info", "SlurmdDebug=info",
        node_line(host),
        f"PartitionName={PARTITION} Nodes={host} Default=YES MaxTime=INFINITE State=UP",
        ""])


def _tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def _stepd_pids() -> set[int]:
    out = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if (entry / "comm").read_text().strip() == "slurmstepd":
                    out.add(int(entry.name))
            except OSError:
                continue
    return out


@dataclass
class Cluster:
    """The running local Slurm: its folder, the environment of its clients, its node."""

    folder: Path
    node: str
    cpus: int
    env: dict[str, str]
    daemons: dict[str, subprocess.Popen] = field(default_factory=dict)
    stepds_before: set[int] = field(default_factory=set)

    def run(self, *args: str, timeout: float = 60, check: bool = True
            ) -> subprocess.CompletedProcess:
        proc = subprocess.run(list(args), capture_output=True, text=True, env=self.env,
                              timeout=timeout)
        if check and proc.returncode != 0:
            raise AssertionError(f"{' '.join(args)} failed ({proc.returncode}): "
                                 f"{proc.stderr.strip()}")
        return proc

    def submit(self, script: Path) -> str:
        """``sbatch --parsable SCRIPT``: the job id."""
        return self.run("sbatch", "--parsable", str(script)).stdout.strip().split(";")[0]

    def job(self, job_id: str) -> dict[str, str]:
        """``scontrol show job -o``: the job's fields ({} once Slurm forgot it)."""
        proc = self.run("scontrol", "show", "job", "-o", job_id, check=False)
        if proc.returncode != 0:
            return {}
        return dict(part.split("=", 1) for part in proc.stdout.split() if "=" in part)

    def node_is_clean(self) -> bool:
        """The node is idle and no step daemon of an earlier job (or incarnation) is
        left: starting a requeued job before its last incarnation's slurmstepd has gone
        can leave the new one hanging (the two share the job's id)."""
        return not _stepd_pids() - self.stepds_before and \
            self.node_state().split()[:1] == ["idle"]

    def release_hold(self, job_id: str) -> None:
        """A requeued job waits ~2 min for its begin time: start it now."""
        self.run("scontrol", "update", f"JobId={job_id}", "StartTime=now", check=False)

    def wait(self, job_id: str, timeout_s: float, *, log: Path | None = None,
             until=None) -> dict[str, str]:
        """Wait until the job ends (or ``until(fields)`` is true); the job's fields."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            fields = self.job(job_id)
            state = fields.get("JobState", "")
            if until is not None and until(fields):
                return fields
            if state in FINAL_STATES:
                return fields
            # a requeued job waits for a begin time (Reason=BeginTime, or None until the
            # scheduler has looked at it): let it start as soon as the node is clean
            if state == "PENDING" and (fields.get("Reason") == "BeginTime"
                                       or fields.get("Restarts", "0") != "0") \
                    and self.node_is_clean():
                self.release_hold(job_id)
            time.sleep(0.3)
        fields = self.job(job_id)
        self.run("scancel", job_id, check=False)
        what = "reach the awaited state" if until is not None else "end"
        raise AssertionError(
            f"job {job_id} did not {what} within {timeout_s:g} s (state "
            f"{fields.get('JobState')}, reason {fields.get('Reason')}, restarts "
            f"{fields.get('Restarts')}; node {self.node_state()}); job log tail:\n" + (_tail(log, 30) if log else "")
            + "\nslurmctld:\n" + _tail(self.folder / "log" / "slurmctld.log")
            + "\nslurmd:\n" + _tail(self.folder / "log" / "slurmd.log"))

    def log_tail(self, daemon: str, lines: int = 25) -> str:
        return _tail(self.folder / "log" / f"{daemon}.log", lines)

    def node_state(self) -> str:
        """The node's state and, when it is drained or down, why."""
        return self.run("sinfo", "-h", "-N", "-o", "%t %E", check=False).stdout.strip()

    def signal_batch(self, job_id: str, name: str) -> None:
        """What Slurm does at ``--signal=B:NAME@S``: the signal to the batch shell."""
        self.run("scancel", f"--signal={name}", "--batch", job_id)

    def requeue(self, job_id: str) -> None:
        """Kill the running job and put it back in the queue (what a node failure or
        an administrator's requeue does)."""
        self.run("scontrol", "requeue", job_id)

    def stop(self) -> list[str]:
        """Cancel every job, stop the daemons; what survived (empty: nothing)."""
        self.run("scancel", "--partition", PARTITION, check=False)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:      # jobs gone, and their step daemons
            if not self.run("squeue", "-h", check=False).stdout.strip() \
                    and not _stepd_pids() - self.stepds_before:
                break
            time.sleep(0.3)
        for name in reversed(DAEMONS):
            proc = self.daemons.get(name)
            if proc is not None and proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
        survivors = [f"slurmstepd {pid}" for pid in _stepd_pids() - self.stepds_before]
        for pid in _stepd_pids() - self.stepds_before:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        return survivors + [name for name, proc in self.daemons.items() if proc.poll() is None]


def _start(cluster: Cluster, name: str, args: list[str]) -> None:
    log = open(cluster.folder / "log" / f"{name}.out", "w")
    cluster.daemons[name] = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT,
                                             env=cluster.env, start_new_session=True)
    log.close()


def _prepare(folder: Path, host: str, user: str) -> dict[str, str]:
    for sub in ("munge", "state", "spool", "log"):
        (folder / sub).mkdir(mode=0o755)
    key = folder / "munge" / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o400)
    ports = (_free_port(16817), _free_port(16900))
    (folder / "slurm.conf").write_text(slurm_conf(folder, host, user, ports))
    env = {k: os.environ[k] for k in PASSED_ENV if k in os.environ}
    env["PATH"] = search_path()
    env["SLURM_CONF"] = str(folder / "slurm.conf")
    return env


def _node_state(cluster: Cluster) -> str:
    return cluster.run("sinfo", "-h", "-N", "-o", "%t", check=False).stdout.strip()


def start_cluster() -> Cluster:
    """Start munged, slurmctld and slurmd; the cluster once its node is idle."""
    missing = [tool for tool in DAEMONS + CLIENTS if shutil.which(tool, path=search_path())
               is None]
    if missing:
        pytest.fail(f"Slurm is not installed here ({', '.join(missing)} missing): `make setup` "
                    "installs slurm-wlm and munge", pytrace=False)
    folder = Path(tempfile.mkdtemp(prefix="tb-slurm-"))    # short: socket paths ≤ 107 B
    host, user = socket.gethostname().split(".")[0], getpass.getuser()
    cluster = Cluster(folder, host, 0, _prepare(folder, host, user),
                      stepds_before=_stepd_pids())
    m = folder / "munge"
    _start(cluster, "munged", ["munged", "-F", "-f", f"--key-file={m}/munge.key",
                               f"--socket={m}/munge.socket", f"--pid-file={m}/munged.pid",
                               f"--log-file={folder}/log/munged.log",
                               f"--seed-file={m}/munged.seed"])
    deadline = time.monotonic() + START_TIMEOUT_S
    while not (m / "munge.socket").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    _start(cluster, "slurmctld", ["slurmctld", "-D", "-i", "-f", cluster.env["SLURM_CONF"]])
    _start(cluster, "slurmd", ["slurmd", "-D", "-N", host, "-f", cluster.env["SLURM_CONF"]])
    state = ""
    while time.monotonic() < deadline:
        state = _node_state(cluster)
        dead = [n for n, p in cluster.daemons.items() if p.poll() is not None]
        if state == "idle" or dead:
            break
        time.sleep(0.3)
    if state != "idle":
        logs = "\n".join(f"--- {n}:\n{_tail(folder / 'log' / f'{n}.log')}\n"
                         f"{_tail(folder / 'log' / f'{n}.out')}" for n in DAEMONS)
        cluster.stop()
        shutil.rmtree(folder, ignore_errors=True)
        pytest.fail(f"the local Slurm did not come up (node state {state or 'unknown'!r}, "
                    f"daemons: {', '.join(f'{n} {p.poll()}' for n, p in cluster.daemons.items())}"
                    f"):\n{logs}", pytrace=False)
    cluster.cpus = int(cluster.run("sinfo", "-h", "-N", "-o", "%c").stdout.split()[0])
    return cluster


@pytest.fixture(scope="session")
def slurm():
    cluster = start_cluster()
    try:
        yield cluster
    finally:
        survivors = cluster.stop()
        if os.environ.get(KEEP_ENV):
            print(f"\nthe local Slurm's folder (logs, state): {cluster.folder}")
        else:
            shutil.rmtree(cluster.folder, ignore_errors=True)
        assert not survivors, f"left running after the tests: {survivors}"


@pytest.fixture(scope="session")
def venv() -> Path:
    """The project's virtual environment, which the jobs activate (``--venv``)."""
    path = REPO / ".venv"
    if not (path / "bin" / "activate").exists():
        pytest.fail(f"{path} has no bin/activate: run `make setup`", pytrace=False)
    return path
