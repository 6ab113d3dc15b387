"""Shared fixtures: where the reference data lives, and a CLI runner."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

# CI profile: derandomized (the same examples on every run, so a failure reproduces and
# the suite's time is stable), no example database, no deadline (2 busy cores).
settings.register_profile("ci", derandomize=True, database=None, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

# A suite started in the background by a non-interactive shell (`make test &`, nohup, a
# CI step's job) inherits SIGINT ignored, and every command it starts would too: the
# tests that press Ctrl-C on a command would then find it deaf (a run that never stops,
# a sweep that finishes with 0). Caught here, SIGINT is back to its default in each
# child at exec, as in a terminal.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("TESTBED_SHARED", REPO.parent / "shared"))
PARADL_INPUTS = SHARED / "data" / "abci-paradl" / "paradl-inputs"
ABCI_CSV = SHARED / "data" / "abci-paradl" / "calibration.csv"


@pytest.fixture(scope="session")
def paradl_inputs() -> Path:
    if not PARADL_INPUTS.exists():
        pytest.fail(f"reference data missing: {PARADL_INPUTS} (set TESTBED_SHARED)")
    return PARADL_INPUTS


@pytest.fixture(scope="session")
def abci_csv() -> Path:
    if not ABCI_CSV.exists():
        pytest.fail(f"reference data missing: {ABCI_CSV} (set TESTBED_SHARED)")
    return ABCI_CSV


def run_cli(*args: str, cwd: Path | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    """Run ``python -m testbed ARGS`` in a fresh process (what a user types)."""
    return subprocess.run([sys.executable, "-m", "testbed", *args], capture_output=True,
                          text=True, cwd=cwd or REPO, timeout=timeout)


@pytest.fixture
def cli():
    return run_cli


def pytest_addoption(parser):
    parser.addoption("--slow", action="store_true", default=False,
                     help="run the slow, thorough variants (more hypothesis examples, "
                          "restores in freshly spawned interpreters)")


def pytest_collection_modifyitems(config, items):
    """Benchmarks time this machine: they belong to the machine-measured tier
    (``-m measured``) beside the tests marked so by hand."""
    measured = pytest.mark.measured
    for item in items:
        if "benchmark" in getattr(item, "fixturenames", ()):
            item.add_marker(measured)


#: The one guard for loops that assert: ``for x in each(items):`` fails when the loop
#: would not run at all (an assertion inside a loop over nothing proves nothing).
def each(items, at_least: int = 1):
    items = list(items)
    assert len(items) >= at_least, f"expected at least {at_least} item(s) to check, got {len(items)}"
    return items
