"""Small builders for HPO tests: a scenario from a dict, a simulation in one call."""

from __future__ import annotations

from typing import Any

from simulators.hpo.engine import HpoRun, simulate_hpo
from testbed.app.resolve import hpo_plan
from testbed.scenario.schema import scenario_from_dict


def scenario(hpo: dict[str, Any], *, nodes: int = 1, gpus: int = 1, **extra):
    return scenario_from_dict({"cluster": {"nodes": nodes, "gpus_per_node": gpus},
                               "hpo": hpo, **extra})


def sim(hpo: dict[str, Any], *, nodes: int = 1, gpus: int = 1, seed: int | None = None,
        **extra) -> HpoRun:
    return simulate_hpo(hpo_plan(scenario(hpo, nodes=nodes, gpus=gpus, **extra), seed=seed))


def grid_of(epochs: list[int], **hpo) -> dict[str, Any]:
    """One trial per entry of ``epochs`` (1 s per epoch unless told)."""
    base = {"search": "grid", "space": {"epochs": epochs}, "epoch_time": "1s"}
    return {**base, **hpo}


def starts(run: HpoRun) -> list[dict]:
    return [f for _, k, f in run.events if k == "trial_start"]


#: The issue's 27-trial space: 3 optimizers × 3 batch sizes × (20, 50, 100) epochs.
ISSUE_SPACE = {"optimizer": ["adam", "sgd", "rmsprop"], "batch_size": [32, 64, 128],
               "epochs": [20, 50, 100]}
