"""Atomic checkpoint store with SHA-256 manifests, keep-last-k and fallback on damage.

Layout of a checkpoint directory::

    ROOT/step-00000012/            one committed checkpoint
        MANIFEST.json              framework, model, step, sha256 + bytes of every file
        state.json, model.pt ...   the files the harness wrote
    ROOT/.tmp-step-00000016-PID/   a checkpoint being written (never loaded)

A checkpoint is written into a temporary directory, every file is fsynced, the
manifest is written and fsynced last, and the directory is renamed to its final name
(atomic on POSIX) and the parent fsynced. A kill at any moment therefore leaves either
the old set of checkpoints or the old set plus one complete new one. On load every
file's SHA-256 is checked; a damaged newest checkpoint is reported and the previous one
is used.

Manifests are read through the input boundary (:mod:`testbed.io.read`: a regular file
of bounded size, strict JSON of bounded depth) and validated by :class:`Manifest` (the
files it lists are plain names inside the checkpoint, their sizes and SHA-256 digests
well formed). Before a run starts, :meth:`CheckpointStore.check_usable` refuses a
checkpoint folder holding a manifest that fails either — a FIFO, a link to
``/dev/zero``, a JSON bomb, a path out of the checkpoint — with one line naming the
manifest and the field, and changes nothing; a store of this code never writes one.
During a run, :meth:`CheckpointStore.verify` gives the same failure as the reason the
checkpoint is skipped.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Annotated, Any

from pydantic import BeforeValidator, Field

from testbed.errors import InputError
from testbed.io.read import parse_json, read_bytes
from testbed.io.schema import Line, Strict, validate, whole_in

MANIFEST = "MANIFEST.json"
PREFIX = "step-"
TMP_PREFIX = ".tmp-step-"
FORMAT_VERSION = 1


#: Largest manifest read (a manifest lists a few files: 16 MiB is thousands of them).
MANIFEST_LIMIT_BYTES = 16 * 2**20
#: Largest step and file size a manifest may name (the records' ranges).
MAX_STEP = 10**9
MAX_FILE_BYTES = 10**15


def _member_name(value: Any) -> str:
    """A file of the checkpoint: a relative path inside it (no ``..``, not absolute)."""
    if not isinstance(value, str) or not value or "\x00" in value or "\\" in value:
        raise ValueError(f"{str(value)[:60]!r} is not a file name")
    parts = PurePosixPath(value).parts
    if value.startswith("/") or ".." in parts or not parts or value == MANIFEST:
        raise ValueError(f"{value[:60]!r} is not a file inside the checkpoint")
    return value


class ManifestFile(Strict):
    """One file of a checkpoint: its size and SHA-256."""

    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    bytes: Annotated[int, whole_in(0, MAX_FILE_BYTES)]


class Manifest(Strict):
    """``MANIFEST.json`` of one committed checkpoint (see the module docstring)."""

    format_version: Annotated[int, whole_in(1, FORMAT_VERSION)]
    framework: Line
    model: Line
    step: Annotated[int, whole_in(0, MAX_STEP)]
    files: dict[Annotated[str, BeforeValidator(_member_name)], ManifestFile] = \
        Field(min_length=1)
    meta: dict[str, Any] = Field(default_factory=dict)


def read_manifest(folder: Path) -> Manifest:
    """The manifest of a checkpoint folder through the input boundary, validated
    (:class:`InputError` naming the file and the field otherwise)."""
    path = folder / MANIFEST
    source = str(path)
    data = read_bytes(path, source=source, limit=MANIFEST_LIMIT_BYTES)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise InputError("not UTF-8 text (damaged)", source=source) from None
    return validate(Manifest, parse_json(text, source=source), source=source,
                    what="checkpoint manifest")


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _fsync_path(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@dataclass(frozen=True)
class Committed:
    """A committed checkpoint on disk."""

    step: int
    path: Path


class CheckpointStore:
    """Checkpoints of one (framework, model) training run under ``root``."""

    def __init__(self, root: str | Path, framework: str, model: str, keep: int = 3,
                 write_delay_s: float = 0.0) -> None:
        if keep < 1:
            raise InputError("keep must be >= 1", field="keep")
        self.root = Path(root)
        self.framework = framework
        self.model = model
        self.keep = keep
        # Fault injection: a pause between writing the files and committing them, so a
        # supervisor can kill the writer in the middle of a checkpoint (slow storage).
        self.write_delay_s = write_delay_s

    # -- validation (never modifies anything) ------------------------------------------

    def check_usable(self) -> None:
        """Raise InputError if the root cannot be written or holds another run's checkpoints."""
        if self.root.exists() and not self.root.is_dir():
            raise InputError("checkpoint path exists and is not a directory",
                             source=str(self.root))
        probe = self.root if self.root.exists() else self._existing_parent()
        if not probe.is_dir() or not os.access(probe, os.W_OK | os.X_OK):
            raise InputError("checkpoint directory is not writable", source=str(self.root))
        try:  # access() says yes to root everywhere; a real write tells the truth (in
            # the folder that exists: nothing is created before every check has passed)
            fd, name = tempfile.mkstemp(prefix=".testbed-probe-", dir=probe)
            os.close(fd)
            os.unlink(name)
        except OSError as exc:
            raise InputError(f"checkpoint directory is not writable ({exc.strerror})",
                             source=str(self.root)) from None
        for entry in self.committed():
            manifest = read_manifest(entry.path)      # refused here, before any change
            theirs = (manifest.framework, manifest.model)
            if theirs != (self.framework, self.model):
                raise InputError(
                    f"checkpoint {entry.path.name} is from framework={theirs[0]} "
                    f"model={theirs[1]}, not framework={self.framework} model={self.model}",
                    source=str(self.root))

    def _existing_parent(self) -> Path:
        path = self.root.resolve()
        while not path.exists():
            path = path.parent
        return path

    # -- listing and verification ------------------------------------------------------

    def committed(self) -> list[Committed]:
        """Committed checkpoints, oldest first."""
        if not self.root.is_dir():
            return []
        found = []
        for child in self.root.iterdir():
            if child.is_dir() and child.name.startswith(PREFIX):
                try:
                    found.append(Committed(int(child.name[len(PREFIX):]), child))
                except ValueError:
                    continue
        return sorted(found, key=lambda c: c.step)

    @staticmethod
    def _read_manifest(path: Path) -> Manifest | None:
        try:
            return read_manifest(path)
        except InputError:
            return None

    def verify(self, entry: Committed) -> str | None:
        """None if the checkpoint is intact, else the reason it is not."""
        try:
            manifest = read_manifest(entry.path)
        except InputError as exc:
            return f"manifest unusable: {exc.message}" + (f" ({exc.field})" if exc.field else "")
        if manifest.step != entry.step:
            return "manifest step does not match directory"
        for name, info in sorted(manifest.files.items()):
            path = entry.path / name
            try:
                st = os.lstat(path)
            except OSError:
                return f"{name} missing"
            if not stat.S_ISREG(st.st_mode):
                return f"{name} is not a regular file"
            if st.st_size != info.bytes:
                return f"{name} has {st.st_size} bytes, manifest says {info.bytes}"
            if sha256_file(path) != info.sha256:
                return f"{name} sha256 mismatch"
        return None

    def latest_valid(self, on_corrupt: Callable[[Committed, str], None] | None = None
                     ) -> Committed | None:
        """The newest intact checkpoint; damaged newer ones are reported and skipped."""
        for entry in reversed(self.committed()):
            reason = self.verify(entry)
            if reason is None:
                return entry
            if on_corrupt is not None:
                on_corrupt(entry, reason)
        return None

    def manifest(self, entry: Committed) -> dict:
        """The validated manifest of a checkpoint, as plain data."""
        try:
            return read_manifest(entry.path).model_dump(mode="json")
        except InputError as exc:
            raise InputError(f"manifest unusable: {exc.message}", source=str(entry.path),
                             field=exc.field) from None

    # -- writing -------------------------------------------------------------------------

    def clean_partial(self) -> list[str]:
        """Remove checkpoints that were being written when a writer died."""
        removed = []
        if self.root.is_dir():
            for child in self.root.iterdir():
                if child.name.startswith(TMP_PREFIX):
                    shutil.rmtree(child, ignore_errors=True)
                    removed.append(child.name)
        return removed

    def begin(self, step: int, tag: str | None = None) -> Path:
        """A fresh temporary directory to write the checkpoint of ``step`` into.

        ``tag`` names it (default: this process id); a process group uses one shared tag
        so that every rank writes its files into the same directory.
        """
        self.root.mkdir(parents=True, exist_ok=True)
        tmp = self.root / f"{TMP_PREFIX}{step:08d}-{tag or os.getpid()}"
        if tmp.exists():
            shutil.rmtree(tmp)
        tmp.mkdir()
        return tmp

    def commit(self, tmp: Path, step: int, meta: dict | None = None) -> Committed:
        """Checksum and fsync every file in ``tmp``, write the manifest, rename atomically."""
        files = {}
        for path in sorted(tmp.rglob("*")):
            if path.is_file():
                _fsync_path(path)
                files[str(path.relative_to(tmp))] = {"sha256": sha256_file(path),
                                                     "bytes": path.stat().st_size}
        for path in sorted(p for p in tmp.rglob("*") if p.is_dir()):
            _fsync_path(path)
        if self.write_delay_s > 0:
            time.sleep(self.write_delay_s)
        manifest = {"format_version": FORMAT_VERSION, "framework": self.framework,
                    "model": self.model, "step": step, "files": files, "meta": meta or {}}
        with open(tmp / MANIFEST, "w", encoding="utf-8") as stream:
            json.dump(manifest, stream, sort_keys=True, indent=1)
            stream.flush()
            os.fsync(stream.fileno())
        _fsync_path(tmp)
        final = self.root / f"{PREFIX}{step:08d}"
        if final.exists():
            # Re-writing the same step after a restart: replace it atomically enough —
            # move the old one aside first so a crash leaves one of the two intact.
            aside = self.retire(Committed(step, final))
            os.rename(tmp, final)
            shutil.rmtree(aside, ignore_errors=True)
        else:
            os.rename(tmp, final)
        _fsync_path(self.root)
        self.prune()
        return Committed(step, final)

    def prune(self) -> list[int]:
        """Keep the newest ``keep`` committed checkpoints; returns the steps removed."""
        entries = self.committed()
        removed = []
        for entry in entries[:-self.keep]:
            shutil.rmtree(self.retire(entry), ignore_errors=True)
            removed.append(entry.step)
        return removed

    def retire(self, entry: Committed) -> Path:
        """Take a committed checkpoint out of the store in one rename, before its files
        are removed: a writer killed while removing them (a SIGKILL, a Slurm requeue)
        leaves a partial folder that :meth:`clean_partial` removes, never a committed
        one without its manifest, which :meth:`check_usable` would refuse. Returns
        where it now is."""
        aside = self.root / f"{TMP_PREFIX}{entry.step:08d}-old-{os.getpid()}"
        if aside.exists():
            shutil.rmtree(aside, ignore_errors=True)
        os.rename(entry.path, aside)
        return aside

    def bytes_on_disk(self, entry: Committed) -> int:
        return sum(p.stat().st_size for p in entry.path.rglob("*") if p.is_file())
