"""The oracle's vocabulary: parallel strategies, prediction modes and pipeline
schedules, with the input-schema types that refuse an unknown name.

Kept apart from :mod:`testbed.oracle.request` (which needs the system profiles and
their pydantic models) so that a scenario's schema can name a strategy without
building the system-profile models: a ``testbed simulate`` of a scenario without a
model never needs them.
"""

from __future__ import annotations

from typing import Annotated, Literal, get_args

from testbed.io.schema import one_of

Strategy = Literal["serial", "data", "spatial", "filter", "channel", "pipeline", "df", "ds"]
Mode = Literal["testbed", "paradl"]
Schedule = Literal["gpipe", "1f1b"]

STRATEGIES: tuple[str, ...] = get_args(Strategy)
#: Calibration fallback: a strategy without its own fitted factors borrows its family's.
FAMILY = {"serial": "data", "data": "data", "spatial": "spatial", "ds": "spatial",
          "filter": "filter", "df": "filter", "channel": "channel", "pipeline": "pipeline"}
MODES: tuple[str, ...] = get_args(Mode)
SCHEDULES: tuple[str, ...] = get_args(Schedule)
#: Strategy and schedule names in an input schema (refused with a did-you-mean).
StrategyName = Annotated[Strategy, one_of(STRATEGIES, "strategy",
                                          choose=f"known: {', '.join(STRATEGIES)}")]
ScheduleName = Annotated[Schedule, one_of(SCHEDULES, "pipeline schedule",
                                          choose=f"known: {', '.join(SCHEDULES)}")]
#: The pipeline schedule when none is named (PipeDream's one-forward-one-backward).
DEFAULT_SCHEDULE = "1f1b"
#: Strategies that take a group size (model parallel inside groups, data across them).
GROUPED = ("df", "ds")
