"""The one input boundary: every file the testbed reads comes in through here.

Why one place: a hostile or broken file must never hang the testbed, eat its memory,
run code or end in a traceback. So every read

* accepts **regular files only** — a FIFO would block forever and ``/dev/zero`` never
  ends, so devices, sockets, pipes and folders are refused before opening (and again
  on the open descriptor, against a swap in between);
* stops at a **size limit** (:data:`DEFAULT_LIMIT_BYTES`, raised with
  ``testbed --max-input-size 1GiB …`` or the ``TESTBED_MAX_INPUT_BYTES`` variable);
* decodes **strict UTF-8**, reporting the byte offset of the first bad byte;
* parses YAML with the **safe loader** (no Python objects), once (the line map and
  the data come from one composed tree), refusing **duplicate keys**, nesting deeper
  than :data:`MAX_DEPTH` and alias expansion beyond :data:`MAX_EXPANDED_NODES` (600
  bytes of nested aliases can expand to billions of nodes);
* parses JSON with ``NaN``/``Infinity`` refused (they are not JSON), a number too large
  to be finite (``1e999``) refused, and **duplicate keys** refused;
* refuses an integer of more than :data:`MAX_INT_DIGITS` digits in YAML and JSON before
  converting it (Python's own limit of 4,300 digits would otherwise end in a traceback,
  and no field of any input needs a number of 10¹⁰⁰ or more), and a YAML scalar that
  looks like a date or number but is none (``9999-99-99``), naming the key;
* reads CSV with a header whose column names are all different (a repeated column is
  ambiguous: refused, naming both positions).

Every problem is an :class:`~testbed.errors.InputError` naming the file (and line or
field where there is one), which the CLI prints as one line with exit status 2.
Numbers are checked finite and in physical range by the schemas that read them.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import re
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from testbed.errors import InputError

#: Default size limit of one input file (64 MiB): far above any real scenario,
#: profile or trace, far below what would hurt a laptop.
DEFAULT_LIMIT_BYTES = 64 * 2**20
#: Environment variable that raises (or lowers) the limit, in bytes or with a unit.
LIMIT_ENV = "TESTBED_MAX_INPUT_BYTES"
#: Deepest nesting of mappings and lists a YAML or JSON input may have.
MAX_DEPTH = 64
#: Most nodes a YAML document may expand to once aliases are followed.
MAX_EXPANDED_NODES = 1_000_000
#: Most digits of an integer in any input: 10¹⁰⁰ is beyond every physical count and
#: every seed; Python refuses to convert more than 4,300 digits (CVE-2020-10735).
MAX_INT_DIGITS = 100


def limit_bytes() -> int:
    """The size limit in force (the environment variable, else the default)."""
    raw = os.environ.get(LIMIT_ENV)
    if not raw:
        return DEFAULT_LIMIT_BYTES
    from testbed.units import parse_size_bytes
    value = parse_size_bytes(raw, source=LIMIT_ENV)
    if value <= 0:
        raise InputError("must be a size > 0", source=LIMIT_ENV)
    return value


def describe_kind(mode: int) -> str:
    """Why a path of this mode is not read (or written) as a file."""
    if stat.S_ISDIR(mode):
        return "is a folder, not a file"
    if stat.S_ISFIFO(mode):
        return "is a FIFO (named pipe), not a regular file"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "is a device, not a regular file"
    if stat.S_ISSOCK(mode):
        return "is a socket, not a regular file"
    return "is not a regular file"


def _too_big(size: int, limit: int) -> str:
    from testbed.units import format_bytes
    return (f"is {format_bytes(size)}, above the input limit of {format_bytes(limit)} "
            f"(raise it with --max-input-size or {LIMIT_ENV})")


def read_bytes(path: str | Path, *, source: str | None = None, field: str | None = None,
               limit: int | None = None) -> bytes:
    """The bytes of a regular file of at most ``limit`` bytes (see the module docstring)."""
    path = Path(path)
    source = source or str(path)
    limit = limit_bytes() if limit is None else limit
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise InputError("no such file", source=source, field=field) from None
    except NotADirectoryError:
        raise InputError("no such file (a parent is not a folder)", source=source,
                         field=field) from None
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror}", source=source, field=field) from None
    if not stat.S_ISREG(st.st_mode):
        raise InputError(describe_kind(st.st_mode), source=source, field=field)
    if st.st_size > limit:
        raise InputError(_too_big(st.st_size, limit), source=source, field=field)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror}", source=source, field=field) from None
    try:
        fst = os.fstat(fd)
        if not stat.S_ISREG(fst.st_mode):   # swapped for something else after the stat
            raise InputError(describe_kind(fst.st_mode), source=source, field=field)
        chunks, total = [], 0
        while True:
            chunk = os.read(fd, min(1 << 20, limit + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            if total > limit:
                raise InputError(_too_big(total, limit), source=source, field=field)
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror}", source=source, field=field) from None
    finally:
        os.close(fd)
    return b"".join(chunks)


def decode_utf8(data: bytes, *, source: str, field: str | None = None) -> str:
    """Strict UTF-8 (a leading byte-order mark is dropped); errors give the byte offset."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise InputError(f"not UTF-8 text: byte 0x{data[exc.start]:02x} at offset "
                         f"{exc.start} cannot be decoded", source=source, field=field,
                         line=line) from None
    if "\x00" in text:
        line = text.count("\n", 0, text.index("\x00")) + 1
        raise InputError("not a text file: contains a NUL byte", source=source, field=field,
                         line=line)
    return text[1:] if text.startswith("\ufeff") else text


def read_text(path: str | Path, *, source: str | None = None, field: str | None = None,
              limit: int | None = None) -> str:
    """A regular UTF-8 text file, checked as :func:`read_bytes` and :func:`decode_utf8` say."""
    source = source or str(path)
    return decode_utf8(read_bytes(path, source=source, field=field, limit=limit),
                       source=source, field=field)


# --------------------------------------------------------------------------- YAML

@dataclass(frozen=True)
class YamlDocument:
    """Parsed YAML: the plain data and the 1-based line of every key path."""

    data: Any
    lines: dict[str, int]


class _SafeNoDuplicates(yaml.SafeLoader):
    """The safe loader, refusing a key that appears twice in one mapping."""

    def construct_mapping(self, node: yaml.Node, deep: bool = False) -> dict[Any, Any]:  # noqa: D102 - PyYAML hook
        if isinstance(node, yaml.MappingNode):
            seen: dict[Any, int] = {}
            for key_node, _ in node.value:
                if isinstance(key_node, yaml.ScalarNode):
                    key = key_node.value
                    if key in seen:
                        raise _DuplicateKey(key, seen[key], key_node.start_mark.line + 1)
                    seen[key] = key_node.start_mark.line + 1
        return super().construct_mapping(node, deep=deep)


class _DuplicateKey(Exception):
    def __init__(self, key: str, first: int, again: int) -> None:
        self.key, self.first, self.again = key, first, again


def _check_tree(node: yaml.Node, source: str) -> None:
    """Refuse deep nesting and alias bombs (expanded size, memoised per node)."""
    sizes: dict[int, int] = {}

    def size(n: yaml.Node, depth: int) -> int:
        if depth > MAX_DEPTH:
            raise InputError(f"nested deeper than {MAX_DEPTH} levels", source=source,
                             line=n.start_mark.line + 1)
        key = id(n)
        if key in sizes:
            return sizes[key]
        total = 1
        if isinstance(n, yaml.MappingNode):
            for k, v in n.value:
                total += size(k, depth + 1) + size(v, depth + 1)
        elif isinstance(n, yaml.SequenceNode):
            for item in n.value:
                total += size(item, depth + 1)
        if total > MAX_EXPANDED_NODES:
            raise InputError(f"expands to more than {MAX_EXPANDED_NODES:,} nodes through "
                             "aliases (&anchor/*alias)", source=source,
                             line=n.start_mark.line + 1)
        sizes[key] = total
        return total

    size(node, 0)


_INT_TAG = "tag:yaml.org,2002:int"
_CHECKED_TAGS = (_INT_TAG, "tag:yaml.org,2002:float", "tag:yaml.org,2002:timestamp")


def digits_problem(text: str) -> str | None:
    """Why the text of an integer is refused before it is converted (or None)."""
    digits = sum(ch.isalnum() for ch in text)
    if digits > MAX_INT_DIGITS:
        return (f"an integer of {digits:,} digits is beyond any value an input may hold "
                f"(at most {MAX_INT_DIGITS} digits)")
    return None


def _check_scalar(node: yaml.ScalarNode, loader: yaml.SafeLoader, path: str,
                  source: str) -> None:
    """A scalar that resolved to an integer, float or date must convert: refuse an
    integer of too many digits before converting it, and a date such as ``9999-99-99``
    (the resolver matches it, the conversion then fails), naming the key."""
    if node.tag not in _CHECKED_TAGS:
        return
    line = node.start_mark.line + 1
    if node.tag == _INT_TAG:
        why = digits_problem(str(node.value))
        if why:
            raise InputError(why, source=source, field=path or None, line=line)
    try:
        loader.construct_object(node)
    except (ValueError, OverflowError, TypeError, yaml.YAMLError) as exc:
        what = "date" if node.tag.endswith("timestamp") else "number"
        raise InputError(f"{node.value!r} is not a valid {what} ({exc})", source=source,
                         field=path or None, line=line) from None


def _line_map(node: yaml.Node, prefix: str, out: dict[str, int],
              check: tuple[yaml.SafeLoader, str] | None = None) -> None:
    """Record the 1-based line of every key path in a composed YAML node tree (and,
    given ``check``, check every scalar on the way, see :func:`_check_scalar`)."""
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            key = str(key_node.value)
            path = f"{prefix}.{key}" if prefix else key
            out.setdefault(path, key_node.start_mark.line + 1)
            if check is not None and isinstance(key_node, yaml.ScalarNode):
                _check_scalar(key_node, check[0], path, check[1])
            _line_map(value_node, path, out, check)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            path = f"{prefix}[{i}]"
            out.setdefault(path, item.start_mark.line + 1)
            _line_map(item, path, out, check)
    elif check is not None and isinstance(node, yaml.ScalarNode):
        _check_scalar(node, check[0], prefix, check[1])


def parse_yaml(text: str, *, source: str) -> YamlDocument:
    """Parse one YAML document safely (see the module docstring)."""
    loader = None
    try:
        loader = _SafeNoDuplicates(text)
        node = loader.get_single_node()
        if node is None:
            return YamlDocument(None, {})
        _check_tree(node, source)
        lines: dict[str, int] = {}
        _line_map(node, "", lines, (loader, source))
        loader.constructed_objects.clear()     # the scalar checks constructed some
        data = loader.construct_document(node)
    except _DuplicateKey as dup:
        raise InputError(f"key {dup.key!r} appears twice (lines {dup.first} and {dup.again})",
                         source=source, field=str(dup.key), line=dup.again) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or getattr(exc, "reason", None) or \
            str(exc).splitlines()[0]
        raise InputError(f"invalid YAML: {problem}", source=source,
                         line=mark.line + 1 if mark else None) from None
    except RecursionError:
        raise InputError(f"nested deeper than {MAX_DEPTH} levels", source=source) from None
    finally:
        if loader is not None:
            loader.dispose()
    return YamlDocument(data, lines)


def load_yaml(path: str | Path, *, source: str | None = None, field: str | None = None,
              limit: int | None = None) -> YamlDocument:
    """Read and parse a YAML file through the boundary."""
    source = source or str(path)
    return parse_yaml(read_text(path, source=source, field=field, limit=limit), source=source)


# --------------------------------------------------------------------------- CSV, JSON

def parse_csv(text: str, *, source: str, required: tuple[str, ...] = (),
              delimiter: str = ",", strip: bool = False
              ) -> Iterator[tuple[int, dict[str, str]]]:
    """``(line number, row)`` for every data row; the header must name ``required``, and
    no column twice. ``strip``: column names and cells without surrounding blanks."""
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter)
    try:
        header: list[str] = []
        for row in reader:             # blank lines before the header are skipped
            if row:
                header = row
                break
    except csv.Error as exc:
        raise InputError(f"not CSV: {exc}", source=source, line=1) from None
    if strip:
        header = [name.strip() for name in header]
    seen: dict[str, int] = {}
    for i, name in enumerate(header, start=1):
        if name in seen:
            raise InputError(f"column {name!r} appears twice in the header (columns "
                             f"{seen[name]} and {i}): which one holds the values is "
                             "ambiguous", source=source, field=name, line=reader.line_num)
        seen[name] = i
    missing = [c for c in required if c not in header]
    if missing:
        raise InputError(f"missing column(s) {', '.join(missing)}", source=source,
                         line=reader.line_num or 1)
    try:
        for cells in reader:
            if not cells:
                continue          # a blank line
            if len(cells) != len(header):
                short = f" (no {header[len(cells)]!r})" if len(cells) < len(header) else ""
                raise InputError(f"expected {len(header)} fields, found {len(cells)}{short}",
                                 source=source, line=reader.line_num)
            if strip:
                cells = [c.strip() for c in cells]
            yield reader.line_num, dict(zip(header, cells, strict=True))
    except csv.Error as exc:
        raise InputError(f"not CSV: {exc}", source=source, line=reader.line_num) from None


def read_csv(path: str | Path, *, source: str | None = None, field: str | None = None,
             required: tuple[str, ...] = (), delimiter: str = ",", strip: bool = False
             ) -> list[tuple[int, dict[str, str]]]:
    """Every ``(line, row)`` of a CSV file read through the boundary."""
    source = source or str(path)
    text = read_text(path, source=source, field=field)
    return list(parse_csv(text, source=source, required=required, delimiter=delimiter,
                          strip=strip))


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """An object whose keys are all different (a repeated key is ambiguous: refused)."""
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"duplicate key {key!r}")
        out[key] = value
    return out


class _Refused:
    """A JSON number the parser hands back unconverted (too many digits, or too large to
    be finite); :func:`parse_json` finds it afterwards to name its key."""

    __slots__ = ("why",)

    def __init__(self, why: str) -> None:
        self.why = why


class _Numbers:
    """``parse_int``/``parse_float`` hooks of one parse: digits bounded before the
    conversion, non-finite results refused."""

    def __init__(self) -> None:
        self.refused = False

    def int(self, text: str) -> Any:
        why = digits_problem(text)
        if why:
            self.refused = True
            return _Refused(why)
        return int(text)

    def float(self, text: str) -> Any:
        value = float(text)
        if not math.isfinite(value):
            self.refused = True
            return _Refused(f"the number {text[:40]} is too large to be finite")
        return value


def _find_refused(value: Any, path: str = "") -> tuple[str, str] | None:
    """The key path and reason of the first refused number inside parsed JSON."""
    if isinstance(value, _Refused):
        return path, value.why
    if isinstance(value, dict):
        for k, v in value.items():
            found = _find_refused(v, f"{path}.{k}" if path else str(k))
            if found:
                return found
    elif isinstance(value, list):
        for i, v in enumerate(value):
            found = _find_refused(v, f"{path}[{i}]")
            if found:
                return found
    return None


def _depth(value: Any, limit: int) -> int:
    stack = [(value, 1)]
    deepest = 0
    while stack:
        item, d = stack.pop()
        deepest = max(deepest, d)
        if deepest > limit:
            return deepest
        if isinstance(item, dict):
            stack.extend((v, d + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, d + 1) for v in item)
    return deepest


#: Text that may hold a number the hooks must see: a run of more digits than an integer
#: may have, or an exponent of 100 or more (only these can overflow or be refused; the
#: hooks cost a Python call per number, so plain text is parsed without them).
_RISKY_NUMBER = re.compile(rf"\d{{{MAX_INT_DIGITS + 1}}}|[eE]\+?0*[1-9]\d\d")


def parse_json(text: str, *, source: str, line: int | None = None) -> Any:
    """Strict JSON (no NaN/Infinity, no duplicate keys, no number beyond
    :data:`MAX_INT_DIGITS` digits or too large to be finite), at most :data:`MAX_DEPTH`
    levels deep."""
    numbers = _Numbers()
    hooks: dict[str, Any] = {}
    if _RISKY_NUMBER.search(text):
        hooks = {"parse_int": numbers.int, "parse_float": numbers.float}
    try:
        value = json.loads(text, parse_constant=_no_constants, object_pairs_hook=_unique_keys,
                           **hooks)
    except (json.JSONDecodeError, ValueError) as exc:
        msg = exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc)
        raise InputError(f"not JSON: {msg}", source=source, line=line) from None
    except RecursionError:
        raise InputError(f"nested deeper than {MAX_DEPTH} levels", source=source,
                         line=line) from None
    if _depth(value, MAX_DEPTH) > MAX_DEPTH:
        raise InputError(f"nested deeper than {MAX_DEPTH} levels", source=source, line=line)
    if numbers.refused:
        found = _find_refused(value)
        if found is not None:
            raise InputError(found[1], source=source, field=found[0] or None, line=line)
    return value


def read_jsonl(path: str | Path, *, source: str | None = None, field: str | None = None
               ) -> list[tuple[int, Any]]:
    """``(line, value)`` for every non-blank line of a JSON-lines file."""
    source = source or str(path)
    text = read_text(path, source=source, field=field)
    out = []
    for number, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            out.append((number, parse_json(line, source=source, line=number)))
    return out
