"""The layer table of DESIGN.md stays true: ``testbed/`` never imports SimPy or a DL
framework (at import time), ``simulators/`` never imports a DL framework, and
``real_runs`` imports frameworks lazily."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FRAMEWORKS = {"torch", "tensorflow", "keras", "chainer", "mpi4py", "cupy", "jax"}
HEAVY = FRAMEWORKS | {"simpy"}


def _top_level_imports(path: Path) -> set[str]:
    """Modules imported at module level (not inside functions)."""
    tree = ast.parse(path.read_text())
    names: set[str] = set()
    for node in tree.body:
        for sub in ast.walk(node) if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) else []:
            if isinstance(sub, ast.Import):
                names |= {a.name.split(".")[0] for a in sub.names}
            elif isinstance(sub, ast.ImportFrom) and sub.module and sub.level == 0:
                names.add(sub.module.split(".")[0])
    return names


def _py_files(folder: str):
    return sorted((REPO / folder).rglob("*.py"))


def test_testbed_is_pure():
    for path in _py_files("testbed"):
        bad = _top_level_imports(path) & HEAVY
        assert not bad, f"{path.relative_to(REPO)} imports {sorted(bad)} at module level"


def test_simulators_do_not_import_frameworks():
    for path in _py_files("simulators"):
        bad = _top_level_imports(path) & FRAMEWORKS
        assert not bad, f"{path.relative_to(REPO)} imports {sorted(bad)}"


def test_real_runs_import_frameworks_lazily():
    for path in _py_files("real_runs"):
        bad = _top_level_imports(path) & FRAMEWORKS
        assert not bad, f"{path.relative_to(REPO)} imports {sorted(bad)} at module level"


def test_importing_everything_loads_no_framework():
    code = (
        "import importlib, pkgutil, sys\n"
        "import testbed, simulators, real_runs\n"
        "for pkg in (testbed, simulators, real_runs):\n"
        "    for m in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + '.'):\n"
        "        if m.name.endswith('__main__'): continue\n"
        "        importlib.import_module(m.name)\n"
        f"heavy = {sorted(FRAMEWORKS)!r}\n"
        "print(','.join(sorted(h for h in heavy if h in sys.modules)))\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "", f"frameworks imported eagerly: {r.stdout.strip()}"
