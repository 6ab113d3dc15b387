"""The oracle's view of a scenario: one request, its estimate, the strategy comparison.

:func:`oracle_request` builds the one :class:`~testbed.oracle.Request` for the scenario's
model, parallelism and system; :func:`oracle_comparison` is the strategy comparison
``testbed run`` prints. A configuration the oracle cannot run raises
:class:`~testbed.errors.Infeasible`, which sweeps count and skip.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from testbed.app.resolve.paths import at
from testbed.app.resolve.sources import named_system
from testbed.errors import Infeasible
from testbed.oracle.names import DEFAULT_SCHEDULE
from testbed.scenario.schema import Scenario

if TYPE_CHECKING:                 # the oracle's model is imported when it is asked
    from testbed.oracle.estimate import Estimate
    from testbed.oracle.request import Request
    from testbed.oracle.sweep import SweepResult

#: Global batch and GPU count of the strategy comparison when a scenario gives no
#: parallelism (a typical data-parallel batch on one node).
DEFAULT_COMPARISON_BATCH = 256


def oracle_request(sc: Scenario, *, field: str = "workload.steps") -> Request:
    """The oracle request for the scenario's model, parallelism and system."""
    p, m = sc.parallelism, sc.model
    if sc.system is None or m is None or p is None:
        missing = [k for k in ("system", "model", "parallelism") if getattr(sc, k) is None]
        raise sc.error(f"needs {', '.join(missing)} to ask the oracle (or give step_time)",
                       field)
    system = named_system(sc)
    w = sc.workload
    with at(sc, "model"):
        from testbed.oracle import resolve_model
        from testbed.oracle.request import Request
        # a written shape ("3x224x224") is read by the zoo, its errors at model.input_shape
        model = resolve_model(m.name, m.input_shape)
        return Request(model=model, system=system, strategy=p.strategy, gpus=p.gpus,
                       global_batch=p.global_batch, group_size=p.group_size,
                       precision=m.precision, optimizer=m.optimizer,
                       micro_batches=p.micro_batches,
                       checkpoint_writers=sc.checkpoint.writers,
                       checkpoint_tier=sc.checkpoint.tier,
                       schedule=p.schedule or DEFAULT_SCHEDULE,
                       input_precision=w.input_precision if w is not None and w.input_precision
                       else None)


def oracle_estimate(sc: Scenario, *, field: str = "workload.steps") -> Estimate:
    """The oracle's estimate for the scenario; infeasible raises :class:`Infeasible`."""
    req = oracle_request(sc, field=field)
    with at(sc, "parallelism"):
        from testbed.oracle.estimate import estimate
        est = estimate(req)
    if not est.feasible:
        raise Infeasible(est.reason or "infeasible", source=sc.source, field="parallelism",
                         line=sc.lines.get("parallelism"))
    return est


@dataclass(frozen=True)
class OracleComparison:
    """The oracle's strategy comparison for a scenario (what ``testbed run`` prints)."""

    model: str
    system: str
    global_batch: int
    max_gpus: int
    result: SweepResult
    chosen: Estimate | None

    @property
    def best_per_strategy(self) -> list[Estimate]:
        return self.result.best_per_strategy(self.global_batch)

    def to_dict(self) -> dict:
        return {"model": self.model, "system": self.system, "global_batch": self.global_batch,
                "max_gpus": self.max_gpus,
                "best_per_strategy": [e.to_dict() for e in self.best_per_strategy],
                "chosen": self.chosen.to_dict() if self.chosen else None}


def oracle_comparison(sc: Scenario) -> OracleComparison | None:
    """Every strategy at the scenario's batch on 1 … its GPU count, ranked (None without
    a model and a system)."""
    if sc.model is None or sc.system is None:
        return None
    system = named_system(sc)
    par = sc.parallelism
    batch = par.global_batch if par else DEFAULT_COMPARISON_BATCH
    max_gpus = par.gpus if par else system.node.gpus_per_node
    with at(sc, "model"):
        from testbed.oracle import resolve_model
        from testbed.oracle.estimate import estimate
        from testbed.oracle.sweep import sweep
        model = resolve_model(sc.model.name, sc.model.input_shape)
        # every strategy's best configuration, however far behind the fastest: the
        # comparison shows what each costs (the sweep's efficiency floor is for ranking)
        result = sweep(model, system, [batch], max_gpus=max_gpus,
                       group_size=par.group_size if par else None,
                       precision=sc.model.precision, optimizer=sc.model.optimizer,
                       min_efficiency=0.0)
    chosen = None
    if par is not None:
        with at(sc, "parallelism"):
            chosen = estimate(oracle_request(sc, field="parallelism"))
    return OracleComparison(model=model.name, system=system.name, global_batch=batch,
                            max_gpus=max_gpus, result=result, chosen=chosen)
