"""`kgen cache info|clear`: the compiled-kernel cache."""
from __future__ import annotations

import argparse

from .common import CommandFailed


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("cache", help="show or clear the compiled-kernel cache",
                       description="Show the compiled-kernel cache (folder, entries, size and its limit) or remove "
                                   "its entries. The folder is KGEN_CACHE_DIR (default: the user cache folder); "
                                   "KGEN_CACHE_MAX_MB bounds its size (default 2048): past it, the least recently "
                                   "used kernels are removed.")
    p.add_argument("action", choices=["info", "clear"], help="info: folder, entries, size; clear: remove the entries")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..core.cache import CacheClearError, DiskCache, disabled

    store = DiskCache()
    if args.action == "info":
        entries = store.entries()
        print(f"folder    {store.dir}{' (disk cache disabled by KGEN_NO_CACHE)' if disabled() else ''}")
        print(f"entries   {len(entries)}")
        print(f"size      {store.size() / 1e6:.2f} MB of at most {store.limit_bytes / 1e6:.0f} MB (KGEN_CACHE_MAX_MB)")
        return 0
    try:
        removed = store.clear()
    except CacheClearError as exc:
        if exc.removed:
            print(f"removed {exc.removed} entries from {store.dir}")
        raise CommandFailed(str(exc)) from None
    print(f"removed {removed} entries from {store.dir}")
    return 0
