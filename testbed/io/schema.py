"""Schema plumbing shared by every validated input: strict models and one-line errors.

Every input schema (scenarios, system profiles, HPO and precision sections, measurement
records) derives from :class:`Strict`: unknown keys are errors, values are frozen, and
floats must be finite (``.inf`` and ``.nan`` are refused; pydantic accepts them by
default). :func:`validate` turns a pydantic ``ValidationError`` into one
:class:`~testbed.errors.ScenarioError` naming the file, the line (from the YAML line
map of :mod:`testbed.io.read`) and the key path, with a did-you-mean hint for unknown
keys.
"""

from __future__ import annotations

import math
import re
import types
import typing
from collections.abc import Callable
from typing import Annotated, Any, TypeVar

from pydantic import BaseModel, BeforeValidator, ConfigDict, ValidationError

from testbed.errors import ScenarioError
from testbed.units import did_you_mean, parse_bandwidth_Bps, parse_duration_s, parse_size_bytes

M = TypeVar("M", bound=BaseModel)


class Strict(BaseModel):
    """Base of every input schema: no unknown keys, frozen, finite floats only."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


def _unit_value(parse: Callable[[Any], Any], value: Any) -> Any:
    """``parse(value)`` with its :class:`InputError` (or any failure) as the
    ``ValueError`` pydantic turns into a validation error."""
    try:
        return parse(value)
    except Exception as exc:  # noqa: BLE001 - InputError from units, or a bad type
        raise ValueError(getattr(exc, "message", str(exc))) from None


def duration_s(value: Any) -> float:
    """A duration >= 0 in seconds (``'5min'`` → 300.0); ValueError otherwise."""
    return _unit_value(parse_duration_s, value)


def positive_duration_s(value: Any) -> float:
    """A duration > 0 in seconds; ValueError otherwise."""
    seconds = duration_s(value)
    if seconds <= 0:
        raise ValueError(f"must be a duration > 0, got {value!r}")
    return seconds


def size_bytes(value: Any) -> int:
    """A size in bytes (``'2GiB'``); ValueError otherwise."""
    return _unit_value(parse_size_bytes, value)


def bandwidth_Bps(value: Any) -> float:
    """A bandwidth > 0 in bytes per second (``'12.5GB/s'``); ValueError otherwise."""
    bw = _unit_value(parse_bandwidth_Bps, value)
    if not math.isfinite(bw) or bw <= 0:
        raise ValueError(f"must be a bandwidth > 0, got {value!r}")
    return bw


#: A duration >= 0 in seconds (``'5min'`` → 300.0).
Duration = Annotated[float, BeforeValidator(duration_s)]
#: A duration > 0 in seconds.
PositiveDuration = Annotated[float, BeforeValidator(positive_duration_s)]
#: A size in bytes (``'2GiB'``).
Size = Annotated[int, BeforeValidator(size_bytes)]
#: A bandwidth in bytes per second (``'12.5GB/s'``).
Bandwidth = Annotated[float, BeforeValidator(bandwidth_Bps)]


def one_of(names: tuple[str, ...], what: str, *, choose: str | None = None,
           fold_case: bool = False) -> BeforeValidator:
    """The validator of a closed set of names, to annotate its ``Literal`` type with:
    an unknown name is refused as ``unknown <what> 'x' (did you mean 'y'?); choose one
    of …`` (``choose`` replaces the tail); ``fold_case`` accepts any letter case and
    passes the name on in lower case. A value that is not a string is left to the
    ``Literal`` check."""
    tail = choose if choose is not None else f"choose one of {', '.join(names)}"

    def check(value: Any) -> Any:
        if not isinstance(value, str):
            return value
        key = value.lower() if fold_case else value
        if key not in names:
            raise ValueError(f"unknown {what} {value!r}{did_you_mean(key, names)}; {tail}")
        return key

    return BeforeValidator(check)


def line_for(lines: dict[str, int], path: str) -> int | None:
    """The line of ``path`` or of its nearest enclosing key."""
    while path:
        if path in lines:
            return lines[path]
        cut = max(path.rfind("."), path.rfind("["))
        if cut <= 0:
            break
        path = path[:cut]
    return lines.get(path)


def _loc_path(loc: tuple) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif isinstance(part, str) and (part.startswith(("function-", "constrained-"))
                                        or part in ("str", "int", "float", "bool")
                                        or part.startswith(("list[", "dict[", "tuple["))):
            continue
        else:
            out += f".{part}" if out else str(part)
    return out


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    """The pydantic model classes named anywhere inside a type annotation."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    found: list[type[BaseModel]] = []
    origin = typing.get_origin(annotation)
    if origin is not None or isinstance(annotation, types.UnionType):
        for arg in typing.get_args(annotation):
            found += _models_in(arg)
    return found


def owner_of(root: type[BaseModel], loc: tuple) -> type[BaseModel] | None:
    """The model class that owns the last key of ``loc`` (for did-you-mean hints)."""
    model = root
    for part in loc[:-1]:
        if isinstance(part, int):
            continue
        field = model.model_fields.get(part) if isinstance(part, str) else None
        if field is None:
            continue   # a union member's tag or a dict key: stay on this model
        inner = _models_in(field.annotation)
        if not inner:
            return None
        model = inner[0]
    return model


def error_from(exc: ValidationError, root: type[BaseModel], *, source: str,
               lines: dict[str, int] | None = None) -> ScenarioError:
    """The most specific error of ``exc`` as one :class:`ScenarioError`."""
    lines = lines or {}
    errors = exc.errors(include_url=False)
    # in a union (``causes: str | list``) the most specific error is the deepest one, and
    # of equally deep ones, the member whose type the input has (not "should be a list")
    err = max(errors, key=lambda e: (len(e["loc"]), e["type"] == "extra_forbidden",
                                     not e["type"].endswith("_type")))
    loc = tuple(err["loc"])
    msg = err["msg"]
    for prefix in ("Value error, ", "Assertion failed, "):
        if msg.startswith(prefix):
            msg = msg[len(prefix):]
    key = re.match(r"^\[([A-Za-z_][A-Za-z0-9_.\[\]]*)\] ", msg)
    if key:   # a model validator names the key it objects to
        loc = loc + tuple(key.group(1).split("."))
        msg = msg[key.end():]
    if err["type"] == "finite_number":
        msg = "must be a finite number (not inf or nan)"
    path = _loc_path(loc)
    line = line_for(lines, path) if path else None
    if err["type"] == "extra_forbidden":
        owner = owner_of(root, loc)
        name = str(loc[-1])
        hint = did_you_mean(name, list(owner.model_fields)) if owner else ""
        return ScenarioError(f"unknown key {name!r}{hint}", source=source, field=path,
                             line=line)
    if err["type"] == "missing":
        return ScenarioError("required key is missing", source=source, field=path, line=line)
    return ScenarioError(msg, source=source, field=path or None, line=line)


def validate(model: type[M], data: Any, *, source: str, lines: dict[str, int] | None = None,
             what: str = "file") -> M:
    """``model.model_validate(data)`` with errors as one :class:`ScenarioError`."""
    if not isinstance(data, dict):
        raise ScenarioError(f"a {what} must be a mapping of keys to values", source=source)
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise error_from(exc, model, source=source, lines=lines) from None
    except RecursionError:
        raise ScenarioError("nested too deeply", source=source) from None
