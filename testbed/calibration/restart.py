"""Restart fit: what a restart of a supervised run costs, part by part.

From the ``restart`` records of supervised runs (kill → first step of the new
process), per framework, the median of each part: the new process's interpreter
start (``process_start_s``), the framework import and model build (``setup_s``, of
which ``import_s`` the import), the
first step after the load (warm-up: allocator, kernel selection) and the rest (the
supervisor noticing the death and damaging or spawning — ``other_s``). The checkpoint
load is *not* a constant here: it is the storage fit's load time of the checkpoint's
bytes (:mod:`testbed.calibration.storage`), so a restart of a bigger model costs more.
Medians, because one slow import on a busy machine should not move the figure.

**Load.** A restart is CPU-bound, single-threaded work, so on a loaded machine it
takes its time on an idle core times its *CPU stretch*: (time on a core + time
runnable waiting for one) / time on a core, which the kernel counts for every thread
and the supervisor reads from the new worker at its first step
(:mod:`real_runs.loadprobe`). The fit keeps the median stretch of its restarts, and
:func:`load_factor` carries a fitted restart to a restart or run that lived another
stretch by its part on a core only (:func:`carried`: the rest, I/O and the
supervisor's detection, waits for no core). A core may also run slower: the
supervisor times a fixed slice of work of its own while the worker runs (its *core
probe*, :func:`real_runs.loadprobe.core_probe_ms`), and the time on a core is carried
by the ratio of the run's probe to the fit's (:func:`probe_ratio`); each fitted
restart's time on a core is first brought to the fit's median probe, so one restart
timed on a slow core does not move the fit. Where the stretch was not read (records
from before it, a kernel without sched statistics) the runnable count ``R`` stands in, by
processor sharing: ``max(1, R/C)`` on ``C`` cores — blind to how Linux groups tasks
by session before it shares the cores (autogroup), which is why the stretch comes
first.

**The model.** Measured, a restart is its worker's time on a core times its stretch,
plus a rest that waits for no core: across 120 restarts of three frameworks under load
(2026-12-03, calibrations G–K) ``restart − load − on-CPU × stretch`` was −0.02 to 0.27
s (median 0.04 s) of 0.6–15 s. So a restart is priced as ``rest + on-CPU × stretch``
(:func:`restart_wall_s`; :func:`carried` where a fit has no such split), the on-core
time brought to the run's core probe and grown by ``contention_per_stretch``
(:func:`on_core_s`): co-runners that make the stretch also share the caches and the
memory, which the probe feels less than a framework import does — the on-core time per
probe millisecond of TensorFlow restarts was 2.02 at stretch 1.21 and 2.18 at 1.60,
and 1.85–2.00 at 1.02 in the held-out run. The slope is a Theil–Sen median of pairwise
slopes over the fit set's restarts, relative to their median, kept in [0, 2], and taken
only when their stretches span at least :data:`MIN_STRETCH_SPAN`; the growth it gives is
kept within [0.5, 2].

**A run's two ends.** The first start (the run's start to the first worker's first
step) and the end (the last worker's last step to the run's end: its result, the
environment it records, its exit) are measured on every supervised run and fitted as
themselves — medians over the fit set's runs of the framework, with the median CPU
stretch each lived — rather than assembled from a restart's parts: under load the
first start took 1.3–1.6× a restart's import and build at the same stretch.
"""

from __future__ import annotations

import statistics
from collections import defaultdict

from testbed.calibration.metrics import residuals, sig
from testbed.measurements import Restart, SupervisedRun
from testbed.systems.calibrated import RestartFit

#: The fitted restarts' CPU stretches must span this much for a contention slope.
MIN_STRETCH_SPAN = 0.15
#: Fewest fitted restarts with a stretch and a probe behind a contention slope.
MIN_SLOPE_POINTS = 4


def on_core_s(on_cpu_s: float, contention_per_stretch: float | None,
              stretch: float | None, probe_ms: float | None, fitted_stretch: float | None,
              fitted_probe_ms: float | None) -> float:
    """A fitted time on a core (``on_cpu_s`` at ``fitted_stretch`` and
    ``fitted_probe_ms``) on cores whose probe read ``probe_ms`` beside co-runners that
    stretched it to ``stretch``, grown by the fit's contention slope."""
    t = on_cpu_s * probe_ratio(fitted_probe_ms, probe_ms)
    k = contention_per_stretch
    if k and stretch is not None and fitted_stretch:
        t *= min(max(1.0 + k * (stretch - fitted_stretch), 0.5), 2.0)
    return t


def restart_wall_s(fit: RestartFit, stretch: float | None, probe_ms: float | None
                   ) -> float | None:
    """Kill to the first step of the new worker, without the checkpoint load, at a CPU
    stretch of ``stretch`` on cores whose probe read ``probe_ms`` (the fit's own where
    unknown): ``rest + on-CPU × stretch``; None for a fit without that split."""
    if fit.rest_s is None or fit.on_cpu_s is None or fit.cpu_stretch is None:
        return None
    s = stretch if stretch is not None else fit.cpu_stretch
    k = fit.contention_per_stretch
    return fit.rest_s + on_core_s(fit.on_cpu_s, k, s, probe_ms, fit.cpu_stretch,
                                  fit.core_probe_ms) * s


def start_wall_s(fit: RestartFit, stretch: float | None, probe_ms: float | None
                 ) -> float | None:
    """A run's first start the same way: its worker does what a restarted one does
    (interpreter, framework import, model build, first step), so its time on a core is
    the restarts' (five or more of them, where a design has one run per framework);
    its rest and the stretch it lived are its own. None without that split."""
    if fit.start_rest_s is None or fit.start_cpu_stretch is None:
        return None
    s = stretch if stretch is not None else fit.start_cpu_stretch
    k = fit.contention_per_stretch
    if fit.on_cpu_s is not None and fit.cpu_stretch is not None:
        on = on_core_s(fit.on_cpu_s, k, s, probe_ms, fit.cpu_stretch, fit.core_probe_ms)
    elif fit.start_on_cpu_s is not None:
        on = on_core_s(fit.start_on_cpu_s, k, s, probe_ms, fit.start_cpu_stretch,
                       fit.start_core_probe_ms)
    else:
        return None
    return fit.start_rest_s + on * s


def contention_slope(points: list[tuple[float, float]]) -> float | None:
    """Relative growth of the on-core time per unit of stretch from ``(stretch,
    on-core time at one probe)`` points: the Theil–Sen slope (median of the pairwise
    slopes) over the median time, in [0, 2]; None when the points are too few or their
    stretches span too little."""
    if len(points) < MIN_SLOPE_POINTS:
        return None
    xs = [x for x, _ in points]
    if max(xs) - min(xs) < MIN_STRETCH_SPAN:
        return None
    slopes = [(b[1] - a[1]) / (b[0] - a[0]) for i, a in enumerate(points)
              for b in points[i + 1:] if abs(b[0] - a[0]) > 1e-9]
    mid = statistics.median(y for _, y in points)
    if not slopes or mid <= 0:
        return None
    return sig(min(max(statistics.median(slopes) / mid, 0.0), 2.0))


def load_stretch(runnable_tasks: float, cores: int) -> float:
    """How much longer CPU-bound work takes with ``runnable_tasks`` sharing ``cores``."""
    return max(1.0, runnable_tasks / max(cores, 1))


def probe_ratio(fitted_ms: float | None, lived_ms: float | None) -> float:
    """How many times slower a core ran than where a time was fitted: the ratio of the
    two core probes (1 when either is unknown)."""
    if not fitted_ms or not lived_ms:
        return 1.0
    return lived_ms / fitted_ms


def load_factor(fit: RestartFit, runnable_tasks: float | None, cores: int,
                cpu_stretch: float | None = None, core_probe_ms: float | None = None
                ) -> float:
    """A fitted restart's time at a CPU stretch of ``cpu_stretch`` on cores whose probe
    read ``core_probe_ms`` (else under ``runnable_tasks``) over its time as fitted (1
    when neither is known on both sides)."""
    if fit.cpu_stretch is not None and cpu_stretch is not None:
        wall = restart_wall_s(fit, cpu_stretch, core_probe_ms)
        if wall is not None and fit.time_s(0.0) > 0:
            return wall / fit.time_s(0.0)
        return carried(fit.time_s(0.0), fit.on_cpu_s, fit.cpu_stretch, cpu_stretch,
                       probe_ratio(fit.core_probe_ms, core_probe_ms))
    if fit.runnable_tasks is None or runnable_tasks is None:
        return 1.0
    return load_stretch(runnable_tasks, cores) / load_stretch(fit.runnable_tasks, cores)


def carried(total_s: float, on_cpu_s: float | None, fitted: float | None,
            lived: float | None, slower: float = 1.0) -> float:
    """The factor that carries a time of ``total_s`` fitted at CPU stretch ``fitted`` to
    one lived at ``lived`` on cores ``slower`` times as slow: only its ``on_cpu_s`` on a
    core grows, to ``on_cpu·slower`` on the core and ``stretch − 1`` waiting per second
    of that (``total + on_cpu·(lived·slower − fitted)``), the rest — I/O, the supervisor
    — not; all of it when ``on_cpu_s`` is unknown (``lived·slower / fitted``). A stretch
    unknown on either side is taken as 1 on both (only the core's speed carries)."""
    if total_s <= 0:
        return 1.0
    if lived is None or not fitted:
        lived = fitted = 1.0
    if on_cpu_s is None:
        return lived * slower / fitted
    return max(total_s + on_cpu_s * (lived * slower - fitted), 0.0) / total_s


def load_words(factor: float, cpu_stretch: float | None, fit: RestartFit,
               runnable_tasks: float | None, cores: int, what: str,
               core_probe_ms: float | None = None) -> str:
    """The basis's words for a load factor (empty when it is 1)."""
    if factor == 1.0:
        return ""
    if fit.cpu_stretch is not None and cpu_stretch is not None:
        slower = probe_ratio(fit.core_probe_ms, core_probe_ms)
        cores_words = f", cores {slower:.2f}× as slow as fitted" if slower != 1.0 else ""
        return (f", × {factor:.2f} for {what} (CPU stretch {cpu_stretch:.2f}, fitted at "
                f"{fit.cpu_stretch:.2f}{cores_words})")
    return (f", × {factor:.2f} for {what} ({runnable_tasks:g} runnable task(s) on {cores} "
            f"core(s), fitted at {fit.runnable_tasks:g})")


def restart_time_s(fit: RestartFit, load_s: float) -> float:
    """Kill to the first step of the new process, with a checkpoint load of ``load_s``."""
    return fit.time_s(load_s)


def _run_ends(runs: list[SupervisedRun]) -> dict[str, float | int | None]:
    """The first start and the end of a framework's supervised runs (medians), each
    with the CPU stretch it was measured at; nothing for runs from before they were."""
    starts = [r.metrics for r in runs if r.metrics.start_s is not None]
    ends = [r.metrics for r in runs if r.metrics.end_s is not None]
    out: dict[str, float | int | None] = {"runs": max(len(starts), len(ends))}
    for key, ms, stretch in (("start", starts, "start_cpu_stretch"),
                             ("end", ends, "train_cpu_stretch")):
        if ms:
            out[f"{key}_s"] = sig(statistics.median(getattr(m, f"{key}_s") for m in ms))
            lived = [getattr(m, stretch) for m in ms if getattr(m, stretch) is not None]
            out[f"{key}_cpu_stretch"] = sig(statistics.median(lived)) if lived else None
    on_cpu, probe = at_median_probe([(m.start_on_cpu_s, m.start_core_probe_ms)
                                     for m in starts])
    out["start_on_cpu_s"], out["start_core_probe_ms"] = on_cpu, probe
    rests = [start - on * st for start, on, st in
             ((m.start_s, m.start_on_cpu_s, m.start_cpu_stretch) for m in starts)
             if start is not None and on is not None and st is not None]
    out["start_rest_s"] = sig(max(statistics.median(rests), 0.0)) if rests else None
    trained = [m.train_core_probe_ms for m in ends if m.train_core_probe_ms is not None]
    out["end_core_probe_ms"] = sig(statistics.median(trained)) if trained else None
    return out


def at_median_probe(samples: list[tuple[float | None, float | None]]
                    ) -> tuple[float | None, float | None]:
    """The median time on a core of ``(on_cpu_s, core_probe_ms)`` samples and the probe
    it is at: each sample timed with a probe is first carried to the median probe of
    those (``on_cpu · median / probe``), so a restart on a slow core moves the fit no
    more than one on a fast core; (None, None) without a time on a core."""
    times = [(t, p) for t, p in samples if t is not None]
    if not times:
        return None, None
    probes = [p for _, p in times if p]
    if not probes:
        return sig(statistics.median(t for t, _ in times)), None
    mid = statistics.median(probes)
    return (sig(statistics.median(t * mid / p if p else t for t, p in times)), sig(mid))


def fit_restart(records: list[Restart], runs: list[SupervisedRun] | None = None
                ) -> tuple[RestartFit, ...]:
    groups: dict[str, list[Restart]] = defaultdict(list)
    for rec in records:
        groups[rec.framework].append(rec)
    by_framework: dict[str, list[SupervisedRun]] = defaultdict(list)
    for run in runs or []:
        by_framework[run.config.framework].append(run)
    out = []
    for framework, recs in sorted(groups.items()):
        m = [r.metrics for r in recs]

        def med(values) -> float:
            return sig(max(statistics.median(values), 0.0))

        imports = [x.import_s for x in m if x.import_s is not None]
        runnable = [x.runnable_tasks for x in m if x.runnable_tasks is not None]
        stretches = [x.cpu_stretch for x in m if x.cpu_stretch is not None]
        on_cpu, probe = at_median_probe([(x.on_cpu_s, x.core_probe_ms) for x in m])
        lived = [(x.restart_s - x.load_s, x.on_cpu_s, x.cpu_stretch, x.core_probe_ms)
                 for x in m if x.on_cpu_s is not None and x.cpu_stretch is not None]
        rests = [wall - on * st for wall, on, st, _ in lived]
        slope = (contention_slope([(st, on * probe / p) for _, on, st, p in lived if p])
                 if probe else None)
        fit = RestartFit(
            framework=framework, process_start_s=med(x.process_start_s for x in m),
            setup_s=med(x.setup_s for x in m), import_s=med(imports) if imports else None,
            first_step_s=med(x.first_step_s for x in m),
            other_s=med(x.restart_s - x.process_start_s - x.setup_s - x.load_s - x.first_step_s
                        for x in m),
            runnable_tasks=med(runnable) if runnable else None,
            cpu_stretch=med(stretches) if stretches else None,
            on_cpu_s=on_cpu, core_probe_ms=probe,
            rest_s=med(rests) if rests else None, contention_per_stretch=slope,
            **_run_ends(by_framework.get(framework, [])),  # type: ignore[arg-type]
            points=len(m), residuals=residuals([0.0], [1.0]))
        pred = [(restart_wall_s(fit, x.cpu_stretch, x.core_probe_ms) or fit.time_s(0.0))
                + x.load_s for x in m]
        out.append(fit.model_copy(update={"residuals": residuals(pred, [x.restart_s for x in m])}))
    return tuple(out)


def find_restart(fits: tuple[RestartFit, ...], framework: str) -> RestartFit | None:
    return next((f for f in fits if f.framework == framework), None)
