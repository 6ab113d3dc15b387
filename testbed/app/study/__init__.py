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
  with bootstrap intervals, paired tests and learning curves.
"""
