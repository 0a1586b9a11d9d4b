"""A small byte store on disk: atomic writes, checked reads, never a reason to fail.

Entries are `<key>.bin` files holding a magic line, a JSON header (payload size,
sha256 and free metadata) and the payload. A reader that finds a truncated,
corrupt or foreign file treats it as a miss. Writers go through a temporary
file and os.replace, so a reader never sees half an entry.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import stat
import tempfile
import warnings
from pathlib import Path
from typing import Any, Iterator

try:  # POSIX only; without it concurrent builders merely duplicate work.
    import fcntl
except ImportError:  # pragma: no cover
    fcntl = None  # type: ignore[assignment]

MAGIC = b"KGEN-CACHE-1\n"


def default_dir() -> Path:
    env = os.environ.get("KGEN_CACHE_DIR")
    if env:
        return Path(env).expanduser()
    import platformdirs

    return Path(platformdirs.user_cache_dir("kgen"))


def disabled() -> bool:
    return os.environ.get("KGEN_NO_CACHE", "").strip() not in ("", "0")


class DiskCache:
    """Entries under one folder. Every failure to read or write degrades to a miss."""

    _warned: set[str] = set()

    def __init__(self, root: Path | None = None, subdir: str = "cubin"):
        self.root = Path(root) if root is not None else default_dir()
        self.dir = self.root / subdir

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
        blob = _read_regular(self.path(key))
        return None if blob is None else decode(blob)

    def put(self, key: str, payload: bytes, meta: dict[str, Any]) -> bool:
        """Write atomically; return False (after one warning) if the folder is unusable."""
        blob = encode(payload, meta)
        tmp = None
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.dir, prefix=f".{key}.", suffix=".tmp")
            _write_all(fd, blob)
            os.replace(tmp, self.path(key))
            return True
        except OSError as exc:
            if tmp is not None:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
            self._warn_once("write failed", exc)
            return False

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
        removed = 0
        if not self.dir.is_dir():
            return 0
        for p in self.dir.iterdir():
            if p.suffix in (".bin", ".lock", ".tmp") or p.name.endswith(".tmp"):
                with contextlib.suppress(OSError):
                    p.unlink()
                    removed += p.suffix == ".bin"
        return removed


# No kernel's entry comes near this; anything bigger is not ours and is not read.
MAX_ENTRY_BYTES = 256 << 20


def _read_regular(path: Path) -> bytes | None:
    """The bytes of `path` if it is a regular file of sane size, else None. Opened without
    blocking and checked after opening, so a FIFO, a device (a link to /dev/zero) or a
    huge file planted under an entry's name is a miss, not a hang or an exhausted memory."""
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
        return b"".join(chunks)
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


def encode(payload: bytes, meta: dict[str, Any]) -> bytes:
    header = {"size": len(payload), "sha256": hashlib.sha256(payload).hexdigest(), "meta": meta}
    return MAGIC + json.dumps(header, sort_keys=True).encode() + b"\n" + payload


def decode(blob: bytes) -> tuple[bytes, dict[str, Any]] | None:
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
        if len(payload) != header["size"] or hashlib.sha256(payload).hexdigest() != header["sha256"]:
            return None
        return payload, header["meta"]
    except (ValueError, KeyError, TypeError):
        return None
