"""Physical range of measured values: what calibration refuses as garbage.

The record schema (:mod:`testbed.measurements`) already refuses missing fields,
non-finite numbers and negative times. A number can still be finite and positive and
absurd — 1e-300 s, 1e300 s, 10¹² GPUs — and one such value poisons a least-squares
fit. :func:`check_record` refuses it with one line naming the file, the line and the
key, before anything is fitted. The bounds are generous: they reject only values no
real measurement could give.
"""

from __future__ import annotations

from typing import Any

from testbed.errors import ScenarioError
from testbed.measurements import Record

#: Shortest plausible measured duration: 100 ns, the resolution of the monotonic
#: clocks the harnesses read (``time.perf_counter`` on Linux: ~100 ns per call); the
#: fastest real measurement, a shared-memory all-reduce of 8 bytes, takes ~2 µs.
MIN_DURATION_S = 1e-7
#: Longest plausible measured duration: 10⁷ s (116 days), twice the 54-day Llama 3
#: 405B pre-training run (Dubey et al., "The Llama 3 Herd of Models", 2024).
MAX_DURATION_S = 1e7
#: Most processes (GPUs, ranks, nodes) of one measured run: 10⁶, ten times the largest
#: GPU clusters built (about 100,000 H100 GPUs, 2024).
MAX_PROCESSES = 10**6
#: Largest plausible byte count (a checkpoint, a message): 10¹⁵ B, a petabyte — 200
#: times the ~5 TB training state of a 405B-parameter model with Adam.
MAX_BYTES = 10**15
#: Largest plausible batch (samples per step, per process or global): 10⁸.
MAX_SAMPLES = 10**8
#: Largest plausible step count of one run: 10⁹.
MAX_STEPS = 10**9
#: Keys whose values are counts of processes.
PROCESS_KEYS = ("processes", "world_size", "nodes", "group_size", "gpus", "kills")
SAMPLE_KEYS = ("batch_size", "global_batch")
STEP_KEYS = ("steps", "lost_steps", "at_step", "incarnation")
#: Free-form parts of a record that are not measurements (the timeline is checked
#: where it is replayed).
SKIP = ("timeline", "env", "model_options")


def _problem(key: str, value: Any) -> str | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if key.endswith("_s") and value > 0 and not MIN_DURATION_S <= value <= MAX_DURATION_S:
        return (f"{value:g} s is outside the physical range of a measured time "
                f"[{MIN_DURATION_S:g} s, {MAX_DURATION_S:g} s]")
    if key.endswith("_bytes") and value > MAX_BYTES:
        return f"{value:g} bytes is more than any measured size ({MAX_BYTES:g})"
    for keys, limit, what in ((PROCESS_KEYS, MAX_PROCESSES, "processes"),
                              (SAMPLE_KEYS, MAX_SAMPLES, "samples"),
                              (STEP_KEYS, MAX_STEPS, "steps")):
        if key in keys and value > limit:
            return f"{value:g} {what} is more than any measured run ({limit:g})"
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
    cfg = getattr(record, "config", None)
    if cfg is not None:
        _shape(cfg.input_shape, source, line)


def _shape(text: str, source: str, line: int | None) -> None:
    """Every dimension of an input shape must be positive."""
    if any(int(d) <= 0 for d in text.split("x")):
        raise ScenarioError(f"input shape {text!r} has a zero dimension", source=source,
                            line=line, field="config.input_shape")
