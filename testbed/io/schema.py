"""Schema plumbing shared by every validated input: strict models and one-line errors.

Every input schema (scenarios, system profiles, HPO and precision sections, measurement
records) derives from :class:`Strict`: unknown keys are errors, values are frozen, and
floats must be finite (``.inf`` and ``.nan`` are refused; pydantic accepts them by
default). :func:`validate` turns a pydantic ``ValidationError`` into one
:class:`~testbed.errors.ScenarioError` naming the file, the line (from the YAML line
map of :mod:`testbed.io.read`) and the key path, with a did-you-mean hint for unknown
keys.

Bounded field types (``Annotated`` with :func:`whole_in`, :func:`number_in`,
:func:`shape_in`; :data:`Line`, :data:`Timestamp`) carry their range in the type, so every schema that reads a count, a
time, a name or a date refuses the same nonsense with the same words: a boolean where a
number belongs, an integer of more digits than :data:`~testbed.io.read.MAX_INT_DIGITS`
(refused before it is converted), a value outside its physical range, a date that is not
one (``9999-99-99``), a name holding a line break (which would inject a line into a file
written from it). :func:`validate_records`, :func:`read_jsonl_models` and
:func:`read_csv_models` validate every record of a JSONL or CSV file against a model,
errors naming ``file:line: field``.
"""

from __future__ import annotations

import math
import re
import types
import typing
from collections.abc import Callable, Iterable
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any, TypeVar

from pydantic import BaseModel, BeforeValidator, ConfigDict, ValidationError

from testbed.errors import ScenarioError
from testbed.io.read import MAX_INT_DIGITS, digits_problem, read_csv, read_jsonl
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


# ------------------------------------------------------------------ bounded field types

#: Longest name or free text of one line an input may hold (a model, a host, a cause).
MAX_LINE_CHARS = 1000


def _count(lo: int, hi: int | None) -> str:
    return f"in {lo:,}…{hi:,}" if hi is not None else f">= {lo:,}"


def whole_value(value: Any, lo: int, hi: int | None, what: str = "") -> int:
    """``value`` as a whole number in ``lo…hi`` (``hi`` None: no upper bound; ``what``
    names what it counts): refuses a boolean, a fraction, text that is not a whole
    number and an integer of more than :data:`~testbed.io.read.MAX_INT_DIGITS` digits
    before converting it."""
    unit = f" ({what})" if what else ""
    if isinstance(value, bool):
        raise ValueError(f"must be a whole number{unit}, not {str(value).lower()}")
    if isinstance(value, str):
        text = value.strip()
        why = digits_problem(text)
        if why:
            raise ValueError(why)
        if not re.fullmatch(r"[-+]?\d+", text):
            raise ValueError(f"must be a whole number{unit}, got {value[:40]!r}")
        value = int(text)
    elif isinstance(value, float):
        if not math.isfinite(value) or value != int(value):
            raise ValueError(f"must be a whole number{unit}, got {value!r}")
        value = int(value)
    elif not isinstance(value, int):
        raise ValueError(f"must be a whole number{unit}, got {_kind(value)}")
    if value.bit_length() > 4 * MAX_INT_DIGITS or value < lo or (hi is not None and value > hi):
        shown = f"{value:,}" if value.bit_length() <= 4 * MAX_INT_DIGITS else "a huge number"
        if lo == 1 and (hi is None or value < lo):
            raise ValueError(f"must be a positive whole number{unit}, got {shown}")
        raise ValueError(f"must be a whole number {_count(lo, hi)}{unit}, got {shown}")
    return value


def whole_in(lo: int, hi: int | None = None, what: str = "") -> BeforeValidator:
    """The validator of a whole number in ``lo…hi`` (see :func:`whole_value`), to
    annotate an ``int`` with: ``Annotated[int, whole_in(1, 10**9, "steps")]``."""
    return BeforeValidator(lambda v: whole_value(v, lo, hi, what))


def number_value(value: Any, lo: float, hi: float, unit: str = "", *,
                 lo_open: bool = False) -> float:
    """``value`` as a finite number in ``[lo, hi]`` (``(lo, hi]`` with ``lo_open``):
    refuses a boolean, text that is not a number, inf and nan."""
    if isinstance(value, bool):
        raise ValueError(f"must be a number, not {str(value).lower()}")
    if isinstance(value, str):
        text = value.strip()
        if len(text) > MAX_INT_DIGITS or not re.fullmatch(
                r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?", text):
            raise ValueError(f"must be a number, got {value[:40]!r}")
        value = float(text)
    elif isinstance(value, int):
        if value.bit_length() > 4 * MAX_INT_DIGITS:
            raise ValueError("must be a finite number, got a huge integer")
        value = float(value)
    elif not isinstance(value, float):
        raise ValueError(f"must be a number, got {type(value).__name__}")
    if not math.isfinite(value):
        raise ValueError("must be a finite number (not inf or nan)")
    u = f" {unit}" if unit else ""
    if value < lo or (lo_open and value == lo):
        raise ValueError(f"must be {'greater than' if lo_open else 'at least'} {lo:g}{u}, "
                         f"got {value:g}")
    if value > hi:
        raise ValueError(f"must be at most {hi:g}{u}, got {value:g}")
    return value


def number_in(lo: float, hi: float, unit: str = "", *, lo_open: bool = False
              ) -> BeforeValidator:
    """The validator of a finite number in ``[lo, hi]`` (see :func:`number_value`), to
    annotate a ``float`` with."""
    return BeforeValidator(lambda v: number_value(v, lo, hi, unit, lo_open=lo_open))


def line_text(value: Any) -> str:
    """One line of text: a string of at most :data:`MAX_LINE_CHARS` characters without
    line breaks or other control characters (tabs allowed)."""
    if not isinstance(value, str):
        raise ValueError(f"must be text, got {_kind(value)}")
    if len(value) > MAX_LINE_CHARS:
        raise ValueError(f"is {len(value):,} characters long, more than {MAX_LINE_CHARS:,}")
    bad = next((ch for ch in value if (ord(ch) < 32 and ch != "\t") or ord(ch) == 127), None)
    if bad is not None:
        raise ValueError(f"must be one line of text without control characters "
                         f"(holds {bad!r})")
    return value


def _kind(value: Any) -> str:
    return {list: "a list", dict: "a mapping", bool: "true/false",
            type(None): "null"}.get(type(value), type(value).__name__)


#: One line of text (a name, a host, a description): see :func:`line_text`.
Line = Annotated[str, BeforeValidator(line_text)]

#: Earliest and latest year a measurement may carry (the first GPU-trained networks are
#: from the 2000s; a record from 9999 is a typo).
TIMESTAMP_YEARS = (1970, 2200)
_ISO_UTC = re.compile(r"(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(\.\d{1,9})?Z")


def timestamp_text(value: Any) -> str:
    """An ISO 8601 UTC time ``YYYY-MM-DDTHH:MM:SS[.frac]Z`` that is a real date and time
    (``9999-99-99`` is not) within :data:`TIMESTAMP_YEARS`; kept as written."""
    if not isinstance(value, str):
        raise ValueError(f"must be an ISO 8601 UTC time such as 2020-01-21T20:20:54Z, got "
                         f"{_kind(value)}")
    m = _ISO_UTC.fullmatch(value)
    if not m:
        raise ValueError(f"must be an ISO 8601 UTC time such as 2020-01-21T20:20:54Z, got "
                         f"{value[:40]!r}")
    y, mo, d, h, mi, sec = (int(g) for g in m.groups()[:6])
    try:
        datetime(y, mo, d, h, mi, sec)
    except ValueError as exc:
        raise ValueError(f"{value!r} is not a real date and time ({exc})") from None
    if not TIMESTAMP_YEARS[0] <= y <= TIMESTAMP_YEARS[1]:
        raise ValueError(f"year {y} is outside {TIMESTAMP_YEARS[0]}…{TIMESTAMP_YEARS[1]}")
    return value


#: An ISO 8601 UTC time, parsed as a date (see :func:`timestamp_text`).
Timestamp = Annotated[str, BeforeValidator(timestamp_text)]


def shape_value(value: Any, max_dim: int, max_dims: int = 8) -> str:
    """A shape ``CxHxW`` (2…``max_dims`` positive dimensions, each at most ``max_dim``),
    checked digit by digit before any conversion; kept as written."""
    if not isinstance(value, str):
        raise ValueError(f"must be a shape such as 3x224x224, got {_kind(value)}")
    parts = value.split("x")
    if not 2 <= len(parts) <= max_dims or not all(p.isascii() and p.isdigit() for p in parts):
        raise ValueError(f"must be a shape such as 3x224x224 (2 to {max_dims} positive "
                         f"dimensions), got {value[:40]!r}")
    for p in parts:
        digits = len(p.lstrip("0"))
        if digits > len(str(max_dim)):
            raise ValueError(f"a dimension of {digits:,} digits is more than {max_dim:,}")
        if not 0 < int(p) <= max_dim:
            raise ValueError(f"dimension {int(p)} must be in 1…{max_dim:,}")
    return value


def shape_in(max_dim: int, max_dims: int = 8) -> BeforeValidator:
    """The validator of a shape text (see :func:`shape_value`), to annotate a ``str``."""
    return BeforeValidator(lambda v: shape_value(v, max_dim, max_dims))


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
                                        or part in ("str", "int", "float", "bool", "[key]")
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
             what: str = "file", line: int | None = None) -> M:
    """``model.model_validate(data)`` with errors as one :class:`ScenarioError` (naming
    ``line`` when the whole record is one line of a file)."""
    if not isinstance(data, dict):
        raise ScenarioError(f"a {what} must be a mapping of keys to values", source=source,
                            line=line)
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        err = error_from(exc, model, source=source, lines=lines)
        if line is not None:
            err = ScenarioError(err.message, source=source, field=err.field, line=line)
        raise err from None
    except RecursionError:
        raise ScenarioError("nested too deeply", source=source, line=line) from None


def validate_records(model: type[M], records: Iterable[tuple[int, Any]], *, source: str,
                     what: str = "record",
                     pick: Callable[[dict[str, Any], int], type[M]] | None = None
                     ) -> list[tuple[int, M]]:
    """``(line, model)`` for every ``(line, data)``: each validated against ``model`` (or
    the model ``pick(data, line)`` chooses, by its kind say), errors naming
    ``file:line: field``."""
    out: list[tuple[int, M]] = []
    for number, data in records:
        if not isinstance(data, dict):
            raise ScenarioError(f"each {what} must be an object of keys and values, got "
                                f"{_kind(data)}", source=source, line=number)
        chosen = model if pick is None else pick(data, number)
        out.append((number, validate(chosen, data, source=source, what=what, line=number)))
    return out


def read_jsonl_models(path: str | Path, model: type[M], *, source: str | None = None,
                      field: str | None = None, what: str = "record",
                      pick: Callable[[dict[str, Any], int], type[M]] | None = None
                      ) -> list[tuple[int, M]]:
    """Every line of a JSON-lines file through the boundary, validated (see
    :func:`validate_records`)."""
    source = source or str(path)
    return validate_records(model, read_jsonl(path, source=source, field=field),
                            source=source, what=what, pick=pick)


def read_csv_models(path: str | Path, model: type[M], *, source: str | None = None,
                    field: str | None = None, required: tuple[str, ...] = (),
                    delimiter: str = ",", what: str = "row") -> list[tuple[int, M]]:
    """Every row of a CSV file through the boundary (duplicate columns refused), blank
    cells as missing, each row validated (errors name the line and the column)."""
    source = source or str(path)
    rows = read_csv(path, source=source, field=field, required=required, delimiter=delimiter)
    return validate_records(model, ((n, {k: v for k, v in row.items() if v.strip()})
                                    for n, row in rows), source=source, what=what)
