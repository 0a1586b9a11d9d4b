"""CUDA C source -> cubin with nvcc, memoised in memory and on disk.

Knows nothing of kernel families: it takes source text, an arch and options.
Needs no GPU, so CI and parallel tuning workers can compile.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from .. import __version__
from .cache import DiskCache, disabled

logger = logging.getLogger(__name__)

# Bump when the cache entry's layout or meaning changes: old entries become misses.
CACHE_SCHEMA = 1
DEFAULT_ARCH = "sm_90"
_ARCH_RE = re.compile(r"^sm_\d{2,3}[af]?$")
BASE_OPTIONS = ("-O3", "-std=c++17", "-Xptxas", "-v", "-lineinfo")


class CompileError(RuntimeError):
    """nvcc rejected the source; carries the command, nvcc's output and the numbered source."""

    def __init__(self, message: str, command: list[str] | None = None, output: str = "", source: str = ""):
        self.command = command or []
        self.output = output
        self.source = source
        text = message
        if command:
            text += "\n\ncommand: " + " ".join(command)
        if output:
            text += "\n\nnvcc output:\n" + output.rstrip()
        if source:
            text += "\n\nsource:\n" + numbered(source)
        super().__init__(text)
        self.summary = message


class ToolchainError(RuntimeError):
    """nvcc is missing or unusable."""


def numbered(source: str) -> str:
    lines = source.splitlines()
    width = len(str(len(lines)))
    return "\n".join(f"{i:>{width}} | {line}" for i, line in enumerate(lines, 1))


@dataclasses.dataclass(frozen=True)
class Compiled:
    """A cubin and what ptxas said about each kernel in it."""

    cubin: bytes
    arch: str
    key: str
    resources: dict[str, dict[str, int]]
    log: str
    origin: str  # "nvcc", "memory" or "disk": where this build came from


# Where nvcc is looked for after PATH, $CUDA_HOME and $CUDA_PATH (a module constant so
# tests can take it away and see the missing-toolchain error).
CUDA_ROOTS: tuple[str, ...] = ("/usr/local/cuda",)


def find_nvcc() -> str:
    found = shutil.which("nvcc")
    if found:
        return found
    for root in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), *CUDA_ROOTS):
        if root and Path(root, "bin", "nvcc").is_file():
            return str(Path(root, "bin", "nvcc"))
    raise ToolchainError(
        "nvcc was not found on PATH (nor under $CUDA_HOME/bin or /usr/local/cuda/bin); "
        "install the CUDA toolkit or add its bin folder to PATH"
    )


_version_memo: dict[tuple, str] = {}
_SCRIPT_PATH = re.compile(rb"/[A-Za-z0-9_.+/-]+")


def _toolchain_ident(nvcc: str) -> tuple:
    """What identifies the installed nvcc: its real path, size and mtime. When nvcc is a
    small wrapper script (`exec /usr/local/cuda/bin/nvcc "$@"`), the files it names are
    added, so a toolkit swapped in behind an unchanged wrapper is still a new nvcc."""
    real = os.path.realpath(nvcc)
    st = os.stat(real)
    ident: list = [real, st.st_size, st.st_mtime_ns]
    if st.st_size <= 65536:
        try:
            with open(real, "rb") as fh:
                head = fh.read()
        except OSError:
            head = b"\x7fELF"
        if not head.startswith(b"\x7fELF"):
            for token in sorted(set(_SCRIPT_PATH.findall(head))):
                target = os.path.realpath(token.decode("utf-8", "replace"))
                try:
                    tst = os.stat(target)
                except OSError:
                    continue
                if os.path.isfile(target):
                    ident += [target, tst.st_size, tst.st_mtime_ns]
    return tuple(ident)


def nvcc_version(nvcc: str | None = None) -> str:
    """nvcc's release line. Memoised by the binary's path, size and mtime (in memory and on
    disk), so a warm build in a fresh process runs no nvcc at all."""
    nvcc = nvcc or find_nvcc()
    try:
        ident = _toolchain_ident(nvcc)
    except OSError as exc:
        raise ToolchainError(f"nvcc at {nvcc} cannot be used: {exc.strerror}") from None
    if ident in _version_memo:
        return _version_memo[ident]
    store = DiskCache(subdir="meta")
    memo_key = hashlib.sha256(repr(ident).encode()).hexdigest()[:24]
    hit = None if disabled() else store.get(memo_key)
    if hit is not None:
        version = hit[0].decode()
    else:
        try:
            out = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=60)
        except OSError as exc:
            raise ToolchainError(f"could not run {nvcc} --version: {exc}") from None
        except subprocess.TimeoutExpired:
            raise ToolchainError(f"{nvcc} --version did not answer within 60 s") from None
        if out.returncode != 0:
            # A broken toolchain must not be cached under an empty version string.
            detail = (out.stderr or out.stdout).strip().splitlines()
            raise ToolchainError(f"{nvcc} --version failed with exit code {out.returncode}"
                                 + (f": {detail[-1]}" if detail else ""))
        lines = [ln for ln in out.stdout.splitlines() if "release" in ln or ln.startswith("Build")]
        version = " ".join(lines) or out.stdout.strip()
        if not disabled():
            store.put(memo_key, version.encode(), {"nvcc": ident[0]})
    _version_memo[ident] = version
    return version


def check_arch(arch: str) -> str:
    if not isinstance(arch, str) or not _ARCH_RE.match(arch):
        raise ValueError(f"arch={arch!r} is not allowed: use the form sm_XY, for example 'sm_90' or 'sm_80'")
    return arch


def arch_number(arch: str) -> int:
    """The compute capability an arch names, as one number: 90 for "sm_90" and "sm_90a"."""
    return int(check_arch(arch)[3:].rstrip("af"))


_PTXAS_ENTRY = re.compile(r"Compiling entry function '([^']+)' for '([^']+)'")
_PTXAS_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_PTXAS_USED = re.compile(r"Used (\d+) registers(.*)")


def parse_ptxas(log: str) -> dict[str, dict[str, int]]:
    """Registers, shared memory, stack and spills per kernel, from `ptxas -v` output."""
    out: dict[str, dict[str, int]] = {}
    current = None
    for line in log.splitlines():
        m = _PTXAS_ENTRY.search(line)
        if m:
            current = out.setdefault(m.group(1), {"registers": 0, "shared_bytes": 0, "stack_bytes": 0,
                                                  "spill_stores": 0, "spill_loads": 0})
            continue
        if current is None:
            continue
        m = _PTXAS_FRAME.search(line)
        if m:
            current["stack_bytes"], current["spill_stores"], current["spill_loads"] = map(int, m.groups())
            continue
        m = _PTXAS_USED.search(line)
        if m:
            current["registers"] = int(m.group(1))
            smem = re.search(r"(\d+) bytes smem", m.group(2))
            current["shared_bytes"] = int(smem.group(1)) if smem else 0
    return out


_memory: dict[str, Compiled] = {}
_memory_lock = threading.Lock()


def cache_key(source: str, arch: str, options: tuple[str, ...], nvcc_ver: str) -> str:
    blob = json.dumps(
        {"schema": CACHE_SCHEMA, "kgen": __version__, "nvcc": nvcc_ver, "arch": arch,
         "options": list(BASE_OPTIONS) + list(options), "source": source},
        sort_keys=True,
    )
    return hashlib.sha256(blob.encode()).hexdigest()


def compile_cuda(source: str, arch: str = DEFAULT_ARCH, options: tuple[str, ...] = (),
                 cache: DiskCache | None = None) -> Compiled:
    """Compile to a cubin for `arch`, reusing the memory or disk cache when the key matches."""
    check_arch(arch)
    nvcc = find_nvcc()
    key = cache_key(source, arch, tuple(options), nvcc_version(nvcc))
    with _memory_lock:
        hit = _memory.get(key)
    if hit is not None:
        return dataclasses.replace(hit, origin="memory")
    store = None if disabled() else (cache or DiskCache())
    if store is None:
        return _remember(_run_nvcc(nvcc, source, arch, options, key))
    found = _load(store, key, arch)
    if found is not None:
        return _remember(found)
    with store.lock(key):
        found = _load(store, key, arch)  # another process may have built it while we waited
        if found is not None:
            return _remember(found)
        built = _run_nvcc(nvcc, source, arch, options, key)
        store.put(key, built.cubin, {"arch": arch, "resources": built.resources, "log": built.log})
    return _remember(built)


def is_cached(source: str, arch: str = DEFAULT_ARCH, options: tuple[str, ...] = (),
              cache: DiskCache | None = None, *, disk_only: bool = False) -> bool:
    """Whether compile_cuda would answer from the memory or disk cache (runs no nvcc; a
    missing toolchain or a disabled cache answers False). A cheap probe: one hash and one
    stat, so a tuner can prefer candidates that cost no compile. disk_only: whether another
    process would find it (the disk cache alone)."""
    try:
        key = cache_key(source, check_arch(arch), tuple(options), nvcc_version(find_nvcc()))
    except (ToolchainError, ValueError):
        return False
    with _memory_lock:
        if key in _memory and not disk_only:
            return True
    if disabled():
        return False
    return (cache or DiskCache()).path(key).is_file()


def _remember(compiled: Compiled) -> Compiled:
    with _memory_lock:
        _memory[compiled.key] = compiled
    return compiled


def _load(store: DiskCache, key: str, arch: str) -> Compiled | None:
    got = store.get(key)
    if got is None:
        return None
    cubin, meta = got
    # A cubin is an ELF file; anything else under this key is foreign and rebuilt.
    if not cubin.startswith(b"\x7fELF") or meta.get("arch") != arch:
        return None
    resources, log = meta.get("resources", {}), meta.get("log", "")
    if not isinstance(resources, dict) or not isinstance(log, str):
        return None
    return Compiled(cubin=cubin, arch=arch, key=key, resources=resources, log=log, origin="disk")


def _run_nvcc(nvcc: str, source: str, arch: str, options: tuple[str, ...], key: str) -> Compiled:
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="kgen-") as tmp:
        src = Path(tmp, "kernel.cu")
        out = Path(tmp, "kernel.cubin")
        src.write_text(source)
        cmd = [nvcc, "-cubin", f"-arch={arch}", *BASE_OPTIONS, *options, "-o", str(out), str(src)]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        except OSError as exc:
            raise ToolchainError(f"could not run nvcc ({nvcc}): {exc}") from None
        except subprocess.TimeoutExpired:
            raise CompileError("nvcc ran for more than 600 s", cmd, "", source) from None
        log = (proc.stdout + proc.stderr).replace(str(src), "kernel.cu")
        if proc.returncode != 0 or not out.is_file():
            raise CompileError(f"nvcc failed with exit code {proc.returncode}", cmd, log, source)
        cubin = out.read_bytes()
    # A call that waits for nvcc says so (kgen -v, or logging at INFO): where first calls wait,
    # `kgen cache fill` compiles ahead.
    logger.info("nvcc compiled %s for %s in %.1f s", key[:12], arch, time.perf_counter() - t0)
    return Compiled(cubin=cubin, arch=arch, key=key, resources=parse_ptxas(log), log=log, origin="nvcc")


def default_workers() -> int:
    """nvcc runs at a time when none are asked for (the tuner's compile processes, a fill's
    threads): one fewer than the CPU count, at least one, leaving a CPU to the process that
    feeds the GPU."""
    return max(1, (os.cpu_count() or 2) - 1)


def clear_memory_cache() -> None:
    with _memory_lock:
        _memory.clear()
