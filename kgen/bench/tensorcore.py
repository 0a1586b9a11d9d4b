"""`python -m kgen.bench.tensorcore OUT.json`: kgen's tensor-core matmul (TensorMatmul)
against cuBLAS through torch.matmul, in one run, on one device.

For each dtype (bfloat16, float16, float32 as TF32, float64) and shape it times the spec
dispatch runs on row-major operands (TensorMatmul.default_spec, then for_layouts: the wgmma
kernel on sm_90 for 16-bit types and TF32) and torch.matmul on the same inputs: CUDA events on torch's
stream, warm-up, each sample long enough to hide launch gaps, median of the samples.
cuBLAS runs with the precision kgen computes in: TF32 allowed only for the float32 rows,
reduced-precision (16-bit) split-K reductions off. Each kgen result is checked against a
float64 product first. It also measures the mma.sync ceiling of the device per input type
(independent MMAs on registers, no memory traffic), and times a few alternative specs
at 4096^3 and 8192^3. Results go to OUT.json (rewritten after every measurement).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time
from typing import Any

SHAPES: list[tuple[int, int, int]] = [
    (4096, 4096, 4096), (8192, 8192, 8192), (4097, 4097, 4097), (3000, 5000, 700), (127, 4096, 4096),
    (4096, 64, 4096), (1000, 1000, 1000),
]
IRREGULAR = [(4097, 4097, 4097), (3000, 5000, 700), (127, 4096, 4096), (4096, 64, 4096), (1000, 1000, 1000)]
DTYPES = ("bfloat16", "float16", "float32", "float64")
VARIANT_SHAPES = [(4096, 4096, 4096), (8192, 8192, 8192)]


def variants(dtype: str) -> list:
    """Alternatives to the default spec, timed at VARIANT_SHAPES: block and warp tiles, K
    step, pipeline depth, shared layout, raster band."""
    from ..ops.tensorcore import TensorMatmul as T

    if dtype in ("float16", "bfloat16"):
        rows = [dict(tile=(128, 128, 32), warp_tile=(64, 64), stages=4),
                dict(tile=(128, 256, 32), warp_tile=(64, 64), stages=3),
                dict(tile=(128, 256, 64), warp_tile=(64, 64), stages=3),
                dict(tile=(256, 128, 32), warp_tile=(64, 64), stages=4),
                dict(tile=(128, 256, 32), warp_tile=(64, 64), stages=4, smem_layout="pad"),
                dict(tile=(128, 128, 64), warp_tile=(64, 32), stages=4),
                dict(tile=(128, 256, 32), warp_tile=(64, 64), stages=4, raster_group=16, min_blocks=1)]
        if dtype == "bfloat16":
            rows = rows[:3]
    elif dtype == "float32":
        rows = [dict(tile=(128, 128, 16), warp_tile=(64, 64), stages=4, smem_layout="pad"),
                dict(tile=(128, 128, 32), warp_tile=(64, 64), stages=3, smem_layout="swizzle"),
                dict(tile=(128, 256, 16), warp_tile=(64, 64), stages=3, smem_layout="pad")]
    else:
        rows = [dict(tile=(64, 64, 16), warp_tile=(32, 32), stages=3, smem_layout="pad"),
                dict(tile=(128, 64, 16), warp_tile=(64, 32), stages=4, smem_layout="pad"),
                dict(tile=(64, 128, 16), warp_tile=(32, 64), stages=4, smem_layout="pad"),
                dict(tile=(128, 128, 16), warp_tile=(64, 32), stages=3, smem_layout="pad"),
                dict(tile=(64, 64, 8), warp_tile=(32, 32), stages=4, smem_layout="swizzle")]
    return [T(dtype=dtype, tf32=dtype == "float32", **r) for r in rows]  # type: ignore[arg-type]


def default_for(shape: tuple[int, int, int], dtype: str):
    """The spec dispatch runs for a product of row-major A and B with no tuning data."""
    from ..ops.tensorcore import TensorMatmul as T

    problem = dict(zip("MNK", shape))
    return T.default_spec(problem, dtype).for_layouts(problem, layout_a="row", layout_b="row")


def bench_specs() -> list:
    """Every spec this benchmark builds (for precompiling, and for the no-spill test)."""

    out = {}
    for dtype in DTYPES:
        for shape in SHAPES:
            s = default_for(shape, dtype)
            out[s.key] = s
        for s in variants(dtype):
            out[s.key] = s
    return list(out.values())


# ---------------------------------------------------------------------------------
# The mma.sync ceiling: each warp issues independent MMAs on register operands.
# ---------------------------------------------------------------------------------
_PEAK_SRC = r"""
#include <cuda_fp16.h>
#define CHAINS 8
extern "C" __global__ void __launch_bounds__(256) peak_f16(float* out, int iters) {
    const unsigned a0 = 0x3c003c00u, b0 = 0x3c003c00u;  // (1.0, 1.0) in float16
    float d[CHAINS][4] = {};
    for (int i = 0; i < iters; ++i)
#pragma unroll
        for (int c = 0; c < CHAINS; ++c)
            asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 { %0, %1, %2, %3}, { %4, %5, %6, %7}, "
                         "{ %8, %9}, { %0, %1, %2, %3};\n" : "+f"(d[c][0]), "+f"(d[c][1]), "+f"(d[c][2]), "+f"(d[c][3])
                         : "r"(a0), "r"(a0), "r"(a0), "r"(a0), "r"(b0), "r"(b0));
    float s = 0.f;
    for (int c = 0; c < CHAINS; ++c) s += d[c][0] + d[c][1] + d[c][2] + d[c][3];
    out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}
extern "C" __global__ void __launch_bounds__(256) peak_bf16(float* out, int iters) {
    const unsigned a0 = 0x3f803f80u;  // (1.0, 1.0) in bfloat16
    float d[CHAINS][4] = {};
    for (int i = 0; i < iters; ++i)
#pragma unroll
        for (int c = 0; c < CHAINS; ++c)
            asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 { %0, %1, %2, %3}, { %4, %5, %6, %7}, "
                         "{ %8, %9}, { %0, %1, %2, %3};\n" : "+f"(d[c][0]), "+f"(d[c][1]), "+f"(d[c][2]), "+f"(d[c][3])
                         : "r"(a0), "r"(a0), "r"(a0), "r"(a0), "r"(a0), "r"(a0));
    float s = 0.f;
    for (int c = 0; c < CHAINS; ++c) s += d[c][0] + d[c][1] + d[c][2] + d[c][3];
    out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}
extern "C" __global__ void __launch_bounds__(256) peak_tf32(float* out, int iters) {
    const unsigned a0 = 0x3f800000u;  // 1.0
    float d[CHAINS][4] = {};
    for (int i = 0; i < iters; ++i)
#pragma unroll
        for (int c = 0; c < CHAINS; ++c)
            asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 { %0, %1, %2, %3}, { %4, %5, %6, %7}, "
                         "{ %8, %9}, { %0, %1, %2, %3};\n" : "+f"(d[c][0]), "+f"(d[c][1]), "+f"(d[c][2]), "+f"(d[c][3])
                         : "r"(a0), "r"(a0), "r"(a0), "r"(a0), "r"(a0), "r"(a0));
    float s = 0.f;
    for (int c = 0; c < CHAINS; ++c) s += d[c][0] + d[c][1] + d[c][2] + d[c][3];
    out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}
extern "C" __global__ void __launch_bounds__(256) peak_f64(float* out, int iters) {
    const double a0 = 1.0;
    double d[CHAINS][2] = {};
    for (int i = 0; i < iters; ++i)
#pragma unroll
        for (int c = 0; c < CHAINS; ++c)
            asm volatile("mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64 { %0, %1}, { %2}, { %3}, { %0, %1};\n"
                         : "+d"(d[c][0]), "+d"(d[c][1]) : "d"(a0), "d"(a0));
    double s = 0.0;
    for (int c = 0; c < CHAINS; ++c) s += d[c][0] + d[c][1];
    out[blockIdx.x * blockDim.x + threadIdx.x] = (float)s;
}
"""
# Flops of one MMA instruction (one warp), per input type's entry point.
_PEAK_FLOPS = {"float16": ("peak_f16", 2 * 16 * 8 * 16), "bfloat16": ("peak_bf16", 2 * 16 * 8 * 16),
               "float32": ("peak_tf32", 2 * 16 * 8 * 8), "float64": ("peak_f64", 2 * 8 * 8 * 4)}


def measure_mma_peaks(torch, log=print) -> dict[str, float]:
    """TFLOP/s of independent mma.sync instructions per input type: the ceiling of this path."""
    from ..core import runtime
    from ..core.compiler import compile_cuda
    from ..core.kernel import default_arch
    from ..core.launch import DriverModule, Launch, ensure_context

    ensure_context()
    mod = DriverModule(compile_cuda(_PEAK_SRC, default_arch()).cubin)
    sms = runtime.device_limits()["multiprocessors"]
    blocks, threads, iters = sms * 4, 256, 2048
    buf = torch.empty(blocks * threads, device="cuda", dtype=torch.float32)
    peaks = {}
    for dtype, (name, flops) in _PEAK_FLOPS.items():
        go = Launch(mod.function(name), name, (blocks, 1, 1), (threads, 1, 1), 0, "Pi")
        stream = torch.cuda.current_stream().cuda_stream
        ms = time_ms(torch, lambda go=go, stream=stream: go(stream, buf.data_ptr(), iters))
        peaks[dtype] = flops * 8 * iters * blocks * (threads // 32) / (ms * 1e-3) / 1e12
        log(f"mma.sync ceiling {dtype}: {peaks[dtype]:.1f} TFLOP/s")
    return peaks


# ---------------------------------------------------------------------------------
# Timing and checking
# ---------------------------------------------------------------------------------
def time_ms(torch, call, *, samples: int = 15, sample_ms: float = 2.0) -> float:
    """Median milliseconds per call: CUDA events on torch's current stream around enough
    back-to-back calls to last ~sample_ms, after a warm-up."""
    for _ in range(3):
        call()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    call()
    torch.cuda.synchronize()
    est = max((time.perf_counter() - t0) * 1e3, 1e-3)
    inner = max(1, min(100, int(sample_ms / est)))
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(samples):
        start.record()
        for _ in range(inner):
            call()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop) / inner)
    return statistics.median(times)


def tflops(shape, ms: float) -> float:
    M, N, K = shape
    return 2.0 * M * N * K / (ms * 1e-3) / 1e12


def _inputs(torch, shape, dtype, seed: int):
    M, N, K = shape
    g = torch.Generator(device="cuda").manual_seed(seed)
    wide = torch.float64 if dtype == "float64" else torch.float32
    tdt = getattr(torch, dtype)
    A = torch.randn(M, K, device="cuda", dtype=wide, generator=g).to(tdt)
    B = torch.randn(K, N, device="cuda", dtype=wide, generator=g).to(tdt)
    return A, B


def _rel_error(torch, spec, A, B) -> float:
    """kgen's output on fresh NaN-poisoned storage against the float64 product."""
    import kgen

    k = kgen.build(spec)
    C = torch.full((A.shape[0], B.shape[1]), float("nan"), device="cuda", dtype=getattr(torch, spec.output_dtype))
    k(A, B, out=C)
    ref = A.double() @ B.double()
    got = C.double()
    if not bool(torch.isfinite(got).all()):
        return float("inf")
    return float(torch.linalg.norm(got - ref) / torch.linalg.norm(ref))


def _measure(torch, spec, A, B, C) -> dict[str, Any]:
    import kgen

    k = kgen.build(spec)
    ms = time_ms(torch, lambda: k(A, B, out=C))
    res = k.resources.get("kgen_tc_matmul", {})
    return {"spec": spec.to_dict(), "ms": ms, "registers": res.get("registers"),
            "spills": res.get("spill_stores", 0) + res.get("spill_loads", 0)}


def _cublas_flags(torch, dtype: str) -> None:
    torch.backends.cuda.matmul.allow_tf32 = dtype == "float32"
    torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False
    torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False


def _write(path: str, record: dict) -> None:
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w") as fh:
        json.dump(record, fh, indent=1)
    os.replace(tmp, path)


def geomean(values) -> float:
    values = [v for v in values if v and v > 0]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")


def run(out_path: str, dtypes=DTYPES, shapes=SHAPES, *, with_variants: bool = True, log=print) -> dict:
    import torch

    from ..core import runtime

    if not torch.cuda.is_available():
        raise runtime.NoGPUError("torch sees no CUDA device")
    record: dict[str, Any] = {
        "device": torch.cuda.get_device_name(), "torch": torch.__version__,
        "multiprocessors": torch.cuda.get_device_properties(0).multi_processor_count,
        "cublas": "torch.matmul; TF32 only for float32 inputs; fp16/bf16 reduced-precision reductions off",
        "timing": "CUDA events, 3 warm-up calls, median of 15 samples of >= 2 ms",
        "command": " ".join(sys.argv), "mma_sync_peak_tflops": {}, "results": [], "variants": [], "summary": {}}
    # Compile everything first, in parallel (nvcc dominates a cold run).
    import concurrent.futures as cf

    import kgen

    wanted = [default_for(s, d) for d in dtypes for s in shapes]
    if with_variants:
        wanted += [s for d in dtypes for s in variants(d)]
    with cf.ThreadPoolExecutor(max_workers=min(16, os.cpu_count() or 2)) as ex:
        list(ex.map(kgen.compile, {s.key: s for s in wanted}.values()))
    try:
        record["mma_sync_peak_tflops"] = measure_mma_peaks(torch, log)
    except Exception as exc:  # noqa: BLE001 - the ceiling is context; the table goes on without it
        record["mma_sync_peak_error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
    _write(out_path, record)
    for dtype in dtypes:
        _cublas_flags(torch, dtype)
        peak = record["mma_sync_peak_tflops"].get(dtype)
        for shape in shapes:
            row: dict[str, Any] = {"dtype": dtype, "shape": list(shape)}
            try:
                spec = default_for(shape, dtype)
                A, B = _inputs(torch, shape, dtype, seed=hash(shape) & 0xFFFF)
                C = torch.empty(shape[0], shape[1], device="cuda", dtype=getattr(torch, spec.output_dtype))
                row["rel_error"] = _rel_error(torch, spec, A, B)
                row["tolerance"] = spec.tolerance_for(dict(zip("MNK", shape)))
                row.update(_measure(torch, spec, A, B, C))
                row["tflops"] = tflops(shape, row["ms"])
                row["cublas_ms"] = time_ms(torch, lambda A=A, B=B, C=C: torch.matmul(A, B, out=C))
                row["cublas_tflops"] = tflops(shape, row["cublas_ms"])
                row["vs_cublas"] = row["cublas_ms"] / row["ms"]
                if peak:
                    row["mma_sync_peak_fraction"] = row["tflops"] / peak
                log(f"{dtype:9s} {'x'.join(map(str, shape)):>16s}: kgen {row['tflops']:7.1f} TFLOP/s, cuBLAS "
                    f"{row['cublas_tflops']:7.1f}, {row['vs_cublas']:.2f}x, error {row['rel_error']:.1e} "
                    f"(tolerance {row['tolerance']:.1e})")
                del A, B, C
            except Exception as exc:  # noqa: BLE001 - a failing row is recorded, the run goes on
                row["error"] = f"{type(exc).__name__}: {str(exc)[:400]}"
                log(f"{dtype} {shape}: {row['error']}")
            record["results"].append(row)
            _write(out_path, record)
        rows = [r for r in record["results"] if r["dtype"] == dtype and "vs_cublas" in r]
        record["summary"][dtype] = {
            f"{'x'.join(map(str, r['shape']))}": round(r["vs_cublas"], 3) for r in rows}
        record["summary"][dtype]["irregular_geomean"] = geomean(
            r["vs_cublas"] for r in rows if tuple(r["shape"]) in IRREGULAR)
        _write(out_path, record)
    if with_variants:
        for dtype in dtypes:
            _cublas_flags(torch, dtype)
            for shape in VARIANT_SHAPES:
                A, B = _inputs(torch, shape, dtype, seed=1)
                for spec in variants(dtype):
                    row = {"dtype": dtype, "shape": list(shape)}
                    try:
                        C = torch.empty(shape[0], shape[1], device="cuda", dtype=getattr(torch, spec.output_dtype))
                        row["rel_error"] = _rel_error(torch, spec, A, B)
                        row.update(_measure(torch, spec, A, B, C))
                        row["tflops"] = tflops(shape, row["ms"])
                        log(f"variant {dtype} {'x'.join(map(str, shape))} {spec.tile} {spec.warp_tile} "
                            f"s{spec.stages} {spec.smem_layout}: {row['tflops']:.1f} TFLOP/s")
                    except Exception as exc:  # noqa: BLE001
                        row["error"] = f"{type(exc).__name__}: {str(exc)[:400]}"
                    record["variants"].append(row)
                    _write(out_path, record)
                del A, B
    return record


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m kgen.bench.tensorcore", description=__doc__.split("\n\n")[0])
    ap.add_argument("out", help="path of the JSON record (rewritten after every measurement)")
    ap.add_argument("--dtypes", default=",".join(DTYPES), help="comma-separated subset of " + ",".join(DTYPES))
    ap.add_argument("--shapes", default="",
                    help="comma-separated MxNxK list (default: seven shapes from 127x4096x4096 to 8192^3)")
    ap.add_argument("--no-variants", action="store_true", help="skip the alternative specs")
    args = ap.parse_args(argv)
    dtypes = [d for d in args.dtypes.split(",") if d]
    bad = [d for d in dtypes if d not in DTYPES]
    if bad:
        ap.error(f"unknown dtype(s) {bad}; allowed: {list(DTYPES)}")
    shapes = SHAPES
    if args.shapes:
        try:
            shapes = [tuple(int(v) for v in s.split("x")) for s in args.shapes.split(",")]  # type: ignore[misc]
        except ValueError:
            ap.error(f"--shapes={args.shapes!r}: use MxNxK,MxNxK")
        if any(len(s) != 3 or min(s) < 1 for s in shapes):
            ap.error(f"--shapes={args.shapes!r}: each shape is three positive integers MxNxK")
    run(args.out, dtypes, shapes, with_variants=not args.no_variants, log=lambda m: print(m, flush=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
