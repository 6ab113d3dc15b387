"""Resilience math (pure): optimum checkpoint intervals, expected wall times, failure
distributions and cause mixes, the checkpoint cost model, the failure streams, and the
node lifecycle (``lifecycle`` the spec, ``ops`` the state machine both simulator engines
execute, ``exposure`` when failure clocks run, ``maintenance`` planned stops,
``policies`` host selection, ``closed_forms`` the expectations tests check against)."""

from testbed.resilience.intervals import (
    daly_exact_interval_s,
    daly_expected_wall_time_s,
    daly_first_order_interval_s,
    daly_higher_order_interval_s,
    expected_wall_time_s,
    segment_expected_s,
    young_interval_s,
)

__all__ = ["daly_exact_interval_s", "daly_expected_wall_time_s", "daly_first_order_interval_s",
           "daly_higher_order_interval_s", "expected_wall_time_s", "segment_expected_s",
           "young_interval_s"]
