"""Where a sweep's points run: a local process pool or an MPI allocation.

``local`` is a :class:`concurrent.futures.ProcessPoolExecutor` (2 workers unless told
otherwise). ``mpi`` is :class:`mpi4py.futures.MPIPoolExecutor`: started as
``mpiexec -n K python -m mpi4py.futures -m testbed sweep … --executor mpi``, rank 0
drives the sweep and ranks 1…K−1 run points; started any other way, it spawns
``--workers`` processes through MPI (when the MPI library allows spawning).
mpi4py is imported only when ``mpi`` is asked for, by :mod:`simulators.mpi_pool`.
"""

from __future__ import annotations

from concurrent.futures import Executor

from testbed.errors import InputError

EXECUTORS = ("local", "mpi")


def make_executor(kind: str, workers: int | None) -> tuple[Executor, int]:
    """An executor and the number of points it runs at once."""
    if workers is not None and workers <= 0:
        raise InputError(f"must be a positive integer, got {workers}", source="--workers")
    if kind == "local":
        from concurrent.futures import ProcessPoolExecutor
        n = workers or 2
        return ProcessPoolExecutor(max_workers=n), n
    if kind == "mpi":
        try:
            from simulators.mpi_pool import mpi_pool
            return mpi_pool(workers)
        except ImportError as exc:  # pragma: no cover - mpi4py is a dependency
            raise InputError(f"mpi4py is not usable: {exc}", source="--executor mpi") from None
    raise InputError(f"unknown executor {kind!r}; choose one of {', '.join(EXECUTORS)}",
                     source="--executor")
