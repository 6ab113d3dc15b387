"""The command line starts fast: a command's help loads no heavy module, and a small
simulation costs little more than the libraries it cannot do without.

Every command is imported only when it runs (``testbed.app.cli.main.LazyGroup``), and a
command module imports its engine, the resolver, numpy or pydantic inside the function
that needs them, so ``testbed simulate --help`` is click and a few light modules. The
first test says so exactly (which modules a fresh interpreter holds after ``--help``);
the second times the start on this machine: CPU seconds (user + system) of the child
processes, the median of several runs, against a budget with room for a loaded 2-core
machine, where CPU time grows far less than wall time.
"""

from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import each

REPO = Path(__file__).resolve().parents[1]
#: Libraries (and project parts) a command's help must not load: each costs tens of
#: milliseconds or more to import (numpy ~0.1 s, scipy.stats ~0.3 s, numba ~0.5 s).
HEAVY = ("numpy", "scipy", "pydantic", "simpy", "numba", "matplotlib", "optuna", "torch",
         "testbed.scenario.schema", "testbed.oracle.estimate", "simulators")
#: Commands whose ``--help`` is checked (``testbed --help`` itself imports every command
#: for its one-line summaries).
HELP_COMMANDS = (("simulate", "--help"), ("hpo", "simulate", "--help"), ("run", "--help"))
#: A scenario small enough that its simulation is a rounding error of the start.
TINY = ("name: tiny\nworkload: {compute_time: 10h}\nfailures: {mtbf: 5h}\n"
        "checkpoint: {cost: 1min, restart: 2min, policy: daly}\n"
        "simulation: {replications: 1, seed: 1}\n")
#: Runs per timing (the median is reported).
RUNS = 5
#: CPU seconds a command's help may take: ~0.08 s measured on the idle and the loaded
#: machine alike; the bar leaves 3x for a slower or busier machine.
HELP_BUDGET_S = 0.3
#: CPU seconds a tiny simulation may add over importing the libraries it needs (numpy,
#: pydantic, yaml, click): the resolver, the schema's models and the engine, ~0.15 s
#: measured on the loaded machine; the bar catches a heavy import slipping in (scipy.stats
#: alone is 0.3 s, numba 0.5 s).
TINY_EXTRA_BUDGET_S = 0.45


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONHASHSEED": "0"}


def _loaded_after(args: tuple[str, ...], heavy: tuple[str, ...] = HEAVY) -> list[str]:
    """The modules of ``heavy`` (and below them) a fresh interpreter holds after
    ``testbed ARGS``."""
    code = ("import json, sys\nfrom testbed.app.cli.main import main\n"
            f"try:\n    main({list(args)!r})\nexcept SystemExit:\n    pass\n"
            f"heavy = {heavy!r}\n"
            "print(json.dumps(sorted(m for m in sys.modules\n"
            "                        if any(m == h or m.startswith(h + '.') for h in heavy))))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=REPO, env=_env(), timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("args", HELP_COMMANDS, ids=" ".join)
def test_help_loads_no_heavy_module(args):
    assert _loaded_after(args) == []


def test_a_small_simulation_loads_only_what_it_runs(tmp_path):
    """A scenario without a model, HPO or plots needs the schema (pydantic), the
    simulator (numpy) and nothing else heavy: not the oracle's estimate, the HPO core,
    SimPy, numba, matplotlib, nor scipy (one replication needs no t quantile)."""
    scenario = tmp_path / "tiny.yaml"
    scenario.write_text(TINY)
    loaded = set(_loaded_after(("simulate", str(scenario), "-q"), HEAVY + ("testbed.hpo",)))
    assert {"numpy", "pydantic", "simulators.run", "testbed.scenario.schema"} <= loaded
    unneeded = ("scipy", "simpy", "numba", "matplotlib", "optuna", "torch",
                "testbed.oracle.estimate", "testbed.hpo")
    assert not [m for m in loaded if m in unneeded or m.startswith(tuple(u + "." for u in unneeded))]


def _cpu_s(argv: list[str]) -> float:
    """Median CPU seconds (user + system) of ``argv`` over :data:`RUNS` runs."""
    times = []
    for _ in range(RUNS):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        proc = subprocess.run(argv, capture_output=True, text=True, cwd=REPO, env=_env(),
                              timeout=120)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        assert proc.returncode == 0, proc.stderr
        times.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return statistics.median(times)


@pytest.mark.measured
def test_start_is_fast(tmp_path):
    scenario = tmp_path / "tiny.yaml"
    scenario.write_text(TINY)
    testbed = [sys.executable, "-m", "testbed"]
    for args in each(HELP_COMMANDS[:2]):
        cpu = _cpu_s([*testbed, *args])
        assert cpu <= HELP_BUDGET_S, f"testbed {' '.join(args)}: {cpu:.3f} s of CPU"
    libraries = _cpu_s([sys.executable, "-c", "import click, numpy, pydantic, yaml"])
    run = _cpu_s([*testbed, "simulate", str(scenario), "-q"])
    assert run - libraries <= TINY_EXTRA_BUDGET_S, (
        f"testbed simulate (tiny): {run:.3f} s of CPU, {run - libraries:.3f} s over its "
        f"libraries' {libraries:.3f} s")
