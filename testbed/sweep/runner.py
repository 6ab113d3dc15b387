"""Plan a sweep (validate every point first) and run it into the results store.

Planning reads the scenario once, applies each grid point's overrides to the parsed
YAML, validates the result with the scenario schema and resolves it for the
simulator — so a bad grid value fails before anything runs, with one message naming
the ``--grid`` option and the key path. Running sends the unfinished points to an
executor, at most a few per worker at a time, and writes each finished point in one
transaction (see :mod:`testbed.store`): a rerun skips what is done.
"""

from __future__ import annotations

import hashlib
import os
import socket
import time
from concurrent.futures import FIRST_COMPLETED, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from testbed.errors import InputError, ScenarioError
from testbed.sweep import simbridge
from testbed.sweep.grid import Axis, apply_implications, apply_overrides, expand, parse_grid
from testbed.sweep.points import Point, canonical_json, point_seed, scenario_hash, sha256_hex

REPO = Path(__file__).resolve().parents[2]
#: Source files whose content decides simulated results (part of the code version).
_CODE_GLOBS = ("simulators/*.py", "testbed/resilience/*.py", "testbed/scenario.py",
               "testbed/oracle/*.py", "testbed/systems.py", "testbed/sweep/*.py")


def code_version() -> str:
    """``testbed`` version plus a short hash of the sources that decide results."""
    from testbed import __version__
    h = hashlib.sha256()
    for pattern in _CODE_GLOBS:
        for path in sorted(REPO.glob(pattern)):
            h.update(path.name.encode())
            h.update(path.read_bytes())
    return f"{__version__}+{h.hexdigest()[:12]}"


@dataclass(frozen=True)
class SweepPlan:
    """A validated sweep: its id, axes and points (with resolved specs to run)."""

    sweep_id: str
    name: str
    source: str
    axes: tuple[Axis, ...]
    points: tuple[Point, ...]
    specs: tuple[Any, ...] = field(repr=False)
    facts: tuple[dict, ...] = field(repr=False)
    engine: str
    base_seed: int
    common_seed: bool
    replications: int | None

    def store_plan(self) -> list[dict]:
        return [{"idx": p.index, "point_key": p.key, "params": p.overrides,
                 "scenario_hash": p.scenario_hash, "seed": p.seed,
                 "replications": p.replications, "facts": f}
                for p, f in zip(self.points, self.facts, strict=True)]


def _grid_error(exc: ScenarioError, overrides: dict, axes: list[Axis]) -> InputError:
    """Re-word a scenario error caused by a grid value so that it names the option."""
    fld = exc.field or ""
    for axis in axes:
        k = axis.key
        if fld == k or fld.startswith(k + ".") or fld.startswith(k + "[") or \
                k.startswith(fld + ".") and fld:
            text = axis.texts[axis.values.index(overrides[k])]
            return InputError(exc.message, source=f"--grid {k}={text}", field=fld)
    return exc


def plan_sweep(path: str | Path, grid: list[str] | tuple[str, ...] = (), *,
               replications: int | None = None, seed: int | None = None,
               engine: str | None = None, common_seed: bool = False) -> SweepPlan:
    """Validate the scenario and every grid point; see the module docstring."""
    from testbed.scenario import check_overrides, load_scenario, scenario_from_dict

    check_overrides(replications, seed)
    base = load_scenario(path)
    raw = yaml.safe_load(Path(path).read_text())
    axes = parse_grid(list(grid))
    points, specs, facts = [], [], []
    for i, overrides in enumerate(expand(axes)):
        try:
            data = apply_implications(apply_overrides(raw, overrides), overrides)
            sc = scenario_from_dict(data, source=str(path), lines=base.lines)
        except ScenarioError as exc:
            raise _grid_error(exc, overrides, axes) from None
        try:
            spec = simbridge.resolve_spec(sc)
            fact = simbridge.spec_facts(spec)
        except ScenarioError as exc:
            reason = simbridge.infeasible_reason(exc)
            if reason is None:
                raise _grid_error(exc, overrides, axes) from None
            spec, fact = None, {"infeasible": reason}
        base_seed = sc.simulation.seed if seed is None else seed
        reps = replications or sc.simulation.replications
        eng = engine or sc.simulation.engine
        sc_hash = scenario_hash(sc)
        points.append(Point(index=i, overrides=overrides, scenario_hash=sc_hash,
                            seed=point_seed(base_seed, sc_hash, common=common_seed),
                            replications=reps, engine=eng))
        specs.append(spec)
        facts.append(fact)
    keys = [p.key for p in points]
    if len(set(keys)) != len(keys):
        dup = next(p for p in points if keys.count(p.key) > 1)
        raise InputError("two grid points describe the same simulation (same scenario and "
                         "seed); remove the duplicate value", source=f"--grid {dup.overrides}")
    sweep_id = sha256_hex(canonical_json({
        "scenario": scenario_hash(base), "grid": [[a.key, list(a.texts)] for a in axes],
        "replications": replications, "seed": seed, "engine": engine,
        "common_seed": common_seed}))[:16]
    return SweepPlan(sweep_id=sweep_id, name=base.name, source=str(path), axes=tuple(axes),
                     points=tuple(points), specs=tuple(specs), facts=tuple(facts),
                     engine=engine or base.simulation.engine,
                     base_seed=base.simulation.seed if seed is None else seed,
                     common_seed=common_seed, replications=replications)


def _run_point(task: tuple) -> tuple:
    """Worker side: simulate one point's replications (runs in a pool or MPI process)."""
    key, spec, seed, reps, engine = task
    start = time.perf_counter()
    rows = simbridge.run_replications(spec, seed, reps, engine)
    return key, rows, time.perf_counter() - start, f"{socket.gethostname()}:{os.getpid()}"


@dataclass
class SweepStats:
    """What a run of :func:`run_sweep` did."""

    sweep_id: str
    points: int
    skipped: int
    ran: int
    rows: int
    elapsed_s: float
    workers: int
    infeasible: int = 0
    older_code: int = 0            # finished points computed by another code version

    @property
    def points_per_s(self) -> float:
        return self.ran / self.elapsed_s if self.elapsed_s > 0 else 0.0


def run_sweep(plan: SweepPlan, store, *, executor: str = "local", workers: int | None = None,
              progress: bool = False) -> SweepStats:
    """Run the plan's unfinished points into ``store`` (a :class:`testbed.store.Store`)."""
    from testbed.progress import Progress
    from testbed.sweep.executors import make_executor

    version = code_version()
    store.register_sweep(sweep_id=plan.sweep_id, name=plan.name, source=plan.source,
                         grid=[[a.key, list(a.texts)] for a in plan.axes],
                         replications=plan.replications or 0, engine=plan.engine,
                         base_seed=plan.base_seed, common_seed=plan.common_seed,
                         code_version=version, plan=plan.store_plan())
    done = store.finished_keys()
    todo = [(p, s) for p, s in zip(plan.points, plan.specs, strict=True)
            if p.key not in done and s is not None]
    infeasible = sum(1 for s in plan.specs if s is None)
    skipped = len(plan.points) - len(todo) - infeasible
    older = sum(1 for v in store.code_versions(p.key for p in plan.points).values()
                if v != version)
    by_key = {p.key: p for p, _ in todo}
    start = time.perf_counter()
    ran = rows = 0
    n_workers = 0
    if todo:
        pool, n_workers = make_executor(executor, workers)
        window = max(2, 4 * n_workers)
        pending: set = set()
        queue = iter(todo)
        with Progress(len(plan.points) - infeasible, initial=skipped, desc=plan.name,
                      enabled=progress) as bar:
            try:
                while True:
                    while len(pending) < window:
                        nxt = next(queue, None)
                        if nxt is None:
                            break
                        p, spec = nxt
                        pending.add(pool.submit(_run_point, (p.key, spec, p.seed,
                                                             p.replications, p.engine)))
                    if not pending:
                        break
                    finished, pending = wait(pending, return_when=FIRST_COMPLETED)
                    for fut in finished:
                        key, out_rows, elapsed, worker = fut.result()
                        p = by_key[key]
                        store.record_point(point_key=key, scenario_hash=p.scenario_hash,
                                           seed=p.seed, engine=p.engine, code_version=version,
                                           rows=out_rows, elapsed_s=elapsed, worker=worker)
                        ran += 1
                        rows += len(out_rows)
                        bar.update(1)
            finally:
                for fut in pending:
                    fut.cancel()
                pool.shutdown(wait=True, cancel_futures=True)
    return SweepStats(sweep_id=plan.sweep_id, points=len(plan.points), skipped=skipped,
                      ran=ran, rows=rows, elapsed_s=time.perf_counter() - start,
                      workers=n_workers, infeasible=infeasible, older_code=older)


#: Aggregated figures per point (mean with a 95% CI where it says so).
def aggregate(store, sweep_id: str) -> list[dict]:
    """Per point of a sweep: params, replications, ETTR and wall time with 95% CI, breakdown."""
    out = []
    for p in store.plan(sweep_id):
        row: dict[str, Any] = {"idx": p["idx"], "params": p["params"], "done": p["done"],
                               "facts": p["facts"], "seed": p["seed"],
                               "infeasible": p["facts"].get("infeasible")}
        if p["done"]:
            cols = ("ettr", "wall_s", "failures", "checkpoints") + simbridge.BREAKDOWN_COLUMNS
            data = store.outcomes(p["point_key"], cols)
            columns = list(zip(*data, strict=True))
            row["replications"] = len(data)
            row["ettr"] = simbridge.mean_ci95(columns[0])
            row["wall_s"] = simbridge.mean_ci95(columns[1])
            row["failures"] = simbridge.mean_ci95(columns[2])
            row["checkpoints"] = sum(columns[3]) / len(data)
            row["breakdown_s"] = {c: sum(v) / len(data)
                                  for c, v in zip(simbridge.BREAKDOWN_COLUMNS, columns[4:],
                                                  strict=True)}
        out.append(row)
    return out
