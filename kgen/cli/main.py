"""The `kgen` command line: render, emit, info, cache, demo, bench, tune."""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from .. import __version__


class CLIError(Exception):
    """A user mistake: printed as one line, exit status 2."""


def _load_spec(text: str):
    from .. import ops  # noqa: F401 - registers the families a spec may name
    from ..core.spec import spec_from_json

    text = text.strip()
    if not text.startswith("{"):
        path = Path(text)
        if not path.is_file():
            raise CLIError(f"SPEC {text!r} is neither inline JSON (starting with '{{') nor an existing file")
        try:
            text = path.read_text()
        except OSError as exc:
            raise CLIError(f"cannot read spec file {path}: {exc.strerror}") from None
        except UnicodeDecodeError:
            raise CLIError(f"spec file {path} is not UTF-8 text (a JSON spec is expected)") from None
    return spec_from_json(text)


def cmd_render(args) -> int:
    from ..core.render import render

    sys.stdout.write(render(_load_spec(args.spec), standalone=args.standalone))
    return 0


def cmd_emit(args) -> int:
    from ..core.render import emit

    spec = _load_spec(args.spec)
    out = Path(args.output)
    if out.parent and not out.parent.exists() and not out.is_dir():
        raise CLIError(f"the folder {out.parent} does not exist")
    path = emit(spec, out, standalone=args.standalone)
    print(path)
    return 0


def cmd_info(args) -> int:
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
    print(f"cache     {state}")
    return 0


def cmd_cache(args) -> int:
    from ..core.cache import DiskCache, disabled

    store = DiskCache()
    if args.action == "info":
        entries = store.entries()
        size = sum(p.stat().st_size for p in entries if p.exists())
        print(f"folder    {store.dir}{' (disk cache disabled by KGEN_NO_CACHE)' if disabled() else ''}")
        print(f"entries   {len(entries)}")
        print(f"size      {size / 1e6:.2f} MB")
    else:
        print(f"removed {store.clear()} entries from {store.dir}")
    return 0


def cmd_demo(args) -> int:
    import numpy as np

    from ..core import runtime
    from ..core.kernel import build, compile
    from ..ops.matmul import Matmul
    from ..ops.reduce import Reduce
    from ..core.render import emit

    mm = Matmul.default_spec({"M": 2048, "N": 2048, "K": 2048}, "float32")
    dot = Reduce.default_spec({"n": 1 << 24, "op": "dot"}, "float32")
    ok, why = runtime.gpu_available()
    if not ok:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        print(f"No GPU here ({why}): rendering and compiling only.")
        for spec in (mm, dot):
            path = emit(spec, out / f"{spec.kernel}.cu", standalone=True)
            c = compile(spec)
            res = ", ".join(f"{k}: {v['registers']} regs, {v['shared_bytes']} B smem, {v['spill_stores']} B spilled"
                            for k, v in sorted(c.resources.items()))
            print(f"  {spec.kernel:7s} -> {path}  ({c.arch}; {res})")
        print(f"Build and run one anywhere with CUDA: nvcc -arch=sm_90 -o matmul {out / 'matmul.cu'} && ./matmul")
        return 0
    from ..core.timing import time_calls
    from pycuda import gpuarray

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
    print(f"kgen demo on {why}")
    print(f"{'kernel':20s} {'kgen ms':>9s} {'numpy ms':>9s} {'rate':>14s} {'rel. error':>11s}")
    for name, t, t_np, rate, e in rows:
        print(f"{name:20s} {t:9.3f} {t_np:9.2f} {rate:>14s} {e:11.2e}")
    return 0


def _rel(got, ref) -> float:
    import numpy as np

    if not np.all(np.isfinite(got)):
        return float("inf")
    return float(np.linalg.norm(got - ref) / max(np.linalg.norm(ref), 1e-300))


def _delegate(module: str, argv: list[str]) -> int:
    import importlib

    try:
        mod = importlib.import_module(module)
    except ImportError as exc:
        raise CLIError(f"this command is not available: {exc}") from None
    return int(mod.main(argv) or 0)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="kgen", description="Render, compile, run, benchmark and tune CUDA kernels from specs.")
    p.add_argument("--version", action="version", version=f"kgen {__version__}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    r = sub.add_parser("render", help="print the CUDA C source of a spec")
    r.add_argument("spec", help="inline JSON (e.g. '{\"kernel\": \"matmul\"}') or a JSON file")
    r.add_argument("--standalone", action="store_true", help="append a main() that checks and times the kernel")
    r.set_defaults(func=cmd_render)

    e = sub.add_parser("emit", help="write the CUDA C source of a spec to a file")
    e.add_argument("spec", help="inline JSON or a JSON file")
    e.add_argument("-o", "--output", required=True, help="the .cu file (or a folder) to write")
    e.add_argument("--standalone", action="store_true", help="append a main() that checks and times the kernel")
    e.set_defaults(func=cmd_emit)

    i = sub.add_parser("info", help="kgen, nvcc, pycuda and device details")
    i.set_defaults(func=cmd_info)

    c = sub.add_parser("cache", help="show or clear the compiled-kernel cache")
    c.add_argument("action", choices=["info", "clear"])
    c.set_defaults(func=cmd_cache)

    d = sub.add_parser("demo", help="build, check and time a matmul and a dot (compile only without a GPU)")
    d.add_argument("--out", default="kgen-demo", help="where the .cu files go when there is no GPU")
    d.set_defaults(func=cmd_demo)

    b = sub.add_parser("bench", help="benchmark a family against the vendor library (kgen bench matmul --help)")
    b.add_argument("family", choices=["matmul", "reduce"])
    b.add_argument("rest", nargs=argparse.REMAINDER)
    b.set_defaults(func=lambda a: _delegate(f"kgen.bench.{a.family}", a.rest))

    t = sub.add_parser("tune", help="autotune a family for a problem (kgen tune matmul --help)")
    t.add_argument("rest", nargs=argparse.REMAINDER)
    t.set_defaults(func=lambda a: _delegate("kgen.cli.tune", a.rest))
    return p


def main(argv: list[str] | None = None) -> int:
    from ..core.compiler import CompileError, ToolchainError
    from ..core.runtime import NoGPUError

    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except CompileError as exc:
        print(f"kgen: error: {exc.summary}", file=sys.stderr)
        print(exc.output, file=sys.stderr)
        return 2
    except (CLIError, ValueError, ToolchainError, NoGPUError, TypeError) as exc:
        print(f"kgen: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"kgen: error: {exc.strerror or exc}: {exc.filename or ''}".rstrip(": "), file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
