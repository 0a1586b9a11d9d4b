"""`kgen bench matmul`: kgen's matmul against cuBLAS SGEMM, in one run, on one device.

For every shape it times the hand-picked best kgen spec (BEST below), cuBLAS through
torch or CuPy (TF32 off), and kgen specs that reproduce the textbook kernels (BASELINES).
Timing: CUDA events, warm-up, median of many repeats, inputs rotated over several sets
whose total passes the L2 size, so no kernel is timed on a warm cache the others lack.
It prints TFLOP/s, the ratio to cuBLAS and the fraction of the FP32 peak, which it
measures with a small FFMA-throughput kernel.
"""
from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from typing import Any

import numpy as np

# The default shapes, (M, N, K): powers of two, odd sizes and skinny products.
SHAPES: list[tuple[int, int, int]] = [
    (1024, 1024, 1024), (2048, 2048, 2048), (4096, 4096, 4096), (8192, 8192, 8192), (1000, 1000, 1000),
    (4097, 4097, 4097), (3000, 5000, 700), (127, 4096, 4096), (4096, 64, 4096),
]

_F32 = dict(shared_memory=True, vector_loads=True, smem_pad=4)
# cp.async pipeline (A staged through registers), 128x128x8 block, 8x8 thread tile.
_ASYNC = dict(tile=(128, 128, 8), thread_tile=(8, 8), warp_tile=(32, 64), stages=3, async_copy=True, **_F32)

_WIDE = dict(tile=(128, 256, 8), thread_tile=(8, 16), warp_tile=(32, 128), stages=4, async_copy=True, **_F32)
# 128x256x16 blocks of 8x16 thread tiles, 3 cp.async stages, interior tiles copied without
# bounds arithmetic, unaligned operands repacked for the vector kernel.
_W16 = dict(_WIDE, tile=(128, 256, 16), stages=3, interior_fast_path=True, repack=True)

# Hand-picked per-shape best specs, from the sweeps on an H200 (docs/bench/research/matmul_sweep.py rounds
# 1-3, docs/bench/research/matmul_wide_sweep.py, docs/bench/research/matmul_pipeline_sweep.py rounds 1-3;
# docs/benchmarks-matmul.md). Keys are "MxNxK"; shapes not listed use DEFAULT.
DEFAULT: dict[str, Any] = dict(_W16, tail_split_k=4)
BEST: dict[str, dict[str, Any]] = {
    # Too few 128x128 tiles to fill 132 SMs twice: split K four ways, two blocks per SM.
    "1024x1024x1024": dict(_ASYNC, min_blocks=2, split_k=4),
    "1000x1000x1000": dict(_ASYNC, min_blocks=2, split_k=4),
    "2048x2048x2048": dict(_W16),
    "4096x4096x4096": dict(_W16),
    "8192x8192x8192": dict(_W16),
    # Unaligned leading dimensions: repacked; 33x17 tiles are 4.25 waves of 132, so the last
    # two tile rows run as a second launch split 3 ways in K.
    "4097x4097x4097": dict(_W16, tail_split_k=4),
    # 24x20 tiles are 3.6 waves: the last tile rows split in K.
    "3000x5000x700": dict(_W16, tail_split_k=4),
    # One row of tiles: split K eight ways over 128x256 blocks (one wave of 128 blocks).
    "127x4096x4096": dict(_WIDE, split_k=8),
    "4096x64x4096": dict(tile=(64, 64, 16), thread_tile=(8, 4), warp_tile=(32, 32), stages=2, min_blocks=4,
                         split_k=8, interior_fast_path=True, **_F32),
}

# The articles' kernels, as kgen specs.
BASELINES: dict[str, dict[str, Any]] = {
    "naive (1 thread/element)": dict(tile=(32, 32, 16), thread_tile=(1, 1)),
    "shared 32x32 tiled": dict(tile=(32, 32, 32), thread_tile=(1, 1), shared_memory=True),
    "thread-tiled 128x128x8, 8x8": dict(tile=(128, 128, 8), thread_tile=(8, 8), shared_memory=True),
}


def shape_key(shape: tuple[int, int, int]) -> str:
    return "x".join(str(s) for s in shape)


def best_spec(shape: tuple[int, int, int], dtype: str = "float32"):
    import kgen

    return kgen.Matmul(dtype=dtype, **BEST.get(shape_key(shape), DEFAULT))


# ---------------------------------------------------------------------------------
# FP32 peak: many independent FFMA chains per thread, enough blocks to fill every SM.
# ---------------------------------------------------------------------------------
_PEAK_SRC = r"""
extern "C" __global__ void __launch_bounds__(256) ffma_peak(float* out, int iters, float a, float b) {
    // 8 independent chains hide the FFMA latency; the result is stored so nothing is dead.
    float x0 = threadIdx.x, x1 = x0 + 1, x2 = x0 + 2, x3 = x0 + 3, x4 = x0 + 4, x5 = x0 + 5, x6 = x0 + 6, x7 = x0 + 7;
    for (int i = 0; i < iters; ++i) {
#pragma unroll
        for (int u = 0; u < 16; ++u) {
            x0 = fmaf(x0, a, b); x1 = fmaf(x1, a, b); x2 = fmaf(x2, a, b); x3 = fmaf(x3, a, b);
            x4 = fmaf(x4, a, b); x5 = fmaf(x5, a, b); x6 = fmaf(x6, a, b); x7 = fmaf(x7, a, b);
        }
    }
    out[blockIdx.x * blockDim.x + threadIdx.x] = x0 + x1 + x2 + x3 + x4 + x5 + x6 + x7;
}
"""


def measure_fp32_peak() -> float:
    """Measured FFMA throughput in TFLOP/s (2 flops per FFMA)."""
    from ..core import runtime
    from ..core.compiler import compile_cuda
    from ..core.kernel import default_arch
    from ..core.timing import time_calls

    drv = runtime.driver()
    mod = runtime.Module(compile_cuda(_PEAK_SRC, default_arch()).cubin)
    fn = mod.function("ffma_peak")
    sms = runtime.device_limits()["multiprocessors"]
    blocks, threads, iters = sms * 8, 256, 4096
    out = drv.mem_alloc(blocks * threads * 4)
    args = (out, np.int32(iters), np.float32(0.999), np.float32(1e-3))
    t = time_calls(lambda: fn(*args, grid=(blocks, 1, 1), block=(threads, 1, 1)), warmup=3, repeats=15)
    flops = 2.0 * 8 * 16 * iters * blocks * threads
    return flops / (t.median_ms * 1e-3) / 1e12


# ---------------------------------------------------------------------------------
# Inputs and timing
# ---------------------------------------------------------------------------------
def _peer():
    """('torch', module) or ('cupy', module) or (None, None): who provides cuBLAS."""
    try:
        import torch

        if torch.cuda.is_available():
            torch.backends.cuda.matmul.allow_tf32 = False
            torch.backends.cudnn.allow_tf32 = False
            return "torch", torch
    except Exception:  # noqa: BLE001 - an unusable torch just means no torch peer
        pass
    try:
        import cupy

        return "cupy", cupy
    except Exception:  # noqa: BLE001
        return None, None


class Inputs:
    """Sets of (A, B, C) device arrays, rotated so the working set passes the L2 size."""

    def __init__(self, M: int, N: int, K: int, dtype: str, lib: str | None, mod, l2_bytes: int, seed: int = 0):
        item = np.dtype(dtype).itemsize
        per_set = (M * K + K * N + M * N) * item
        n_sets = max(1, min(8, math.ceil(2 * l2_bytes / per_set)))
        self.sets = []
        for i in range(n_sets):
            if lib == "torch":
                g = mod.Generator(device="cuda").manual_seed(seed + i)
                tdt = mod.float32 if dtype == "float32" else mod.float64
                A = mod.randn(M, K, device="cuda", dtype=tdt, generator=g)
                B = mod.randn(K, N, device="cuda", dtype=tdt, generator=g)
                C = mod.full((M, N), float("nan"), device="cuda", dtype=tdt)
            elif lib == "cupy":
                rs = mod.random.RandomState(seed + i)
                A = rs.standard_normal((M, K), dtype=dtype)
                B = rs.standard_normal((K, N), dtype=dtype)
                C = mod.full((M, N), np.nan, dtype=dtype)
            else:
                from pycuda import gpuarray

                rng = np.random.default_rng(seed + i)
                A = gpuarray.to_gpu(rng.standard_normal((M, K)).astype(dtype))
                B = gpuarray.to_gpu(rng.standard_normal((K, N)).astype(dtype))
                C = gpuarray.empty((M, N), dtype)
                C.fill(np.nan)
            self.sets.append((A, B, C))
        self.i = 0

    def next(self):
        s = self.sets[self.i]
        self.i = (self.i + 1) % len(self.sets)
        return s


def time_op(call, inputs: Inputs, *, target_ms: float = 2.0, repeats: int = 25) -> float:
    """Median milliseconds per call; each sample holds enough calls to last ~target_ms."""
    from ..core import runtime
    from ..core.timing import time_calls

    drv = runtime.driver()
    for _ in range(2):
        call(*inputs.next())
    drv.Context.synchronize()
    t0 = time.perf_counter()
    call(*inputs.next())
    drv.Context.synchronize()
    est_ms = (time.perf_counter() - t0) * 1e3
    inner = max(1, min(50, int(target_ms / max(est_ms, 1e-3))))
    t = time_calls(lambda: call(*inputs.next()), warmup=2, repeats=repeats, inner=inner)
    return t.median_ms


def check(spec, inputs: Inputs, lib, mod) -> float:
    """Relative error of kgen on the first input set against a float64 product."""
    k = _build(spec)
    A, B, C = inputs.sets[0]
    k(A, B, out=C)
    if lib == "torch":
        ref = (A.double() @ B.double()).cpu().numpy()
        got = C.cpu().numpy()
    elif lib == "cupy":
        ref = mod.asnumpy(A.astype(np.float64) @ B.astype(np.float64))
        got = mod.asnumpy(C)
    else:
        ref = A.get().astype(np.float64) @ B.get().astype(np.float64)
        got = C.get()
    if not np.all(np.isfinite(got)):
        return float("inf")
    return float(np.linalg.norm(got - ref) / max(np.linalg.norm(ref), 1e-300))


_kernels: dict[str, Any] = {}


def _build(spec):
    import kgen

    k = _kernels.get(spec.key)
    if k is None:
        k = _kernels[spec.key] = kgen.build(spec)
    return k


def kgen_call(spec):
    k = _build(spec)
    return lambda A, B, C: k(A, B, out=C)


def peer_call(lib, mod):
    if lib == "torch":
        return lambda A, B, C: mod.matmul(A, B, out=C)
    if lib == "cupy":
        return lambda A, B, C: mod.matmul(A, B, out=C)
    return None


def tflops(shape, ms: float) -> float:
    M, N, K = shape
    return 2.0 * M * N * K / (ms * 1e-3) / 1e12


def run(shapes, *, baselines: bool = True, repeats: int = 25, extra_specs=None, dtype: str = "float32",
        tune: str | None = None, log=print, on_shape=None) -> dict[str, Any]:
    """Time everything; returns the JSON-able record that the docs quote."""
    from ..core import runtime

    ok, name = runtime.gpu_available()
    if not ok:
        raise runtime.NoGPUError(name)
    limits = runtime.device_limits()
    lib, mod = _peer()
    peak = measure_fp32_peak()
    log(f"device: {name} ({limits['multiprocessors']} SMs), cuBLAS via {lib or 'nothing (absent)'}, "
        f"measured FP32 FFMA peak {peak:.1f} TFLOP/s")
    record: dict[str, Any] = {"device": name, "multiprocessors": limits["multiprocessors"], "peer": lib,
                              "fp32_peak_tflops": peak, "dtype": dtype, "shapes": []}
    for shape in shapes:
        M, N, K = shape
        inputs = Inputs(M, N, K, dtype, lib, mod, limits["l2_bytes"])
        row: dict[str, Any] = {"shape": list(shape), "n_input_sets": len(inputs.sets), "results": []}
        peer = peer_call(lib, mod)
        entries: list[tuple[str, Any, Any]] = []  # (label, kgen spec or None, peer call or None)
        if peer is not None:
            entries.append(("cuBLAS (" + lib + ")", None, peer))
        best = best_spec(shape, dtype)
        entries.append(("kgen best", best, None))
        if tune:
            # The autotuner's pick for this exact shape (from its database when already tuned).
            import kgen

            tuned = kgen.autotune(kgen.Matmul, problem={"M": M, "N": N, "K": K}, dtype=dtype, strategy=tune)
            if tuned.best is None:
                raise RuntimeError(f"{shape_key(shape)}: the {tune} tune timed no candidate ({tuned.note})")
            log(f"{shape_key(shape)}: {tune} tune picked {tuned.best.to_json()} ({tuned.note})")
            entries.append((f"kgen tuned ({tune})", tuned.best, None))
        if baselines:
            for bname, fields in BASELINES.items():
                entries.append((bname, _spec(fields, dtype), None))
        for i, s in enumerate(extra_specs or []):
            entries.append((f"spec {i}", s, None))
        peer_ms = None
        for label, spec, call in entries:
            res: dict[str, Any] = {"name": label}
            try:
                if spec is not None:
                    res["spec"] = spec.to_dict()
                    res["rel_error"] = check(spec, inputs, lib, mod)
                    res["tolerance"] = spec.tolerance(K)
                    call = kgen_call(spec)
                    res["resources"] = _build(spec).resources
                ms = time_op(call, inputs, repeats=repeats)
                res.update(ms=ms, tflops=tflops(shape, ms), peak_fraction=tflops(shape, ms) / peak)
                if spec is None:
                    peer_ms = ms
            except Exception as exc:  # noqa: BLE001 - a failing variant is recorded, the run goes on
                res["error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
            row["results"].append(res)
        for res in row["results"]:
            if peer_ms and "ms" in res:
                res["vs_cublas"] = peer_ms / res["ms"]
        record["shapes"].append(row)
        del inputs
        _print_row(shape, row, log)
        if on_shape is not None:
            on_shape(record)  # e.g. save what is measured so far: a long run cut short keeps it
    for label, key in (("kgen best", "geomean_vs_cublas"), (f"kgen tuned ({tune})", "geomean_tuned_vs_cublas")):
        ratios = [r["vs_cublas"] for row in record["shapes"] for r in row["results"]
                  if r["name"] == label and "vs_cublas" in r]
        if ratios:
            record[key] = math.exp(statistics.fmean(math.log(x) for x in ratios))
            log(f"geometric mean of {label} / cuBLAS over {len(ratios)} shapes: {record[key]:.3f}x")
    if tune:
        # Per shape, the faster of the hand-picked and the tuned spec.
        ratios = [max(r["vs_cublas"] for r in row["results"] if r["name"].startswith("kgen ") and "vs_cublas" in r)
                  for row in record["shapes"]
                  if any(r["name"].startswith("kgen ") and "vs_cublas" in r for r in row["results"])]
        if ratios:
            record["geomean_best_of_both_vs_cublas"] = math.exp(statistics.fmean(math.log(x) for x in ratios))
            log(f"geometric mean of the faster kgen spec per shape / cuBLAS: "
                f"{record['geomean_best_of_both_vs_cublas']:.3f}x")
    return record


def _spec(fields, dtype):
    import kgen

    return kgen.Matmul(dtype=dtype, **fields)


def _print_row(shape, row, log):
    log(f"\n{shape_key(shape)}  (inputs rotated over {row['n_input_sets']} sets)")
    for r in row["results"]:
        if "error" in r:
            log(f"  {r['name']:<32} ERROR {r['error']}")
            continue
        vs = f"{r['vs_cublas']:.3f}x" if "vs_cublas" in r else "  -   "
        err = f" err {r['rel_error']:.1e}" if "rel_error" in r else ""
        bad = " FAILED CHECK" if "rel_error" in r and not r["rel_error"] <= r["tolerance"] else ""
        log(f"  {r['name']:<32} {r['ms']:9.3f} ms {r['tflops']:7.2f} TFLOP/s {vs:>7} cuBLAS "
            f"{100 * r['peak_fraction']:5.1f}% peak{err}{bad}")


def plot(record: dict[str, Any], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names: list[str] = []
    for row in record["shapes"]:
        for r in row["results"]:
            if r["name"] not in names:
                names.append(r["name"])
    labels = [shape_key(tuple(row["shape"])) for row in record["shapes"]]
    x = np.arange(len(labels))
    width = 0.8 / max(len(names), 1)
    fig, ax = plt.subplots(figsize=(12, 5))
    for i, name in enumerate(names):
        vals = []
        for row in record["shapes"]:
            got = [r.get("tflops", 0.0) for r in row["results"] if r["name"] == name]
            vals.append(got[0] if got else 0.0)
        ax.bar(x + (i - (len(names) - 1) / 2) * width, vals, width, label=name)
    ax.axhline(record["fp32_peak_tflops"], color="k", linestyle="--", linewidth=0.8, label="measured FFMA peak")
    ax.set_xticks(x)
    ax.set_xticklabels(labels, rotation=20)
    ax.set_ylabel("TFLOP/s (float32)")
    ax.set_title(f"kgen matmul vs cuBLAS SGEMM (TF32 off) on {record['device']}")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def parse_shape(text: str) -> tuple[int, int, int]:
    parts = text.lower().replace("^3", "").split("x")
    try:
        vals = [int(p) for p in parts]
    except ValueError:
        raise argparse.ArgumentTypeError(f"shape {text!r} is not MxNxK (or N^3)") from None
    if len(vals) == 1:
        vals = vals * 3
    if len(vals) != 3 or min(vals) < 1:
        raise argparse.ArgumentTypeError(f"shape {text!r} is not MxNxK with positive sizes")
    return tuple(vals)  # type: ignore[return-value]


def build_parser(ap: argparse.ArgumentParser | None = None) -> argparse.ArgumentParser:
    """The options of `kgen bench matmul`, added to `ap` (the kgen command's subparser) or a new parser."""
    if ap is None:
        ap = argparse.ArgumentParser(prog="kgen bench matmul", description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", nargs="+", type=parse_shape, default=None,
                    help="MxNxK shapes, or N for N^3 (default: nine shapes from 127x4096x4096 to 8192^3)")
    ap.add_argument("--no-baselines", action="store_true", help="skip the textbook kernels")
    ap.add_argument("--repeats", type=int, default=25, help="timed samples per kernel (median reported)")
    ap.add_argument("--json", default=None, help="write the raw record here")
    ap.add_argument("--plot", default=None, help="write a bar chart (PNG, needs matplotlib) here")
    ap.add_argument("--tune", choices=["guided", "random", "exhaustive"], default=None,
                    help="also time the autotuner's pick for each shape (tuned now, or read from the database)")
    return ap


def main(argv: list[str]) -> int:
    return main_args(build_parser().parse_args(argv))


def main_args(args: argparse.Namespace) -> int:
    """Run the benchmark for parsed options (see build_parser)."""

    def save(record):
        if args.json:
            with open(args.json, "w") as fh:
                json.dump(record, fh, indent=1)

    try:
        record = run(args.shapes or SHAPES, baselines=not args.no_baselines, repeats=args.repeats, tune=args.tune,
                     on_shape=save)
    except Exception as exc:  # noqa: BLE001 - the CLI reports, it does not trace back
        if type(exc).__name__ == "NoGPUError":
            print(f"kgen bench matmul: {exc}", file=sys.stderr)
            return 2
        raise
    save(record)
    if args.plot:
        try:
            plot(record, args.plot)
        except ImportError:
            print("matplotlib is not importable: no plot written", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
