"""testbed: simulation-and-replay testbed, with fault injection, for DL training on HPC clusters.

The package holds two of the three layers (the contract is ``tests/layering_contract.py``):

* the **core**, every ``testbed.`` module outside ``testbed.app``, in five floors: the
  foundation (units, errors, the I/O boundary ``testbed.io``, event logs, statistics,
  seed streams); the layer IR and zoo and the system profiles; the physics (the oracle,
  checkpoint and failure math, precision transforms); scenarios, traces, measurement
  records and typed results; calibration fits and HPO planning. It never imports SimPy,
  a deep-learning framework or MPI.
* the **application**, ``testbed.app``: the resolver, the results store, sweeps, HPO
  sweeps, reports, studies and the command line.

The engines between them, ``simulators/`` (SimPy and the fast loops) and ``real_runs/``
(the framework harnesses), are packages of their own.
"""

__version__ = "0.1.0"
