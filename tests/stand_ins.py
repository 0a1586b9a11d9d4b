"""What the catalogue and cluster tests tune with instead of a GPU and nvcc.

landscape / fake_resources: made-up times and ptxas reports for matmul specs; SMALL: a
corner of the matmul space (28 candidates, the same for every large shape).

stand_in_nvcc: a stand-in for nvcc, for tests that run the real compile path (render,
compile pool processes, disk cache) without the CUDA toolkit's cost: it answers --version,
and for -cubin -o OUT SRC writes an ELF-looking file and a ptxas report, logging every
compile.
"""
from __future__ import annotations

import hashlib
import os
import stat
import sys
from typing import Callable

from kgen.core import compiler

SMALL = {"tile": [(64, 64, 16), (128, 64, 16), (128, 128, 8)], "thread_tile": [(4, 4), (8, 4)], "stages": [2],
         "shared_memory": True, "split_k": 1, "async_copy": False, "min_blocks": 0}


def landscape(spec) -> float:
    """A made-up time, the same for every problem, with a fixed jitter per spec so no two tie."""
    BM, BN, _ = spec.tile
    TM, TN = spec.thread_tile
    jitter = int(hashlib.md5(spec.key.encode()).hexdigest()[:8], 16) / 2 ** 32
    return (1.0 + abs(BM - 128) / 64 + abs(BN - 64) / 128 + abs(TM - 8) / 16 + TN / 64) * (1 + 0.1 * jitter)


def fake_resources(spec, arch):
    """A ptxas report that prunes nothing."""
    return {"kgen_matmul": {"registers": 64, "shared_bytes": 0, "stack_bytes": 0, "spill_stores": 0,
                            "spill_loads": 0}}

SCRIPT = r'''#!PYTHON
import os, re, sys
args = sys.argv[1:]
if "--version" in args:
    print("Cuda compilation tools, release 99.9, V99.9.0 (kgen test stand-in)")
    sys.exit(0)
out = args[args.index("-o") + 1]
text = open(args[-1]).read()
with open(os.environ["FAKE_NVCC_LOG"], "a") as log:
    log.write(str(len(text)) + "\n")
arch = [a for a in args if a.startswith("-arch=")][0][6:]
with open(out, "wb") as fh:
    fh.write(b"\x7fELF stand-in cubin")
for name in re.findall(r"__global__\s+void\s+(?:__launch_bounds__\([^)]*\)\s*)?(\w+)\s*\(", text):
    sys.stderr.write(f"ptxas info    : Compiling entry function '{name}' for '{arch}'\n")
    sys.stderr.write("ptxas info    : Function properties for x\n")
    sys.stderr.write("    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n")
    sys.stderr.write("ptxas info    : Used 64 registers, 0 bytes smem, 400 bytes cmem[0]\n")
'''


def stand_in_nvcc(tmp_path, monkeypatch) -> Callable[[], int]:
    """Put the stand-in first on PATH (for this process and the processes it starts), give
    them an empty disk cache and this process an empty memory cache, and return a function
    counting the compiles so far."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    nvcc = bin_dir / "nvcc"
    nvcc.write_text(SCRIPT.replace("PYTHON", sys.executable))
    nvcc.chmod(nvcc.stat().st_mode | stat.S_IEXEC)
    log = tmp_path / "nvcc.log"
    log.write_text("")
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_NVCC_LOG", str(log))
    monkeypatch.setenv("KGEN_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(compiler, "_memory", {})  # a fresh memory cache, the shared one back afterwards
    return lambda: len(log.read_text().splitlines())
