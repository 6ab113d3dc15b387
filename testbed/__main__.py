"""``python -m testbed`` (also under ``python -m mpi4py.futures -m testbed``).

The guard matters under MPI: mpi4py.futures workers import the main module under
another name (``__worker__``) to unpickle tasks, and must not run the CLI.
"""

from testbed.app.cli.main import main

if __name__ == "__main__":
    main()
