"""The layer contract of the README stays true (see tests/layering_contract.py), and the
contract itself catches a planted circle, an upward import and a private import."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.layering_contract import FRAMEWORKS, violations

REPO = Path(__file__).resolve().parents[1]


def test_the_tree_keeps_the_contract():
    problems = violations(REPO)
    assert not problems, "\n".join(problems)


def _plant(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def test_contract_fails_on_a_planted_circle(tmp_path):
    root = _plant(tmp_path, {
        "testbed/__init__.py": "",
        "testbed/units.py": "from testbed.errors import InputError\n",
        "testbed/errors.py": "def f():\n    from testbed.units import parse\n",
    })
    problems = violations(root)
    assert any("import circle" in p and "testbed.errors" in p and "testbed.units" in p
               for p in problems), problems


def test_contract_fails_on_an_upward_or_private_import(tmp_path):
    root = _plant(tmp_path, {
        "testbed/__init__.py": "",
        "testbed/units.py": "def f():\n    from testbed.app.cli import main\n",
        "testbed/app/cli/__init__.py": "",
        "testbed/app/cli/main.py": "from testbed.units import _hidden\n",
        "simulators/__init__.py": "",
        "simulators/engine.py": "import torch\nfrom testbed.app.results_db import Store\n",
        "testbed/app/results_db.py": "def f():\n    import torch\n",
        "testbed/oracle.py": "import simpy\n",
        "testbed/newthing.py": "",
    })
    text = "\n".join(violations(root))
    assert "core module testbed.units imports application module testbed.app.cli.main" in text
    assert "private name(s) _hidden" in text
    assert "engines module simulators.engine imports application module testbed.app.results_db" in text
    assert "framework torch" in text
    assert "the core imports simpy" in text
    # a framework inside a function of the application is caught too: they live in real_runs
    assert "the application imports torch" in text
    assert "testbed.newthing belongs to no layer" in text


def test_importing_everything_loads_no_framework():
    """At run time too: importing every module (the application included) loads no DL
    framework and no MPI — they are imported only where a command needs them."""
    code = (
        "import importlib, pkgutil, sys\n"
        "import testbed, simulators, real_runs\n"
        "for pkg in (testbed, simulators, real_runs):\n"
        "    for m in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + '.'):\n"
        "        if m.name.endswith('__main__'): continue\n"
        "        importlib.import_module(m.name)\n"
        f"heavy = {sorted(FRAMEWORKS | {'mpi4py'})!r}\n"
        "print(','.join(sorted(h for h in heavy if h in sys.modules)))\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "", f"imported eagerly: {r.stdout.strip()}"


def test_contract_fails_on_an_upward_import_between_core_floors(tmp_path):
    """An arrow back up inside the core closes no circle and crosses no layer, yet it is
    caught: the precision transforms (physics floor) may not import a calibration fit."""
    root = _plant(tmp_path, {
        "testbed/__init__.py": "",
        "testbed/precision/__init__.py": "",
        "testbed/precision/floats.py": "from testbed.calibration.fit import fit\n",
        "testbed/calibration/__init__.py": "",
        "testbed/calibration/fit.py": "def fit():\n    return 1\n",
        "testbed/app/__init__.py": "",
        "testbed/app/sweep/__init__.py": "",
        "testbed/app/sweep/grid.py": "def f():\n    from testbed.app.cli.main import main\n",
        "testbed/app/cli/__init__.py": "",
        "testbed/app/cli/main.py": "",
    })
    problems = violations(root)
    text = "\n".join(problems)
    assert "testbed.precision.floats imports testbed.calibration.fit of the higher core floor 5" \
        in text, text
    assert "testbed.app.sweep.grid imports testbed.app.cli.main of the higher application " \
        "floor 4" in text, text
    assert not any("circle" in p for p in problems)


def test_every_floor_of_the_contract_names_packages_that_exist():
    """The floors are the README's architecture: a floor naming a package that is gone
    would let a new one of that name in unplaced, so every prefix must exist."""
    from tests.layering_contract import APP_FLOORS, CORE_FLOORS
    missing = []
    for prefix in [p for floor in CORE_FLOORS + APP_FLOORS for p in floor]:
        rel = Path(*prefix.split("."))
        if not ((REPO / rel).is_dir() or (REPO / rel).with_suffix(".py").is_file()):
            missing.append(prefix)
    assert not missing, missing
