"""The SQLite state of real HPO sweeps: every state change, one transaction each.

Tables (schema version :data:`SCHEMA_VERSION`, in ``hpo_meta``):

* ``hpo_sweeps(sweep, name, source, created_wall, t0_wall, slots, seed)`` — one row per
  sweep; ``sweep`` is a hash of the ``hpo:`` section, the seed and the worker count, so
  the same command finds its own sweep again;
* ``hpo_events(sweep, seq, t_s, event, fields)`` — the schedule trace, in order: the
  history the driver replays to rebuild its state after it was killed;
* ``hpo_trials(sweep, trial, status, attempts, value, config)`` — the latest state of
  each trial, for people and reports;
* ``hpo_beats(sweep, t_s, wall)`` — the sweep time and the wall time of the latest
  commit: where a rerun continues the sweep's clock (:mod:`testbed.app.hpo.clock`).

The driver appends the events of one state change (an attempt started, ended or
failed, with its trial rows) in one transaction. The database runs in WAL mode, so a
SIGKILL at any instant leaves the last committed change and nothing half-written.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from testbed.app.results_db import OPEN_WAIT_S, sqlite_busy, write_error
from testbed.errors import InputError
from testbed.io.canonical import dumps

SCHEMA_VERSION = 1
_SCHEMA = """
CREATE TABLE IF NOT EXISTS hpo_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS hpo_sweeps (
    sweep TEXT PRIMARY KEY, name TEXT, source TEXT, created_wall REAL NOT NULL,
    t0_wall REAL NOT NULL, slots INTEGER NOT NULL, seed INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS hpo_events (
    sweep TEXT NOT NULL, seq INTEGER NOT NULL, t_s REAL NOT NULL, event TEXT NOT NULL,
    fields TEXT NOT NULL, PRIMARY KEY (sweep, seq));
CREATE TABLE IF NOT EXISTS hpo_trials (
    sweep TEXT NOT NULL, trial INTEGER NOT NULL, status TEXT NOT NULL,
    attempts INTEGER NOT NULL, value REAL, config TEXT, PRIMARY KEY (sweep, trial));
CREATE TABLE IF NOT EXISTS hpo_beats (
    sweep TEXT PRIMARY KEY, t_s REAL NOT NULL, wall REAL NOT NULL);
"""


class HpoStore:
    """One SQLite file holding any number of HPO sweeps."""

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        target = Path(path)
        if target.is_dir():
            raise InputError("is a folder; give a database file", source=self.path,
                             field="--store")
        if not target.parent.is_dir():
            raise InputError("the folder does not exist", source=self.path, field="--store")
        new = not target.exists()
        deadline = time.monotonic() + OPEN_WAIT_S
        while True:
            try:
                self.conn = sqlite3.connect(self.path, timeout=30, isolation_level=None)
                row = self._open_or_create()
                break
            except sqlite3.OperationalError as exc:
                self.conn.close()
                if sqlite_busy(exc) and time.monotonic() < deadline:
                    time.sleep(0.05)    # another process is creating this store
                    continue
                self._refuse(new, f"not a usable SQLite database: {exc}")
            except sqlite3.DatabaseError as exc:
                self.conn.close()
                self._refuse(new, f"not a usable SQLite database: {exc}")
        if row is None or str(row[0]) != str(SCHEMA_VERSION):
            self.conn.close()
            raise InputError(f"HPO schema version {str(row[0] if row else None)[:20]!r}, this "
                             f"testbed writes {SCHEMA_VERSION}; use a new --store",
                             source=self.path, field="--store")

    def _open_or_create(self) -> tuple | None:
        """The schema version row, the tables made first in one exclusive transaction
        when the file is new (a second process waits, then finds them). A database
        that holds other tables and no HPO state is refused and left as it was."""
        tables = {r[0] for r in self.conn.execute(
            "SELECT name FROM sqlite_master WHERE type='table'")}
        if tables and "hpo_meta" not in tables:
            self.conn.close()
            raise InputError("not a testbed HPO store (left untouched): give a new --store",
                             source=self.path, field="--store")
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute("PRAGMA synchronous=NORMAL")
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            for statement in _SCHEMA.split(";"):
                if statement.strip():
                    self.conn.execute(statement)
            self.conn.execute("INSERT OR IGNORE INTO hpo_meta VALUES ('schema_version', ?)",
                              (str(SCHEMA_VERSION),))
            self.conn.execute("COMMIT")
        except BaseException:
            if self.conn.in_transaction:
                self.conn.execute("ROLLBACK")
            raise
        return self.conn.execute("SELECT value FROM hpo_meta WHERE key='schema_version'"
                                 ).fetchone()

    def _refuse(self, new: bool, message: str) -> None:
        """An unusable store is one line; one this command made is removed again."""
        if new:
            for suffix in ("", "-wal", "-shm", "-journal"):
                Path(f"{self.path}{suffix}").unlink(missing_ok=True)
        raise InputError(message, source=self.path, field="--store")

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> HpoStore:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ------------------------------------------------------------------ sweeps

    def open_sweep(self, sweep: str, *, name: str, source: str, slots: int, seed: int
                   ) -> float:
        """Create the sweep if new; return its start (wall clock, seconds)."""
        row = self.conn.execute("SELECT t0_wall FROM hpo_sweeps WHERE sweep=?", (sweep,)
                                ).fetchone()
        if row is not None:
            return float(row[0])
        now = time.time()
        with self.conn:
            self.conn.execute("BEGIN IMMEDIATE")
            self.conn.execute("INSERT OR IGNORE INTO hpo_sweeps VALUES (?,?,?,?,?,?,?)",
                              (sweep, name, source, now, now, slots, seed))
        return float(self.conn.execute("SELECT t0_wall FROM hpo_sweeps WHERE sweep=?",
                                       (sweep,)).fetchone()[0])

    def events(self, sweep: str) -> list[tuple[float, str, dict]]:
        rows = self.conn.execute("SELECT t_s, event, fields FROM hpo_events WHERE sweep=? "
                                 "ORDER BY seq", (sweep,)).fetchall()
        return [(t, e, self._json(f, "an event's fields")) for t, e, f in rows]

    def commit(self, sweep: str, events: Sequence[tuple[float, str, dict]],
               trials: Iterable[dict[str, Any]] = (), *,
               beat: tuple[float, float] | None = None) -> None:
        """Append ``events`` and update ``trials`` rows in one transaction (``beat``:
        the sweep time and wall time of this commit); a full disk rolls it back and is
        one line (:class:`~testbed.app.results_db.StoreWriteError`)."""
        try:
            self._commit(sweep, events, trials, beat)
        except sqlite3.OperationalError as exc:
            raise write_error(self.path, exc) from None

    def _commit(self, sweep: str, events: Sequence[tuple[float, str, dict]],
                trials: Iterable[dict[str, Any]], beat: tuple[float, float] | None) -> None:
        with self.conn:
            self.conn.execute("BEGIN IMMEDIATE")
            (seq,) = self.conn.execute("SELECT COALESCE(MAX(seq), -1) FROM hpo_events "
                                       "WHERE sweep=?", (sweep,)).fetchone()
            self.conn.executemany(
                "INSERT INTO hpo_events VALUES (?,?,?,?,?)",
                [(sweep, seq + 1 + i, t, e, dumps(f)) for i, (t, e, f) in enumerate(events)])
            self.conn.executemany(
                "INSERT OR REPLACE INTO hpo_trials VALUES (?,?,?,?,?,?)",
                [(sweep, t["trial"], t["status"], t["attempts"], t.get("value"),
                  dumps(t.get("config"))) for t in trials])
            if beat is not None:
                self.conn.execute("INSERT OR REPLACE INTO hpo_beats VALUES (?,?,?)",
                                  (sweep, beat[0], beat[1]))

    def beat(self, sweep: str) -> tuple[float, float] | None:
        """(sweep time, wall time) of the sweep's latest commit, if recorded."""
        row = self.conn.execute("SELECT t_s, wall FROM hpo_beats WHERE sweep=?", (sweep,)
                                ).fetchone()
        return None if row is None else (float(row[0]), float(row[1]))

    def trials(self, sweep: str) -> list[dict[str, Any]]:
        rows = self.conn.execute("SELECT trial, status, attempts, value, config FROM "
                                 "hpo_trials WHERE sweep=? ORDER BY trial", (sweep,)).fetchall()
        return [{"trial": r[0], "status": r[1], "attempts": r[2], "value": r[3],
                 "config": self._json(r[4], "a trial's config", empty_ok=True)
                 if r[4] else None} for r in rows]

    def _json(self, text: Any, what: str, *, empty_ok: bool = False) -> Any:
        """A JSON column through the input boundary (a store changed behind the
        testbed's back is one line): an object, of bounded depth and finite numbers."""
        from testbed.io.read import parse_json
        value = parse_json(text, source=self.path) if isinstance(text, str) else None
        if value is None and empty_ok:
            return None
        if not isinstance(value, dict):
            raise InputError(f"damaged HPO store: {what} is not a JSON object",
                             source=self.path, field="--store")
        return value
