"""How the study's networks were chosen: a small grid scored on a validation split cut
from the *training* data (the last :data:`VALIDATION_FRACTION` of the training rows —
for hurricanes the last training years), never on the test split.

Run ``python -m real_runs.precision.tune hurricanes`` (or ``digits``); it prints one
line per configuration, fp64 inputs, PyTorch, three seeds. The winners are written by
hand into :data:`real_runs.precision.study.NETS` — tuning is a one-off, not part of a
study.
"""

from __future__ import annotations

import itertools
import sys
from dataclasses import replace
from typing import Any

import numpy as np

from real_runs.precision.data import NoSkill, StudyData, load_dataset
from real_runs.precision.nets import NetSpec
from real_runs.precision.study import standardise, train_and_score

#: Most optimiser steps a chosen configuration may take (so the CI study stays short).
MAX_STEPS = 2000
#: Share of the training rows held out (at the end) for validation.
VALIDATION_FRACTION = 0.2
GRID: dict[str, list[Any]] = {"hidden": [(16,), (32,), (32, 32), (64, 64)], "epochs": [20, 40, 80, 160],
        "learning_rate": [1e-3, 3e-3], "batch_size": [32]}
SEEDS = (0, 1, 2, 3, 4)


def validation_split(data: StudyData) -> StudyData:
    """The training rows split into sub-training and validation rows (at the end)."""
    n = len(data.y_train)
    cut = n - int(round(n * VALIDATION_FRACTION))
    y_val = np.asarray(data.class_values)[data.y_train[cut:]] if data.task == "classification" \
        else data.y_train[cut:]
    no_skill = NoSkill("not used in tuning", np.zeros(n - cut))
    return replace(data, x_train=data.x_train[:cut], y_train=data.y_train[:cut],
                   x_test=data.x_train[cut:], y_test=y_val.astype(np.float64),
                   no_skill=no_skill)


def _mean(values: list[float | None]) -> float:
    """The mean of the values a score has (nan when it has none: accuracy of a
    regression, MAE of a classifier)."""
    present = [v for v in values if v is not None]
    return float(np.mean(present)) if present else float("nan")


def main(name: str) -> None:
    full = load_dataset(name)
    data = validation_split(full)
    x_train, x_val = standardise(data.x_train, data.x_test)
    classify = data.task == "classification"
    outputs = data.classes if classify else 1
    for values in itertools.product(*GRID.values()):
        params = dict(zip(GRID, values, strict=True))
        spec = NetSpec(inputs=len(data.features), outputs=outputs,
                       task="classification" if classify else "regression", **params)
        steps = params["epochs"] * -(-len(full.y_train) // params["batch_size"])
        scores = [train_and_score(data, spec, x_train, x_val, seed=s, framework="torch")
                  for s in SEEDS]
        acc = _mean([s.accuracy for s in scores])
        mae = _mean([s.mae for s in scores])
        within = "" if steps <= MAX_STEPS else "  (over MAX_STEPS)"
        print(f"{params}  steps {steps}  accuracy {acc:.4f}  mae {mae:.4f}{within}", flush=True)


if __name__ == "__main__":   # pragma: no cover
    main(sys.argv[1] if len(sys.argv) > 1 else "hurricanes")
