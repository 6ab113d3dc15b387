"""``python -m testbed`` (also under ``python -m mpi4py.futures -m testbed``)."""

from testbed.cli.main import main

main()
