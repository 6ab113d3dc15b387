"""Accuracy figures and the relative least squares every fit uses.

* ParaDL's accuracy of one prediction is ``min(pred, meas) / max(pred, meas)`` (1 is
  perfect, symmetric in over- and under-prediction); a set's accuracy is the mean
  (Kahira et al., HPDC'21, report 86.74% for their oracle on ABCI).
* MAPE: mean of ``|pred − meas| / meas`` in percent.
* Rank correlation: Spearman's ρ between predicted and measured values across
  configurations (does the model order configurations right?).

Fits minimise *relative* squared error with non-negative coefficients (``nnls`` on
rows divided by the measured value): microsecond and second measurements count
alike, and a physical cost is never negative.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from scipy.optimize import nnls
from scipy.stats import spearmanr

from testbed.systems.calibrated import Residuals

#: Values of a fit's points: a list or a numpy array.
Floats = Sequence[float] | np.ndarray


def accuracy(pred: float, meas: float) -> float:
    """ParaDL's accuracy of one prediction (0 when either is not positive)."""
    if not (pred > 0 and meas > 0) or not (math.isfinite(pred) and math.isfinite(meas)):
        return 0.0
    return min(pred, meas) / max(pred, meas)


def mape_pct(pred: Floats, meas: Floats) -> float:
    p, m = np.asarray(pred, float), np.asarray(meas, float)
    return float(np.mean(np.abs(p - m) / m) * 100.0) if len(m) else 0.0


def rank_correlation(pred: Sequence[float], meas: Sequence[float]) -> float | None:
    """Spearman's ρ (None with fewer than three points or no spread)."""
    if len(pred) < 3 or len(set(meas)) < 2 or len(set(pred)) < 2:
        return None
    rho = spearmanr(pred, meas).statistic
    return None if not math.isfinite(rho) else float(rho)


def residuals(pred: Floats, meas: Floats) -> Residuals:
    """The :class:`Residuals` of a fit on its own points (rounded: stable bytes)."""
    accs = [accuracy(p, m) for p, m in zip(pred, meas, strict=True)]
    if not accs:
        return Residuals(n=0, accuracy=0.0, mape_pct=0.0, worst_accuracy=0.0)
    return Residuals(n=len(accs), accuracy=round(float(np.mean(accs)), 4),
                     mape_pct=round(mape_pct(pred, meas), 3),
                     worst_accuracy=round(float(min(accs)), 4))


def relative_nnls(design: np.ndarray, measured: np.ndarray) -> np.ndarray:
    """Non-negative ``x`` minimising ``Σ ((design·x − t) / t)²``."""
    design = np.asarray(design, float)
    measured = np.asarray(measured, float)
    scaled = design / measured[:, None]
    # columns of very different magnitude (seconds per layer vs per MAC): scale them
    norms = np.linalg.norm(scaled, axis=0)
    norms[norms == 0] = 1.0
    x, _ = nnls(scaled / norms, np.ones(len(measured)), maxiter=50 * design.shape[1])
    return x / norms


def sig(value: float, digits: int = 6) -> float:
    """``value`` rounded to ``digits`` significant digits (stable YAML bytes)."""
    if value == 0 or not math.isfinite(value):
        return float(value)
    return float(f"{value:.{digits}g}")
