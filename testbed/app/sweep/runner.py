"""Plan a sweep (validate every point first) and run it into the results store.

Planning reads the scenario once, applies each grid point's overrides to the parsed
YAML, validates the result with the scenario schema and resolves it for the
simulator — so a bad grid value fails before anything runs, with one message naming
the ``--grid`` option and the key path. Running sends the unfinished points to an
executor, at most a few per worker at a time, and writes each finished point in one
transaction (see :mod:`testbed.app.results_db`): a rerun skips what is done. A
scenario with an ``hpo:`` section and no workload is swept the same way, each point on
the HPO schedule simulator (:mod:`testbed.app.sweep.hpo`).
"""

from __future__ import annotations

import hashlib
import os
import socket
import time
from collections.abc import Sequence
from concurrent.futures import FIRST_COMPLETED, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from simulators.run import replicate
from testbed.app.resolve import resolve
from testbed.app.resolve.runaway import refuse_stepwise
from testbed.app.sweep.grid import Axis, apply_implications, apply_overrides, expand, parse_grid
from testbed.app.sweep.hpo import HPO_ENGINE, HpoPoint, hpo_rows, is_hpo_scenario, resolve_point
from testbed.app.sweep.hpo import base_seed as hpo_base_seed
from testbed.app.sweep.points import Point, canonical_json, point_seed, scenario_hash, sha256_hex
from testbed.errors import Infeasible, InputError, ScenarioError
from testbed.outcomes import OUTCOME_KEYS, Replicated, replicated_from_rows
from testbed.resilience.spec import SimSpec, SpecFacts

REPO = Path(__file__).resolve().parents[3]
#: Source files whose content decides simulated results (part of the code version).
_CODE_GLOBS = ("simulators/*.py", "testbed/resilience/*.py", "testbed/scenario/*.py",
               "testbed/oracle/*.py", "testbed/systems/*.py", "testbed/app/sweep/*.py",
               "simulators/hpo/*.py", "testbed/hpo/*.py",
               "testbed/app/resolve/*.py", "testbed/outcomes.py", "testbed/stats.py",
               "testbed/streams.py")


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
    specs: tuple[SimSpec | HpoPoint | None, ...] = field(repr=False)
    facts: tuple[SpecFacts, ...] = field(repr=False)
    engine: str
    base_seed: int
    common_seed: bool
    replications: int | None

    def store_plan(self) -> list[dict]:
        return [{"idx": p.index, "point_key": p.key, "params": p.overrides,
                 "scenario_hash": p.scenario_hash, "seed": p.seed,
                 "replications": p.replications, "facts": f.to_dict()}
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


def _load_once(path: str | Path):
    """The scenario file parsed once: its raw mapping and the validated base scenario."""
    from testbed.io.read import load_yaml
    from testbed.scenario.schema import scenario_from_dict

    doc = load_yaml(path)
    base = scenario_from_dict(doc.data, source=str(path), lines=doc.lines)
    return doc.data, base


def plan_points(raw: dict, base, source: str, overrides_list: list[dict[str, Any]], *,
                axes: Sequence[Axis] = (), replications: int | None = None,
                seed: int | None = None, engine: str | None = None,
                common_seed: bool = False
                ) -> tuple[list[Point], list[SimSpec | HpoPoint | None], list[SpecFacts]]:
    """Validate and resolve every point (a scenario mapping with overrides applied)."""
    from testbed.scenario.schema import scenario_from_dict

    points: list[Point] = []
    specs: list[SimSpec | HpoPoint | None] = []
    facts: list[SpecFacts] = []
    for i, overrides in enumerate(overrides_list):
        try:
            data = apply_implications(apply_overrides(raw, overrides), overrides)
            sc = scenario_from_dict(data, source=source, lines=base.lines)
            point_engine = engine or sc.simulation.engine
            spec: SimSpec | HpoPoint | None
            if is_hpo_scenario(sc):
                if engine is not None:
                    raise InputError("an HPO scenario runs on the HPO schedule simulator; "
                                     "leave --engine out", source="--engine")
                point_engine, base_seed = HPO_ENGINE, hpo_base_seed(sc, seed)
                spec, fact = resolve_point(sc, base_seed)
            else:
                base_seed = sc.simulation.seed if seed is None else seed
                resolved = resolve(sc)
                refuse_stepwise(resolved, engine=point_engine, events=False)
                spec, fact = resolved, resolved.facts
        except Infeasible as exc:
            spec, fact = None, SpecFacts.infeasible_point(exc.reason)
        except ScenarioError as exc:
            raise _grid_error(exc, overrides, list(axes)) from None
        sc_hash = scenario_hash(sc)
        points.append(Point(index=i, overrides=overrides, scenario_hash=sc_hash,
                            seed=point_seed(base_seed, sc_hash, common=common_seed),
                            replications=replications or sc.simulation.replications,
                            engine=point_engine))
        specs.append(spec)
        facts.append(fact)
    keys = [p.key for p in points]
    if len(set(keys)) != len(keys):
        dup = next(p for p in points if keys.count(p.key) > 1)
        raise InputError("two grid points describe the same simulation (same scenario and "
                         "seed); remove the duplicate value", source=f"--grid {dup.overrides}")
    return points, specs, facts


def plan_sweep(path: str | Path, grid: list[str] | tuple[str, ...] = (), *,
               replications: int | None = None, seed: int | None = None,
               engine: str | None = None, common_seed: bool = False) -> SweepPlan:
    """Validate the scenario and every grid point; see the module docstring."""
    from testbed.scenario.schema import check_overrides

    check_overrides(replications, seed)
    raw, base = _load_once(path)
    axes = parse_grid(list(grid))
    points, specs, facts = plan_points(raw, base, str(path), expand(axes), axes=axes,
                                       replications=replications, seed=seed, engine=engine,
                                       common_seed=common_seed)
    sweep_id = sha256_hex(canonical_json({
        "scenario": scenario_hash(base), "grid": [[a.key, list(a.texts)] for a in axes],
        "replications": replications, "seed": seed, "engine": engine,
        "common_seed": common_seed}))[:16]
    hpo_base = is_hpo_scenario(base)
    return SweepPlan(sweep_id=sweep_id, name=base.name, source=str(path), axes=tuple(axes),
                     points=tuple(points), specs=tuple(specs), facts=tuple(facts),
                     engine=HPO_ENGINE if hpo_base else engine or base.simulation.engine,
                     base_seed=(hpo_base_seed(base, seed) if hpo_base else
                                base.simulation.seed if seed is None else seed),
                     common_seed=common_seed, replications=replications)


def point_rows(spec: SimSpec | HpoPoint, seed: int, replications: int, engine: str = "fast"
               ) -> list[tuple]:
    """``replications`` store rows of a job: ``(rep, *OUTCOME_KEYS values, run_s)``.

    ``run_s`` is the time that replication took to simulate (a timing column, the only
    place wall-clock time enters a result row). An HPO point runs on the HPO schedule
    simulator (:mod:`testbed.app.sweep.hpo` says how its rows are filled).
    """
    if isinstance(spec, HpoPoint):
        return hpo_rows(spec, seed, replications)
    marks = [time.perf_counter()]
    results = replicate(spec, replications, seed, engine,
                        progress=lambda _n: marks.append(time.perf_counter()))
    return [(rep, *res.outcome_row(), marks[rep + 1] - marks[rep])
            for rep, res in enumerate(results)]


def _run_point(task: tuple) -> tuple:
    """Worker side: simulate one point's replications (runs in a pool or MPI process)."""
    key, spec, seed, reps, engine = task
    start = time.perf_counter()
    rows = point_rows(spec, seed, reps, engine)
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
    elsewhere: int = 0             # points another live sweep on the store was computing

    @property
    def points_per_s(self) -> float:
        return self.ran / self.elapsed_s if self.elapsed_s > 0 else 0.0


class SweepInterrupted(Exception):
    """A sweep stopped by Ctrl-C or SIGTERM; ``stats`` says what is stored."""

    def __init__(self, stats: SweepStats) -> None:
        self.stats = stats
        super().__init__("interrupted")


def _register(plan: SweepPlan, store, version: str) -> None:
    store.register_sweep(sweep_id=plan.sweep_id, name=plan.name, source=plan.source,
                         grid=[[a.key, list(a.texts)] for a in plan.axes],
                         replications=plan.replications or 0, engine=plan.engine,
                         base_seed=plan.base_seed, common_seed=plan.common_seed,
                         code_version=version, plan=plan.store_plan())


def _drive(pool, todo: list, store, version: str, window: int, bar) -> tuple[int, int]:
    """Keep ``window`` points in flight; store each as it finishes. (points, rows)."""
    by_key = {p.key: p for p, _ in todo}
    pending: set = set()
    queue = iter(todo)
    ran = rows = 0
    while True:
        while len(pending) < window:
            nxt = next(queue, None)
            if nxt is None:
                break
            p, spec = nxt
            pending.add(pool.submit(_run_point, (p.key, spec, p.seed, p.replications,
                                                 p.engine)))
        if not pending:
            return ran, rows
        finished, pending = wait(pending, return_when=FIRST_COMPLETED)
        for fut in finished:
            key, out_rows, elapsed, worker = fut.result()
            p = by_key[key]
            store.record_point(point_key=key, scenario_hash=p.scenario_hash, seed=p.seed,
                               engine=p.engine, code_version=version, rows=out_rows,
                               elapsed_s=elapsed, worker=worker)
            ran += 1
            rows += len(out_rows)
            bar.update(1)


def run_sweep(plan: SweepPlan, store, *, executor: str = "local", workers: int | None = None,
              progress: bool = False) -> SweepStats:
    """Run the plan's unfinished points into ``store`` (a :class:`testbed.app.results_db.Store`).

    Points are claimed first, so a second sweep on the same store skips the points in
    flight here. Ctrl-C or SIGTERM stops the workers, releases the claims and raises
    :class:`SweepInterrupted` with what is stored; rerunning the command resumes.
    """
    from testbed.app.progress import Progress
    from testbed.app.results_db import owner_id
    from testbed.app.sweep.executors import make_executor, stop_now

    version = code_version()
    _register(plan, store, version)
    done = store.finished_keys()
    open_ = [(p, s) for p, s in zip(plan.points, plan.specs, strict=True)
             if p.key not in done and s is not None]
    owner = owner_id()
    mine = store.claim([p.key for p, _ in open_], owner)
    todo = [(p, s) for p, s in open_ if p.key in mine]
    infeasible = sum(1 for s in plan.specs if s is None)
    skipped = len(plan.points) - len(open_) - infeasible
    older = sum(1 for v in store.code_versions(p.key for p in plan.points).values()
                if v != version)
    start = time.perf_counter()
    ran = rows = n_workers = 0

    def stats() -> SweepStats:
        return SweepStats(sweep_id=plan.sweep_id, points=len(plan.points), skipped=skipped,
                          ran=ran, rows=rows, elapsed_s=time.perf_counter() - start,
                          workers=n_workers, infeasible=infeasible, older_code=older,
                          elsewhere=len(open_) - len(todo))
    try:
        if todo:
            pool, n_workers = make_executor(executor, workers, len(todo))
            with Progress(len(plan.points) - infeasible, initial=skipped, desc=plan.name,
                          enabled=progress) as bar:
                try:
                    ran, rows = _drive(pool, todo, store, version, max(2, 4 * n_workers), bar)
                except BaseException:
                    stop_now(pool)
                    raise
                pool.shutdown(wait=True)
    except KeyboardInterrupt:
        ran = len(store.finished_keys() & {p.key for p, _ in todo})
        raise SweepInterrupted(stats()) from None
    finally:
        store.release(owner)
    return stats()


@dataclass(frozen=True)
class PointAggregate:
    """One point of a sweep as reports and the CLI show it: its grid values, the
    resolved facts, and (once finished) the statistics over its replications."""

    idx: int
    params: dict[str, Any]
    seed: int
    facts: SpecFacts
    stats: Replicated | None

    @property
    def done(self) -> bool:
        return self.stats is not None

    @property
    def infeasible(self) -> str | None:
        return self.facts.infeasible

    @property
    def finished(self) -> Replicated:
        """The statistics of a finished point (for lists filtered on :attr:`done`)."""
        if self.stats is None:
            raise ValueError(f"point {self.idx} has not finished")
        return self.stats

    def to_dict(self) -> dict:
        out: dict[str, Any] = {"idx": self.idx, "params": self.params, "seed": self.seed,
                               "done": self.done, "infeasible": self.infeasible,
                               "facts": self.facts.to_dict()}
        if self.stats is not None:
            out.update(self.stats.to_dict())
        return out


def aggregate(store, sweep_id: str) -> list[PointAggregate]:
    """Per point of a sweep: params, facts and, when finished, the replicated statistics."""
    out = []
    for p in store.plan(sweep_id):
        stats = None
        if p["done"]:
            stats = replicated_from_rows(store.outcomes(p["point_key"], OUTCOME_KEYS))
        out.append(PointAggregate(idx=p["idx"], params=p["params"], seed=p["seed"],
                                  facts=SpecFacts.from_dict(p["facts"]), stats=stats))
    return out
