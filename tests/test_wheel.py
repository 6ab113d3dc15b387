"""The wheel carries everything the CLI needs: installed outside the checkout, it predicts
with a shipped profile and runs the built-in quickstart (package data via
importlib.resources, nothing read from the source tree)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _run(args, cwd, env, timeout=300):
    return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout)


def test_wheel_outside_the_checkout_predicts_and_runs(tmp_path):
    wheels = tmp_path / "wheels"
    env = {**os.environ, "PIP_NO_INDEX": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    # build from a copy: setuptools leaves build/ and *.egg-info in the source folder
    src = tmp_path / "src"
    top = {".git", ".venv", "build", "report", ".pytest_cache", ".hypothesis", ".benchmarks",
           ".ruff_cache", ".mypy_cache"}

    def ignore(folder: str, names: list[str]) -> set[str]:
        skip = {n for n in names if n == "__pycache__" or n.endswith(".egg-info")}
        return skip | (top & set(names) if Path(folder) == REPO else set())
    shutil.copytree(REPO, src, symlinks=True, ignore=ignore)
    r = _run([sys.executable, "-m", "pip", "wheel", str(src), "--no-deps",
              "--no-build-isolation", "-q", "-w", str(wheels)], tmp_path, env)
    assert r.returncode == 0, r.stderr[-2000:]
    wheel = next(wheels.glob("testbed-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    for needed in ("testbed/data/systems/abci-v100.yaml", "testbed/data/causes/llama3_405b.csv",
                   "testbed/data/scenarios/quickstart.yaml", "testbed/py.typed",
                   "testbed/data/traces/example_failures.csv"):
        assert needed in names, needed
    shipped = sorted(p.name for p in (REPO / "scenarios").glob("*.yaml"))
    assert sorted(n.rsplit("/", 1)[-1] for n in names
                  if n.startswith("testbed/data/scenarios/")) == shipped
    site = tmp_path / "site"
    r = _run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(site),
              str(wheel)], tmp_path, env)
    assert r.returncode == 0, r.stderr[-2000:]
    work = tmp_path / "elsewhere"
    work.mkdir()
    run_env = {**os.environ, "PYTHONPATH": str(site), "PYTHONSAFEPATH": "1"}
    where = _run([sys.executable, "-c", "import testbed; print(testbed.__file__)"], work,
                 run_env)
    assert where.stdout.strip().startswith(str(site)), where.stdout + where.stderr
    r = _run([sys.executable, "-m", "testbed", "oracle", "predict", "--system", "abci-v100",
              "--model", "resnet50", "--strategy", "data", "--gpus", "8", "--global-batch",
              "256", "--json"], work, run_env)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["time_per_iteration_s"] > 0
    r = _run([sys.executable, "-m", "testbed", "run", "-r", "5", "--quiet"], work, run_env)
    assert r.returncode == 0, r.stderr
    assert (work / "report" / "quickstart" / "index.html").is_file()
    # every shipped scenario by name, listed and runnable, its trace read from the package
    r = _run([sys.executable, "-m", "testbed", "scenarios", "--json"], work, run_env)
    assert r.returncode == 0, r.stderr
    assert sorted(f"{row['name']}.yaml" for row in json.loads(r.stdout)) == shipped
    r = _run([sys.executable, "-m", "testbed", "run", "trace-replay", "-r", "2", "-q",
              "--no-report", "--json"], work, run_env)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["simulation"]["failures"]["mean"] > 0
