"""Shared fixtures of the real-run tests: the ``--slow`` option, CLI runner, servers.

``--slow`` (or ``TESTBED_SLOW=1``) raises the number of hypothesis examples of the
determinism property from the CI count to the thorough count.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from real_runs.env import child_env

CI_EXAMPLES = 20
SLOW_EXAMPLES = 100


def pytest_addoption(parser):
    try:
        parser.addoption("--slow", action="store_true", default=False,
                         help="run the thorough (slow) real-run property examples")
    except ValueError:
        pass  # already added by another conftest


def slow_enabled(config) -> bool:
    try:
        if config.getoption("--slow"):
            return True
    except ValueError:
        pass
    return os.environ.get("TESTBED_SLOW", "") not in ("", "0")


@pytest.fixture(scope="session")
def slow_mode(request) -> bool:
    """True with ``--slow`` / ``TESTBED_SLOW=1``."""
    return slow_enabled(request.config)


@pytest.fixture(scope="session")
def examples(request) -> int:
    """Hypothesis examples per framework for the determinism property."""
    return SLOW_EXAMPLES if slow_enabled(request.config) else CI_EXAMPLES


def pytest_collection_modifyitems(config, items):
    if slow_enabled(config):
        return
    skip = pytest.mark.skip(reason="slow: run with --slow or TESTBED_SLOW=1")
    for item in items:
        if "slow" in item.keywords and "real_runs" in str(item.fspath):
            item.add_marker(skip)


def run_cli(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """Run ``testbed real-run ARGS`` through the real entry point's error handling."""
    return subprocess.run([sys.executable, "-m", "testbed", "real-run", *args],
                          capture_output=True, text=True, env=child_env(), timeout=timeout)


@pytest.fixture(scope="session")
def cli():
    """``cli(*args)`` runs ``testbed real-run ARGS`` in a child process."""
    return run_cli
