"""An MPI pool for running simulation points across an allocation (mpi4py.futures).

Started as ``mpiexec -n K python -m mpi4py.futures -m testbed sweep … --executor mpi``,
rank 0 drives the sweep and ranks 1…K−1 run points; started any other way, the pool
spawns ``workers`` processes through MPI (when the MPI library allows spawning). It
lives here, with the engines it runs, so that ``testbed/`` never imports MPI.
"""

from __future__ import annotations

from concurrent.futures import Executor


def mpi_pool(workers: int | None) -> tuple[Executor, int]:
    """An :class:`mpi4py.futures.MPIPoolExecutor` and how many points it runs at once."""
    from mpi4py import MPI
    from mpi4py.futures import MPIPoolExecutor

    size = MPI.COMM_WORLD.Get_size()
    if size > 1:
        return MPIPoolExecutor(), size - 1
    n = workers or 2
    return MPIPoolExecutor(max_workers=n), n
