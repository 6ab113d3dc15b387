"""testbed: simulation-and-replay testbed, with fault injection, for DL training on HPC clusters.

The pure core (this package) holds the scenario schema, the model IR and zoo, the
analytical cost model (the *oracle*), checkpoint/failure math, traces, calibration and
reports. It never imports SimPy or a deep-learning framework: those live in
``simulators/`` and ``real_runs/``.
"""

__version__ = "0.1.0"
