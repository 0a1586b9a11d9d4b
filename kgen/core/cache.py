"""A small byte store on disk: atomic writes, checked reads, never a reason to fail.

Entries are `<key>.bin` files holding a magic line, a JSON header (the key, payload
size, sha256 and free metadata) and the payload. A reader that finds a truncated,
corrupt or foreign file, or an entry written under another key, treats it as a miss.
Writers go through a temporary file and os.replace, so a reader never sees half an
entry. Entries are readable by everyone the umask allows (0644 by default), so a cache
folder shared between users hits for all of them.

The store keeps itself under a size limit (KGEN_CACHE_MAX_MB, default 2048 MB): after a
write takes it over, the entries used least recently are removed until it is at 90% of
the limit. A hit refreshes an entry's modification time (at most once an hour), which is
what "used recently" means here.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import math
import os
import stat
import tempfile
import threading
import time
import warnings
from pathlib import Path
from typing import Any, Iterator

try:  # POSIX only; without it concurrent builders merely duplicate work.
    import fcntl
except ImportError:  # pragma: no cover
    fcntl = None  # type: ignore[assignment]

log = logging.getLogger(__name__)

MAGIC = b"KGEN-CACHE-1\n"
DEFAULT_MAX_MB = 2048
# A hit refreshes the entry's mtime only when it is older than this, so hits cost no
# write in the common case and eviction still sees which entries are in use.
_TOUCH_AFTER_S = 3600.0
# A writer re-measures the folder after this long, so growth from other processes is seen.
_RESCAN_AFTER_S = 60.0

_TRUE_WORDS = ("1", "true", "yes", "on")
_FALSE_WORDS = ("", "0", "false", "no", "off")


def expand_path(text: str, variable: str) -> Path:
    """`text` (the value of the environment variable `variable`) with ~ and ~user expanded;
    ValueError naming the variable when the home folder cannot be found."""
    expanded = os.path.expanduser(text)
    if expanded.startswith("~"):
        user = expanded[1:].split(os.sep, 1)[0]
        what = f"there is no user {user!r} on this machine" if user else "the home folder is unknown (HOME is unset)"
        raise ValueError(f"{variable}={text!r} cannot be used: {what}; give the folder as a full path")
    return Path(expanded)


def default_dir() -> Path:
    env = os.environ.get("KGEN_CACHE_DIR")
    if env:
        return expand_path(env, "KGEN_CACHE_DIR")
    import platformdirs

    return Path(platformdirs.user_cache_dir("kgen"))


def disabled() -> bool:
    """True when KGEN_NO_CACHE asks for no disk cache (1, true, yes or on, any case)."""
    raw = os.environ.get("KGEN_NO_CACHE", "")
    word = raw.strip().lower()
    if word in _TRUE_WORDS:
        return True
    if word in _FALSE_WORDS:
        return False
    raise ValueError(f"KGEN_NO_CACHE={raw!r} is not allowed: 1, true, yes or on turn the disk cache off; "
                     "0, false, no, off or unset keep it on")


def max_bytes() -> int:
    """The size limit of one cache folder, from KGEN_CACHE_MAX_MB (megabytes, default 2048)."""
    raw = os.environ.get("KGEN_CACHE_MAX_MB", "").strip()
    if not raw:
        return DEFAULT_MAX_MB * 1_000_000
    try:
        mb = float(raw)
    except ValueError:
        mb = math.nan
    if not (math.isfinite(mb) and mb > 0):
        raise ValueError(f"KGEN_CACHE_MAX_MB={raw!r} is not allowed: a positive number of megabytes "
                         f"(default {DEFAULT_MAX_MB})")
    return int(mb * 1_000_000)


def _umask() -> int:
    """The process umask, read without changing it where /proc allows (changing it, even
    briefly, races with other threads creating files)."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    old = os.umask(0o022)
    os.umask(old)
    return old


def shareable_mode(mode: int = 0o644) -> int:
    """`mode` less what the umask takes away: the mode a plain new file would get."""
    return mode & ~_umask()


class CacheClearError(OSError):
    """Some entries could not be removed; `removed` says how many were."""

    def __init__(self, message: str, removed: int, failed: list[tuple[Path, OSError]]):
        super().__init__(message)
        self.removed = removed
        self.failed = failed


# Per folder: [bytes the entries held when last measured plus writes since, when measured].
_usage: dict[str, list[float]] = {}
_usage_lock = threading.Lock()


class DiskCache:
    """Entries under one folder. Every failure to read or write degrades to a miss."""

    _warned: set[str] = set()

    def __init__(self, root: Path | None = None, subdir: str = "cubin", limit_bytes: int | None = None):
        self.root = Path(root) if root is not None else default_dir()
        self.dir = self.root / subdir
        self.limit_bytes = max_bytes() if limit_bytes is None else limit_bytes

    def _warn_once(self, what: str, exc: BaseException) -> None:
        # Keyed by the root, not the subfolder: an unusable cache folder is one problem
        # for the user, so the cubin and meta stores together warn once.
        tag = str(self.root)
        if tag not in DiskCache._warned:
            DiskCache._warned.add(tag)
            warnings.warn(
                f"kgen: the cache folder {self.dir} cannot be used ({what}: {exc}); "
                "keeping compiled kernels in memory only for this process",
                RuntimeWarning,
                stacklevel=3,
            )

    def path(self, key: str) -> Path:
        return self.dir / f"{key}.bin"

    def get(self, key: str) -> tuple[bytes, dict[str, Any]] | None:
        path = self.path(key)
        found = _read_regular(path)
        if found is None:
            return None
        blob, mtime = found
        entry = decode(blob, key)
        if entry is not None and time.time() - mtime > _TOUCH_AFTER_S:
            with contextlib.suppress(OSError):  # another user's entry: it ages, that is all
                os.utime(path)
        return entry

    def put(self, key: str, payload: bytes, meta: dict[str, Any]) -> bool:
        """Write atomically; return False (after one warning) if the folder is unusable."""
        blob = encode(payload, meta, key)
        tmp = None
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.dir, prefix=".", suffix=".tmp")
            # mkstemp makes the file 0600; other users sharing the folder must read it.
            os.fchmod(fd, shareable_mode(0o644))
            _write_all(fd, blob)
            os.replace(tmp, self.path(key))
        except OSError as exc:
            if tmp is not None:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
            self._warn_once("write failed", exc)
            return False
        self._keep_within_limit(len(blob))
        return True

    # -- size ------------------------------------------------------------------------------
    def size(self) -> int:
        """Bytes the entries hold now."""
        total = 0
        for p in self.entries():
            with contextlib.suppress(OSError):
                total += p.stat().st_size
        return total

    def _keep_within_limit(self, added: int) -> None:
        tag = str(self.dir)
        now = time.monotonic()
        with _usage_lock:
            usage = _usage.get(tag)
            if usage is not None:
                usage[0] += added
            stale = usage is None or usage[0] > self.limit_bytes or now - usage[1] > _RESCAN_AFTER_S
        if not stale:
            return
        size = self.evict(self.limit_bytes)
        with _usage_lock:
            _usage[tag] = [size, now]

    def evict(self, limit_bytes: int) -> int:
        """If the entries hold more than `limit_bytes`, remove the least recently used ones
        until they hold at most 90% of it; return the bytes left. The newest entry stays."""
        stats = []
        for p in self.entries():
            with contextlib.suppress(OSError):
                st = p.stat()
                stats.append((st.st_mtime, st.st_size, p))
        total = sum(s for _, s, _ in stats)
        if total <= limit_bytes:
            return total
        goal = int(0.9 * limit_bytes)
        stats.sort()
        removed = 0
        for _, nbytes, p in stats[:-1]:
            if total <= goal:
                break
            try:
                p.unlink()
            except FileNotFoundError:
                pass  # another process evicted it first
            except OSError:
                continue
            total -= nbytes
            removed += 1
        log.info("cache %s over its limit of %.0f MB: removed %d least recently used entries, %.1f MB left",
                 self.dir, limit_bytes / 1e6, removed, total / 1e6)
        return total

    @contextlib.contextmanager
    def lock(self, key: str) -> Iterator[None]:
        """Hold an exclusive lock for `key` so that concurrent builders compile once."""
        handle = None
        if fcntl is not None:
            try:
                self.dir.mkdir(parents=True, exist_ok=True)
                handle = open(self.dir / f".{key}.lock", "a+b")
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
            except OSError:
                if handle is not None:
                    handle.close()
                handle = None
        try:
            yield
        finally:
            if handle is not None:
                with contextlib.suppress(OSError):
                    fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
                handle.close()

    def entries(self) -> list[Path]:
        try:
            return sorted(self.dir.glob("*.bin"))
        except OSError:
            return []

    def clear(self) -> int:
        """Remove every entry (and stray lock and temporary files); return how many entries
        went. Raises CacheClearError, after removing what it could, when some could not."""
        if not self.dir.is_dir():
            return 0
        removed = 0
        failed: list[tuple[Path, OSError]] = []
        try:
            names = list(self.dir.iterdir())
        except OSError as exc:
            raise CacheClearError(f"cannot list the cache folder {self.dir}: {exc.strerror}", 0,
                                  [(self.dir, exc)]) from None
        for p in names:
            if p.suffix in (".bin", ".lock", ".tmp"):
                try:
                    p.unlink()
                except FileNotFoundError:
                    continue
                except OSError as exc:
                    if p.suffix == ".bin":
                        failed.append((p, exc))
                    continue
                removed += p.suffix == ".bin"
        with _usage_lock:
            _usage.pop(str(self.dir), None)
        if failed:
            first, why = failed[0]
            raise CacheClearError(f"could not remove {len(failed)} of {len(failed) + removed} entries from "
                                  f"{self.dir} ({why.strerror}: {first.name}, ...)", removed, failed)
        return removed


# No kernel's entry comes near this; anything bigger is not ours and is not read.
MAX_ENTRY_BYTES = 256 << 20


def _read_regular(path: Path) -> tuple[bytes, float] | None:
    """The bytes and mtime of `path` if it is a regular file of sane size, else None. Opened
    without blocking and checked after opening, so a FIFO, a device (a link to /dev/zero) or
    a huge file planted under an entry's name is a miss, not a hang or an exhausted memory."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_ENTRY_BYTES:
            return None
        chunks, left = [], st.st_size + 1  # one byte more shows a file still growing
        while left > 0:
            chunk = os.read(fd, left)
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks), st.st_mtime
    except OSError:
        return None
    finally:
        os.close(fd)


def _write_all(fd: int, blob: bytes) -> None:
    """Write `blob` to the open temporary file and make it durable before it is renamed
    into place (a crash then leaves the old entry or the new one, never half of one).
    A separate function so tests can make it fail like a full disk."""
    with os.fdopen(fd, "wb") as fh:
        fh.write(blob)
        fh.flush()
        os.fsync(fh.fileno())


def encode(payload: bytes, meta: dict[str, Any], key: str | None = None) -> bytes:
    header = {"size": len(payload), "sha256": hashlib.sha256(payload).hexdigest(), "meta": meta}
    if key is not None:
        header["key"] = key
    return MAGIC + json.dumps(header, sort_keys=True).encode() + b"\n" + payload


def decode(blob: bytes, key: str | None = None) -> tuple[bytes, dict[str, Any]] | None:
    """(payload, meta) of an entry, or None when it is damaged, foreign or (given `key`)
    was written under another key: a copied or renamed entry is never served."""
    if not blob.startswith(MAGIC):
        return None
    rest = blob[len(MAGIC):]
    newline = rest.find(b"\n")
    if newline < 0:
        return None
    try:
        header = json.loads(rest[:newline])
        payload = rest[newline + 1:]
        # The hash covers the payload only, so a damaged header must be caught by shape.
        if not isinstance(header, dict) or not isinstance(header.get("meta"), dict):
            return None
        if key is not None and header.get("key") != key:
            return None
        if len(payload) != header["size"] or hashlib.sha256(payload).hexdigest() != header["sha256"]:
            return None
        return payload, header["meta"]
    except (ValueError, KeyError, TypeError):
        return None
