"""SimPy engines of the testbed: the cluster simulator with failures and checkpoint-restart.

* :mod:`simulators.engine` — the step-by-step SimPy engine (job, watchers, holds);
* :mod:`simulators.fast` — the fast exact path, equal to the engine for the same seed
  (an inlined loop for the common case, :mod:`simulators.fast_ops` for cluster
  operations, the job's progress in closed form in :mod:`simulators.jobmath`);
* :mod:`simulators.run` — R replications (fixed or adaptive) and their summary.

Both engines execute the same node lifecycle, :class:`testbed.resilience.ops.ClusterOps`.
"""
