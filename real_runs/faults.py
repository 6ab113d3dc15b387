"""Fault plans for the supervisor: when to kill, and how to damage a checkpoint.

A kill plan is a list of :class:`KillSpec`, one per incarnation of the job (the first
applies to the first run, the second to the first restart, ...). A spec fires when
the worker has finished ``at_step`` (global step; the worker is told to hold still
there, so the kill lands exactly after that step), when it starts writing a checkpoint
(``during_checkpoint``: the write is slowed down so the kill lands inside it), or
``at_s`` seconds after the incarnation started (wall clock, imports included).

Kill traces (``--kill-trace FILE``) are JSONL, one spec per line, e.g.::

    {"at_step": 3}
    {"during_checkpoint": true}
    {"at_s": 4.5, "damage": "bitflip"}

``damage`` (``truncate`` or ``bitflip``) damages the newest committed checkpoint after
the kill, before the restart, to show that the damage is detected and the previous
checkpoint is used.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from testbed.errors import ScenarioError
from testbed.io.read import parse_json, read_text
from testbed.streams import generator

DAMAGE_MODES = ("truncate", "bitflip")
#: Most kills a trace may plan: each is a restart of seconds (a framework import), so
#: ten thousand are hours of restarts; more is a mistake, not a plan.
MAX_TRACE_KILLS = 10_000


@dataclass(frozen=True)
class KillSpec:
    at_step: int | None = None
    at_s: float | None = None
    during_checkpoint: bool = False
    damage: str | None = None

    def describe(self) -> str:
        if self.during_checkpoint:
            return "during checkpoint write"
        if self.at_step is not None:
            return f"after step {self.at_step}"
        return f"at {self.at_s:.3f} s"


def parse_kill_trace(path: str | Path) -> list[KillSpec]:
    """Read a JSONL kill trace through the input boundary, every line validated by the
    record schema's :class:`~testbed.measurements.Kill` (exactly one trigger, a positive
    step within the records' range, a positive time, a known damage mode); errors name
    the file, line and field. Lines starting with ``#`` are comments."""
    from testbed.io.schema import validate_records
    from testbed.measurements import Kill
    source = str(path)
    lines = [(number, line) for number, line in enumerate(read_text(path).splitlines(), 1)
             if line.strip() and not line.lstrip().startswith("#")]
    if len(lines) > MAX_TRACE_KILLS:
        raise ScenarioError(f"the kill trace holds {len(lines):,} kills, more than "
                            f"{MAX_TRACE_KILLS:,} (each is a restart of seconds)",
                            source=source, line=lines[MAX_TRACE_KILLS][0])
    records = [(number, parse_json(line, source=source, line=number)) for number, line in lines]
    kills = validate_records(Kill, records, source=source, what="kill")
    if not kills:
        raise ScenarioError("the kill trace holds no kill (run without --kill-trace for a "
                            "run without kills)", source=source)
    return [KillSpec(at_step=k.at_step, at_s=k.at_s, during_checkpoint=k.during_checkpoint,
                     damage=k.damage) for _, k in kills]


def mtbf_plan(mtbf_s: float, seed: int, count: int) -> list[KillSpec]:
    """Kill times drawn from an exponential distribution (mean ``mtbf_s``), one per incarnation."""
    rng = generator(seed, "run.kills")
    return [KillSpec(at_s=float(t)) for t in rng.exponential(mtbf_s, size=count)]


def damage_file(path: Path, mode: str, seed: int = 0) -> str:
    """Damage one file in place: cut it to half its length, or flip one bit in the middle."""
    data = bytearray(path.read_bytes())
    if mode == "truncate":
        path.write_bytes(bytes(data[: len(data) // 2]))
        return f"truncated {path.name} to {len(data) // 2} of {len(data)} bytes"
    if mode == "bitflip":
        if not data:
            raise ValueError("cannot flip a bit of an empty file")
        rng = generator(seed, "run.damage")
        offset = int(rng.integers(len(data) // 4, max(len(data) * 3 // 4, len(data) // 4 + 1)))
        data[offset] ^= 1 << int(rng.integers(0, 8))
        path.write_bytes(bytes(data))
        return f"flipped a bit at byte {offset} of {path.name}"
    raise ValueError(f"unknown damage mode {mode!r}")


def damage_checkpoint(directory: Path, mode: str, seed: int = 0) -> str:
    """Damage the largest data file (not the manifest) of a committed checkpoint."""
    files = sorted((p for p in directory.rglob("*") if p.is_file() and p.name != "MANIFEST.json"),
                   key=lambda p: (-p.stat().st_size, str(p)))
    if not files:
        raise ValueError(f"{directory} has no data files")
    return damage_file(files[0], mode, seed)
