"""`kgen info`: kgen, nvcc, pycuda, the device, the cache and the settings in effect."""
from __future__ import annotations

import argparse
import os

from .. import __version__


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("info", help="kgen, nvcc, pycuda, device, cache and settings",
                       description="Show kgen's version, the CUDA toolchain, pycuda, the device, the cache and "
                                   "the KGEN_* settings in effect.")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..core import cache, compiler, runtime

    print(f"kgen      {__version__}")
    try:
        nvcc = compiler.find_nvcc()
        print(f"nvcc      {nvcc}: {compiler.nvcc_version(nvcc)}")
    except compiler.ToolchainError as exc:
        print(f"nvcc      missing: {exc}")
    try:
        import pycuda

        print(f"pycuda    {pycuda.VERSION_TEXT}")
    except ImportError:
        print("pycuda    not installed (pip install 'kgen[cuda]'); render, emit and compile still work")
    ok, what = runtime.gpu_available()
    if ok:
        lim = runtime.device_limits()
        print(f"device    {what}, {runtime.device_arch()}, {lim['multiprocessors']} SMs, "
              f"L2 {lim['l2_bytes'] >> 20} MiB, {lim['max_shared_per_block_optin']} B shared/block")
    else:
        print(f"device    none ({what})")
    state = "off (KGEN_NO_CACHE)" if cache.disabled() else str(cache.DiskCache().dir)
    print(f"cache     {state}, at most {cache.max_bytes() / 1e6:.0f} MB")
    for name in ("KGEN_ARCH", "KGEN_DEVICE", "KGEN_CACHE_DIR", "KGEN_CACHE_MAX_MB", "KGEN_NO_CACHE", "KGEN_TUNE_DB",
                 "KGEN_SPLIT_TF32", "KGEN_PDL"):
        if os.environ.get(name):
            print(f"setting   {name}={os.environ[name]}")
    return 0
