"""Sweep points of HPO scenarios: an ``hpo:`` section instead of a ``workload``.

``testbed sweep scenarios/hpo-cifar-grid.yaml --grid cluster.nodes=1,2,4 --grid
hpo.trial_resources.gpus=1,2`` plans each point like any other (overrides applied to the
parsed YAML, validated by the scenario schema), resolves it with the HPO resolver
(:func:`testbed.app.resolve.hpo_plan`, which refuses what the schema cannot: a trial
larger than a node) and simulates it on the HPO schedule simulator
(:func:`simulators.hpo.engine.simulate_hpo`), one replication per seed.

**Seeds.** An HPO scenario's base seed is ``hpo.seed``, else ``simulation.seed`` (what
``testbed hpo simulate`` uses); replication ``r`` of a point runs the HPO simulator
with seed ``point seed + r`` (mod 2⁶³): a one-point sweep with common random numbers
and one replication is exactly ``testbed hpo simulate``.

**Store rows.** The results store has one row layout for every sweep
(:data:`testbed.outcomes.OUTCOME_KEYS`); an HPO replication fills it with the
*average slot's* time: ``wall_s`` is the makespan, ``useful_s`` the slot-seconds of
work that was kept over the slots, ``lost_s`` the slot-seconds thrown away by
failures, preemptions and cancellations over the slots, ``waiting_s`` the idle
slot-seconds over the slots (so the three sum to the makespan, as every breakdown
does), ``checkpoint_s`` and ``restart_s`` 0 (inside the trials' busy time),
``failures`` the attempts that failed or were preempted, ``checkpoints`` the trials
completed, and ``ettr`` useful / wall — the share of the allocation that did kept
work. The point's facts carry ``work_s``: the failure-free trial GPU-seconds over the
GPUs (no schedule can finish sooner), and ``analytical_wall_s`` where a closed form
exists (FIFO of equal single-attempt trials without failures:
``ceil(trials / slots) · t``).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from testbed.resilience.spec import SpecFacts

if TYPE_CHECKING:
    from testbed.scenario.schema import Scenario

#: The engine name of HPO points in the store.
HPO_ENGINE = "hpo"


@dataclass(frozen=True)
class HpoPoint:
    """A resolved HPO sweep point: the validated scenario (resolved again in the worker
    with each replication's seed; a random search draws its trials from the seed)."""

    scenario: Scenario        # picklable: it travels to the pool's workers


def is_hpo_scenario(sc) -> bool:
    """An ``hpo:`` section and no ``workload``: simulated by the HPO simulator."""
    return sc.workload is None and sc.hpo is not None


def base_seed(sc, seed: int | None) -> int:
    """The seed an HPO scenario's points derive from (see the module doc)."""
    if seed is not None:
        return int(seed)
    if sc.hpo is not None and sc.hpo.seed is not None:
        return int(sc.hpo.seed)
    return int(sc.simulation.seed)


def replication_seed(point_seed: int, replication: int) -> int:
    return (int(point_seed) + int(replication)) % 2**63


def trial_durations(plan) -> list[tuple[float, int]] | None:
    """(failure-free seconds, GPUs) of every trial known before the sweep (None for a
    search that proposes trials as it goes)."""
    if plan.configs is None:
        return None
    return [(plan.full_duration_s(i, c), plan.trial_shape(c).gpus)
            for i, c in enumerate(plan.configs)]


def concurrent_trials(plan, gpus: int) -> int:
    """Trials of ``gpus`` GPUs that fit on the cluster at once (GPUs and cores per node)."""
    per_node = plan.gpus_per_node // max(gpus, 1) if gpus else plan.gpus_per_node
    cores = plan.spec.trial_resources.cores
    if cores and plan.cores_per_node:
        per_node = min(per_node, plan.cores_per_node // cores)
    return plan.nodes * per_node


def closed_form_s(plan) -> float | None:
    """``ceil(trials / slots) · t`` for FIFO of equal trials with no failure of any
    kind (the only schedule whose makespan has this closed form); else None."""
    spec = plan.spec
    if spec.scheduler != "fifo" or spec.inject_failures or plan.node_injections:
        return None
    if spec.failures.probability or spec.failures.trial_mtbf or spec.failures.nodes:
        return None
    durations = trial_durations(plan)
    if not durations or len({d for d in durations}) != 1:
        return None
    t, gpus = durations[0]
    if gpus < 1 or plan.spec.trial_resources.memory:
        return None
    slots = concurrent_trials(plan, gpus)
    return math.ceil(len(durations) / slots) * t if slots else None


def hpo_facts(plan) -> SpecFacts:
    """The deterministic facts of an HPO point (see the module doc)."""
    durations = trial_durations(plan)
    work = (sum(d * g for d, g in durations) / plan.slots
            if durations and plan.slots else 0.0)
    return SpecFacts(policy=f"hpo {plan.spec.scheduler}", nodes=plan.nodes, work_s=work,
                     interval_s=None, ckpt_cost_s=float(plan.spec.checkpoint_time),
                     load_s=float(plan.spec.restore_time), restart_s=0.0, job_mtbf_s=None,
                     young_interval_s=None, daly_interval_s=None,
                     analytical_wall_s=closed_form_s(plan))


def resolve_point(sc, seed: int) -> tuple[HpoPoint, SpecFacts]:
    """Validate an HPO point (the resolver's refusals name the scenario's key)."""
    from testbed.app.resolve import hpo_plan
    plan = hpo_plan(sc, seed=seed)
    return HpoPoint(sc), hpo_facts(plan)


def summary_row(summary) -> tuple:
    """The store columns (less replication and run_s) of one simulated HPO sweep."""
    wall = float(summary.makespan_s)
    slots = max(int(summary.slots), 1)
    lost = float(summary.lost_to_failures_s) / slots
    useful = max(float(summary.busy_slot_s) / slots - lost, 0.0)
    waiting = max(wall - useful - lost, 0.0)
    return (wall, useful, 0.0, lost, 0.0, waiting,
            int(summary.failures + summary.preemptions), int(summary.trials_completed),
            useful / wall if wall > 0 else 0.0)


def hpo_rows(point: HpoPoint, seed: int, replications: int) -> list[tuple]:
    """``replications`` store rows of an HPO point (``(rep, *outcomes, run_s)``)."""
    from simulators.hpo.engine import simulate_hpo
    from testbed.app.resolve import hpo_plan
    rows = []
    for rep in range(replications):
        start = time.perf_counter()
        run = simulate_hpo(hpo_plan(point.scenario, seed=replication_seed(seed, rep)))
        rows.append((rep, *summary_row(run.summary), time.perf_counter() - start))
    return rows
