"""Samplers of an HPO sweep: the plan's fixed list (grid, random) or Optuna's TPE.

TPE (Bergstra et al., "Algorithms for Hyper-Parameter Optimization", NeurIPS 2011)
runs through Optuna's ask/tell interface: ``config(i)`` asks a new Optuna trial and
``observe(i, value)`` tells its value (``None``: failed). Optuna is imported only
when a sweep asks for TPE; its sampler is seeded from the run seed's ``tpe`` stream,
so a sweep is reproducible when results arrive in the same order — always in the
simulator. With asha/hyperband TPE learns from each trial's first rung result.
"""

from __future__ import annotations

from typing import Any

from testbed.hpo.plan import HpoPlan
from testbed.hpo.protocols import Sampler
from testbed.scenario.hpo import Range
from testbed.streams import generator


class ListSampler:
    """Configurations known before the sweep (grid, random): a :class:`Sampler`."""

    def __init__(self, configs) -> None:
        self.configs = configs

    def config(self, i: int) -> dict[str, Any]:
        return self.configs[i]

    def observe(self, i: int, value: float | None) -> None:
        pass


class TpeSampler:
    """Optuna's TPESampler through ask/tell: a :class:`Sampler`."""

    def __init__(self, plan: HpoPlan) -> None:
        try:
            import optuna
        except ImportError as exc:   # pragma: no cover - optuna is a dependency
            from testbed.errors import InputError
            raise InputError(f"search 'tpe' needs Optuna: {exc}", field="hpo.search") from None
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        self.optuna = optuna
        seed = int(generator(plan.seed, "hpo.tpe").integers(2**31 - 1))
        self.direction = "minimize" if plan.spec.metric.mode == "min" else "maximize"
        sampler = optuna.samplers.TPESampler(seed=seed)
        self.study = optuna.create_study(direction=self.direction, sampler=sampler)
        self.space = plan.spec.space
        self.asked: dict[int, Any] = {}

    def _distribution(self, spec):
        d = self.optuna.distributions
        if isinstance(spec, Range):
            if spec.type == "int":
                return d.IntDistribution(int(spec.low), int(spec.high), log=spec.log)
            return d.FloatDistribution(spec.low, spec.high, log=spec.log)
        return d.CategoricalDistribution(list(spec))

    def config(self, i: int) -> dict[str, Any]:
        dists = {k: self._distribution(v) for k, v in self.space.items()}
        trial = self.study.ask(dists)
        self.asked[i] = trial
        return {k: trial.params[k] for k in self.space}

    def observe(self, i: int, value: float | None) -> None:
        trial = self.asked.pop(i, None)
        if trial is None:
            return
        if value is None:
            self.study.tell(trial, state=self.optuna.trial.TrialState.FAIL)
        else:
            self.study.tell(trial, float(value))


def make_sampler(plan: HpoPlan) -> Sampler:
    """The sampler the plan's ``search`` asks for."""
    if plan.configs is not None:
        return ListSampler(plan.configs)
    return TpeSampler(plan)
