"""Physical range of measured values: what calibration refuses as garbage.

A number can be finite and positive and absurd — 1e-300 s, 1e300 s, 10¹² GPUs — and
one such value poisons a least-squares fit. The ranges are defined once, next to the
record schema (:mod:`testbed.measurements`: :data:`MIN_DURATION_S` …
:data:`MAX_STEPS`), and the schema's bounded field types refuse a value outside them
as an *implausible measurement* when a record is read or built, naming the file, the
line and the key. :func:`check_record` applies the same ranges to a validated record
once more, by key name (a time is a key ending in ``_s``, a size one ending in
``_bytes``), so a record that reached calibration by another road is held to them too.
"""

from __future__ import annotations

from typing import Any

from testbed.errors import ScenarioError
from testbed.measurements import (
    MAX_BYTES,
    MAX_DURATION_S,
    MAX_PROCESSES,
    MAX_SAMPLES,
    MAX_STEPS,
    MIN_DURATION_S,
    Record,
    implausible_time,
)

__all__ = ["MAX_BYTES", "MAX_DURATION_S", "MAX_PROCESSES", "MAX_SAMPLES", "MAX_STEPS",
           "MIN_DURATION_S", "check_record"]

#: Keys whose values are counts of processes, samples and steps.
PROCESS_KEYS = ("processes", "world_size", "nodes", "group_size", "gpus", "kills")
SAMPLE_KEYS = ("batch_size", "global_batch")
STEP_KEYS = ("steps", "lost_steps", "at_step", "incarnation")
#: Free-form parts of a record that are not measurements (the timeline is checked by
#: its own schema, :class:`testbed.measurements.TimelineEvent`).
SKIP = ("timeline", "env", "model_options")


def _problem(key: str, value: Any) -> str | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if key.endswith("_s"):
        why = implausible_time(float(value))
        return why.removeprefix("implausible measurement: ") if why else None
    if key.endswith("_bytes") and value > MAX_BYTES:
        return f"{value:.3g} bytes is more than any measured size ({MAX_BYTES:g})"
    for keys, limit, what in ((PROCESS_KEYS, MAX_PROCESSES, "processes"),
                              (SAMPLE_KEYS, MAX_SAMPLES, "samples"),
                              (STEP_KEYS, MAX_STEPS, "steps")):
        if key in keys and value > limit:
            return f"{value:.3g} {what} is more than any measured run ({limit:g})"
    return None


def _walk(data: Any, path: str):
    if isinstance(data, dict):
        for key, value in data.items():
            if key not in SKIP:
                yield from _walk(value, f"{path}.{key}" if path else str(key))
    elif isinstance(data, (list, tuple)):
        for i, value in enumerate(data):
            yield from _walk(value, f"{path}[{i}]")
    else:
        yield path, data


def check_record(record: Record, source: str, line: int | None) -> None:
    """Refuse a record holding a value no measurement could give (file, line, key)."""
    for path, value in _walk(record.model_dump(mode="python"), ""):
        why = _problem(path.rsplit(".", 1)[-1].split("[")[0], value)
        if why is not None:
            raise ScenarioError(f"implausible measurement: {why}", source=source, line=line,
                                field=path)
