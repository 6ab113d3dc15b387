"""The embedded results store: an SQLite file with one row per point and replication.

Tables:

``sweeps``
    one row per sweep (``sweep_id`` = hash of the base scenario, grid, replications,
    engine and seed mode): scenario name and file, grid, code version.
``sweep_points``
    the plan: every point of a sweep with its index, overrides (JSON), scenario hash,
    seed and the resolved facts reports need (checkpoint interval and cost, MTBF,
    Young/Daly intervals). Written once, before any point runs; idempotent.
``points``
    one row per *finished* point: key, seed, replications, code version and timing.
``results``
    one row per point and replication: the outcome (wall time and where it went,
    failures, checkpoints, ETTR), the point's scenario hash and seed, the code version
    and the replication's own simulation time ``run_s``.

A point's ``results`` rows and its ``points`` row are written in one transaction, so
a point is either fully there or not there at all: a process killed at any moment
(SIGKILL included) loses at most the points in flight, and the primary keys make a
duplicate row impossible. A rerun skips every point that has a ``points`` row. The
database runs in WAL mode, and only one process (the sweep's driver) writes.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

from testbed.errors import InputError

SCHEMA_VERSION = 2
#: The ``meta`` row that marks a database as a testbed results store.
APPLICATION = "testbed-results"
#: Tables of a results store (a database holding other tables is not ours to touch).
TABLES = {"meta", "sweeps", "sweep_points", "points", "results", "claims"}
#: A claim older than this is stale (its sweep died without releasing it).
CLAIM_TTL_S = 6 * 3600.0

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS claims (
    point_key TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    claimed_unix REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS sweeps (
    sweep_id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    source TEXT,
    grid_json TEXT NOT NULL,
    replications INTEGER NOT NULL,
    engine TEXT NOT NULL,
    base_seed INTEGER NOT NULL,
    common_seed INTEGER NOT NULL,
    code_version TEXT NOT NULL,
    created_unix REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS sweep_points (
    sweep_id TEXT NOT NULL REFERENCES sweeps(sweep_id),
    idx INTEGER NOT NULL,
    point_key TEXT NOT NULL,
    params_json TEXT NOT NULL,
    scenario_hash TEXT NOT NULL,
    seed INTEGER NOT NULL,
    replications INTEGER NOT NULL,
    facts_json TEXT NOT NULL,
    PRIMARY KEY (sweep_id, idx)
);
CREATE TABLE IF NOT EXISTS points (
    point_key TEXT PRIMARY KEY,
    scenario_hash TEXT NOT NULL,
    seed INTEGER NOT NULL,
    replications INTEGER NOT NULL,
    engine TEXT NOT NULL,
    code_version TEXT NOT NULL,
    elapsed_s REAL NOT NULL,
    worker TEXT NOT NULL,
    finished_unix REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS results (
    point_key TEXT NOT NULL,
    replication INTEGER NOT NULL,
    scenario_hash TEXT NOT NULL,
    seed INTEGER NOT NULL,
    code_version TEXT NOT NULL,
    wall_s REAL NOT NULL,
    useful_s REAL NOT NULL,
    checkpoint_s REAL NOT NULL,
    lost_s REAL NOT NULL,
    restart_s REAL NOT NULL,
    waiting_s REAL NOT NULL,
    failures INTEGER NOT NULL,
    checkpoints INTEGER NOT NULL,
    ettr REAL NOT NULL,
    run_s REAL NOT NULL,
    PRIMARY KEY (point_key, replication)
);
"""

#: Columns of an exported row (results joined with the sweep plan).
EXPORT_COLUMNS = ("sweep_id", "point", "params", "point_key", "replication", "scenario_hash",
                  "seed", "code_version", "wall_s", "useful_s", "checkpoint_s", "lost_s",
                  "restart_s", "waiting_s", "failures", "checkpoints", "ettr", "run_s")


class Store:
    """A results database (see the module docstring). Use as a context manager.

    ``Store(path)`` opens (or creates) a store to write; ``Store.open_readonly(path)``
    opens an existing one without changing a byte (no WAL switch, no tables created).
    Either refuses a file that is not a testbed store, or one of another schema
    version, with one line and the file left as it was.
    """

    def __init__(self, path: str | Path, *, create: bool = True, readonly: bool = False) -> None:
        self.path = Path(path)
        self.readonly = readonly
        if (readonly or not create) and not self.path.is_file():
            raise InputError("no such results database", source=str(path))
        if self.path.exists() and not self.path.is_file():
            raise InputError("is not a regular file", source=str(path))
        if create and not self.path.parent.is_dir():
            raise InputError("folder does not exist", source=str(path))
        try:
            self.db = self._connect()
            self._check_or_create(create and not readonly)
        except sqlite3.DatabaseError as exc:
            raise InputError(f"not a readable SQLite database: {exc}", source=str(path)) from None

    @classmethod
    def open_readonly(cls, path: str | Path) -> Store:
        """An existing store opened read-only (reports and exports)."""
        return cls(path, create=False, readonly=True)

    def _connect(self) -> sqlite3.Connection:
        if self.readonly:
            from urllib.parse import quote
            base = f"file:{quote(str(self.path.resolve()))}?mode=ro"
            db = sqlite3.connect(base, uri=True, isolation_level=None, timeout=30.0)
            try:
                db.execute("SELECT count(*) FROM sqlite_master").fetchone()
                return db
            except sqlite3.OperationalError:
                # a WAL database on a read-only mount cannot create its -shm file:
                # read it as an immutable file instead
                db.close()
                return sqlite3.connect(base + "&immutable=1", uri=True,
                                       isolation_level=None, timeout=30.0)
        return sqlite3.connect(str(self.path), isolation_level=None, timeout=30.0)

    def _tables(self) -> set[str]:
        return {r[0] for r in self.db.execute(
            "SELECT name FROM sqlite_master WHERE type='table'")}

    def _check_or_create(self, create: bool) -> None:
        """Refuse foreign databases and other schema versions; create a new store."""
        tables = self._tables()
        if not tables and create:
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.executescript(_SCHEMA)
            self.db.executemany("INSERT OR IGNORE INTO meta VALUES (?, ?)",
                                [("application", APPLICATION),
                                 ("schema_version", str(SCHEMA_VERSION))])
            tables = self._tables()
        meta = dict(self.db.execute("SELECT key, value FROM meta").fetchall()) \
            if "meta" in tables else {}
        if meta.get("application") != APPLICATION or not tables <= TABLES:
            self.db.close()
            raise InputError("not a testbed results database (left untouched)",
                             source=str(self.path))
        if meta.get("schema_version") != str(SCHEMA_VERSION):
            self.db.close()
            raise InputError(f"results database of schema version "
                             f"{meta.get('schema_version')!r}; this testbed reads version "
                             f"{SCHEMA_VERSION} (use a new --store)", source=str(self.path))
        if not self.readonly:
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute("PRAGMA synchronous=NORMAL")
            self.db.execute("PRAGMA foreign_keys=ON")

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self.db.close()

    # ------------------------------------------------------------------ writing
    def register_sweep(self, *, sweep_id: str, name: str, source: str | None, grid: list,
                       replications: int, engine: str, base_seed: int, common_seed: bool,
                       code_version: str, plan: Sequence[dict]) -> None:
        """Record a sweep and its planned points (idempotent: a rerun changes nothing)."""
        with self._transaction():
            self.db.execute(
                "INSERT OR IGNORE INTO sweeps VALUES (?,?,?,?,?,?,?,?,?,?)",
                (sweep_id, name, source, json.dumps(grid), replications, engine, base_seed,
                 int(common_seed), code_version, time.time()))
            self.db.executemany(
                "INSERT OR IGNORE INTO sweep_points VALUES (?,?,?,?,?,?,?,?)",
                [(sweep_id, p["idx"], p["point_key"], json.dumps(p["params"], sort_keys=True),
                  p["scenario_hash"], p["seed"], p["replications"],
                  json.dumps(p["facts"], sort_keys=True)) for p in plan])

    def code_versions(self, keys: Iterable[str]) -> dict[str, str]:
        """Code version of each finished point among ``keys``."""
        keys = list(keys)
        out: dict[str, str] = {}
        for i in range(0, len(keys), 500):
            chunk = keys[i:i + 500]
            marks = ",".join("?" * len(chunk))
            out.update(self.db.execute(
                f"SELECT point_key, code_version FROM points WHERE point_key IN ({marks})",
                chunk).fetchall())
        return out

    def finished_keys(self) -> set[str]:
        """Keys of the points whose results are complete."""
        return {r[0] for r in self.db.execute("SELECT point_key FROM points")}

    def claim(self, keys: Iterable[str], owner: str, *, now: float | None = None,
              alive=None) -> set[str]:
        """Claim unfinished points for ``owner``; returns the keys this owner now holds.

        A point claimed by another owner that is still alive (``alive(owner)``, default:
        same host and the process exists) and not older than :data:`CLAIM_TTL_S` is
        left to it, so two sweeps on one store do not compute the same point.
        """
        now = time.time() if now is None else now
        alive = alive or owner_alive
        got: set[str] = set()
        with self._transaction():
            done = self.finished_keys()
            held = dict((k, (o, t)) for k, o, t in self.db.execute(
                "SELECT point_key, owner, claimed_unix FROM claims"))
            for key in keys:
                if key in done:
                    continue
                other = held.get(key)
                if other and other[0] != owner and now - other[1] < CLAIM_TTL_S and \
                        alive(other[0]):
                    continue
                self.db.execute("INSERT OR REPLACE INTO claims VALUES (?,?,?)",
                                (key, owner, now))
                got.add(key)
        return got

    def release(self, owner: str) -> None:
        """Drop every claim of ``owner`` (its sweep ended or was interrupted)."""
        with self._transaction():
            self.db.execute("DELETE FROM claims WHERE owner=?", (owner,))

    def claimed_by_others(self, keys: Iterable[str], owner: str) -> set[str]:
        """Which of ``keys`` another live owner holds."""
        return {k for k, o, t in self.db.execute(
            "SELECT point_key, owner, claimed_unix FROM claims")
            if k in set(keys) and o != owner and owner_alive(o)
            and time.time() - t < CLAIM_TTL_S}

    def record_point(self, *, point_key: str, scenario_hash: str, seed: int, engine: str,
                     code_version: str, rows: Iterable[tuple], elapsed_s: float,
                     worker: str) -> bool:
        """Write a finished point and its replication rows in one transaction.

        ``rows`` are ``(replication, wall_s, useful_s, checkpoint_s, lost_s, restart_s,
        waiting_s, failures, checkpoints, ettr, run_s)``. Returns False (and writes
        nothing) when the point is already there.
        """
        rows = list(rows)
        with self._transaction():
            if self.db.execute("SELECT 1 FROM points WHERE point_key=?",
                               (point_key,)).fetchone():
                return False
            self.db.executemany(
                "INSERT INTO results VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                [(point_key, r[0], scenario_hash, seed, code_version, *r[1:]) for r in rows])
            self.db.execute("INSERT INTO points VALUES (?,?,?,?,?,?,?,?,?)",
                            (point_key, scenario_hash, seed, len(rows), engine, code_version,
                             elapsed_s, worker, time.time()))
            self.db.execute("DELETE FROM claims WHERE point_key=?", (point_key,))
        return True

    def _transaction(self):
        db = self.db

        class _Tx:
            def __enter__(self_inner):
                db.execute("BEGIN IMMEDIATE")

            def __exit__(self_inner, exc_type, exc, tb):
                db.execute("COMMIT" if exc_type is None else "ROLLBACK")
                return False

        return _Tx()

    # ------------------------------------------------------------------ reading
    def sweeps(self) -> list[dict]:
        """Every sweep, oldest first."""
        cur = self.db.execute("SELECT * FROM sweeps ORDER BY created_unix, sweep_id")
        cols = [c[0] for c in cur.description]
        out = []
        for row in cur:
            d = dict(zip(cols, row, strict=True))
            d["grid"] = self._json(d.pop("grid_json"), "a sweep's grid")
            out.append(d)
        return out

    def sweep(self, sweep_id: str | None = None) -> dict:
        """One sweep by id or id prefix (default: the latest)."""
        all_ = self.sweeps()
        if not all_:
            raise InputError("the database holds no sweep", source=str(self.path))
        if sweep_id is None:
            return all_[-1]
        match = [s for s in all_ if s["sweep_id"].startswith(sweep_id)]
        if len(match) != 1:
            raise InputError(f"{'no' if not match else 'more than one'} sweep matches "
                             f"{sweep_id!r}", source="--sweep")
        return match[0]

    def _json(self, text: str, what: str):
        try:
            return json.loads(text)
        except (TypeError, ValueError):
            raise InputError(f"damaged results database: {what} is not JSON",
                             source=str(self.path)) from None

    def plan(self, sweep_id: str) -> list[dict]:
        """The sweep's points in index order, each with params, facts and completion."""
        cur = self.db.execute(
            "SELECT sp.idx, sp.point_key, sp.params_json, sp.scenario_hash, sp.seed, "
            "sp.replications, sp.facts_json, p.point_key IS NOT NULL, p.elapsed_s "
            "FROM sweep_points sp LEFT JOIN points p ON p.point_key = sp.point_key "
            "WHERE sp.sweep_id=? ORDER BY sp.idx", (sweep_id,))
        return [{"idx": r[0], "point_key": r[1], "params": self._json(r[2], "a point's params"),
                 "scenario_hash": r[3], "seed": r[4], "replications": r[5],
                 "facts": self._json(r[6], "a point's facts"), "done": bool(r[7]),
                 "elapsed_s": r[8]} for r in cur]

    def outcomes(self, point_key: str, columns: Sequence[str]) -> list[tuple]:
        """The replication rows of one point, in replication order."""
        cols = ", ".join(_checked(columns))
        return self.db.execute(f"SELECT {cols} FROM results WHERE point_key=? "
                               "ORDER BY replication", (point_key,)).fetchall()

    def count_rows(self) -> int:
        return self.db.execute("SELECT COUNT(*) FROM results").fetchone()[0]

    def export_rows(self, sweep_id: str | None = None):
        """Rows of :data:`EXPORT_COLUMNS` (every sweep, or one), in sweep/point/replication order."""
        where = "WHERE sp.sweep_id=?" if sweep_id else ""
        args = (sweep_id,) if sweep_id else ()
        cols = ", ".join(f"r.{c}" for c in EXPORT_COLUMNS[3:])
        return self.db.execute(
            f"SELECT sp.sweep_id, sp.idx, sp.params_json, {cols} FROM sweep_points sp "
            f"JOIN results r ON r.point_key = sp.point_key {where} "
            "ORDER BY sp.sweep_id, sp.idx, r.replication", args)


_COLUMN_NAMES = set(EXPORT_COLUMNS)


def _checked(columns: Sequence[str]) -> Sequence[str]:
    for c in columns:
        if c not in _COLUMN_NAMES:
            raise ValueError(f"unknown results column {c!r}")
    return columns


def owner_id() -> str:
    """This process as a claim owner: ``host:pid``."""
    import os
    import socket
    return f"{socket.gethostname()}:{os.getpid()}"


def owner_alive(owner: str) -> bool:
    """Whether a claim's owner may still be running: another host is assumed alive
    (until the claim goes stale); on this host, whether the process exists."""
    import os
    import socket
    host, _, pid = owner.rpartition(":")
    if host != socket.gethostname():
        return True
    try:
        os.kill(int(pid), 0)
    except (ValueError, ProcessLookupError):
        return False
    except PermissionError:
        return True
    return True
