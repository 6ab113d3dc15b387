"""Sweep grids: ``--grid key.path=v1,v2`` options, their cross product, and overrides.

A grid axis names a key path into the scenario file (``checkpoint.interval``,
``failures.node_mtbf``, ``checkpoint.levels[0].cost``) and a comma-separated list of
values. Each value is read as YAML (``3`` is an integer, ``10min`` stays a string for
the scenario's unit parser, ``true`` a boolean), so a grid value means exactly what the
same text would mean in the scenario file. The sweep's points are the cross product
of the axes, in the order the axes were given (the last axis varies fastest).

Two keys come in exclusive pairs, and a grid on one of them implies the rest (see
:func:`apply_implications`): a grid on ``checkpoint.interval`` (or
``checkpoint.every_steps``) means fixed-interval checkpointing, so the policy becomes
``fixed`` unless the grid also sets it; and ``failures.mtbf`` (whole job) replaces
the scenario's ``failures.node_mtbf`` (per node), and the other way round. So
``--grid checkpoint.interval=10min,1h --grid failures.mtbf=3h,6h`` works on any
scenario with failures.
"""

from __future__ import annotations

import copy
import itertools
import re
from dataclasses import dataclass
from typing import Any

from testbed.errors import InputError

_SEGMENT = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)((?:\[\d+\])*)$")


@dataclass(frozen=True)
class Axis:
    """One grid axis: a key path and the raw texts and parsed values it takes."""

    key: str
    texts: tuple[str, ...]
    values: tuple[Any, ...]


def split_path(key: str, *, source: str = "--grid") -> list[str | int]:
    """``checkpoint.levels[0].cost`` → ``['checkpoint', 'levels', 0, 'cost']``."""
    parts: list[str | int] = []
    if not key:
        raise InputError("empty key path", source=source)
    for seg in key.split("."):
        m = _SEGMENT.match(seg)
        if not m:
            raise InputError(f"bad key path {key!r}: segment {seg!r} is not a key name "
                             "(optionally with [index])", source=source)
        parts.append(m.group(1))
        indexes = re.findall(r"\[(\d+)\]", m.group(2))
        if any(len(i) > 9 for i in indexes):
            raise InputError(f"bad key path {key[:60]!r}: an index of more than 9 digits",
                             source=source)
        parts.extend(int(i) for i in indexes)
    return parts


def _parse_value(text: str, source: str) -> Any:
    """One grid value as YAML, through the input boundary (its digit, date and nesting
    checks: a value of 5,000 digits or a date 9999-99-99 is one line)."""
    from testbed.io.read import parse_yaml
    try:
        value = parse_yaml(text, source=source).data
    except InputError as exc:
        raise InputError(f"value {text[:60]!r}: {exc.message}", source=source) from None
    return text if value is None and text.strip() not in ("null", "~") else value


def parse_axis(option: str) -> Axis:
    """Parse one ``key.path=v1,v2,...`` option."""
    source = f"--grid {option if len(option) <= 80 else option[:77] + '...'}"
    if "=" not in option:
        raise InputError("expected key.path=value1,value2,...", source=source)
    key, _, rest = option.partition("=")
    key = key.strip()
    split_path(key, source=source)
    texts = tuple(t.strip() for t in rest.split(","))
    if not rest.strip() or any(not t for t in texts):
        raise InputError("every value must be non-empty", source=source)
    if len(set(texts)) != len(texts):
        raise InputError("a value appears twice", source=source)
    return Axis(key, texts, tuple(_parse_value(t, source) for t in texts))


def parse_grid(options: list[str] | tuple[str, ...]) -> list[Axis]:
    """Parse every ``--grid`` option; a key may appear only once."""
    axes = [parse_axis(o) for o in options]
    seen: set[str] = set()
    for a in axes:
        if a.key in seen:
            raise InputError("the same key is given twice", source=f"--grid {a.key}")
        seen.add(a.key)
    return axes


def expand(axes: list[Axis]) -> list[dict[str, Any]]:
    """The grid's points: one ``{key path: value}`` mapping each (one empty point for no axes)."""
    if not axes:
        return [{}]
    return [dict(zip([a.key for a in axes], combo, strict=True))
            for combo in itertools.product(*[a.values for a in axes])]


def apply_overrides(data: dict, overrides: dict[str, Any]) -> dict:
    """A deep copy of the scenario mapping with each key path set to its value.

    Missing mappings on the way are created (so ``failures.bursts.size`` works on a
    scenario without bursts); the scenario schema then decides whether the result is
    valid. A path through a list needs the list item to exist.
    """
    out = copy.deepcopy(data)
    for key, value in overrides.items():
        parts = split_path(key)
        node: Any = out
        for i, part in enumerate(parts[:-1]):
            nxt = parts[i + 1]
            if isinstance(part, int):
                if not isinstance(node, list) or part >= len(node):
                    raise InputError(f"{'.'.join(map(str, parts[:i]))} has no item [{part}]",
                                     source=f"--grid {key}")
                node = node[part]
                continue
            if not isinstance(node, dict):
                raise InputError(f"{part!r} is not inside a mapping", source=f"--grid {key}")
            if node.get(part) is None:
                node[part] = [] if isinstance(nxt, int) else {}
            node = node[part]
        last = parts[-1]
        if isinstance(last, int):
            if not isinstance(node, list) or last >= len(node):
                raise InputError(f"no item [{last}] to set", source=f"--grid {key}")
            node[last] = value
        else:
            if not isinstance(node, dict):
                raise InputError(f"cannot set {last!r}: its parent is not a mapping",
                                 source=f"--grid {key}")
            node[last] = value
    return out


#: key set by a grid → keys of the scenario it replaces.
_EXCLUSIVE = {
    "checkpoint.interval": ("checkpoint.every_steps",),
    "checkpoint.every_steps": ("checkpoint.interval",),
    "failures.mtbf": ("failures.node_mtbf",),
    "failures.node_mtbf": ("failures.mtbf",),
}


def apply_implications(data: dict, keys) -> dict:
    """Complete a point's overridden mapping (in place) as the module docstring says."""
    keys = set(keys)
    for key, replaced in _EXCLUSIVE.items():
        if key not in keys:
            continue
        for other in replaced:
            if other in keys:
                continue
            section, name = other.split(".")
            if isinstance(data.get(section), dict):
                data[section].pop(name, None)
    if keys & {"checkpoint.interval", "checkpoint.every_steps"} and \
            "checkpoint.policy" not in keys and isinstance(data.get("checkpoint"), dict):
        data["checkpoint"]["policy"] = "fixed"
    return data
