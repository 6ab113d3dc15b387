"""The one way the testbed writes a file: atomically, with ordinary permissions.

:func:`atomic_write` writes to a temporary file in the target's folder, flushes and
fsyncs it, gives it the mode the file would have had (the existing file's mode, or
0666 minus the umask for a new one — ``tempfile.mkstemp`` alone leaves 0600), and
renames it over the target. A reader sees the old file or the new one, never half
of either; a failure (full disk, read-only mount, a folder in the way) leaves the old
file untouched, removes the temporary one and raises an :class:`InputError` naming
the file, which the CLI prints as one line.

:func:`write_csv` and :func:`write_json` are the CSV writer and JSON emitter every
command uses (JSON through :mod:`testbed.io.canonical`, so equal data give equal bytes).
"""

from __future__ import annotations

import csv
import errno
import io
import os
import stat
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any

from testbed.errors import InputError
from testbed.io.read import describe_kind

_REASONS = {
    errno.ENOSPC: "no space left on the device",
    errno.EDQUOT: "disk quota exceeded",
    errno.EROFS: "the file system is read-only",
    errno.EACCES: "permission denied",
    errno.EPERM: "operation not permitted",
    errno.EISDIR: "is a folder",
    errno.ENOTDIR: "a parent is not a folder",
    errno.ENOENT: "the folder does not exist",
    errno.ENAMETOOLONG: "the name is too long",
    errno.EFBIG: "the file is larger than allowed (a file-size limit, or the disk is full)",
}


def os_reason(exc: OSError) -> str:
    """A short human reason for a failed write or read."""
    return _REASONS.get(exc.errno or 0, exc.strerror or str(exc))


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _refuse_special(target: Path, field: str | None) -> None:
    """A device, FIFO or socket in the target's place is never written: an atomic rename
    would replace the device node itself, and opening a FIFO blocks until a reader comes."""
    try:
        mode = os.stat(target).st_mode
    except OSError:
        return
    if target.is_dir():
        raise InputError("is a folder; give a file name", source=str(target), field=field)
    if not stat.S_ISREG(mode):
        raise InputError(f"{describe_kind(mode)}; give a file name", source=str(target),
                         field=field)


def check_writable_target(path: str | Path, *, field: str | None = None) -> Path:
    """Refuse, before any work starts, a target that cannot be written: a folder, a
    device or a FIFO in its place, a missing or read-only parent folder."""
    target = Path(path)
    _refuse_special(target, field)
    parent = target.parent if str(target.parent) else Path(".")
    if not parent.is_dir():
        raise InputError("the folder does not exist", source=str(target), field=field)
    if not os.access(parent, os.W_OK | os.X_OK):
        raise InputError("the folder is not writable", source=str(target), field=field)
    return target


def atomic_write(path: str | Path, write: Callable[[IO[Any]], object], *, binary: bool = False,
                 field: str | None = None) -> Path:
    """Write ``path`` through ``write(handle)`` atomically (see the module docstring)."""
    target = Path(path)
    parent = target.parent if str(target.parent) else Path(".")
    _refuse_special(target, field)
    try:
        mode = stat.S_IMODE(os.stat(target).st_mode)
    except FileNotFoundError:
        mode = 0o666 & ~_umask()
    except OSError:
        mode = 0o666 & ~_umask()
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(dir=parent, prefix=f".{target.name}.", suffix=".tmp")
        fh: IO[Any] = (os.fdopen(fd, "wb") if binary
                       else os.fdopen(fd, "w", encoding="utf-8", newline=""))
        with fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, target)
        tmp = None
    except OSError as exc:
        raise InputError(f"cannot write: {os_reason(exc)}", source=str(target),
                         field=field) from None
    finally:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
    return target


def write_text(path: str | Path, text: str, *, field: str | None = None) -> Path:
    """Write a text file atomically."""
    return atomic_write(path, lambda fh: fh.write(text), field=field)


def write_bytes(path: str | Path, data: bytes, *, field: str | None = None) -> Path:
    """Write a binary file atomically."""
    return atomic_write(path, lambda fh: fh.write(data), binary=True, field=field)


def csv_text(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """CSV text (RFC 4180 quoting, ``\\r\\n`` line ends as the csv module writes them)."""
    buf = io.StringIO(newline="")
    writer = csv.writer(buf)
    writer.writerow(header)
    writer.writerows(rows)
    return buf.getvalue()


def write_csv(path: str | Path, header: Sequence[str], rows: Sequence[Sequence[Any]], *,
              field: str | None = None) -> Path:
    """Write a CSV file atomically."""
    return write_text(path, csv_text(header, rows), field=field)


def json_text(data: Any, *, indent: int | None = 2) -> str:
    """Stable JSON text: sorted keys, plain data (see :mod:`testbed.io.canonical`)."""
    import json

    from testbed.io.canonical import plain
    if indent is None:
        from testbed.io.canonical import dumps
        return dumps(data)
    return json.dumps(plain(data), indent=indent, sort_keys=True, ensure_ascii=False)


def write_json(path: str | Path, data: Any, *, field: str | None = None) -> Path:
    """Write a JSON file atomically (pretty, sorted keys, trailing newline)."""
    return write_text(path, json_text(data) + "\n", field=field)
