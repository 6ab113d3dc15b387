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

A new store is created inside one ``BEGIN IMMEDIATE`` transaction, so two sweeps
starting on the same new file at the same instant do not race: one creates the tables,
the other waits for it and finds a complete store. A write that fails because the disk
is full (or the file may grow no further) rolls back and is one line
(:class:`StoreWriteError`, exit 1): every point committed before it stays. A store
opened read-only (reports, exports) creates no ``-wal``/``-shm`` files beside it: with
none there it is read as an immutable file; with a writer's files there, through them.
"""

from __future__ import annotations

import json
import math
import sqlite3
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter, ValidationError

from testbed.errors import InputError, TestbedError
from testbed.io.schema import Line

SCHEMA_VERSION = 2
#: The ``meta`` row that marks a database as a testbed results store.
APPLICATION = "testbed-results"
#: Tables of a results store (a database holding other tables is not ours to touch).
TABLES = {"meta", "sweeps", "sweep_points", "points", "results", "claims"}
#: A claim older than this is stale (its sweep died without releasing it).
CLAIM_TTL_S = 6 * 3600.0
#: How long opening a store waits for another process that is creating it.
OPEN_WAIT_S = 30.0


def sqlite_busy(exc: sqlite3.OperationalError) -> bool:
    """Whether SQLite refused because another connection holds the database."""
    text = str(exc)
    return "locked" in text or "busy" in text


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


class StoreWriteError(TestbedError):
    """A write to the store failed for a reason that is not the input's (a full disk, a
    file-size limit, an I/O error): one line, exit 1; the transaction was rolled back."""


def write_error(path: Path | str, exc: sqlite3.Error) -> StoreWriteError:
    """The one line of a failed write (the store keeps what was committed before)."""
    return StoreWriteError(f"{path}: cannot write the results database: {exc} (every point "
                           "stored before is kept; free space and rerun to resume)")


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
        deadline = time.monotonic() + OPEN_WAIT_S
        self._new = not self.path.exists()
        while True:
            try:
                self.db = self._connect()
                self._check_or_create(create and not readonly)
                break
            except sqlite3.OperationalError as exc:
                # another process is creating the store or switching it to WAL, which
                # SQLite reports as busy at once, without its busy timeout: wait for it
                if sqlite_busy(exc) and time.monotonic() < deadline:
                    self._close_quietly()
                    time.sleep(0.05)
                    continue
                self._close_quietly()
                self._remove_if_new()
                raise InputError(f"not a readable SQLite database: {exc}",
                                 source=str(path)) from None
            except sqlite3.DatabaseError as exc:
                self._close_quietly()
                raise InputError(f"not a readable SQLite database: {exc}",
                                 source=str(path)) from None

    def _remove_if_new(self) -> None:
        """A store this command failed to create leaves no file behind."""
        if self._new:
            for suffix in ("", "-wal", "-shm", "-journal"):
                Path(f"{self.path}{suffix}").unlink(missing_ok=True)

    def _close_quietly(self) -> None:
        db = getattr(self, "db", None)
        if db is not None:
            try:
                db.close()
            except sqlite3.Error:
                pass

    @classmethod
    def open_readonly(cls, path: str | Path) -> Store:
        """An existing store opened read-only (reports and exports)."""
        return cls(path, create=False, readonly=True)

    def _connect(self) -> sqlite3.Connection:
        if self.readonly:
            from urllib.parse import quote
            base = f"file:{quote(str(self.path.resolve()))}?mode=ro"
            side = [Path(f"{self.path}{suffix}").exists() for suffix in ("-wal", "-shm")]
            if not any(side):
                # no writer's files: read the file as immutable, which makes no -wal/-shm
                # (a read-only open of a WAL database would create them)
                return sqlite3.connect(base + "&immutable=1", uri=True,
                                       isolation_level=None, timeout=30.0)
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

    def _create(self) -> None:
        """Create the tables of a new store in one exclusive transaction: a second
        process creating the same store waits for it, then finds every table there."""
        self.db.execute("PRAGMA journal_mode=WAL")
        try:
            self.db.execute("BEGIN IMMEDIATE")
            if not self._tables():
                for statement in _SCHEMA.split(";"):
                    if statement.strip():
                        self.db.execute(statement)
                self.db.executemany("INSERT OR IGNORE INTO meta VALUES (?, ?)",
                                    [("application", APPLICATION),
                                     ("schema_version", str(SCHEMA_VERSION))])
            self.db.execute("COMMIT")
        except BaseException:
            _rollback(self.db)
            raise

    def _check_or_create(self, create: bool) -> None:
        """Refuse foreign databases and other schema versions; create a new store."""
        tables = self._tables()
        if not tables and create:
            self._create()
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

    @contextmanager
    def _transaction(self) -> Iterator[None]:
        """One write transaction; a failed write (full disk) rolls back and raises
        :class:`StoreWriteError`."""
        db = self.db
        # a signal (SIGTERM, Ctrl-C) that landed between an earlier BEGIN and its guard
        # left that transaction open: end it, or this BEGIN fails within it
        _rollback(db)
        try:
            try:
                db.execute("BEGIN IMMEDIATE")
                yield
                db.execute("COMMIT")
            except BaseException:
                _rollback(db)
                raise
        except sqlite3.OperationalError as exc:
            _rollback(db)
            if sqlite_busy(exc):
                raise StoreWriteError(f"{self.path}: the results database stayed locked by "
                                      f"another process ({exc})") from None
            raise write_error(self.path, exc) from None

    # ------------------------------------------------------------------ reading
    def sweeps(self) -> list[dict]:
        """Every sweep, oldest first."""
        cur = self.db.execute("SELECT * FROM sweeps ORDER BY created_unix, sweep_id")
        cols = [c[0] for c in cur.description]
        out = []
        for row in cur:
            d = dict(zip(cols, row, strict=True))
            d["grid"] = self._json(d.pop("grid_json"), "a sweep's grid", _GRID)
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

    def _json(self, text: Any, what: str, schema: TypeAdapter):
        """A JSON column through the input boundary (depth, digits, finite numbers) and
        its schema: a store changed behind the testbed's back is one line."""
        from testbed.io.read import parse_json
        if not isinstance(text, str):
            raise InputError(f"damaged results database: {what} is not JSON text",
                             source=str(self.path))
        try:
            return schema.validate_python(parse_json(text, source=str(self.path)))
        except (InputError, ValidationError) as exc:
            why = exc.message if isinstance(exc, InputError) else \
                exc.errors(include_url=False)[0]["msg"]
            raise InputError(f"damaged results database: {what}: {why}",
                             source=str(self.path)) from None

    def plan(self, sweep_id: str) -> list[dict]:
        """The sweep's points in index order, each with params, facts and completion."""
        cur = self.db.execute(
            "SELECT sp.idx, sp.point_key, sp.params_json, sp.scenario_hash, sp.seed, "
            "sp.replications, sp.facts_json, p.point_key IS NOT NULL, p.elapsed_s "
            "FROM sweep_points sp LEFT JOIN points p ON p.point_key = sp.point_key "
            "WHERE sp.sweep_id=? ORDER BY sp.idx", (sweep_id,))
        out = [{"idx": r[0], "point_key": r[1],
                "params": self._json(r[2], "a point's params", _PARAMS),
                "scenario_hash": r[3], "seed": r[4], "replications": r[5],
                "facts": self._facts(self._json(r[6], "a point's facts", _PARAMS)),
                "done": bool(r[7]), "elapsed_s": r[8]} for r in cur]
        for p in out:
            if not isinstance(p["idx"], int) or not isinstance(p["seed"], int):
                raise InputError("damaged results database: a point's index or seed is not "
                                 "a whole number", source=str(self.path))
        return out

    def point_params(self, text: Any) -> dict:
        """A point's grid values from its ``params_json`` column (validated)."""
        return self._json(text, "a point's params", _PARAMS)

    def _facts(self, data: dict) -> dict:
        """A point's resolved facts, checked to be what :class:`SpecFacts` reads."""
        from testbed.resilience.spec import SpecFacts
        try:
            SpecFacts.from_dict(data)
        except (TypeError, ValueError, KeyError, AttributeError):
            raise InputError("damaged results database: a point's facts are not the facts "
                             "of a sweep point", source=str(self.path)) from None
        return data

    def outcomes(self, point_key: str, columns: Sequence[str]) -> list[tuple]:
        """The replication rows of one point, in replication order."""
        cols = ", ".join(_checked(columns))
        rows = self.db.execute(f"SELECT {cols} FROM results WHERE point_key=? "
                               "ORDER BY replication", (point_key,)).fetchall()
        for row in rows:
            if not all(isinstance(v, (int, float)) and not isinstance(v, bool)
                       and math.isfinite(v) for v in row):
                raise InputError("damaged results database: a result row holds a value that "
                                 "is not a finite number", source=str(self.path))
        return rows

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
#: The schemas of the JSON columns: a sweep's grid (``[[key, [value texts]], …]``) and a
#: point's parameters and facts (objects).
_GRID = TypeAdapter(list[tuple[Line, list[Line]]])
_PARAMS = TypeAdapter(dict[str, Any])


def _rollback(db: sqlite3.Connection) -> None:
    """Roll back the open transaction, if SQLite has not already done so."""
    try:
        if db.in_transaction:
            db.execute("ROLLBACK")
    except sqlite3.Error:
        pass


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
