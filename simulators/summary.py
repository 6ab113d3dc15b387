"""Summaries over replications: means with 95% confidence intervals (Student t)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from scipy import stats

from simulators.result import RepResult


def mean_ci95(values: Sequence[float], low: float = -math.inf,
              high: float = math.inf) -> dict[str, float]:
    """Mean and the 95% confidence interval of the mean (t distribution, n − 1 dof),
    clipped to the quantity's range [``low``, ``high``] (a count is never negative,
    ETTR never above 1)."""
    x = np.asarray(values, dtype=float)
    mean = float(x.mean())
    if x.size < 2:
        return {"mean": mean, "ci95_low": mean, "ci95_high": mean, "std": 0.0}
    sd = float(x.std(ddof=1))
    half = float(stats.t.ppf(0.975, x.size - 1)) * sd / math.sqrt(x.size)
    return {"mean": mean, "ci95_low": max(mean - half, low),
            "ci95_high": min(mean + half, high), "std": sd}


def summarize(results: Sequence[RepResult], cause_names: Sequence[str]) -> dict:
    """The summary fields of ``testbed simulate --json`` for a set of replications."""
    n = len(results)
    by_cause = np.sum([r.by_cause for r in results], axis=0) if cause_names else []
    return {
        "replications": n,
        "wall_time_s": mean_ci95([r.wall_s for r in results], low=0.0),
        "ettr": mean_ci95([r.ettr for r in results], low=0.0, high=1.0),
        "failures": mean_ci95([r.failures for r in results], low=0.0),
        "checkpoints": {"mean": float(np.mean([r.checkpoints for r in results]))},
        "breakdown_s": {
            "useful": float(np.mean([r.useful_s for r in results])),
            "checkpoint": float(np.mean([r.checkpoint_s for r in results])),
            "lost_work": float(np.mean([r.lost_s for r in results])),
            "restart": float(np.mean([r.restart_s for r in results])),
            "waiting": float(np.mean([r.waiting_s for r in results])),
        },
        "failures_by_cause": {name: float(c) / n for name, c in zip(cause_names, by_cause,
                                                                     strict=True) if c},
    }
