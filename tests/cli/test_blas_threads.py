"""The CLI runs numpy's BLAS on one thread unless the user chose a count
(:func:`testbed.app.cli.main.one_blas_thread`): a second OpenBLAS thread cost every
command about 85 ms of CPU at start-up, for arrays too small to use it."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from testbed.app.cli.main import BLAS_THREAD_VARS, one_blas_thread
from tests.conftest import REPO

#: Threads of a process that ran ``one_blas_thread()`` and then imported numpy.
THREADS_AFTER_IMPORT = ("from testbed.app.cli.main import one_blas_thread; one_blas_thread(); "
                        "import numpy, os; print(len(os.listdir('/proc/self/task')))")


def test_an_unset_count_becomes_one():
    environ: dict[str, str] = {}
    one_blas_thread(environ)
    assert environ == {"OPENBLAS_NUM_THREADS": "1"}


@pytest.mark.parametrize("name", BLAS_THREAD_VARS)
def test_a_count_the_user_set_is_kept(name):
    environ = {name: "4"}
    one_blas_thread(environ)
    assert environ == {name: "4"}


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="needs Linux /proc")
def test_numpy_then_starts_no_blas_thread():
    env = {k: v for k, v in os.environ.items() if k not in BLAS_THREAD_VARS}
    env["PYTHONPATH"] = str(REPO)
    out = subprocess.run([sys.executable, "-c", THREADS_AFTER_IMPORT], env=env, cwd=REPO,
                         capture_output=True, text=True, check=True, timeout=60)
    assert int(out.stdout) == 1
