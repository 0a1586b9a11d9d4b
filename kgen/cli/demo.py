"""`kgen demo`: build, check and time a matmul and a dot product; without a GPU, render and
compile them and write their standalone sources to a folder."""
from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from .common import shared_text


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("demo", help="build, check and time a matmul and a dot (compile only without a GPU)",
                       description="With a GPU: build a 2048^3 matmul and a 2^24 dot product, check them against "
                                   "float64 references and time them. Without one: render and compile both, "
                                   "report their resources and write standalone .cu files.")
    p.add_argument("-o", "--out", metavar="DIR", default=None,
                   help="where the .cu files go without a GPU (default: a new temporary folder, printed)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..core import runtime
    from ..ops.matmul import Matmul
    from ..ops.reduce import Reduce

    mm = Matmul.default_spec({"M": 2048, "N": 2048, "K": 2048}, "float32")
    dot = Reduce.default_spec({"n": 1 << 24, "op": "dot"}, "float32")
    ok, why = runtime.gpu_available()
    if not ok:
        return _compile_only(args, (mm, dot), why)
    return _run_on_gpu(mm, dot, why)


def _compile_only(args: argparse.Namespace, specs, why: str) -> int:
    from ..core.kernel import compile
    from ..core.render import emit

    out = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="kgen-demo-"))
    out.mkdir(parents=True, exist_ok=True)
    print(f"No GPU here ({why}): rendering and compiling only, into {out}")
    for spec in specs:
        path = emit(spec, out / f"{spec.kernel}.cu", standalone=True)
        c = compile(spec)
        print(f"  {spec.kernel:7s} -> {path}  ({c.arch})")
        for name, res in sorted(c.resources.items()):
            print(f"      {name}: {res['registers']} regs, {shared_text(res)}, {res['spill_stores']} B spilled")
    print(f"Build and run one anywhere with CUDA: nvcc -arch=sm_90 -o matmul {out / 'matmul.cu'} && ./matmul")
    return 0


def _run_on_gpu(mm, dot, device: str) -> int:
    import numpy as np
    from pycuda import gpuarray

    from ..core.kernel import build
    from ..core.timing import time_calls

    rng = np.random.default_rng()
    rows = []
    M = N = K = 2048
    A = rng.standard_normal((M, K)).astype(np.float32)
    B = rng.standard_normal((K, N)).astype(np.float32)
    k = build(mm)
    dA, dB = gpuarray.to_gpu(A), gpuarray.to_gpu(B)
    dC = gpuarray.empty((M, N), np.float32)
    dC.fill(np.nan)
    k(dA, dB, out=dC)
    err = _rel(dC.get(), A.astype(np.float64) @ B.astype(np.float64))
    t = time_calls(lambda: k(dA, dB, out=dC), repeats=20).median_ms
    t0 = time.perf_counter()
    A @ B
    t_np = (time.perf_counter() - t0) * 1e3
    rows.append(("matmul 2048^3 f32", t, t_np, f"{2 * M * N * K / t / 1e9:.1f} TFLOP/s", err))
    n = 1 << 24
    x = rng.standard_normal(n).astype(np.float32)
    y = rng.standard_normal(n).astype(np.float32)
    kd = build(dot)
    dx, dy = gpuarray.to_gpu(x), gpuarray.to_gpu(y)
    res = kd(dx, dy)
    ref = float(np.dot(x.astype(np.float64), y.astype(np.float64)))
    derr = abs(float(res.get()) - ref) / max(abs(ref), 1e-30)
    t = time_calls(lambda: kd(dx, dy), repeats=50).median_ms
    t0 = time.perf_counter()
    np.dot(x, y)
    t_np = (time.perf_counter() - t0) * 1e3
    rows.append(("dot 2^24 f32", t, t_np, f"{2 * n * 4 / t / 1e6:.0f} GB/s", derr))
    print(f"kgen demo on {device}")
    print(f"{'kernel':20s} {'kgen ms':>9s} {'numpy ms':>9s} {'rate':>14s} {'rel. error':>11s}")
    for name, t, t_np, rate, e in rows:
        print(f"{name:20s} {t:9.3f} {t_np:9.2f} {rate:>14s} {e:11.2e}")
    for kernel in (k, kd):
        for name, r in sorted(kernel.resources.items()):
            print(f"  {name}: {r['registers']} regs, {shared_text(r)}, {r['spill_stores']} B spilled")
    return 0


def _rel(got, ref) -> float:
    import numpy as np

    if not np.all(np.isfinite(got)):
        return float("inf")
    return float(np.linalg.norm(got - ref) / max(np.linalg.norm(ref), 1e-300))
