"""The tuning database: what the autotuner measured, kept between runs and processes.

SQLite in the cache folder (default_dir()/tune.sqlite3, or $KGEN_TUNE_DB). SQLite
gives us atomic transactions and locking between processes for free: several
`kgen tune` runs, or a tune and a program dispatching from the same database,
can share it. WAL mode lets readers go on while one process writes.

Two tables:
  candidates  one row per (problem key, spec): status, times, ptxas resources,
              the reason a candidate failed. A run writes each as it is measured,
              so an interrupted run resumes where it stopped.
  results     one row per (problem key, strategy): the winner, its time and how
              sure the tuner was. Dispatch reads these.

The problem key covers family, dtype, problem, device name, compute capability,
nvcc version and kgen version: a result is only reused as is where all of them
match. Dispatch is looser on purpose (nearest shape, any version on the same
device), because a tuned spec stays a sound choice after a kgen upgrade.

Nothing a user tuned is lost by opening, reading or waiting:
  * readers (open_db(path, read_only=True): `kgen tune list`, dispatch) open the file
    read-only and never write, so a read-only file or folder serves its results;
  * a writer waits at most `timeout` seconds ($KGEN_TUNE_DB_TIMEOUT, default 60) for
    another process' lock, then raises TuneDBLockedError naming the file;
  * only a file SQLite reports as damaged ("file is not a database", "malformed") is
    moved aside, under a new name that never replaces another file, and a writer then
    starts an empty database; a read-only file or folder, a full disk or a file that
    cannot be opened make a writer keep its new results in memory (one warning), with
    the file's own results still visible;
  * a row that does not hold what its columns should is skipped, with one warning per
    row naming the database and the row's key.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import sqlite3
import threading
import time
import urllib.parse
import warnings
from pathlib import Path
from typing import Any, Callable

SCHEMA = 1
DEFAULT_TIMEOUT_S = 60.0

_TABLES = {
    "meta": "CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT)",
    "candidates": """CREATE TABLE IF NOT EXISTS candidates (
    key TEXT NOT NULL, spec_key TEXT NOT NULL, spec TEXT NOT NULL, status TEXT NOT NULL,
    median_ms REAL, iqr_ms REAL, samples INTEGER, resources TEXT, reason TEXT, updated REAL,
    PRIMARY KEY (key, spec_key))""",
    "results": """CREATE TABLE IF NOT EXISTS results (
    key TEXT NOT NULL, strategy TEXT NOT NULL, family TEXT NOT NULL, dtype TEXT NOT NULL,
    problem TEXT NOT NULL, bucket TEXT NOT NULL, device TEXT NOT NULL, arch TEXT NOT NULL,
    nvcc TEXT NOT NULL, kgen TEXT NOT NULL, best TEXT NOT NULL, best_ms REAL NOT NULL,
    summary TEXT NOT NULL, updated REAL NOT NULL,
    PRIMARY KEY (key, strategy))""",
}
_INDEX = "CREATE INDEX IF NOT EXISTS results_by_device ON results (family, dtype, device, arch)"
_CANDIDATE_COLS = ("key", "spec_key", "spec", "status", "median_ms", "iqr_ms", "samples", "resources", "reason",
                   "updated")
_RESULT_COLS = ("key", "strategy", "family", "dtype", "problem", "bucket", "device", "arch", "nvcc", "kgen", "best",
                "best_ms", "summary", "updated")
_COLUMNS = {"meta": ("name", "value"), "candidates": _CANDIDATE_COLS, "results": _RESULT_COLS}


class TuneDBError(RuntimeError):
    """The tuning database cannot be used as asked. The message names the file and what
    to do; `path` holds the file."""

    def __init__(self, message: str, path: str | os.PathLike | None = None):
        super().__init__(message)
        self.path = Path(path) if path is not None else None


class TuneDBLockedError(TuneDBError):
    """Another process held the database's lock for longer than the timeout."""


class TuneDBWarning(RuntimeWarning):
    """Something in the tuning database was skipped or is not kept (the message says what)."""


def lock_timeout() -> float:
    """Seconds to wait for another process' lock: $KGEN_TUNE_DB_TIMEOUT, default 60."""
    raw = os.environ.get("KGEN_TUNE_DB_TIMEOUT", "").strip()
    if not raw:
        return DEFAULT_TIMEOUT_S
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value >= 0):
        raise TuneDBError(f"KGEN_TUNE_DB_TIMEOUT={raw!r} is not allowed: a number of seconds, 0 or more")
    return value


def default_path() -> Path:
    env = os.environ.get("KGEN_TUNE_DB")
    if env:
        try:
            return Path(env).expanduser()
        except RuntimeError as exc:  # ~user that does not exist
            raise TuneDBError(f"KGEN_TUNE_DB={env!r} cannot be used: {exc}; give an absolute path") from None
    from ..core.cache import default_dir

    return default_dir() / "tune.sqlite3"


def problem_key(family: str, dtype: str, problem: dict[str, Any], device: str, arch: str,
                nvcc: str, kgen: str) -> str:
    """The exact identity of a tuning problem. Any difference means a different entry."""
    blob = json.dumps({"schema": SCHEMA, "family": family, "dtype": dtype, "problem": problem,
                       "device": device, "arch": arch, "nvcc": nvcc, "kgen": kgen},
                      sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:32]


# -- what an SQLite error means ---------------------------------------------------------
# SQLite's primary result codes (https://sqlite.org/rescode.html); the sqlite3 module names
# them only from Python 3.11.
_KINDS = {26: "corrupt", 11: "corrupt",  # SQLITE_NOTADB, SQLITE_CORRUPT
          5: "busy", 6: "busy",  # SQLITE_BUSY, SQLITE_LOCKED
          8: "unwritable", 14: "unwritable", 13: "unwritable", 10: "unwritable",  # READONLY, CANTOPEN, FULL, IOERR
          3: "unwritable", 23: "unwritable"}  # SQLITE_PERM, SQLITE_AUTH


def _error_kind(exc: sqlite3.Error) -> str:
    """'corrupt', 'busy', 'unwritable' or 'other'."""
    code = getattr(exc, "sqlite_errorcode", None)  # Python 3.11+: the extended result code
    if code is not None:
        return _KINDS.get(code & 0xFF, "other")
    text = str(exc).lower()
    if "not a database" in text or "malformed" in text:
        return "corrupt"
    if "locked" in text or "busy" in text:
        return "busy"
    if any(w in text for w in ("readonly", "read-only", "unable to open", "disk is full", "disk i/o")):
        return "unwritable"
    return "other"


class _BadRow(Exception):
    pass


class TuneDB:
    """A handle on one database file. Cheap to create; opens its connection lazily.

    read_only=True: a reader. It opens the file read-only (a read-only file or folder is
    fine), never creates or changes it, and sees no rows while the file does not exist.
    Writes raise TuneDBError.

    read_only=False: a writer (the autotuner). It creates the file when missing. Where
    the file cannot be written (read-only file or folder, disk full) it keeps working on
    an in-memory copy of the file's contents after one warning (persistent becomes False).

    timeout: seconds to wait for another process' lock before TuneDBLockedError
    (default $KGEN_TUNE_DB_TIMEOUT or 60).
    """

    def __init__(self, path: str | os.PathLike | None = None, *, read_only: bool = False,
                 timeout: float | None = None):
        self.path = Path(path) if path is not None else default_path()
        self.read_only = read_only
        self.timeout = lock_timeout() if timeout is None else float(timeout)
        self._conn: sqlite3.Connection | None = None
        self._lock = threading.RLock()
        self.persistent = True
        self._reported: set[tuple] = set()

    # -- messages -------------------------------------------------------------------------
    def _locked(self, exc: BaseException) -> TuneDBLockedError:
        return TuneDBLockedError(
            f"the tuning database {self.path} is locked by another process ({exc}; waited {self.timeout:g} s). "
            "Another `kgen tune` or a program with an open write transaction is using it: run again when it "
            "is done, set KGEN_TUNE_DB_TIMEOUT to wait longer (seconds), or use another database "
            "(--db or KGEN_TUNE_DB)", self.path)

    def _failed(self, exc: BaseException, doing: str) -> TuneDBError:
        return TuneDBError(f"cannot {doing} the tuning database {self.path}: {exc}. Check the file, or use another "
                           "database (--db or KGEN_TUNE_DB)", self.path)

    def _warn(self, message: str) -> None:
        warnings.warn(message, TuneDBWarning, stacklevel=4)

    # -- connection -------------------------------------------------------------------
    def _check_path(self) -> None:
        if self.path.is_dir():
            raise TuneDBError(f"the tuning database {self.path} is a folder, not a file; give the path of a "
                              f"database file, e.g. {self.path / 'tune.sqlite3'} (--db or KGEN_TUNE_DB)", self.path)
        if self.path.exists() and not self.path.is_file():
            raise TuneDBError(f"the tuning database {self.path} is not a regular file; give the path of a database "
                              "file (--db or KGEN_TUNE_DB)", self.path)

    def _connection(self) -> sqlite3.Connection | None:
        """The open connection; None for a reader whose file does not exist (yet)."""
        if self._conn is None:
            self._check_path()
            self._conn = self._connect_reader() if self.read_only else self._connect_writer()
        return self._conn

    def _sqlite(self, target: str, uri: bool = False) -> sqlite3.Connection:
        # isolation_level=None: we issue BEGIN IMMEDIATE ourselves, so that a writer takes
        # the write lock up front instead of failing half-way on a lock upgrade.
        return sqlite3.connect(target, uri=uri, timeout=self.timeout, isolation_level=None, check_same_thread=False)

    def _open_read_only(self) -> tuple[sqlite3.Connection, set[str]]:
        """A read-only connection to the file and its tables, checked; raises sqlite3.Error
        or TuneDBError."""
        uri = "file:" + urllib.parse.quote(str(self.path.absolute())) + "?mode=ro"
        try:
            return self._checked(uri)
        except sqlite3.Error as exc:
            wal = Path(str(self.path) + "-wal")
            # A WAL database in a folder we cannot write: SQLite cannot make its shared-memory
            # file. With no write-ahead log beside it, nobody can be writing, and the main file
            # holds every committed row: read it as immutable.
            if _error_kind(exc) != "unwritable" or (wal.exists() and wal.stat().st_size > 0):
                raise
        return self._checked(uri + "&immutable=1")

    def _checked(self, uri: str) -> tuple[sqlite3.Connection, set[str]]:
        conn = self._sqlite(uri, uri=True)
        try:
            return conn, self._check_schema(conn, create=False)
        except BaseException:
            conn.close()
            raise

    def _connect_reader(self) -> sqlite3.Connection | None:
        if not self.path.exists():
            return None
        try:
            conn, tables = self._open_read_only()
        except sqlite3.Error as exc:
            raise self._reader_error(exc) from None
        if not {"candidates", "results"} <= tables:  # an empty file (or one being created): no rows yet
            conn.close()
            return None
        conn.execute("PRAGMA query_only = ON")
        return conn

    def _reader_error(self, exc: sqlite3.Error) -> TuneDBError:
        kind = _error_kind(exc)
        if kind == "busy":
            return self._locked(exc)
        if kind == "corrupt":
            return TuneDBError(f"the tuning database {self.path} is damaged ({exc}); nothing was changed. The next "
                               "`kgen tune` that writes to it moves it aside and starts a new one; or use another "
                               "database (--db or KGEN_TUNE_DB)", self.path)
        return self._failed(exc, "read")

    def _connect_writer(self) -> sqlite3.Connection:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            return self._memory(f"its folder cannot be created: {exc}", copy=False)
        try:
            return self._open_writer()
        except sqlite3.Error as exc:
            kind = _error_kind(exc)
            if kind == "busy":
                raise self._locked(exc) from None
            if kind == "unwritable":
                return self._memory(str(exc), copy=True)
            if kind != "corrupt":
                raise self._failed(exc, "open") from None
            first = exc
        aside = self._move_aside(first)
        if aside is None:
            return self._memory(f"it is damaged ({first}) and could not be moved aside", copy=False)
        self._warn(f"kgen: the tuning database {self.path} is damaged ({first}); moved it to {aside} (nothing "
                   "deleted) and started a new one")
        try:
            return self._open_writer()
        except sqlite3.Error as exc:
            if _error_kind(exc) == "busy":
                raise self._locked(exc) from None
            return self._memory(str(exc), copy=False)

    def _open_writer(self) -> sqlite3.Connection:
        conn = self._sqlite(str(self.path))
        try:
            self._check_schema(conn, create=True)
            conn.execute("PRAGMA synchronous = NORMAL")
        except BaseException:
            conn.close()
            raise
        return conn

    def _check_schema(self, conn: sqlite3.Connection, create: bool) -> set[str]:
        """Read the stored schema version and table layout; a writer creates what is
        missing (in a transaction: two processes may create a database at once).
        Returns the tables the database has."""
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if not tables:
            if not create:
                return tables  # an empty file: no rows
            with contextlib.suppress(sqlite3.OperationalError):  # WAL is a speed-up, not a need
                conn.execute("PRAGMA journal_mode = WAL")
        elif "meta" not in tables:
            raise TuneDBError(f"{self.path} is an SQLite database but not a kgen tuning database (tables "
                              f"{sorted(tables)}, no kgen schema); nothing was changed. Use another database "
                              "(--db or KGEN_TUNE_DB)", self.path)
        else:
            self._check_version(conn)
        missing = [t for t in _TABLES if t not in tables]
        if missing and create:
            conn.execute("BEGIN IMMEDIATE")
            try:
                for name in _TABLES:
                    conn.execute(_TABLES[name])
                conn.execute(_INDEX)
                conn.execute("INSERT OR IGNORE INTO meta (name, value) VALUES ('schema', ?)", (str(SCHEMA),))
                conn.execute("COMMIT")
            except BaseException:
                with contextlib.suppress(sqlite3.Error):
                    conn.execute("ROLLBACK")
                raise
            tables |= set(_TABLES)
            self._check_version(conn)
        for table, cols in _COLUMNS.items():
            if table in tables:
                have = {r[1] for r in conn.execute(f"PRAGMA table_info({table})")}
                lost = [c for c in cols if c not in have]
                if lost:
                    raise TuneDBError(f"the tuning database {self.path} has a table {table!r} without the columns "
                                      f"{lost}; it was not written by this kgen. Nothing was changed; use another "
                                      "database (--db or KGEN_TUNE_DB)", self.path)
        return tables

    def _check_version(self, conn: sqlite3.Connection) -> None:
        row = conn.execute("SELECT value FROM meta WHERE name = 'schema'").fetchone()
        if row is None:
            raise TuneDBError(f"{self.path} has no kgen schema version; it is not a kgen tuning database. Nothing "
                              "was changed; use another database (--db or KGEN_TUNE_DB)", self.path)
        try:
            version = int(row[0])
        except (TypeError, ValueError):
            version = None
        if version is None or version < 1:
            raise TuneDBError(f"the tuning database {self.path} has the schema version {row[0]!r}, which no kgen "
                              "writes. Nothing was changed; use another database (--db or KGEN_TUNE_DB)", self.path)
        if version > SCHEMA:
            raise TuneDBError(f"the tuning database {self.path} was written by a newer kgen (schema {version}; "
                              f"this kgen reads schema {SCHEMA}). Nothing was changed: upgrade kgen, or use another "
                              "database (--db or KGEN_TUNE_DB)", self.path)

    def _move_aside(self, exc: BaseException) -> Path | None:
        """Rename a damaged file to a name no other file has (hard link, then unlink: an
        existing file is never replaced). None when it cannot be moved."""
        try:
            before = os.stat(self.path)
        except OSError:
            return None
        stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
        base = f"{self.path.name}.broken-{stamp}-{time.time_ns() % 10**9:09d}-{os.getpid()}"
        for attempt in range(1000):
            aside = self.path.with_name(base if attempt == 0 else f"{base}-{attempt}")
            if _link_new(self.path, aside, before):
                break
        else:
            return None
        for suffix in ("-wal", "-journal"):  # they may hold committed pages of the damaged file
            side = Path(str(self.path) + suffix)
            with contextlib.suppress(OSError):
                if side.exists():
                    _link_new(side, Path(str(aside) + suffix), os.stat(side))
        return aside

    def _memory(self, reason: str, copy: bool) -> sqlite3.Connection:
        """Go on in memory, with a copy of what the file holds where it can be read."""
        conn = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
        copied = ""
        if copy and self.path.is_file():
            try:
                source, _ = self._open_read_only()
                with contextlib.closing(source):
                    source.backup(conn)
                copied = " (its stored results are still used)"
            except (sqlite3.Error, TuneDBError) as exc:
                copied = f" (its stored results could not be read either: {exc})"
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        for name in _TABLES:
            if name not in tables:
                conn.execute(_TABLES[name])
        conn.execute("INSERT OR IGNORE INTO meta (name, value) VALUES ('schema', ?)", (str(SCHEMA),))
        self.persistent = False
        self._warn(f"kgen: cannot write the tuning database {self.path} ({reason}); new tuning results are kept in "
                   f"memory for this process only{copied}. To keep them, make the file and its folder writable "
                   "or use another database (--db or KGEN_TUNE_DB)")
        return conn

    # -- reading and writing ------------------------------------------------------------
    def _write(self, work: Callable[[sqlite3.Connection], object]) -> None:
        if self.read_only:
            raise TuneDBError(f"the tuning database {self.path} was opened read-only; open it with "
                              "open_db(path) to write", self.path)
        with self._lock:
            conn = self._connection()
            assert conn is not None  # only a reader goes without a connection
            try:
                _transaction(conn, work)
                return
            except sqlite3.Error as exc:
                kind = _error_kind(exc)
                if kind == "busy":
                    raise self._locked(exc) from None
                if kind != "unwritable" or not self.persistent:
                    raise self._failed(exc, "write") from None
                reason = str(exc)
            # The file stopped taking writes (disk full, made read-only): go on in memory.
            self._conn = self._memory(reason, copy=True)
            conn.close()
            _transaction(self._conn, work)

    def _read(self, sql: str, args: tuple = ()) -> list[tuple]:
        with self._lock:
            conn = self._connection()
            if conn is None:
                return []
            try:
                return conn.execute(sql, args).fetchall()
            except sqlite3.Error as exc:
                raise self._reader_error(exc) from None

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def _skip(self, table: str, ident: tuple, why: str) -> None:
        """One warning per bad row and handle: name the database, the row and the fault."""
        if (table, ident) in self._reported:
            return
        self._reported.add((table, ident))
        names = ("key", "strategy") if table == "results" else ("key", "spec_key")
        where = ", ".join(f"{n}={v!r}" for n, v in zip(names, ident))
        warnings.warn(f"kgen: skipped a damaged row of the tuning database {self.path}: {table} row {where}: {why}",
                      TuneDBWarning, stacklevel=4)

    # -- candidates -------------------------------------------------------------------
    def put_candidates(self, key: str, rows: list[dict[str, Any]]) -> None:
        """Insert or replace candidate records (dicts as made by Record.to_row)."""
        if not rows:
            return
        now = time.time()
        values = [(key, r["spec_key"], r["spec"], r["status"], r.get("median_ms"), r.get("iqr_ms"),
                   r.get("samples", 0), json.dumps(r.get("resources")), r.get("reason"), now) for r in rows]
        sql = _insert("candidates", _CANDIDATE_COLS)
        self._write(lambda conn: conn.executemany(sql, values))

    def candidates(self, key: str) -> list[dict[str, Any]]:
        rows = self._read(f"SELECT {', '.join(_CANDIDATE_COLS)} FROM candidates WHERE key = ?", (key,))
        out = []
        for row in rows:
            try:
                out.append(_candidate_row(row))
            except _BadRow as why:
                self._skip("candidates", (row[0], row[1]), str(why))
        return out

    # -- results ----------------------------------------------------------------------
    def put_result(self, key: str, strategy: str, ident: dict[str, Any], best_json: str, best_ms: float,
                   summary: dict[str, Any]) -> None:
        values = (key, strategy, ident["family"], ident["dtype"], json.dumps(ident["problem"], sort_keys=True),
                  json.dumps(list(ident["bucket"])), ident["device"], ident["arch"], ident["nvcc"], ident["kgen"],
                  best_json, float(best_ms), json.dumps(summary, sort_keys=True), time.time())
        sql = _insert("results", _RESULT_COLS)
        self._write(lambda conn: conn.execute(sql, values))

    def _results(self, where: str, args: tuple, suffix: str = "") -> list[dict[str, Any]]:
        rows = self._read(f"SELECT {', '.join(_RESULT_COLS)} FROM results {where} {suffix}", args)
        out = []
        for row in rows:
            try:
                out.append(_result_row(row))
            except _BadRow as why:
                self._skip("results", (row[0], row[1]), str(why))
        return out

    def result(self, key: str, strategy: str | None = None) -> dict[str, Any] | None:
        """The stored result for `key` (for `strategy`, or the most recent of any)."""
        if strategy is None:
            rows = self._results("WHERE key = ?", (key,), "ORDER BY updated DESC")
        else:
            rows = self._results("WHERE key = ? AND strategy = ?", (key, strategy))
        return rows[0] if rows else None

    def results_for_device(self, family: str, dtype: str, device: str, arch: str) -> list[dict[str, Any]]:
        """Every result tuned on this kind of device for this family and dtype, newest first."""
        return self._results("WHERE family = ? AND dtype = ? AND device = ? AND arch = ?",
                             (family, dtype, device, arch), "ORDER BY updated DESC")

    def all_results(self) -> list[dict[str, Any]]:
        return self._results("", (), "ORDER BY updated DESC")

    def forget(self, key: str) -> None:
        def work(conn: sqlite3.Connection) -> None:
            conn.execute("DELETE FROM candidates WHERE key = ?", (key,))
            conn.execute("DELETE FROM results WHERE key = ?", (key,))

        self._write(work)


def _transaction(conn: sqlite3.Connection, work: Callable[[sqlite3.Connection], object]) -> None:
    conn.execute("BEGIN IMMEDIATE")
    try:
        work(conn)
    except BaseException:
        with contextlib.suppress(sqlite3.Error):
            conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def _insert(table: str, cols: tuple[str, ...]) -> str:
    return f"INSERT OR REPLACE INTO {table} ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})"


def _link_new(src: Path, dst: Path, before: os.stat_result) -> bool:
    """Give `src` the new name `dst` without replacing anything at `dst`; False when `dst`
    is taken. `src` is only unlinked while it is still the file seen as `before`."""
    try:
        os.link(src, dst)
    except FileExistsError:
        return False
    except OSError:
        # No hard links here: reserve the name exclusively, then rename onto the reservation.
        try:
            fd = os.open(dst, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
        except FileExistsError:
            return False
        os.close(fd)
        os.replace(src, dst)
        return True
    now = os.stat(src)
    if (now.st_dev, now.st_ino) == (before.st_dev, before.st_ino):
        os.unlink(src)
    return True


# -- rows: checked column by column, a bad one is skipped by the caller --------------------
def _text(name: str, value: Any) -> str:
    if not isinstance(value, str):
        raise _BadRow(f"{name} is {_describe(value)}, not text")
    return value


def _number(name: str, value: Any, optional: bool = False) -> float | None:
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise _BadRow(f"{name} is {_describe(value)}, not a finite number")
    return float(value)


def _json(name: str, value: Any, kind: type, optional: bool = False) -> Any:
    if value is None and optional:
        return None
    text = _text(name, value)
    try:
        parsed = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise _BadRow(f"{name} is not valid JSON ({exc})") from None
    if parsed is None and optional:
        return None
    if not isinstance(parsed, kind):
        raise _BadRow(f"{name} is a JSON {type(parsed).__name__}, not a JSON "
                      f"{'object' if kind is dict else 'list'}")
    return parsed


def _describe(value: Any) -> str:
    text = repr(value)
    return f"{type(value).__name__} {text[:40] + '...' if len(text) > 40 else text}"


def _result_row(row: tuple) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, value in zip(_RESULT_COLS, row):
        if name == "problem":
            out[name] = _json(name, value, dict)
        elif name == "bucket":
            bucket = _json(name, value, list)
            for v in bucket:
                if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                    raise _BadRow(f"bucket {bucket!r} holds {v!r}; it must hold finite numbers")
            out[name] = tuple(bucket)
        elif name == "summary":
            summary = _json(name, value, dict)
            if not isinstance(summary.get("counts", {}), dict):
                raise _BadRow("summary's counts is not a JSON object")
            out[name] = summary
        elif name in ("best_ms", "updated"):
            out[name] = _number(name, value)
        else:
            out[name] = _text(name, value)
    return out


def _candidate_row(row: tuple) -> dict[str, Any]:
    _, spec_key, spec, status, med, iqr, samples, resources, reason, _ = row
    if samples is not None and (isinstance(samples, bool) or not isinstance(samples, int) or samples < 0):
        raise _BadRow(f"samples is {_describe(samples)}, not a count")
    return {"spec_key": _text("spec_key", spec_key), "spec": _text("spec", spec), "status": _text("status", status),
            "median_ms": _number("median_ms", med, optional=True), "iqr_ms": _number("iqr_ms", iqr, optional=True),
            "samples": samples or 0, "resources": _json("resources", resources, dict, optional=True),
            "reason": None if reason is None else _text("reason", reason)}


_open_dbs: dict[tuple[str, bool], TuneDB] = {}
_open_lock = threading.Lock()


def open_db(path: str | os.PathLike | None = None, read_only: bool = False) -> TuneDB:
    """A shared handle per (path, read_only) within this process (one connection each).

    read_only=True for lookups (dispatch, `kgen tune list`): never creates, changes or
    moves the file. read_only=False for the autotuner, which writes results."""
    p = str(Path(path) if path is not None else default_path())
    with _open_lock:
        db = _open_dbs.get((p, read_only))
        if db is None:
            db = _open_dbs[(p, read_only)] = TuneDB(p, read_only=read_only)
        return db
