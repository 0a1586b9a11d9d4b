"""The compiled-kernel cache under stress: concurrent builders, torn and hostile files,
unusable folders, a full disk, and toolchain changes. CPU only.

Most tests compile through a fake nvcc (a small script that logs every call and writes
an ELF-looking cubin), so they are fast, count nvcc runs exactly and need no CUDA; the
eight-process test wraps the real nvcc when there is one.
"""
from __future__ import annotations

import errno
import hashlib
import json
import multiprocessing
import os
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pytest

from kgen.core import cache as cache_mod
from kgen.core import compiler
from kgen.core.cache import DiskCache, decode, encode

ROOT = Path(__file__).resolve().parents[1]
ARCH = "sm_90"

FAKE_NVCC = r'''#!{python}
# A stand-in for nvcc: logs each call, answers --version, and "compiles" by writing an
# ELF header plus the source's hash, so equal sources give equal cubins.
import hashlib, os, sys, time
args = sys.argv[1:]
with open(os.environ["KGEN_TEST_NVCC_LOG"], "a") as log:
    log.write(("version" if "--version" in args else "compile") + " " + str(os.getpid()) + "\n")
if "--version" in args:
    print("nvcc: NVIDIA (R) Cuda compiler driver")
    print("Cuda compilation tools, release {release}, V{release}.0")
    sys.exit(0)
time.sleep(float(os.environ.get("KGEN_TEST_NVCC_SLEEP", "0")))
out = args[args.index("-o") + 1]
src = open(args[-1], "rb").read()
with open(out, "wb") as fh:
    fh.write(b"\x7fELF" + hashlib.sha256(src).digest() * 64)
sys.stderr.write("ptxas info    : Compiling entry function 'k' for '{arch}'\n"
                 "ptxas info    : Used 10 registers, 0 bytes smem\n")
'''


def _write_fake_nvcc(folder: Path, release: str = "12.8") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "nvcc"
    path.write_text(FAKE_NVCC.replace("{python}", sys.executable).replace("{release}", release)
                    .replace("{arch}", ARCH))
    path.chmod(0o755)
    return path


@pytest.fixture
def env(tmp_path, monkeypatch):
    """A private cache folder, a fake nvcc first on PATH, and clean in-process memos.
    Returns an object with .cache (Path), .log (Path), .nvcc (Path) and .compiles()."""
    log = tmp_path / "nvcc.log"
    log.write_text("")
    nvcc = _write_fake_nvcc(tmp_path / "bin")
    monkeypatch.setenv("PATH", f"{nvcc.parent}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("KGEN_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("KGEN_TEST_NVCC_LOG", str(log))
    monkeypatch.delenv("KGEN_NO_CACHE", raising=False)
    monkeypatch.setattr(compiler, "_version_memo", {})
    monkeypatch.setattr(DiskCache, "_warned", set())
    compiler.clear_memory_cache()

    class Env:
        cache = tmp_path / "cache"
        def compiles(self):
            return sum(1 for ln in log.read_text().splitlines() if ln.startswith("compile"))
    e = Env()
    e.log, e.nvcc, e.tmp = log, nvcc, tmp_path
    yield e
    compiler.clear_memory_cache()


SOURCE = 'extern "C" __global__ void k(float* p) { p[threadIdx.x] = 1.0f; }\n'


def _fresh_compile(source=SOURCE, arch=ARCH):
    """Compile as a new process would: nothing remembered in memory."""
    compiler.clear_memory_cache()
    compiler._version_memo.clear()
    return compiler.compile_cuda(source, arch)


def _entry(env) -> Path:
    entries = sorted((env.cache / "cubin").glob("*.bin"))
    assert len(entries) == 1, entries
    return entries[0]


# ---------------------------------------------------------------------------------
# Damaged entries: every kind is a miss, rebuilt, and the rebuilt entry is whole
# ---------------------------------------------------------------------------------

def _damage(kind: str, path: Path) -> None:
    blob = path.read_bytes()
    payload, meta = decode(blob)
    if kind == "truncated":
        path.write_bytes(blob[: len(blob) // 2])
    elif kind == "header only":
        path.write_bytes(blob[: blob.index(b"\n", len(cache_mod.MAGIC)) + 1])
    elif kind == "empty":
        path.write_bytes(b"")
    elif kind == "garbage":
        path.write_bytes(os.urandom(len(blob)))
    elif kind == "flipped byte":
        i = len(blob) - 7
        path.write_bytes(blob[:i] + bytes([blob[i] ^ 0x40]) + blob[i + 1:])
    elif kind == "not a cubin":
        path.write_bytes(encode(b"#!/bin/sh\necho not a cubin\n", meta, path.stem))
    elif kind == "wrong arch":
        path.write_bytes(encode(payload, {**meta, "arch": "sm_80"}, path.stem))
    elif kind == "meta not an object":
        # A header whose size and hash are right (they cover only the payload) but whose
        # metadata is a list: the reader must check the shape, not trust it.
        header = {"size": len(payload), "sha256": hashlib.sha256(payload).hexdigest(), "meta": [meta],
                  "key": path.stem}
        path.write_bytes(cache_mod.MAGIC + json.dumps(header).encode() + b"\n" + payload)
    elif kind == "resources wrong type":
        path.write_bytes(encode(payload, {**meta, "resources": "lots"}, path.stem))
    elif kind == "old magic":
        path.write_bytes(b"KGEN-CACHE-0\n" + blob[len(cache_mod.MAGIC):])
    elif kind == "a folder":
        path.unlink()
        path.mkdir()
    else:
        raise AssertionError(kind)


DAMAGE = ["truncated", "header only", "empty", "garbage", "flipped byte", "not a cubin", "wrong arch",
          "meta not an object", "resources wrong type", "old magic"]


@pytest.mark.parametrize("kind", DAMAGE)
def test_damaged_entry_is_rebuilt(env, kind):
    first = _fresh_compile()
    assert first.origin == "nvcc" and env.compiles() == 1
    assert _fresh_compile().origin == "disk" and env.compiles() == 1
    path = _entry(env)
    _damage(kind, path)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a damaged entry is routine: no warning
        again = _fresh_compile()
    assert again.origin == "nvcc" and again.cubin == first.cubin and env.compiles() == 2
    assert decode(path.read_bytes())[0] == first.cubin  # rewritten whole
    assert _fresh_compile().origin == "disk" and env.compiles() == 2


def test_entry_replaced_by_a_folder_falls_back_to_memory(env):
    first = _fresh_compile()
    _damage("a folder", _entry(env))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        again = _fresh_compile()
    assert again.cubin == first.cubin and again.origin == "nvcc"
    assert len([w for w in caught if "cannot be used" in str(w.message)]) == 1


def _compile_with_deadline(seconds: float = 60):
    """_fresh_compile in a thread, failing (not hanging) if it does not finish."""
    import threading

    box = {}
    t = threading.Thread(target=lambda: box.setdefault("c", _fresh_compile()), daemon=True)
    t.start()
    t.join(seconds)
    assert "c" in box, f"compiling hung for {seconds} s on a hostile cache entry"
    return box["c"]


@pytest.mark.parametrize("kind", ["fifo", "link to /dev/zero", "huge sparse file", "dangling link"])
def test_planted_special_files_are_misses(env, kind):
    """Files no kgen writes, planted under an entry's name: a FIFO (reading would block),
    a link to /dev/zero (reading would never end), a file far larger than any cubin."""
    first = _fresh_compile()
    path = _entry(env)
    path.unlink()
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "link to /dev/zero":
        os.symlink("/dev/zero", path)
    elif kind == "dangling link":
        os.symlink(env.tmp / "nowhere", path)
    else:
        with open(path, "wb") as fh:
            fh.truncate(cache_mod.MAX_ENTRY_BYTES + 1)
    again = _compile_with_deadline()
    assert again.origin == "nvcc" and again.cubin == first.cubin
    assert path.is_file() and not path.is_symlink() and decode(path.read_bytes())[0] == first.cubin


def test_hostile_entries_never_crash_the_reader(tmp_path):
    """Random byte strings, and every prefix of a real entry, decode to a miss or to the
    exact payload; nothing raises."""
    good = encode(b"\x7fELF" + b"x" * 300, {"arch": ARCH, "resources": {}, "log": ""})
    for cut in range(len(good)):
        assert decode(good[:cut]) is None
    assert decode(good) is not None
    rnd = os.urandom(4096)
    for i in range(0, 4096, 64):
        assert decode(cache_mod.MAGIC + rnd[i:]) is None
        assert decode(rnd[i:]) is None


# ---------------------------------------------------------------------------------
# Folders that cannot be written, a disk that is full
# ---------------------------------------------------------------------------------

def _one_warning(caught) -> str:
    msgs = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
    assert len(msgs) == 1, msgs
    return msgs[0]


def test_unwritable_cache_folder_builds_in_memory_with_one_warning(env, monkeypatch):
    # Root ignores permission bits, so the folder is made unusable by putting it under a file.
    blocker = env.tmp / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("KGEN_CACHE_DIR", str(blocker / "cache"))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        first = _fresh_compile()
        second = compiler.compile_cuda(SOURCE, ARCH)           # memory hit: no new warning
        third = _fresh_compile(SOURCE.replace("1.0f", "2.0f"))  # a new kernel: still one warning
    assert first.origin == "nvcc" and second.origin == "memory" and third.origin == "nvcc"
    message = _one_warning(caught)
    assert str(blocker) in message and "memory only" in message
    assert blocker.read_text() == "not a folder"


def _enospc_after_half(fd, blob):
    with os.fdopen(fd, "wb") as fh:
        fh.write(blob[: len(blob) // 2])
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def test_full_disk_builds_in_memory_with_one_warning_and_leaves_no_debris(env, monkeypatch):
    monkeypatch.setattr(cache_mod, "_write_all", _enospc_after_half)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        first = _fresh_compile()
        _fresh_compile(SOURCE.replace("1.0f", "3.0f"))
    assert first.origin == "nvcc"
    assert "No space left on device" in _one_warning(caught)
    leftovers = [p.name for p in env.cache.rglob("*") if p.is_file() and not p.name.endswith(".lock")]
    assert leftovers == []  # no half-written entry, no temporary file
    # Space comes back: the next process writes the entry and the one after reads it.
    monkeypatch.undo()
    monkeypatch.setenv("KGEN_CACHE_DIR", str(env.cache))
    monkeypatch.setenv("PATH", f"{env.nvcc.parent}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("KGEN_TEST_NVCC_LOG", str(env.log))
    assert _fresh_compile().origin == "nvcc"
    assert _fresh_compile().origin == "disk"


def test_full_disk_keeps_the_previous_entry(env, monkeypatch):
    """A failed write never damages what is already there (the write goes to a temporary
    file first)."""
    first = _fresh_compile()
    path = _entry(env)
    before = path.read_bytes()
    store = DiskCache()
    monkeypatch.setattr(cache_mod, "_write_all", _enospc_after_half)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert store.put(path.stem, b"\x7fELF replacement", {"arch": ARCH}) is False
    assert path.read_bytes() == before and decode(before)[0] == first.cubin


def test_no_cache_writes_nothing(env, monkeypatch):
    monkeypatch.setenv("KGEN_NO_CACHE", "1")
    assert _fresh_compile().origin == "nvcc"
    assert _fresh_compile().origin == "nvcc"
    assert not env.cache.exists()


# ---------------------------------------------------------------------------------
# Toolchain and version changes never reuse an old entry
# ---------------------------------------------------------------------------------

def _touch_later(path: Path) -> None:
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 5_000_000_000))


def test_new_nvcc_version_rebuilds(env):
    old = _fresh_compile()
    assert _fresh_compile().origin == "disk"
    _write_fake_nvcc(env.nvcc.parent, release="13.1")  # the toolkit was upgraded in place
    _touch_later(env.nvcc)
    new = _fresh_compile()
    assert new.origin == "nvcc" and new.key != old.key and env.compiles() == 2


def test_new_nvcc_behind_an_unchanged_wrapper_rebuilds(env, monkeypatch):
    """nvcc on PATH is often a one-line wrapper (`exec /usr/local/cuda/bin/nvcc "$@"`); a
    toolkit swapped in behind it must still count as a new nvcc."""
    real = _write_fake_nvcc(env.tmp / "toolkit" / "bin", release="12.4")
    wrapper_dir = env.tmp / "wrapper"
    wrapper_dir.mkdir()
    wrapper = wrapper_dir / "nvcc"
    wrapper.write_text(f'#!/bin/sh\nexec {real} "$@"\n')
    wrapper.chmod(0o755)
    monkeypatch.setenv("PATH", f"{wrapper_dir}{os.pathsep}{os.environ['PATH']}")
    old = _fresh_compile()
    assert _fresh_compile().origin == "disk"
    before = wrapper.read_bytes()
    _write_fake_nvcc(real.parent, release="12.9")
    _touch_later(real)
    assert wrapper.read_bytes() == before
    new = _fresh_compile()
    assert new.origin == "nvcc" and new.key != old.key


def test_other_arch_rebuilds(env):
    a = _fresh_compile(arch="sm_90")
    b = _fresh_compile(arch="sm_80")
    assert b.origin == "nvcc" and a.key != b.key and env.compiles() == 2
    assert _fresh_compile(arch="sm_90").origin == "disk"


def test_other_kgen_version_or_schema_rebuilds(env, monkeypatch):
    a = _fresh_compile()
    monkeypatch.setattr(compiler, "__version__", "99.0.0")
    b = _fresh_compile()
    monkeypatch.setattr(compiler, "CACHE_SCHEMA", compiler.CACHE_SCHEMA + 1)
    c = _fresh_compile()
    assert b.origin == c.origin == "nvcc" and len({a.key, b.key, c.key}) == 3


def test_other_options_rebuild(env):
    a = compiler.compile_cuda(SOURCE, ARCH)
    compiler.clear_memory_cache()
    b = compiler.compile_cuda(SOURCE, ARCH, ("-DKGEN_TEST=1",))
    assert b.origin == "nvcc" and a.key != b.key


# ---------------------------------------------------------------------------------
# Concurrency
# ---------------------------------------------------------------------------------

def test_threads_in_one_process_compile_once(env, monkeypatch):
    import threading

    monkeypatch.setenv("KGEN_TEST_NVCC_SLEEP", "0.3")
    compiler.clear_memory_cache()
    results, errors = [], []

    def go():
        try:
            results.append(compiler.compile_cuda(SOURCE, ARCH).cubin)
        except Exception as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=go) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(set(results)) == 1 and len(results) == 8
    assert env.compiles() == 1


CHILD = r"""
import hashlib, os, sys, time
ready, go = sys.argv[1], sys.argv[2]
open(ready, "w").close()
while not os.path.exists(go):
    time.sleep(0.002)
import kgen
c = kgen.compile(kgen.Matmul(), "sm_90")
print(hashlib.sha256(c.cubin).hexdigest(), c.origin)
"""


def _reader(folder: str, stop_file: str, result) -> None:
    """Reads every entry it can see, as fast as it can, until told to stop; counts
    reads that found a file but could not decode it (a torn entry)."""
    reads = torn = 0
    sub = Path(folder) / "cubin"
    while not os.path.exists(stop_file):
        for path in sub.glob("*.bin") if sub.is_dir() else ():
            try:
                blob = path.read_bytes()
            except OSError:
                continue
            reads += 1
            if decode(blob) is None:
                torn += 1
    result.put((reads, torn))


@pytest.mark.nvcc
def test_eight_processes_build_the_same_spec(tmp_path):
    """Eight fresh processes start compiling one spec at the same moment, through a
    wrapper that logs every real nvcc run: all succeed with the same cubin, nvcc compiles
    once (the file lock makes the others wait and then read the entry), and a reader
    hammering the cache folder meanwhile never sees a torn entry."""
    real = compiler.find_nvcc()
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "nvcc.log"
    wrapper = bin_dir / "nvcc"
    # Sleeping before a compile widens the window in which the others arrive.
    wrapper.write_text(f'#!/bin/sh\ncase "$*" in *-cubin*) echo "compile $$" >> {log}; sleep 0.5;; '
                       f'*) echo "other $$" >> {log};; esac\nexec {real} "$@"\n')
    wrapper.chmod(0o755)
    cache_dir = tmp_path / "cache"
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "KGEN_CACHE_DIR": str(cache_dir),
           "PYTHONPATH": str(ROOT)}
    env.pop("KGEN_NO_CACHE", None)
    go = tmp_path / "go"
    stop = tmp_path / "stop"
    ctx = multiprocessing.get_context("fork")
    result = ctx.Queue()
    reader = ctx.Process(target=_reader, args=(str(cache_dir), str(stop), result))
    reader.start()
    procs, readies = [], []
    for i in range(8):
        ready = tmp_path / f"ready{i}"
        readies.append(ready)
        procs.append(subprocess.Popen([sys.executable, "-c", CHILD, str(ready), str(go)], env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    deadline = time.time() + 60
    while not all(r.exists() for r in readies) and time.time() < deadline:
        time.sleep(0.01)
    go.touch()
    outs = [p.communicate(timeout=240) for p in procs]
    stop.touch()
    reads, torn = result.get(timeout=30)
    reader.join(timeout=30)
    for p, (_, err) in zip(procs, outs):
        assert p.returncode == 0, err
    digests = {out.split()[0] for out, _ in outs}
    origins = sorted(out.split()[1] for out, _ in outs)
    compiles = sum(1 for ln in log.read_text().splitlines() if ln.startswith("compile"))
    assert len(digests) == 1, digests
    assert compiles <= 2, (compiles, origins)  # one, unless the lock is unavailable
    assert origins.count("nvcc") == compiles and origins.count("disk") == 8 - compiles
    assert torn == 0, (reads, torn)
    assert reads > 0
    entries = list((cache_dir / "cubin").glob("*.bin"))
    assert len(entries) == 1 and decode(entries[0].read_bytes()) is not None
    assert not list((cache_dir / "cubin").glob("*.tmp"))


def _writer(folder: str, key: str, wid: int, count: int, size: int) -> None:
    store = DiskCache(Path(folder))
    payload = bytes([wid]) * size
    for i in range(count):
        store.put(key, payload + i.to_bytes(4, "little"), {"writer": wid, "i": i})


def _hammer_reader(folder: str, key: str, stop_file: str, result) -> None:
    store = DiskCache(Path(folder))
    path = store.path(key)
    reads = torn = 0
    while not os.path.exists(stop_file):
        if not path.exists():
            continue
        got = store.get(key)
        reads += 1
        if got is None:
            torn += 1  # the file existed, so a miss means it was read half-written
            continue
        payload, meta = got
        body = payload[:-4]
        if body != bytes([meta["writer"]]) * len(body) or int.from_bytes(payload[-4:], "little") != meta["i"]:
            torn += 1
    result.put((reads, torn))


def test_concurrent_writers_and_readers_never_tear(tmp_path):
    """Four processes overwrite one entry with distinct 256 KiB payloads while two read
    it in a loop: every read returns one writer's payload whole, with its own header."""
    ctx = multiprocessing.get_context("fork")
    folder, key, stop = str(tmp_path / "c"), "k" * 24, str(tmp_path / "stop")
    result = ctx.Queue()
    readers = [ctx.Process(target=_hammer_reader, args=(folder, key, stop, result)) for _ in range(2)]
    writers = [ctx.Process(target=_writer, args=(folder, key, w, 25, 256 * 1024)) for w in range(4)]
    for p in readers + writers:
        p.start()
    for p in writers:
        p.join(timeout=120)
        assert p.exitcode == 0
    Path(stop).touch()
    totals = [result.get(timeout=30) for _ in readers]
    for p in readers:
        p.join(timeout=30)
    assert sum(r for r, _ in totals) > 0
    assert sum(t for _, t in totals) == 0, totals
    assert not list(Path(folder, "cubin").glob("*.tmp"))
