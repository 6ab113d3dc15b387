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
"""

from __future__ import annotations

import statistics
from collections import defaultdict

from testbed.calibration.metrics import residuals, sig
from testbed.measurements import Restart
from testbed.systems.calibrated import RestartFit


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
        fit = RestartFit(
            framework=framework, process_start_s=med(x.process_start_s for x in m),
            setup_s=med(x.setup_s for x in m), import_s=med(imports) if imports else None,
            first_step_s=med(x.first_step_s for x in m),
            other_s=med(x.restart_s - x.process_start_s - x.setup_s - x.load_s - x.first_step_s
                        for x in m),
            points=len(m), residuals=residuals([0.0], [1.0]))
        pred = [restart_time_s(fit, x.load_s) for x in m]
        out.append(fit.model_copy(update={"residuals": residuals(pred, [x.restart_s for x in m])}))
    return tuple(out)


def find_restart(fits: tuple[RestartFit, ...], framework: str) -> RestartFit | None:
    return next((f for f in fits if f.framework == framework), None)
