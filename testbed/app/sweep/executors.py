"""Where a sweep's points run: a local process pool or an MPI allocation.

``local`` is a :class:`concurrent.futures.ProcessPoolExecutor` with at most
min(points, CPUs) workers (2 unless told otherwise). Every worker asks the kernel to
kill it when its parent dies (Linux ``PR_SET_PDEATHSIG``) and checks its parent once
at start, so a sweep killed with SIGKILL leaves no worker behind holding the
database. ``mpi`` is :class:`mpi4py.futures.MPIPoolExecutor`, for a sweep started as
``mpiexec -n K python -m mpi4py.futures -m testbed sweep … --executor mpi``: rank 0
drives the sweep and ranks 1…K−1 run points. Asked for outside such a launch it is
refused with one line (spawning MPI processes from a plain process hangs on many MPI
installations).
"""

from __future__ import annotations

import os
import signal
from concurrent.futures import Executor, ProcessPoolExecutor

from testbed.errors import InputError

EXECUTORS = ("local", "mpi")
#: Workers of the local pool unless ``--workers`` says otherwise.
DEFAULT_WORKERS = 2
#: Environment variables that MPI launchers (OpenMPI, MPICH/Hydra, PMIx, Slurm) set.
MPI_LAUNCH_VARS = ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "MPI_LOCALNRANKS")
_PR_SET_PDEATHSIG = 1


def _die_with_parent(parent_pid: int) -> None:
    """Pool initializer: SIGKILL this worker when the sweep's process dies."""
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):   # not Linux: the parent check below still helps
        pass
    signal.signal(signal.SIGINT, signal.SIG_IGN)    # the driver handles Ctrl-C
    if os.getppid() != parent_pid:      # the parent died before the request took effect
        os._exit(1)


def worker_count(workers: int | None, points: int) -> int:
    """Workers to start: the request (or the default), at most one per point and CPU."""
    if workers is not None and workers <= 0:
        raise InputError(f"must be a positive integer, got {workers}", source="--workers")
    n = workers or DEFAULT_WORKERS
    return max(1, min(n, points, os.cpu_count() or 1))


def in_mpi_launch() -> bool:
    return any(v in os.environ for v in MPI_LAUNCH_VARS)


def require_mpi_launch(command: str) -> None:
    """One line, before any work, when ``--executor mpi`` is asked for outside an MPI
    launch (mpi4py.futures would otherwise try to spawn workers and hang)."""
    if not in_mpi_launch():
        raise InputError(f"needs an MPI launch: mpiexec -n K python -m mpi4py.futures -m "
                         f"testbed {command} … --executor mpi", source="--executor mpi")


def make_executor(kind: str, workers: int | None, points: int = 1 << 30
                  ) -> tuple[Executor, int]:
    """An executor and the number of points it runs at once."""
    if kind == "local":
        n = worker_count(workers, points)
        return ProcessPoolExecutor(max_workers=n, initializer=_die_with_parent,
                                   initargs=(os.getpid(),)), n
    if kind == "mpi":
        require_mpi_launch("sweep")
        from simulators.mpi_pool import mpi_pool
        return mpi_pool(workers)
    raise InputError(f"unknown executor {kind!r}; choose one of {', '.join(EXECUTORS)}",
                     source="--executor")


def stop_now(pool: Executor) -> None:
    """Cancel what is queued and end the pool's workers without waiting for them."""
    procs = list(getattr(pool, "_processes", {}) .values()) if isinstance(
        pool, ProcessPoolExecutor) else []
    pool.shutdown(wait=False, cancel_futures=True)
    for proc in procs:
        if proc.is_alive():
            proc.kill()
    for proc in procs:
        proc.join(timeout=5)
