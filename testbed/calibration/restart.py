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

**Load.** A restart is CPU-bound, single-threaded work, so on ``C`` cores shared with
``R`` runnable tasks (the restarting worker among them; the supervisor reads the count
while the restart is under way, :mod:`real_runs.loadprobe`) it takes
``max(1, R/C)`` times its time on an idle machine — processor sharing. The fit keeps
the median ``R`` of its restarts, and :func:`load_factor` carries a fitted restart to a
run that ran under another load.
"""

from __future__ import annotations

import statistics
from collections import defaultdict

from testbed.calibration.metrics import residuals, sig
from testbed.measurements import Restart
from testbed.systems.calibrated import RestartFit


def load_stretch(runnable_tasks: float, cores: int) -> float:
    """How much longer CPU-bound work takes with ``runnable_tasks`` sharing ``cores``."""
    return max(1.0, runnable_tasks / max(cores, 1))


def load_factor(fit: RestartFit, runnable_tasks: float | None, cores: int) -> float:
    """A fitted restart's time under ``runnable_tasks`` over its time as fitted (1 when
    either load is unknown)."""
    if fit.runnable_tasks is None or runnable_tasks is None:
        return 1.0
    return load_stretch(runnable_tasks, cores) / load_stretch(fit.runnable_tasks, cores)


def restart_time_s(fit: RestartFit, load_s: float) -> float:
    """Kill to the first step of the new process, with a checkpoint load of ``load_s``."""
    return fit.time_s(load_s)


def fit_restart(records: list[Restart]) -> tuple[RestartFit, ...]:
    groups: dict[str, list[Restart]] = defaultdict(list)
    for rec in records:
        groups[rec.framework].append(rec)
    out = []
    for framework, recs in sorted(groups.items()):
        m = [r.metrics for r in recs]

        def med(values) -> float:
            return sig(max(statistics.median(values), 0.0))

        imports = [x.import_s for x in m if x.import_s is not None]
        runnable = [x.runnable_tasks for x in m if x.runnable_tasks is not None]
        fit = RestartFit(
            framework=framework, process_start_s=med(x.process_start_s for x in m),
            setup_s=med(x.setup_s for x in m), import_s=med(imports) if imports else None,
            first_step_s=med(x.first_step_s for x in m),
            other_s=med(x.restart_s - x.process_start_s - x.setup_s - x.load_s - x.first_step_s
                        for x in m),
            runnable_tasks=med(runnable) if runnable else None,
            points=len(m), residuals=residuals([0.0], [1.0]))
        pred = [restart_time_s(fit, x.load_s) for x in m]
        out.append(fit.model_copy(update={"residuals": residuals(pred, [x.restart_s for x in m])}))
    return tuple(out)


def find_restart(fits: tuple[RestartFit, ...], framework: str) -> RestartFit | None:
    return next((f for f in fits if f.framework == framework), None)
