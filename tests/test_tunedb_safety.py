"""The tuning database never loses what a user tuned: not under another process' lock,
not on a read-only file or folder, not on a folder given as the database, not on bad
rows, and a damaged file is moved aside under a name that never replaces another.

Permission cases run in a child process as an unprivileged user (root ignores file
modes): the child imports what it needs, then drops to `nobody` before it touches the
database. Run as a normal user, the child simply runs as that user.
"""
from __future__ import annotations

import contextlib
import json
import os
import shutil
import sqlite3
import stat
import subprocess
import sys
import tempfile
import textwrap
import time
import warnings
from pathlib import Path

import pytest

import kgen
from kgen.tune import dispatch
from kgen.tune.db import SCHEMA, TuneDB, TuneDBError, TuneDBLockedError, TuneDBWarning, open_db, problem_key
from kgen.tune.device import DeviceInfo, arch_limits

DEVICE = DeviceInfo("Recorded GPU", "sm_90", arch_limits("sm_90"))
PROBLEM = {"M": 512, "N": 512, "K": 512}
SPEC = kgen.Matmul(tile=(64, 64, 16), thread_tile=(4, 4), shared_memory=True)
LOCK_WAIT = 0.4  # seconds: KGEN_TUNE_DB_TIMEOUT in these tests


@pytest.fixture(autouse=True)
def _short_lock_wait(monkeypatch):
    monkeypatch.setenv("KGEN_TUNE_DB_TIMEOUT", str(LOCK_WAIT))
    dispatch.forget()
    yield
    dispatch.forget()


def _ident(problem=PROBLEM):
    from kgen.tune.device import toolchain_version

    return {"family": "matmul", "dtype": "float32", "problem": problem,
            "bucket": tuple(kgen.Matmul.bucket(problem)), "device": DEVICE.name, "arch": DEVICE.arch,
            "nvcc": toolchain_version(), "kgen": kgen.__version__}


def _key(ident) -> str:
    return problem_key(ident["family"], ident["dtype"], ident["problem"], ident["device"], ident["arch"],
                       ident["nvcc"], ident["kgen"])


def _store(path, problem=PROBLEM, spec=SPEC, ms=1.25) -> str:
    ident = _ident(problem)
    db = TuneDB(path)
    db.put_result(_key(ident), "exhaustive", ident, spec.to_json(), ms, {"counts": {"timed": 7}})
    db.close()
    return _key(ident)


def _rows(path) -> list[tuple]:
    """What the file holds, read with plain sqlite3 (not through kgen). Read-write, so that
    closing it removes the -wal and -shm files a read-only connection would leave."""
    conn = sqlite3.connect(path)
    try:
        return conn.execute("SELECT key, strategy, best, best_ms FROM results ORDER BY key").fetchall()
    finally:
        conn.close()


def _asides(folder) -> list[str]:
    return sorted(p.name for p in Path(folder).iterdir() if ".broken-" in p.name)


def _list(path, capsys) -> tuple[int, str, str]:
    from kgen.cli import tune as cli

    capsys.readouterr()
    rc = cli.main(["list", "--db", str(path)])
    out = capsys.readouterr()
    return rc, out.out, out.err


# -- another process holds the lock -------------------------------------------------------

@contextlib.contextmanager
def _held(path, journal="wal"):
    """A second process holding BEGIN EXCLUSIVE on `path` until the block ends."""
    code = textwrap.dedent(f"""
        import sqlite3, sys
        conn = sqlite3.connect({str(path)!r}, isolation_level=None)
        conn.execute("PRAGMA journal_mode = {journal}")
        conn.execute("BEGIN EXCLUSIVE")
        print("held", flush=True)
        sys.stdin.readline()
        conn.execute("ROLLBACK")
    """)
    proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "held"
        yield proc
    finally:
        proc.stdin.close()
        proc.wait(timeout=30)


def test_a_locked_database_makes_a_writer_wait_the_stated_time_then_fail_clearly(tmp_path):
    path = tmp_path / "tune.sqlite3"
    key = _store(path)
    before = _rows(path)
    ident = _ident({"M": 64, "N": 64, "K": 64})
    with _held(path):
        db = TuneDB(path)
        t0 = time.perf_counter()
        with pytest.raises(TuneDBLockedError) as info:
            db.put_result(_key(ident), "exhaustive", ident, SPEC.to_json(), 0.5, {})
        waited = time.perf_counter() - t0
        assert db.result(key) is not None  # WAL: reading goes on under another's write lock
    assert LOCK_WAIT * 0.9 <= waited < LOCK_WAIT + 10
    message = str(info.value)
    assert str(path) in message and "locked" in message and "KGEN_TUNE_DB_TIMEOUT" in message
    assert f"{LOCK_WAIT:g} s" in message
    assert isinstance(info.value, TuneDBError) and isinstance(info.value, RuntimeError)
    assert _rows(path) == before and not _asides(tmp_path)
    db.put_result(_key(ident), "exhaustive", ident, SPEC.to_json(), 0.5, {})  # the lock is gone: it works
    assert len(_rows(path)) == 2
    db.close()


def test_tune_list_reads_a_database_another_process_is_writing(tmp_path, capsys):
    path = tmp_path / "tune.sqlite3"
    _store(path)
    with _held(path):
        rc, out, err = _list(path, capsys)
    assert rc == 0, err
    assert out.startswith(f"1 tuned problem(s) in {path}")
    assert _asides(tmp_path) == [] and len(_rows(path)) == 1


def test_tune_list_on_a_locked_rollback_database_is_one_line_and_moves_nothing(tmp_path):
    path = tmp_path / "tune.sqlite3"
    _store(path)
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA journal_mode = DELETE")  # readers wait for an exclusive lock here
    conn.close()
    before = _rows(path)
    env = dict(os.environ, KGEN_TUNE_DB_TIMEOUT=str(LOCK_WAIT))
    with _held(path, journal="delete"):
        proc = subprocess.run([sys.executable, "-m", "kgen", "tune", "list", "--db", str(path)],
                              capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode in (1, 2), proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "locked" in lines[0] and str(path) in lines[0], proc.stderr
    assert _rows(path) == before and _asides(tmp_path) == []


def _resources(spec, arch):
    return {"kgen_matmul": {"registers": 64, "shared_bytes": 0, "stack_bytes": 0, "spill_stores": 0,
                            "spill_loads": 0}}


def test_a_tune_that_meets_a_lock_mid_run_fails_with_one_line(tmp_path, monkeypatch, capsys):
    from kgen.cli import tune as cli
    from kgen.tune import tuner
    from kgen.tune.runners import RecordedRunner

    path = tmp_path / "tune.sqlite3"
    _store(path, problem={"M": 64, "N": 64, "K": 64})
    real = tuner.autotune

    def recorded(*args, **kw):
        kw.update(runner=RecordedRunner(lambda s: 1.0 + s.tile[0] / 1000), compiler=_resources, workers=0)
        return real(*args, **kw)

    monkeypatch.setattr(tuner, "autotune", recorded)
    monkeypatch.setattr(cli, "autotune", recorded, raising=False)  # where the CLI holds its own reference
    with _held(path):
        with pytest.raises(TuneDBLockedError):
            recorded("matmul", PROBLEM, "float32", strategy="random", max_configs=2, db=str(path))
        capsys.readouterr()
        rc = cli.main(["matmul", "--shape", "512x512x512", "--strategy", "random", "--max-configs", "2",
                       "--db", str(path), "--quiet"])
        err = capsys.readouterr().err
    assert rc in (1, 2)
    assert len(err.strip().splitlines()) == 1 and "locked" in err and str(path) in err, err
    assert len(_rows(path)) == 1 and _asides(tmp_path) == []


# -- a folder as the database -------------------------------------------------------------

def test_a_folder_given_as_the_database_is_an_error_and_is_never_renamed(tmp_path, capsys):
    folder = tmp_path / "precious"
    folder.mkdir()
    (folder / "notes.txt").write_text("mine")
    rc, out, err = _list(folder, capsys)
    assert rc in (1, 2) and "is a folder" in err and str(folder) in err and len(err.strip().splitlines()) == 1
    with pytest.raises(TuneDBError, match="is a folder"):
        TuneDB(folder).put_result("k", "s", _ident(), SPEC.to_json(), 1.0, {})
    assert dispatch.select(kgen.Matmul, PROBLEM, device=DEVICE, db=str(folder)).origin != "exact"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["precious"]
    assert (folder / "notes.txt").read_text() == "mine"


# -- damaged files ------------------------------------------------------------------------

def test_only_a_damaged_file_is_moved_aside_and_never_over_another_copy(tmp_path):
    path = tmp_path / "tune.sqlite3"
    contents = [b"first damaged file " * 64, b"second damaged file " * 64]
    t0 = time.time()
    for junk in contents:  # both within one second: the names must still differ
        path.write_bytes(junk)
        with pytest.warns(TuneDBWarning, match="damaged"):
            db = TuneDB(path)
            assert db.all_results() == []
        db.close()
    assert time.time() - t0 < 1.0
    asides = _asides(tmp_path)
    kept = sorted((tmp_path / a).read_bytes() for a in asides if not a.endswith(("-wal", "-shm", "-journal")))
    assert kept == sorted(contents)
    assert _rows(path) == []  # a new, empty database took the name


def test_a_reader_leaves_a_damaged_file_where_it_is(tmp_path, capsys):
    path = tmp_path / "tune.sqlite3"
    path.write_bytes(b"not a database " * 100)
    with pytest.raises(TuneDBError, match="damaged"):
        TuneDB(path, read_only=True).all_results()
    rc, out, err = _list(path, capsys)
    assert rc in (1, 2) and "damaged" in err
    assert path.read_bytes() == b"not a database " * 100 and _asides(tmp_path) == []


# -- readers never write --------------------------------------------------------------------

def test_readers_open_read_only_and_never_write(tmp_path, capsys):
    missing = tmp_path / "none.sqlite3"
    assert TuneDB(missing, read_only=True).all_results() == []
    rc, out, _ = _list(missing, capsys)
    assert rc == 0 and out.startswith("0 tuned problem(s)")
    assert not missing.exists()
    path = tmp_path / "tune.sqlite3"
    _store(path)
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA journal_mode = DELETE")  # no -wal/-shm: any write would show in the file
    conn.close()
    before = path.read_bytes()
    reader = open_db(path, read_only=True)
    assert reader is open_db(path, read_only=True) and reader is not open_db(path)
    assert len(reader.all_results()) == 1 and reader.results_for_device("matmul", "float32", DEVICE.name, "sm_90")
    with pytest.raises(TuneDBError, match="read-only"):
        reader.put_result("k", "s", _ident(), SPEC.to_json(), 1.0, {})
    choice = dispatch.select(kgen.Matmul, PROBLEM, device=DEVICE, db=reader)
    assert choice.origin == "exact" and choice.spec == SPEC
    rc, out, _ = _list(path, capsys)
    assert rc == 0 and out.startswith("1 tuned problem(s)")
    reader.close()
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tune.sqlite3"]


# -- the schema -----------------------------------------------------------------------------

@pytest.mark.parametrize("version, message", [("2", "newer kgen"), ("banana", "schema version"),
                                              (None, "no kgen schema version")])
def test_the_stored_schema_version_is_read_and_checked(tmp_path, version, message):
    path = tmp_path / "tune.sqlite3"
    _store(path)
    conn = sqlite3.connect(path)
    if version is None:
        conn.execute("DELETE FROM meta")
    else:
        conn.execute("UPDATE meta SET value = ? WHERE name = 'schema'", (version,))
    conn.commit()
    conn.close()
    before = _rows(path)
    for read_only in (True, False):
        with pytest.raises(TuneDBError, match=message) as info:
            TuneDB(path, read_only=read_only).all_results()
        assert str(path) in str(info.value)
    assert _rows(path) == before and _asides(tmp_path) == []


def test_a_database_that_is_not_kgens_is_left_alone(tmp_path):
    path = tmp_path / "other.sqlite3"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE users (name TEXT)")
    conn.execute("INSERT INTO users VALUES ('ada')")
    conn.commit()
    conn.close()
    for read_only in (True, False):
        with pytest.raises(TuneDBError, match="not a kgen tuning database"):
            TuneDB(path, read_only=read_only).all_results()
    conn = sqlite3.connect(path)
    tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    conn.close()
    assert tables == ["users"]


def test_inserts_name_their_columns(tmp_path):
    """A results table whose columns are in another order still gets each value in its column."""
    path = tmp_path / "tune.sqlite3"
    conn = sqlite3.connect(path)
    conn.executescript(f"""
        CREATE TABLE meta (name TEXT PRIMARY KEY, value TEXT);
        INSERT INTO meta VALUES ('schema', '{SCHEMA}');
        CREATE TABLE results (best TEXT NOT NULL, best_ms REAL NOT NULL, summary TEXT NOT NULL, updated REAL,
            key TEXT NOT NULL, strategy TEXT NOT NULL, family TEXT, dtype TEXT, problem TEXT, bucket TEXT,
            device TEXT, arch TEXT, nvcc TEXT, kgen TEXT, PRIMARY KEY (key, strategy));
        CREATE TABLE candidates (updated REAL, reason TEXT, resources TEXT, samples INTEGER, iqr_ms REAL,
            median_ms REAL, status TEXT, spec TEXT, spec_key TEXT, key TEXT, PRIMARY KEY (key, spec_key));
    """)
    conn.close()
    key = _store(path)
    db = TuneDB(path)
    db.put_candidates(key, [{"spec_key": SPEC.key, "spec": SPEC.to_json(), "status": "ok", "median_ms": 1.5,
                             "iqr_ms": 0.01, "samples": 9, "resources": {"r": 1}, "reason": None}])
    (row,) = db.all_results()
    assert row["best"] == SPEC.to_json() and row["best_ms"] == 1.25 and row["problem"] == PROBLEM
    assert row["summary"] == {"counts": {"timed": 7}} and row["strategy"] == "exhaustive"
    (cand,) = db.candidates(key)
    assert cand["spec_key"] == SPEC.key and cand["median_ms"] == 1.5 and cand["samples"] == 9
    assert cand["resources"] == {"r": 1}
    db.close()


# -- bad rows -------------------------------------------------------------------------------

# column -> a value no kgen writes there (what a hand edit, a foreign tool or a damaged page leaves)
BAD_RESULTS = {
    "bucket of strings": ("bucket", '["nine", "nine", "nine"]'),
    "bucket not JSON": ("bucket", "[9, 9"),
    "bucket an object": ("bucket", '{"M": 9}'),
    "problem a JSON string": ("problem", '"M=512"'),
    "problem not JSON": ("problem", "{M: 512}"),
    "summary not JSON": ("summary", "{not json"),
    "summary a list": ("summary", "[1, 2]"),
    "summary counts a number": ("summary", '{"counts": 7}'),
    "best_ms as text": ("best_ms", "fast"),
    "best_ms infinite": ("best_ms", float("inf")),
    "best a blob": ("best", b"\x00\x01"),
    "updated as text": ("updated", "yesterday"),
}


def _insert_bad_result(path, column, value, key) -> None:
    ident = _ident({"M": 1024, "N": 1024, "K": 1024})
    row = {"key": key, "strategy": "exhaustive", "family": "matmul", "dtype": "float32",
           "problem": json.dumps(ident["problem"]), "bucket": json.dumps(list(ident["bucket"])),
           "device": DEVICE.name, "arch": DEVICE.arch, "nvcc": ident["nvcc"], "kgen": ident["kgen"],
           "best": SPEC.to_json(), "best_ms": 0.001, "summary": "{}", "updated": time.time() + 100}
    row[column] = value
    conn = sqlite3.connect(path)
    conn.execute(f"INSERT INTO results ({', '.join(row)}) VALUES ({', '.join('?' * len(row))})", tuple(row.values()))
    conn.commit()
    conn.close()


@pytest.mark.parametrize("kind", sorted(BAD_RESULTS))
def test_a_bad_result_row_is_skipped_and_named(tmp_path, capsys, kind):
    column, value = BAD_RESULTS[kind]
    path = tmp_path / "tune.sqlite3"
    _store(path)
    bad_key = f"bad-{column}-row"
    _insert_bad_result(path, column, value, bad_key)
    with pytest.warns(TuneDBWarning) as caught:
        rows = TuneDB(path, read_only=True).all_results()
    assert [r["best"] for r in rows] == [SPEC.to_json()]
    messages = [str(w.message) for w in caught]
    assert len(messages) == 1 and str(path) in messages[0] and bad_key in messages[0] and column in messages[0]
    with pytest.warns(TuneDBWarning, match=bad_key):
        choice = dispatch.select(kgen.Matmul, PROBLEM, device=DEVICE, db=TuneDB(path))
    assert choice.origin == "exact" and choice.spec == SPEC
    with pytest.warns(TuneDBWarning, match=bad_key):
        rc, out, err = _list(path, capsys)
    assert rc == 0 and out.startswith("1 tuned problem(s)"), err


BAD_CANDIDATES = {
    "resources not JSON": ("resources", "{regs: 9"),
    "resources a list": ("resources", "[64]"),
    "median_ms as text": ("median_ms", "slow"),
    "samples as text": ("samples", "many"),
    "samples negative": ("samples", -3),
    "spec a blob": ("spec", b"\x00"),
    "reason a blob": ("reason", b"\x01"),
}


def test_bad_candidate_rows_are_skipped_one_by_one(tmp_path):
    path = tmp_path / "tune.sqlite3"
    key = _store(path)
    good = {"spec_key": SPEC.key, "spec": SPEC.to_json(), "status": "ok", "median_ms": 1.5, "iqr_ms": 0.01,
            "samples": 9, "resources": None, "reason": None}
    TuneDB(path).put_candidates(key, [good])
    conn = sqlite3.connect(path)
    for i, (column, value) in enumerate(BAD_CANDIDATES.values()):
        row = {"key": key, "spec_key": f"bad-candidate-{i}", "spec": SPEC.to_json(), "status": "ok",
               "median_ms": 1.0, "iqr_ms": 0.0, "samples": 3, "resources": "null", "reason": None, "updated": 0.0}
        row[column] = value
        conn.execute(f"INSERT INTO candidates ({', '.join(row)}) VALUES ({', '.join('?' * len(row))})",
                     tuple(row.values()))
    conn.commit()
    conn.close()
    db = TuneDB(path, read_only=True)
    with pytest.warns(TuneDBWarning) as caught:
        rows = db.candidates(key)
    assert [r["spec_key"] for r in rows] == [SPEC.key]
    messages = sorted(str(w.message) for w in caught)
    assert len(messages) == len(BAD_CANDIDATES)
    for i, (column, _) in enumerate(BAD_CANDIDATES.values()):
        (m,) = [m for m in messages if f"bad-candidate-{i}'" in m]
        assert str(path) in m and column in m
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert len(db.candidates(key)) == 1  # each bad row is reported once per handle


# -- read-only files and folders, as a user that file modes apply to ------------------------

def _unprivileged() -> tuple[int, int] | None:
    """(uid, gid) to drop to when running as root; None when not root."""
    import pwd

    try:
        user = pwd.getpwnam("nobody")
    except KeyError:
        pytest.skip("running as root and there is no 'nobody' user to test file permissions with")
    return user.pw_uid, user.pw_gid


_CHILD = r"""
import contextlib, importlib, io, json, os, sys, warnings
# Everything the checks import lazily, imported now: after dropping to another user the
# interpreter's own folder may be unreadable.
for name in ("kgen.cli.tune", "kgen.cli.common", "kgen.cli.progress", "kgen.tune.db", "kgen.tune.dispatch",
             "kgen.tune.tuner", "kgen.tune.defaults", "kgen.tune.device", "kgen.tune.records", "kgen.core.cache",
             "kgen.ops", "kgen.ops.matmul", "kgen.ops.reduce", "sqlite3", "urllib.parse", "argparse", "logging",
             "shutil", "subprocess", "re", "time", "math", "hashlib"):
    try:
        importlib.import_module(name)
    except ImportError:
        pass
import kgen
from kgen.tune.db import TuneDB, TuneDBWarning, open_db
from kgen.tune.device import DeviceInfo, arch_limits, toolchain_version
nvcc = toolchain_version()
path, uid, gid = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
if uid >= 0:
    os.setgroups([])
    os.setgid(gid)
    os.setuid(uid)
assert not os.access(path, os.W_OK) or not os.access(os.path.dirname(path), os.W_OK), "the test needs a read-only case"
report = {}
warnings.simplefilter("always")
with warnings.catch_warnings(record=True) as caught:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        report["list_rc"] = kgen.cli.tune.main(["list", "--db", path])
    report["list"] = out.getvalue()
    device = DeviceInfo("Recorded GPU", "sm_90", arch_limits("sm_90"))
    problem = {"M": 512, "N": 512, "K": 512}
    choice = kgen.tune.dispatch.select(kgen.Matmul, problem, device=device, db=open_db(path, read_only=True))
    report["select"] = [choice.origin, choice.spec.to_json()]
    kgen.tune.dispatch.forget()
    choice = kgen.tune.dispatch.select(kgen.Matmul, problem, device=device, db=path)
    report["select_default_handle"] = [choice.origin, choice.spec.to_json()]
    report["reader_warnings"] = [str(w.message) for w in caught]
for attempt in range(2):  # two writers, well within one second
    with warnings.catch_warnings(record=True) as caught:
        db = TuneDB(path)
        before = len(db.all_results())
        ident = {"family": "matmul", "dtype": "float32", "problem": {"M": 8 + attempt, "N": 8, "K": 8},
                 "bucket": [3.0, 3.0, 3.0], "device": "Recorded GPU", "arch": "sm_90", "nvcc": nvcc,
                 "kgen": kgen.__version__}
        db.put_result(f"new-{attempt}", "exhaustive", ident, '{"kernel": "matmul"}', 0.1, {})
        db.put_result(f"newer-{attempt}", "exhaustive", ident, '{"kernel": "matmul"}', 0.1, {})
        report[f"writer{attempt}"] = {"before": before, "after": len(db.all_results()), "persistent": db.persistent,
                                      "warnings": [str(w.message) for w in caught if w.category is TuneDBWarning]}
        db.close()
print(json.dumps(report))
"""


@contextlib.contextmanager
def _shared_folder():
    """A folder outside pytest's private temp tree, so that another user can reach it."""
    folder = Path(tempfile.mkdtemp(prefix="kgen-tunedb-"))
    folder.chmod(0o755)
    try:
        yield folder
    finally:
        for p in [folder, *folder.iterdir()]:
            with contextlib.suppress(OSError):
                p.chmod(0o755 if p.is_dir() else 0o644)
        shutil.rmtree(folder, ignore_errors=True)


def _run_child(path: Path) -> dict:
    uid, gid = (-1, -1)
    if os.geteuid() == 0:
        uid, gid = _unprivileged()
    with _shared_folder() as cache:
        cache.chmod(0o777)
        env = dict(os.environ, KGEN_CACHE_DIR=str(cache), KGEN_TUNE_DB_TIMEOUT=str(LOCK_WAIT),
                   PYTHONDONTWRITEBYTECODE="1")
        proc = subprocess.run([sys.executable, "-c", _CHILD, str(path), str(uid), str(gid)], capture_output=True,
                              text=True, env=env, timeout=300, cwd="/")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _check_served_and_kept(report: dict, path: Path, before: list, files_before: list[str]) -> None:
    assert report["list_rc"] == 0 and report["list"].startswith("1 tuned problem(s)"), report
    assert report["select"] == ["exact", SPEC.to_json()]
    assert report["select_default_handle"] == ["exact", SPEC.to_json()]
    for attempt in range(2):
        w = report[f"writer{attempt}"]
        # The file's result is still seen, new results live in memory, and that is said once.
        assert w["before"] == 1 and w["after"] == 3 and w["persistent"] is False, w
        assert len(w["warnings"]) == 1 and str(path) in w["warnings"][0] and "in memory" in w["warnings"][0]
    assert _rows(path) == before
    assert sorted(p.name for p in path.parent.iterdir() if not p.name.endswith(("-wal", "-shm"))) == files_before


def _chown(paths, uid, gid):
    for p in paths:
        os.chown(p, uid, gid)


def test_a_read_only_file_serves_reads_and_keeps_every_copy():
    with _shared_folder() as folder:
        path = folder / "tune.sqlite3"
        _store(path)
        before = _rows(path)
        if os.geteuid() == 0:
            _chown([folder, path], *_unprivileged())
        path.chmod(0o444)
        files = sorted(p.name for p in folder.iterdir())
        report = _run_child(path)
        _check_served_and_kept(report, path, before, files)
        assert stat.S_IMODE(path.stat().st_mode) == 0o444 and _asides(folder) == []


def test_a_read_only_folder_serves_reads_and_keeps_every_copy():
    with _shared_folder() as folder:
        path = folder / "tune.sqlite3"
        _store(path)  # WAL mode, and closed: no -wal or -shm beside it
        before = _rows(path)
        if os.geteuid() == 0:
            _chown([folder, path], *_unprivileged())
        folder.chmod(0o555)
        files = sorted(p.name for p in folder.iterdir())
        assert files == ["tune.sqlite3"]
        report = _run_child(path)
        _check_served_and_kept(report, path, before, files)
