"""Reports people can look at: an HTML page with PNG plots and the data as CSV.

* :func:`build_report` — one scenario (what ``testbed run`` shows): where the time
  goes, ETTR against the checkpoint interval with the Young/Daly optima, a timeline of
  one replication, the oracle's strategy comparison.
* :func:`report_from_store` — one sweep of a results database (``testbed report
  results.db -o report/``).

matplotlib (Agg) is imported only when a plot is drawn.
"""

from testbed.app.report.common import ReportFiles
from testbed.app.report.scenario_report import build_report
from testbed.app.report.sweep_report import report_from_store

__all__ = ["ReportFiles", "build_report", "report_from_store"]
