"""The HPO scaling study: makespan, speed-up and efficiency against nodes and GPUs per
trial, simulated through the sweep machinery and measured with real trials.

**Simulated.** The scenario's ``hpo:`` section is swept over ``cluster.nodes`` ×
``hpo.trial_resources.gpus`` by the normal sweep planner and runner
(:mod:`testbed.app.sweep`, HPO points: :mod:`testbed.app.sweep.hpo`) into a results
store, with common random numbers so points differ only by their parameters. Per
GPUs-per-trial ``g``, the speed-up of ``n`` nodes is ``T(n₀) / T(n)`` against the
smallest node count ``n₀`` and the efficiency ``speed-up · n₀ / n``.

**Where trials run out.** The trial set's *average parallelism* is ``P = Σ dᵢ / max
dᵢ`` (failure-free trial durations ``dᵢ``; ``P`` = the trial count when trials are
equal; under ASHA or Hyperband Σ dᵢ is the work the smallest cluster's simulation
kept, as most trials stop early): no schedule finishes before ``max(Σ dᵢ / slots, max dᵢ)``, so once the
concurrent trials ``c(n) = n · ⌊GPUs per node / g⌋`` (fewer if cores bind) exceed
``P`` the longest trials, not the nodes, set the makespan. For FIFO of equal trials
without failures the makespan is the closed form ``⌈trials / c⌉ · t``, which the
study prints beside the simulation.

**Claim.** "HPO distributes over nodes with near-linear speed-up up to the point where
trials run out": on the simulated points with ``c(n) ≤ P`` (beyond the smallest), an
efficiency ≥ ``min_efficiency`` (default 0.8) at every one → supported, below at any →
contradicted, no such point → undecided. The measured runs (``testbed hpo run`` of
the same equal real trials — PyTorch on scikit-learn's digits — on 1, 2, … workers: a
local process pool, or with ``executor="mpi"`` MPI ranks under ``mpiexec -n W+1 python
-m mpi4py.futures``, which the study starts itself) are judged by the
same rule on their own scope — only when the machine has a free core per worker (its
load average, measured before, says so); otherwise undecided.
"""

from __future__ import annotations

import math
import os
import tempfile
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from testbed.app.study.verdict import Verdict
from testbed.errors import InputError

CLAIM = ("HPO distributes over nodes with near-linear speed-up up to the point where "
         "trials run out")
DEFAULT_SCENARIO = "scenarios/hpo-cifar-grid.yaml"
#: Schedulers that stop trials before their full budget.
STOPPING = ("asha", "hyperband")


@dataclass(frozen=True)
class HpoScalingOptions:
    scenario: str = DEFAULT_SCENARIO
    nodes: tuple[int, ...] = (1, 2, 4, 8, 16)
    gpus_per_trial: tuple[int, ...] | None = None      # None: 1, 2, 4 … ≤ GPUs per node
    replications: int = 1
    seed: int | None = None
    min_efficiency: float = 0.8
    measure: bool = True
    executor: str = "local"            # local pool, or mpi (mpiexec + mpi4py.futures)
    workers: tuple[int, ...] = (1, 2)
    measure_trials: int = 4
    measure_epochs: int = 3


@dataclass(frozen=True)
class ScalingPoint:
    """One simulated (nodes, GPUs per trial) point."""

    nodes: int
    gpus_per_trial: int
    gpus: int
    concurrent: int
    trials: int
    parallelism: float
    makespan_s: float
    makespan_ci95: tuple[float, float]
    speedup: float
    efficiency: float
    utilisation: float
    lower_bound_s: float
    closed_form_s: float | None
    judged: bool                       # c(n) ≤ P and not the base point

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class MeasuredPoint:
    """One real sweep on ``workers`` local workers."""

    workers: int
    trials: int
    makespan_s: float
    busy_slot_s: float
    mean_trial_s: float
    speedup: float
    efficiency: float
    closed_form_s: float              # ⌈trials / W⌉ · (the 1-worker mean trial time)
    load_before: float
    cpus: int

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class HpoScalingStudy:
    scenario: str
    name: str
    scheduler: str
    search: str
    gpus_per_node: int
    sweep_id: str
    min_efficiency: float
    points: tuple[ScalingPoint, ...]
    measured: tuple[MeasuredPoint, ...]
    claims: tuple[Verdict, ...]
    notes: tuple[str, ...]

    def to_dict(self) -> dict:
        return {"scenario": self.scenario, "name": self.name, "scheduler": self.scheduler,
                "search": self.search, "gpus_per_node": self.gpus_per_node,
                "sweep_id": self.sweep_id, "min_efficiency": self.min_efficiency,
                "points": [p.to_dict() for p in self.points],
                "measured": [m.to_dict() for m in self.measured],
                "claims": [c.to_dict() for c in self.claims], "notes": list(self.notes)}


def validate(opts: HpoScalingOptions) -> HpoScalingOptions:
    if not opts.nodes or min(opts.nodes) < 1:
        raise InputError("give node counts ≥ 1", field="--nodes")
    if opts.gpus_per_trial is not None and (not opts.gpus_per_trial
                                            or min(opts.gpus_per_trial) < 1):
        raise InputError("give GPU counts ≥ 1", field="--gpus-per-trial")
    if not 0 < opts.replications <= 1000:
        raise InputError(f"must be in 1…1000, got {opts.replications}", field="--replications")
    if not 0 < opts.min_efficiency <= 1:
        raise InputError(f"must be in (0, 1], got {opts.min_efficiency}",
                         field="--min-efficiency")
    if opts.executor not in ("local", "mpi"):
        raise InputError(f"unknown executor {opts.executor!r}; choose local or mpi",
                         field="--executor")
    if opts.measure and opts.executor == "mpi":
        import importlib.util
        import shutil
        if shutil.which("mpiexec") is None or importlib.util.find_spec("mpi4py") is None:
            raise InputError("needs mpiexec on the PATH and mpi4py installed (pip install "
                             "'testbed[mpi]'), or --executor local", field="--executor")
    if opts.measure:
        from real_runs.env import max_local_processes
        most = max_local_processes()
        if not opts.workers or min(opts.workers) < 1 or max(opts.workers) > most:
            raise InputError(f"give worker counts in 1…{most} (the local pool's limit on "
                             "this machine)", field="--workers")
        if not 1 <= opts.measure_trials <= 64:
            raise InputError(f"must be in 1…64, got {opts.measure_trials}",
                             field="--measure-trials")
        if not 1 <= opts.measure_epochs <= 50:
            raise InputError(f"must be in 1…50, got {opts.measure_epochs}",
                             field="--measure-epochs")
    return opts


# ------------------------------------------------------------------ simulated

def _trial_set(sc, gpus: int) -> tuple[int, float, float]:
    """(trials, Σ d, max d) of the scenario's failure-free trial durations with
    ``gpus`` GPUs per trial (on one big node, so any trial fits)."""
    from testbed.app.resolve import hpo_plan
    from testbed.app.sweep.hpo import trial_durations
    data = sc.model_copy(update={"hpo": sc.hpo.model_copy(update={
        "trial_resources": sc.hpo.trial_resources.model_copy(update={"gpus": gpus})})})
    plan = hpo_plan(data, seed=None)
    d = trial_durations(plan)
    if not d:
        raise InputError("the study needs a search whose trials are known before it runs "
                         "(grid or random), not one that proposes them as it goes",
                         source=sc.source, field="hpo.search")
    return len(d), sum(x for x, _ in d), max(x for x, _ in d)


def simulate_points(opts: HpoScalingOptions, work_dir: Path):
    """Sweep the scenario (nodes × GPUs per trial) into a store in ``work_dir``;
    the base scenario, the plan, and the aggregated points."""
    from testbed.app.results_db import Store
    from testbed.app.sweep import aggregate, plan_sweep, run_sweep
    from testbed.app.sweep.hpo import is_hpo_scenario
    from testbed.scenario.schema import load_scenario

    sc = load_scenario(opts.scenario)
    if not is_hpo_scenario(sc):
        raise InputError("not an HPO scenario (it needs an 'hpo' section and no "
                         "'workload')", source=opts.scenario, field="hpo")
    gpn = sc.cluster.gpus_per_node or 1
    gs = opts.gpus_per_trial or tuple(g for g in (1, 2, 4, 8) if g <= gpn)
    if max(gs) > gpn:
        raise InputError(f"a trial of {max(gs)} GPUs does not fit on a node of {gpn}",
                         field="--gpus-per-trial")
    grid = [f"cluster.nodes={','.join(map(str, opts.nodes))}",
            f"hpo.trial_resources.gpus={','.join(map(str, gs))}"]
    plan = plan_sweep(opts.scenario, grid, replications=opts.replications, seed=opts.seed,
                      common_seed=True)
    with Store(work_dir / "sweep.db") as store:
        run_sweep(plan, store, workers=1)
        agg = aggregate(store, plan.sweep_id)
    return sc, plan, agg, gs


def scaling_points(sc, agg, gs, min_efficiency: float) -> list[ScalingPoint]:
    out = []
    gpn = sc.cluster.gpus_per_node or 1
    cores_node = sc.hpo.node_resources.cores
    cores = sc.hpo.trial_resources.cores
    for g in gs:
        n_trials, total, longest = _trial_set(sc, g)
        parallelism = total / longest
        mine = sorted((a for a in agg if a.params["hpo.trial_resources.gpus"] == g
                       and a.done), key=lambda a: a.params["cluster.nodes"])
        if not mine:
            continue
        base = mine[0]
        n0, t0 = base.params["cluster.nodes"], base.finished.wall_time_s.mean
        if sc.hpo.scheduler in STOPPING:
            # most trials stop early: the work is what the smallest cluster kept
            # (per-GPU useful seconds × its GPUs, in trial-seconds of g GPUs)
            total = base.finished.breakdown_s.useful_s * n0 * gpn / g
            parallelism = total / longest
        for a in mine:
            n = a.params["cluster.nodes"]
            per = gpn // g
            if cores and cores_node:
                per = min(per, cores_node // cores)
            conc = n * per
            t = a.finished.wall_time_s
            speedup = t0 / t.mean
            closed = a.facts.analytical_wall_s
            out.append(ScalingPoint(
                nodes=n, gpus_per_trial=g, gpus=n * gpn, concurrent=conc, trials=n_trials,
                parallelism=round(parallelism, 3), makespan_s=t.mean,
                makespan_ci95=(t.ci95_low, t.ci95_high), speedup=round(speedup, 4),
                efficiency=round(speedup * n0 / n, 4),
                utilisation=round(a.finished.ettr.mean, 4),
                lower_bound_s=max(total / conc, longest) if conc else math.inf,
                closed_form_s=closed, judged=(n != n0 and conc <= parallelism)))
    return out


def judge(points, min_efficiency: float, scope: str, what: str) -> Verdict:
    judged = [p for p in points if p.judged]
    rule = (f"every {what} point with concurrent trials ≤ the trial set's average "
            f"parallelism (beyond the smallest) has efficiency ≥ {min_efficiency:.2f} → "
            "supported; any below → contradicted; no such point → undecided")
    if not judged:
        return Verdict(CLAIM, "undecided", f"no {what} point between the smallest and the "
                       "point where trials run out", rule, scope)
    worst = min(judged, key=lambda p: p.efficiency)
    beyond = [p for p in points if not p.judged and p.efficiency < min_efficiency]
    evidence = (f"{len(judged)} {what} point(s) before trials run out: lowest efficiency "
                f"{worst.efficiency:.3f} ({_where(worst)}); "
                + (f"{len(beyond)} point(s) past it below {min_efficiency:.2f} (expected)"
                   if beyond else "no point past it falls below the threshold"))
    verdict = "supported" if worst.efficiency >= min_efficiency else "contradicted"
    return Verdict(CLAIM, verdict, evidence, rule, scope)  # type: ignore[arg-type]


def _where(p) -> str:
    if isinstance(p, MeasuredPoint):
        return f"{p.workers} workers"
    return f"{p.nodes} node(s), {p.gpus_per_trial} GPU(s)/trial, {p.concurrent} at once"


# ------------------------------------------------------------------ measured

def measured_scenario(trials: int, epochs: int, workers: int) -> str:
    """A grid of ``trials`` equal real trials (PyTorch CNN on the digits), FIFO, no
    failures, on one node of ``workers`` slots, as YAML."""
    lrs = ", ".join(f"{0.002 * (i + 1):g}" for i in range(trials))
    return (f"name: hpo-scaling-measured\ncluster: {{nodes: 1, gpus_per_node: {workers}}}\n"
            f"hpo:\n  search: grid\n  space:\n    lr: [{lrs}]\n    epochs: [{epochs}]\n"
            "  trial_resources: {gpus: 1}\n  epoch_time: 0.1s\n  scheduler: fifo\n"
            "  on_failure: retry\n  checkpoint_every_epochs: 1\n")


def _run_real(opts: HpoScalingOptions, path: Path, db: Path, workers: int):
    """One real sweep: the summary of ``testbed hpo run`` on a local pool of ``workers``,
    or under ``mpiexec -n workers+1 python -m mpi4py.futures`` (rank 0 drives)."""
    if opts.executor == "local":
        from testbed.app.hpo.driver import run_sweep
        return run_sweep(str(path), workers=workers, store_path=str(db)).summary
    import json
    import subprocess
    import sys

    from testbed.hpo.trace import HpoSummary
    env = dict(os.environ)
    if hasattr(os, "geteuid") and os.geteuid() == 0:     # OpenMPI refuses root without
        env.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")      # these two (other MPIs ignore)
        env.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    if workers + 1 > (os.cpu_count() or 1):               # the driver rank is mostly idle
        env.setdefault("OMPI_MCA_rmaps_base_oversubscribe", "1")
    cmd = ["mpiexec", "-n", str(workers + 1), sys.executable, "-m", "mpi4py.futures", "-m",
           "testbed", "hpo", "run", str(path), "--executor", "mpi", "--store", str(db),
           "--json"]
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise InputError(f"the MPI sweep failed (exit {done.returncode}): {last}",
                         field="--executor")
    data = json.loads(done.stdout)
    names = HpoSummary.__dataclass_fields__
    values = {k: data[k] for k in names if k in data}
    values["best_so_far"] = tuple(tuple(b) for b in values.get("best_so_far", ()))
    return HpoSummary(**values)


def measure(opts: HpoScalingOptions, work_dir: Path, progress: Callable[[str], None]
            ) -> list[MeasuredPoint]:
    """Real sweeps of the same equal trials on each worker count (``testbed hpo run``)."""
    from testbed.io.write import write_text
    out: list[MeasuredPoint] = []
    t1 = base_t = 0.0
    base_w = 0
    for w in sorted(opts.workers):
        path = work_dir / f"measured-{w}.yaml"
        write_text(path, measured_scenario(opts.measure_trials, opts.measure_epochs, w))
        load = os.getloadavg()[0]
        s = _run_real(opts, path, work_dir / f"hpo-{w}.db", w)
        mean_trial = s.busy_slot_s / max(s.trials_completed, 1)
        if not out:
            t1, base_w, base_t = mean_trial, w, s.makespan_s
        speed = base_t / s.makespan_s
        out.append(MeasuredPoint(workers=w, trials=s.trials_completed,
                                 makespan_s=s.makespan_s, busy_slot_s=s.busy_slot_s,
                                 mean_trial_s=mean_trial, speedup=round(speed, 4),
                                 efficiency=round(speed * base_w / w, 4),
                                 closed_form_s=math.ceil(opts.measure_trials / w) * t1,
                                 load_before=round(load, 2), cpus=os.cpu_count() or 1))
        progress(f"measured {w}")
    return out


def judge_measured(points: list[MeasuredPoint], opts: HpoScalingOptions) -> Verdict:
    scope = (f"measured: real trials on {opts.executor} workers of this machine"
             + (" (mpiexec + mpi4py.futures)" if opts.executor == "mpi" else ""))
    busy = [p for p in points if p.load_before + p.workers > p.cpus + 0.5 and p.workers > 1]
    if busy:
        p = busy[0]
        return Verdict(CLAIM, "undecided", f"the machine was busy: load {p.load_before:.2f} "
                       f"before the {p.workers}-worker run on {p.cpus} CPU(s), so workers "
                       "shared cores; measured efficiency "
                       + ", ".join(f"{q.workers}: {q.efficiency:.3f}" for q in points),
                       "judged only with a free core per worker (load average + workers "
                       "≤ CPUs); then as the simulated rule", scope)
    proxies = [ScalingPoint(nodes=p.workers, gpus_per_trial=1, gpus=p.workers,
                            concurrent=p.workers, trials=p.trials,
                            parallelism=float(p.trials), makespan_s=p.makespan_s,
                            makespan_ci95=(p.makespan_s, p.makespan_s), speedup=p.speedup,
                            efficiency=p.efficiency, utilisation=0.0,
                            lower_bound_s=p.closed_form_s, closed_form_s=p.closed_form_s,
                            judged=(p is not points[0] and p.workers <= p.trials))
               for p in points]
    v = judge(proxies, opts.min_efficiency, scope, "measured")
    return replace(v, evidence=v.evidence.replace("node(s)", "worker(s)"))


def steps_of(opts: HpoScalingOptions) -> int:
    return 1 + (len(opts.workers) if opts.measure else 0)


def run_hpo_scaling_study(opts: HpoScalingOptions, *,
                          progress: Callable[[str], None] = lambda _s: None
                          ) -> HpoScalingStudy:
    """Simulate (and measure) the study; see the module doc."""
    opts = validate(opts)
    notes: list[str] = []
    with tempfile.TemporaryDirectory(prefix="testbed-hpo-scaling-") as tmp:
        work = Path(tmp)
        sc, plan, agg, gs = simulate_points(opts, work)
        progress("simulated")
        points = scaling_points(sc, agg, gs, opts.min_efficiency)
        claims = [judge(points, opts.min_efficiency, f"simulated: {sc.name}, "
                        f"{sc.hpo.scheduler}", "simulated")]
        measured: list[MeasuredPoint] = []
        if opts.measure:
            from real_runs.env import framework_installed
            if not framework_installed("torch"):      # the real trials train with PyTorch
                notes.append("measured runs skipped: PyTorch is not installed (pip install "
                             "'testbed[frameworks]')")
            else:
                measured = measure(opts, work, progress)
                claims.append(judge_measured(measured, opts))
    if sc.hpo.scheduler in STOPPING:
        notes.append("a stopping scheduler ends most trials early: the trial work behind the "
                     "average parallelism and the lower bound is the kept work of the "
                     "smallest cluster's simulation (the longest trial is a full budget)")
    if any(p.gpus_per_trial > 1 for p in points) and sc.hpo.epoch_time is not None:
        notes.append("the scenario's epoch_time does not depend on a trial's GPUs: more "
                     "GPUs per trial only cut the trials that run at once (give hpo.cost "
                     "oracle for trials that speed up with GPUs)")
    return HpoScalingStudy(scenario=opts.scenario, name=sc.name, scheduler=sc.hpo.scheduler,
                           search=sc.hpo.search, gpus_per_node=sc.cluster.gpus_per_node or 1,
                           sweep_id=plan.sweep_id, min_efficiency=opts.min_efficiency,
                           points=tuple(points),
                           measured=tuple(measured), claims=tuple(claims), notes=tuple(notes))
