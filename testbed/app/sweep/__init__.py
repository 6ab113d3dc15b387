"""Parameter sweeps over scenarios: grids, seeds, executors and the resumable runner.

``testbed sweep SCENARIO --grid key=v1,v2 …`` plans every point (validating it),
then runs the unfinished ones on a local process pool or an MPI allocation, writing
each finished point to the SQLite results store (:mod:`testbed.app.results_db`) in one
transaction. See :mod:`testbed.app.sweep.runner`; HPO scenarios (an ``hpo:`` section, no
workload) are swept on the HPO schedule simulator (:mod:`testbed.app.sweep.hpo`).
"""

from testbed.app.sweep.runner import (
    PointAggregate,
    SweepPlan,
    SweepStats,
    aggregate,
    plan_sweep,
    run_sweep,
)

__all__ = ["PointAggregate", "SweepPlan", "SweepStats", "aggregate", "plan_sweep", "run_sweep"]
