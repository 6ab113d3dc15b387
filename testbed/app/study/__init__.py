"""The studies the testbed is built from, as commands a user reruns (``testbed study …``).

Each study runs real measurements through the engines (``real_runs``) and the core's
models, and returns one frozen result with ``to_dict()``: the study's table, its
figures' data, and its claims, each judged *supported*, *contradicted* or *undecided*
by the data (:class:`~testbed.app.study.verdict.Verdict`). The CLI
(``testbed/app/cli/study.py``) prints the tables and writes the folder of plots and
CSV/JSON files.

* :mod:`~testbed.app.study.checkpoint` — checkpoint formats, sizes, save/load against
  ``dd``, writers 1…N, the oracle's projection to a cluster, deterministic restart;
* :mod:`~testbed.app.study.precision` — reduced-precision inputs against baselines,
  with bootstrap intervals, paired tests and learning curves;
* :mod:`~testbed.app.study.oracle` — the oracle's accuracy per strategy and model against
  measured runs (ParaDL's metric), fitted and held-out rows kept apart;
* :mod:`~testbed.app.study.hpo_scaling` — HPO makespan, speed-up and efficiency against
  nodes and GPUs per trial, simulated through the sweep machinery and measured on real
  workers.
"""
