"""Hyperparameter-optimisation schedules: the ``hpo:`` section of a scenario and the pure
decision logic shared by the simulator (``simulators/hpo/engine.py``) and the real driver
(``testbed/app/hpo/driver.py``).

* :mod:`testbed.scenario.hpo` — the schema (:class:`~testbed.scenario.hpo.HpoSpec`);
* :mod:`testbed.hpo.space` — grid and seeded random sampling of the search space;
* :mod:`testbed.hpo.plan` — a validated spec resolved into a frozen :class:`HpoPlan`;
* :mod:`testbed.hpo.cluster` — GPUs, cores and memory of nodes, first-fit placement;
* :mod:`testbed.hpo.asha`, :mod:`testbed.hpo.hyperband` — schedulers' decisions;
* :mod:`testbed.hpo.controller` — trials, queue and failure policy, engine-agnostic;
* :mod:`testbed.hpo.timing` — where an attempt's epochs and checkpoints fall in time;
* :mod:`testbed.hpo.trace` — the schedule trace (events) and the summary computed from it.
"""
