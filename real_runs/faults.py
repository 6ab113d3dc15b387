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

import math
from dataclasses import dataclass
from pathlib import Path

from testbed.errors import ScenarioError
from testbed.io.read import parse_json, read_text
from testbed.streams import generator

DAMAGE_MODES = ("truncate", "bitflip")


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
    """Read a JSONL kill trace; errors name the file and line."""
    specs = []
    lines = read_text(path).splitlines()
    for number, line in enumerate(lines, start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        data = parse_json(line, source=str(path), line=number)
        if not isinstance(data, dict):
            raise ScenarioError("each line must be an object", source=str(path), line=number)
        unknown = set(data) - {"at_step", "at_s", "during_checkpoint", "damage"}
        if unknown:
            raise ScenarioError(f"unknown keys {sorted(unknown)}", source=str(path), line=number)
        if not isinstance(data.get("during_checkpoint", False), bool):
            raise ScenarioError("during_checkpoint must be true or false", source=str(path),
                                line=number, field="during_checkpoint")
        triggers = [data.get("at_step") is not None, data.get("at_s") is not None,
                    bool(data.get("during_checkpoint"))]
        if sum(triggers) != 1:
            raise ScenarioError("give exactly one of at_step, at_s, during_checkpoint",
                                source=str(path), line=number)
        damage = data.get("damage")
        if damage is not None and damage not in DAMAGE_MODES:
            raise ScenarioError(f"damage must be one of {list(DAMAGE_MODES)}", source=str(path),
                                line=number, field="damage")
        at_step = data.get("at_step")
        at_s = data.get("at_s")
        if at_step is not None and (isinstance(at_step, bool) or not isinstance(at_step, int)
                                    or at_step <= 0):
            raise ScenarioError("at_step must be a positive integer", source=str(path),
                                line=number, field="at_step")
        if at_s is not None and (isinstance(at_s, bool) or not isinstance(at_s, (int, float))
                                 or not math.isfinite(at_s) or at_s <= 0):
            raise ScenarioError("at_s must be a positive number", source=str(path), line=number,
                                field="at_s")
        specs.append(KillSpec(at_step=at_step, at_s=None if at_s is None else float(at_s),
                              during_checkpoint=bool(data.get("during_checkpoint")),
                              damage=damage))
    if not specs:
        raise ScenarioError("the kill trace holds no kill (run without --kill-trace for a "
                            "run without kills)", source=str(path))
    return specs


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
