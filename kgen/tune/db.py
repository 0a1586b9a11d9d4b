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
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sqlite3
import threading
import time
import warnings
from pathlib import Path
from typing import Any, Iterator

SCHEMA = 1

_DDL = """
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT);
CREATE TABLE IF NOT EXISTS candidates (
    key TEXT NOT NULL, spec_key TEXT NOT NULL, spec TEXT NOT NULL, status TEXT NOT NULL,
    median_ms REAL, iqr_ms REAL, samples INTEGER, resources TEXT, reason TEXT, updated REAL,
    PRIMARY KEY (key, spec_key));
CREATE TABLE IF NOT EXISTS results (
    key TEXT NOT NULL, strategy TEXT NOT NULL, family TEXT NOT NULL, dtype TEXT NOT NULL,
    problem TEXT NOT NULL, bucket TEXT NOT NULL, device TEXT NOT NULL, arch TEXT NOT NULL,
    nvcc TEXT NOT NULL, kgen TEXT NOT NULL, best TEXT NOT NULL, best_ms REAL NOT NULL,
    summary TEXT NOT NULL, updated REAL NOT NULL,
    PRIMARY KEY (key, strategy));
CREATE INDEX IF NOT EXISTS results_by_device ON results (family, dtype, device, arch);
"""


def default_path() -> Path:
    from ..core.cache import default_dir, expand_path

    env = os.environ.get("KGEN_TUNE_DB")
    if env:
        return expand_path(env, "KGEN_TUNE_DB")

    return default_dir() / "tune.sqlite3"


def problem_key(family: str, dtype: str, problem: dict[str, Any], device: str, arch: str,
                nvcc: str, kgen: str) -> str:
    """The exact identity of a tuning problem. Any difference means a different entry."""
    blob = json.dumps({"schema": SCHEMA, "family": family, "dtype": dtype, "problem": problem,
                       "device": device, "arch": arch, "nvcc": nvcc, "kgen": kgen},
                      sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:32]


class TuneDB:
    """A handle on one database file. Cheap to create; opens its connection lazily.

    Every failure to use the file (read-only folder, corrupt file) degrades, after
    one warning, to an in-memory database: tuning still works, it is just not kept.
    """

    def __init__(self, path: str | os.PathLike | None = None):
        self.path = Path(path) if path is not None else default_path()
        self._conn: sqlite3.Connection | None = None
        self._lock = threading.Lock()
        self.persistent = True

    # -- connection -------------------------------------------------------------------
    def _connect(self) -> sqlite3.Connection:
        if self._conn is not None:
            return self._conn
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = self._open(str(self.path))
        except sqlite3.DatabaseError as exc:
            # A file that is not a database (or is damaged) is moved aside, not deleted:
            # it may hold someone's results worth rescuing.
            aside = self.path.with_name(f"{self.path.name}.broken-{int(time.time())}")
            with contextlib.suppress(OSError):
                os.replace(self.path, aside)
            warnings.warn(f"kgen: the tuning database {self.path} was unreadable ({exc}); moved it to "
                          f"{aside} and started a new one", RuntimeWarning, stacklevel=3)
            try:
                conn = self._open(str(self.path))
            except (sqlite3.Error, OSError) as exc2:
                conn = self._memory(exc2)
        except OSError as exc:
            conn = self._memory(exc)
        self._conn = conn
        return conn

    @staticmethod
    def _open(target: str) -> sqlite3.Connection:
        # isolation_level=None: we issue BEGIN IMMEDIATE ourselves, so that a writer takes
        # the write lock up front instead of failing half-way on a lock upgrade.
        conn = sqlite3.connect(target, timeout=60.0, isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA busy_timeout = 60000")
        if target != ":memory:":
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = NORMAL")
        conn.executescript(_DDL)
        conn.execute("INSERT OR IGNORE INTO meta VALUES ('schema', ?)", (str(SCHEMA),))
        return conn

    def _memory(self, exc: BaseException) -> sqlite3.Connection:
        warnings.warn(f"kgen: cannot use the tuning database {self.path} ({exc}); tuning results are kept "
                      "in memory for this process only", RuntimeWarning, stacklevel=4)
        self.persistent = False
        return self._open(":memory:")

    @contextlib.contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            conn = self._connect()
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            else:
                conn.execute("COMMIT")

    def _read(self, sql: str, args: tuple = ()) -> list[tuple]:
        with self._lock:
            return self._connect().execute(sql, args).fetchall()

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    # -- candidates -------------------------------------------------------------------
    def put_candidates(self, key: str, rows: list[dict[str, Any]]) -> None:
        """Insert or replace candidate records (dicts as made by autotune.Record.to_row)."""
        if not rows:
            return
        now = time.time()
        with self._write() as conn:
            conn.executemany(
                "INSERT OR REPLACE INTO candidates VALUES (?,?,?,?,?,?,?,?,?,?)",
                [(key, r["spec_key"], r["spec"], r["status"], r.get("median_ms"), r.get("iqr_ms"),
                  r.get("samples", 0), json.dumps(r.get("resources")), r.get("reason"), now) for r in rows])

    def candidates(self, key: str) -> list[dict[str, Any]]:
        rows = self._read("SELECT spec_key, spec, status, median_ms, iqr_ms, samples, resources, reason "
                          "FROM candidates WHERE key = ?", (key,))
        out = []
        for spec_key, spec, status, med, iqr, samples, resources, reason in rows:
            out.append({"spec_key": spec_key, "spec": spec, "status": status, "median_ms": med, "iqr_ms": iqr,
                        "samples": samples or 0, "resources": json.loads(resources) if resources else None,
                        "reason": reason})
        return out

    # -- results ----------------------------------------------------------------------
    def put_result(self, key: str, strategy: str, ident: dict[str, Any], best_json: str, best_ms: float,
                   summary: dict[str, Any]) -> None:
        with self._write() as conn:
            conn.execute(
                "INSERT OR REPLACE INTO results VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (key, strategy, ident["family"], ident["dtype"], json.dumps(ident["problem"], sort_keys=True),
                 json.dumps(list(ident["bucket"])), ident["device"], ident["arch"], ident["nvcc"], ident["kgen"],
                 best_json, float(best_ms), json.dumps(summary, sort_keys=True), time.time()))

    def result(self, key: str, strategy: str | None = None) -> dict[str, Any] | None:
        """The stored result for `key` (for `strategy`, or the most recent of any)."""
        if strategy is None:
            rows = self._read(f"SELECT {_RESULT_COLS} FROM results WHERE key = ? ORDER BY updated DESC LIMIT 1",
                              (key,))
        else:
            rows = self._read(f"SELECT {_RESULT_COLS} FROM results WHERE key = ? AND strategy = ?", (key, strategy))
        return _result_row(rows[0]) if rows else None

    def results_for_device(self, family: str, dtype: str, device: str, arch: str) -> list[dict[str, Any]]:
        """Every result tuned on this kind of device for this family and dtype, newest first."""
        rows = self._read(f"SELECT {_RESULT_COLS} FROM results WHERE family = ? AND dtype = ? AND device = ? "
                          "AND arch = ? ORDER BY updated DESC", (family, dtype, device, arch))
        return [_result_row(r) for r in rows]

    def all_results(self) -> list[dict[str, Any]]:
        return [_result_row(r) for r in self._read(f"SELECT {_RESULT_COLS} FROM results ORDER BY updated DESC")]

    def forget(self, key: str) -> None:
        with self._write() as conn:
            conn.execute("DELETE FROM candidates WHERE key = ?", (key,))
            conn.execute("DELETE FROM results WHERE key = ?", (key,))


_RESULT_COLS = "key, strategy, family, dtype, problem, bucket, device, arch, nvcc, kgen, best, best_ms, summary, updated"


def _result_row(row: tuple) -> dict[str, Any]:
    (key, strategy, family, dtype, problem, bucket, device, arch, nvcc, kgen, best, best_ms, summary,
     updated) = row
    return {"key": key, "strategy": strategy, "family": family, "dtype": dtype, "problem": json.loads(problem),
            "bucket": tuple(json.loads(bucket)), "device": device, "arch": arch, "nvcc": nvcc, "kgen": kgen,
            "best": best, "best_ms": best_ms, "summary": json.loads(summary), "updated": updated}


_open_dbs: dict[str, TuneDB] = {}
_open_lock = threading.Lock()


def open_db(path: str | os.PathLike | None = None) -> TuneDB:
    """A shared handle per path within this process (one connection per file)."""
    p = str(Path(path) if path is not None else default_path())
    with _open_lock:
        db = _open_dbs.get(p)
        if db is None:
            db = _open_dbs[p] = TuneDB(p)
        return db
