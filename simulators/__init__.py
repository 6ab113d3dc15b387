"""SimPy engines of the testbed: the cluster simulator with failures and checkpoint-restart.

* :mod:`simulators.engine` — the step-by-step SimPy engine (job, cluster, injector);
* :mod:`simulators.fast` — the fast exact path, equal to the engine for the same seed;
* :mod:`simulators.run` — R replications and their summary (:mod:`simulators.summary`).
"""
