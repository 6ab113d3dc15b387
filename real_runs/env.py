"""Process environment for real runs: child-process settings, the child protocol and
environment capture.

Children run with one thread per library (OpenMP, MKL, TensorFlow) so that results
are reproducible and two processes share a 2-core machine without oversubscription.
A child answers in JSON lines on standard output; bad input is one line on standard
error with the CLI's prefix and exit status 2, which the parent raises again as an
:class:`~testbed.errors.InputError` (:func:`child_error`).
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import platform
import socket
import subprocess
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from testbed.errors import TestbedError
from testbed.measurements import Environment

#: Distribution names of each framework (first installed one wins), for version capture.
FRAMEWORK_DISTS = {"torch": ("torch",), "tensorflow": ("tensorflow", "tensorflow-cpu"),
                   "keras": ("keras",), "chainer": ("chainer",), "cupy": ("cupy", "cupy-cuda12x"),
                   "mpi4py": ("mpi4py",), "none": ()}

REPO_ROOT = Path(__file__).resolve().parent.parent


def child_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """Environment for a harness child process: single-threaded, quiet, importable."""
    env = dict(os.environ)
    for key in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                "TF_NUM_INTEROP_THREADS", "TF_NUM_INTRAOP_THREADS"):
        env[key] = "1"
    env.setdefault("SETUPTOOLS_USE_DISTUTILS", "stdlib")
    env["TF_CPP_MIN_LOG_LEVEL"] = "2"
    env["TF_ENABLE_ONEDNN_OPTS"] = "0"      # oneDNN reorders float sums; keep results exact
    env["PYTHONHASHSEED"] = "0"
    env["PYTHONWARNINGS"] = "ignore"
    env["OMPI_ALLOW_RUN_AS_ROOT"] = "1"
    env["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] = "1"
    path = env.get("PYTHONPATH", "")
    env["PYTHONPATH"] = f"{REPO_ROOT}{os.pathsep}{path}" if path else str(REPO_ROOT)
    if extra:
        env.update(extra)
    return env


def python_cmd(module: str, *args: str) -> list[str]:
    """Command line that runs ``python -m module args`` with this interpreter."""
    return [sys.executable, "-m", module, *args]


#: The CLI's prefix of a bad-input line, and the exit status that goes with it.
ERROR_PREFIX = "testbed: error: "
INPUT_ERROR_STATUS = 2


def write_json_lines(records: Callable[[], Iterable[dict[str, Any]]]) -> int:
    """Child side: write each record of ``records()`` as a JSON line; bad input becomes
    one error line and :data:`INPUT_ERROR_STATUS`. The exit status."""
    from testbed.errors import InputError
    try:
        for record in records():
            sys.stdout.write(json.dumps(record) + "\n")
            sys.stdout.flush()
    except InputError as exc:
        print(f"{ERROR_PREFIX}{exc.format()}", file=sys.stderr)
        return INPUT_ERROR_STATUS
    return 0


class ChildFailed(TestbedError):
    """A framework child process failed on its own (out of memory, a framework error, a
    time limit): not the user's input, so the CLI says it in one line and exits 1."""


def child_error(returncode: int, stderr: str, what: str) -> Exception:
    """Parent side: the error of a child that failed — its bad input again as an
    :class:`InputError`, anything else as ``ChildFailed("<what> failed: …")``."""
    from testbed.errors import InputError
    tail = stderr.strip().splitlines()
    message = tail[-1] if tail else f"exit status {returncode}"
    if returncode == INPUT_ERROR_STATUS:
        return InputError(message.removeprefix(ERROR_PREFIX))
    return ChildFailed(f"{what} failed: {message}")


#: Local framework processes one command may start: a few per CPU (they take turns on
#: the cores), and at least 8 so a small machine can still try a small group.
PROCESSES_PER_CPU = 4
MIN_PROCESS_CAP = 8


def framework_installed(module: str) -> bool:
    """Whether ``module`` (torch, tensorflow, chainer) can be imported here — found
    without importing it, so asking costs nothing and loads no framework."""
    import importlib.util

    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def max_local_processes() -> int:
    """The most framework processes a command starts on this machine."""
    return max(MIN_PROCESS_CAP, PROCESSES_PER_CPU * (os.cpu_count() or 1))


def available_memory_bytes() -> int | None:
    """Memory the kernel can give a new process now (Linux ``MemAvailable``; the
    physical memory elsewhere), or None when the system does not say."""
    try:
        with open("/proc/meminfo", encoding="ascii") as stream:
            for line in stream:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (OSError, ValueError):
        return None


def run_json_child(module: str, args: list[str], *, timeout_s: float, what: str
                   ) -> list[dict[str, Any]]:
    """Run ``python -m module args`` (single-threaded libraries) and return the JSON
    records it wrote; raises :func:`child_error` when it fails."""
    try:
        proc = subprocess.run(python_cmd(module, *args), capture_output=True, text=True,
                              env=child_env(), timeout=timeout_s)
    except subprocess.TimeoutExpired:
        raise ChildFailed(f"{what} failed: no result within {timeout_s:g} s") from None
    if proc.returncode != 0:
        raise child_error(proc.returncode, proc.stderr, what)
    return [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]


def _version(dists: tuple[str, ...]) -> str:
    for dist in dists:
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
    return "absent" if dists else ""


def cpu_model() -> str:
    """The CPU model name from /proc/cpuinfo (Linux) or ``platform.processor()``."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as stream:
            for line in stream:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def gpu_model(framework: str) -> str:
    """The first GPU's name as the framework sees it, ``"none"`` without one.

    Only asks a framework that is already imported, so capture never pays an import.
    """
    if framework == "torch" and "torch" in sys.modules:
        torch = sys.modules["torch"]
        if torch.cuda.is_available():
            return str(torch.cuda.get_device_name(0))
    if framework == "tensorflow" and "tensorflow" in sys.modules:
        tf = sys.modules["tensorflow"]
        gpus = tf.config.list_physical_devices("GPU")
        if gpus:
            details = tf.config.experimental.get_device_details(gpus[0])
            return str(details.get("device_name", gpus[0].name))
    if framework == "chainer" and "cupy" in sys.modules:
        cupy = sys.modules["cupy"]
        return str(cupy.cuda.runtime.getDeviceProperties(0)["name"].decode())
    return os.environ.get("TESTBED_GPU_MODEL", "none")


def capture_environment(framework: str = "none", world_size: int = 1) -> Environment:
    """The environment of this process, for a measurement record."""
    versions = {name: _version(dists) for name, dists in FRAMEWORK_DISTS.items()
                if dists and name != framework}
    versions = {k: v for k, v in versions.items() if v != "absent"}
    versions["numpy"] = _version(("numpy",))
    from real_runs.stack import stack_versions
    versions.update(stack_versions())     # MPI/NCCL/UCX versions and settings
    return Environment(
        host=socket.gethostname(), os=f"{platform.system()} {platform.release()}",
        python=platform.python_version(), cpu_model=cpu_model(), cpu_count=os.cpu_count() or 1,
        gpu_model=gpu_model(framework), framework=framework,
        framework_version=_version(FRAMEWORK_DISTS.get(framework, ())),
        world_size=world_size, versions=versions)
