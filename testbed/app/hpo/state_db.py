"""The SQLite state of real HPO sweeps: every state change, one transaction each.

Tables (schema version :data:`SCHEMA_VERSION`, in ``hpo_meta``):

* ``hpo_sweeps(sweep, name, source, created_wall, t0_wall, slots, seed)`` — one row per
  sweep; ``sweep`` is a hash of the ``hpo:`` section, the seed and the worker count, so
  the same command finds its own sweep again;
* ``hpo_events(sweep, seq, t_s, event, fields)`` — the schedule trace, in order: the
  history the driver replays to rebuild its state after it was killed;
* ``hpo_trials(sweep, trial, status, attempts, value, config)`` — the latest state of
  each trial, for people and reports.

The driver appends the events of one state change (an attempt started, ended or
failed, with its trial rows) in one transaction. The database runs in WAL mode, so a
SIGKILL at any instant leaves the last committed change and nothing half-written.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

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
        try:
            self.conn = sqlite3.connect(self.path, timeout=30, isolation_level=None)
            self.conn.execute("PRAGMA journal_mode=WAL")
            self.conn.execute("PRAGMA synchronous=NORMAL")
            self.conn.executescript(_SCHEMA)
            row = self.conn.execute("SELECT value FROM hpo_meta WHERE key='schema_version'"
                                    ).fetchone()
        except sqlite3.DatabaseError as exc:
            raise InputError(f"not a usable SQLite database: {exc}", source=self.path,
                             field="--store") from None
        if row is None:
            self.conn.execute("INSERT OR IGNORE INTO hpo_meta VALUES ('schema_version', ?)",
                              (str(SCHEMA_VERSION),))
        elif int(row[0]) != SCHEMA_VERSION:
            raise InputError(f"HPO schema version {row[0]}, this testbed writes "
                             f"{SCHEMA_VERSION}; use a new --store", source=self.path,
                             field="--store")

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
        return [(t, e, json.loads(f)) for t, e, f in rows]

    def commit(self, sweep: str, events: Sequence[tuple[float, str, dict]],
               trials: Iterable[dict[str, Any]] = ()) -> None:
        """Append ``events`` and update ``trials`` rows in one transaction."""
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

    def trials(self, sweep: str) -> list[dict[str, Any]]:
        rows = self.conn.execute("SELECT trial, status, attempts, value, config FROM "
                                 "hpo_trials WHERE sweep=? ORDER BY trial", (sweep,)).fetchall()
        return [{"trial": r[0], "status": r[1], "attempts": r[2], "value": r[3],
                 "config": json.loads(r[4]) if r[4] else None} for r in rows]
