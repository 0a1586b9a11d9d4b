"""The disk cache at its edges: file modes for a shared folder, the environment variables
that steer it, entries bound to their key, the size limit, and clearing without permission.
Permission cases run a child process as an unprivileged user (tests run as root here)."""
from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

import kgen
from kgen.core import cache as cache_mod
from kgen.core.cache import CacheClearError, DiskCache, decode, encode

ROOT = Path(kgen.__file__).resolve().parents[1]


# ---------------------------------------------------------------------------------
# Running as another user
# ---------------------------------------------------------------------------------

def _unprivileged() -> tuple[str, str] | None:
    """(user, python) that can run kgen from this checkout as a user other than root, or
    None (then the caller skips, saying why)."""
    if os.geteuid() != 0:
        return None
    try:
        import pwd

        pwd.getpwnam("nobody")
    except (ImportError, KeyError):
        return None
    for python in (sys.executable, shutil.which("python3"), "/usr/bin/python3"):
        if not python:
            continue
        try:
            probe = subprocess.run([python, "-c", "import sys; sys.path.insert(0, sys.argv[1]); import kgen.cli.main",
                                    str(ROOT)], user="nobody", capture_output=True, text=True, timeout=60,
                                   cwd="/")
        except (OSError, subprocess.SubprocessError):
            continue
        if probe.returncode == 0:
            return "nobody", python
    return None


_AS_OTHER = None


def as_other_user() -> tuple[str, str]:
    global _AS_OTHER
    if _AS_OTHER is None:
        _AS_OTHER = _unprivileged() or ("", "")
    if not _AS_OTHER[0]:
        why = ("tests do not run as root" if os.geteuid() != 0 else
               "no unprivileged user (nobody) can run python with kgen from this checkout")
        pytest.skip(f"needs a second, unprivileged user: {why}")
    return _AS_OTHER


def run_as_other(code: str, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    user, python = as_other_user()
    full_env = {"PATH": "/usr/bin:/bin", "HOME": "/", **(env or {})}
    prelude = f"import sys; sys.path.insert(0, {str(ROOT)!r}); "
    return subprocess.run([python, "-c", prelude + code, *args], user=user, capture_output=True, text=True,
                          timeout=120, env=full_env, cwd="/")


@pytest.fixture
def shared_dir():
    """A folder outside pytest's private (0700) temporary root, open to other users."""
    path = Path(tempfile.mkdtemp(prefix="kgen-shared-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


# ---------------------------------------------------------------------------------
# Modes: a cache shared between users hits for all of them
# ---------------------------------------------------------------------------------

def test_entries_are_readable_by_other_users(shared_dir):
    old = os.umask(0o022)
    try:
        store = DiskCache(shared_dir)
        assert store.put("k" * 24, b"\x7fELF payload", {"arch": "sm_90"})
    finally:
        os.umask(old)
    path = store.path("k" * 24)
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
    code = ("from pathlib import Path; from kgen.core.cache import DiskCache; "
            "hit = DiskCache(Path(sys.argv[1])).get('k' * 24); print(hit[0] if hit else None)")
    out = run_as_other(code, str(shared_dir))
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == repr(b"\x7fELF payload")


def test_a_private_umask_keeps_entries_private(tmp_path):
    old = os.umask(0o077)
    try:
        DiskCache(tmp_path).put("p" * 24, b"x", {})
    finally:
        os.umask(old)
    assert stat.S_IMODE(DiskCache(tmp_path).path("p" * 24).stat().st_mode) == 0o600


# ---------------------------------------------------------------------------------
# Environment variables
# ---------------------------------------------------------------------------------

@pytest.mark.parametrize("value, off", [
    ("1", True), ("true", True), ("YES", True), (" on ", True),
    ("0", False), ("false", False), ("No", False), ("off", False), ("", False),
])
def test_no_cache_words(monkeypatch, value, off):
    monkeypatch.setenv("KGEN_NO_CACHE", value)
    assert cache_mod.disabled() is off


def test_no_cache_other_words_are_an_error(monkeypatch):
    monkeypatch.setenv("KGEN_NO_CACHE", "sometimes")
    with pytest.raises(ValueError, match=r"KGEN_NO_CACHE='sometimes' is not allowed: 1, true, yes or on"):
        cache_mod.disabled()


def test_unknown_user_in_the_cache_dir_is_a_clear_error(monkeypatch):
    monkeypatch.setenv("KGEN_CACHE_DIR", "~nosuchuser-kgen/cache")
    with pytest.raises(ValueError, match=r"KGEN_CACHE_DIR='~nosuchuser-kgen/cache' cannot be used: "
                                         r"there is no user 'nosuchuser-kgen'"):
        cache_mod.default_dir()


@pytest.mark.parametrize("variable, argv", [("KGEN_CACHE_DIR", ["tune", "list"]), ("KGEN_CACHE_DIR", ["cache", "info"]),
                                             ("KGEN_TUNE_DB", ["tune", "list"])])
def test_unknown_user_in_a_path_is_one_line_in_the_cli(variable, argv):
    proc = subprocess.run([sys.executable, "-m", "kgen", *argv], capture_output=True, text=True,
                          env={**os.environ, variable: "~nosuchuser-kgen/cache"})
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode != 0 and len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert lines[0].startswith(f"kgen: error: {variable}='~nosuchuser-kgen/cache' cannot be used")


def test_tilde_of_a_real_user_expands(monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("KGEN_CACHE_DIR", "~/kc")
    assert cache_mod.default_dir() == tmp_path / "kc"


@pytest.mark.parametrize("value", ["0", "-5", "lots", "nan", "inf"])
def test_bad_size_limit_is_an_error(monkeypatch, value):
    monkeypatch.setenv("KGEN_CACHE_MAX_MB", value)
    with pytest.raises(ValueError, match=r"KGEN_CACHE_MAX_MB=.* is not allowed: a positive number of megabytes"):
        cache_mod.max_bytes()


def test_size_limit_default_and_setting(monkeypatch):
    monkeypatch.delenv("KGEN_CACHE_MAX_MB", raising=False)
    assert cache_mod.max_bytes() == 2048 * 10**6
    monkeypatch.setenv("KGEN_CACHE_MAX_MB", "1.5")
    assert cache_mod.max_bytes() == 1_500_000
    assert DiskCache(Path("/nonexistent")).limit_bytes == 1_500_000


# ---------------------------------------------------------------------------------
# Entries are bound to their key
# ---------------------------------------------------------------------------------

def test_an_entry_copied_under_another_key_is_a_miss(tmp_path):
    store = DiskCache(tmp_path)
    assert store.put("a" * 24, b"\x7fELF kernel a", {"arch": "sm_90"})
    shutil.copy(store.path("a" * 24), store.path("b" * 24))
    assert store.get("b" * 24) is None
    assert store.get("a" * 24) == (b"\x7fELF kernel a", {"arch": "sm_90"})
    # An entry without a key (any other writer) is a miss too.
    store.path("c" * 24).write_bytes(encode(b"\x7fELF", {"arch": "sm_90"}))
    assert store.get("c" * 24) is None
    assert decode(store.path("a" * 24).read_bytes(), "a" * 24) is not None


@pytest.mark.nvcc
def test_compiler_rebuilds_rather_than_serve_another_specs_entry():
    one = kgen.compile(kgen.Reduce(op="sum"), "sm_90")
    other = kgen.compile(kgen.Reduce(op="max"), "sm_90")
    store = DiskCache()
    shutil.copy(store.path(other.key), store.path(one.key))
    from kgen.core import compiler

    compiler.clear_memory_cache()
    again = kgen.compile(kgen.Reduce(op="sum"), "sm_90")
    assert again.origin == "nvcc" and set(again.resources) == set(one.resources)
    assert decode(store.path(one.key).read_bytes(), one.key) is not None  # rewritten under its own key


# ---------------------------------------------------------------------------------
# Size limit
# ---------------------------------------------------------------------------------

def _age(path: Path, seconds: float) -> None:
    t = time.time() - seconds
    os.utime(path, (t, t))


def test_writes_past_the_limit_evict_the_least_recently_used(tmp_path):
    size = len(encode(b"x" * 1000, {}, "k" * 24))
    store = DiskCache(tmp_path, limit_bytes=5 * size)
    keys = [f"{i:024d}" for i in range(5)]
    for i, key in enumerate(keys):
        assert store.put(key, b"x" * 1000, {})
        _age(store.path(key), 10_000 - i * 1000)  # key 0 oldest
    # Key 0 is read now: it becomes the most recently used (its mtime is refreshed).
    assert store.get(keys[0]) is not None
    assert store.path(keys[0]).stat().st_mtime > time.time() - 60
    cache_mod._usage.clear()  # as a new process would
    assert store.put("n" * 24, b"x" * 1000, {})  # six entries: over the limit
    left = {p.stem for p in store.entries()}
    assert store.size() <= 0.9 * 5 * size
    assert keys[1] not in left and keys[2] not in left  # the two least recently used went
    assert {keys[0], keys[3], keys[4], "n" * 24} == left


def test_one_entry_bigger_than_the_limit_is_kept(tmp_path):
    store = DiskCache(tmp_path, limit_bytes=100)
    assert store.put("a" * 24, b"x" * 1000, {})
    assert store.put("b" * 24, b"x" * 1000, {})
    assert [p.stem for p in store.entries()] == ["b" * 24]


def test_cache_info_shows_size_and_limit(tmp_path):
    env = {**os.environ, "KGEN_CACHE_DIR": str(tmp_path), "KGEN_CACHE_MAX_MB": "300"}
    DiskCache(tmp_path).put("a" * 24, b"x" * 2_000_000, {})
    out = subprocess.run([sys.executable, "-m", "kgen", "cache", "info"], capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr
    assert "entries   1" in out.stdout
    assert "size      2.00 MB of at most 300 MB (KGEN_CACHE_MAX_MB)" in out.stdout


# ---------------------------------------------------------------------------------
# Clearing
# ---------------------------------------------------------------------------------

def test_clear_reports_entries_it_could_not_remove(shared_dir):
    store = DiskCache(shared_dir)
    for key in ("a" * 24, "b" * 24):
        store.put(key, b"\x7fELF", {})
    store.dir.chmod(0o755)  # root's folder: another user may read but not remove
    env = {"KGEN_CACHE_DIR": str(shared_dir)}
    out = run_as_other("from kgen.cli.main import main; sys.exit(main(['cache', 'clear']))", env=env)
    assert out.returncode == 1, (out.stdout, out.stderr)
    assert "Traceback" not in out.stderr
    assert "could not remove 2 of 2 entries" in out.stderr and "Permission denied" in out.stderr
    assert "removed 0" not in out.stdout
    assert len(store.entries()) == 2


def test_clear_raises_with_what_it_removed(tmp_path, monkeypatch):
    store = DiskCache(tmp_path)
    for key in ("a" * 24, "b" * 24, "c" * 24):
        store.put(key, b"\x7fELF", {})
    real_unlink = Path.unlink

    def unlink(self, *a, **k):
        if self.name.startswith("b"):
            raise PermissionError(13, "Permission denied", str(self))
        return real_unlink(self, *a, **k)

    monkeypatch.setattr(Path, "unlink", unlink)
    with pytest.raises(CacheClearError, match=r"could not remove 1 of 3 entries .*Permission denied") as info:
        store.clear()
    assert info.value.removed == 2 and len(info.value.failed) == 1
