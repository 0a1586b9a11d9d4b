"""Skinny products (decode shapes) against cuBLAS through torch, in one run.

    kgen bench decode --shapes 1x4096x4096,4x14336x4096 --layouts col,row
    python -m kgen.bench.skinny --shapes 1x4096x4096,16x14336x4096 --dtypes float32,bfloat16 --json out.json
    python -m kgen.bench.skinny --random 12 --seed 7          # M in 1..64, N and K in 1024..16384

For every shape M x N x K and dtype it reports, beside the copy bandwidth measured in the
same run (torch clone of a 1 GiB buffer, bytes read + written over time):
  bound      (bytes of A + B + C) / copy bandwidth: the least time the product can take;
  floor      a device-to-device copy of the same bytes (half read, half written) timed as the
             route is (a CUDA graph over buffers rotated past L2): what one launch moving
             those bytes reaches at this size, launch and ramp-up included (a 16 MB copy
             reached 78% of the 1 GiB copy's bandwidth on an H100); `% floor` = floor / route;
  device     the kgen kernel's device time: a bound launcher (arguments resolved once)
             called back to back, CUDA events around the batch; `% bound` = bound / device;
  single     one public call (`k(A, B)`, output allocated, host included) between CUDA
             events after a synchronisation, median over repeats, for kgen and torch.matmul;
  pipelined  public calls back to back, events around the batch, per call;
  cuBLAS device  torch.matmul replayed from a CUDA graph (its device time alone);
  route      what kgen.matmul runs for the call (the family dispatch picks: on an H100 or H200
             16-bit few rows go to the tensor-core kernel with A's rows as the wgmma N), its
             device time from a CUDA graph, its % of the bound and one public call beside
             torch.matmul's.
Inputs rotate through enough copies that their footprint is at least 3 L2s, so no
contender reads a warm L2. B is the weight as torch's Linear holds it (B = W.T, W stored
N x K) unless --layout row. TF32 is off for cuBLAS (torch.backends.cuda.matmul.allow_tf32).
--sweep times field variants of the default spec on the same shapes (device time), for
each of --layouts, and reports which fields moved it.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import random
import statistics
import sys
import time
from typing import Any

DTYPES = ("float32", "bfloat16", "float16")
DEFAULT_SHAPES = ("1x4096x4096", "1x14336x4096", "4x4096x4096", "8x5120x5120", "16x4096x11008",
                  "16x14336x4096", "17x4096x4096", "32x4096x4096", "64x5120x5120", "128x4096x4096",
                  "256x4096x4096")


def _parse(argv: list[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="kgen bench decode", description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", default=",".join(DEFAULT_SHAPES), help="comma list of MxNxK")
    ap.add_argument("--random", type=int, default=0,
                    help="draw this many shapes instead: M in 1..64, N, K in 1024..16384")
    ap.add_argument("--seed", type=int, default=0, help="seed for --random")
    ap.add_argument("--dtypes", default=",".join(DTYPES), help="comma list of float32, bfloat16, float16, float64")
    ap.add_argument("--layouts", default="col",
                    help="comma list of col (B = W.T with W stored N x K, as torch's Linear holds it) and row "
                         "(B stored K x N)")
    ap.add_argument("--repeats", type=int, default=20, help="timed samples per measurement (median taken)")
    ap.add_argument("--sweep", action="store_true", help="also time field variants of the default spec")
    ap.add_argument("--sweep-shapes", default="", help="shapes for --sweep (default: the first four table shapes)")
    ap.add_argument("--sweep-only", action="store_true", help="with --sweep: skip the table")
    ap.add_argument("--sweep-dtypes", default="", help="dtypes for --sweep (default: --dtypes)")
    ap.add_argument("--json", default="", help="write every result to this JSON file")
    ap.add_argument("--budget", type=float, default=0.0, help="stop starting new shapes after this many seconds")
    return ap.parse_args(argv)


def shapes_from(args) -> list[tuple[int, int, int]]:
    if args.random:
        rng = random.Random(args.seed)
        return [(rng.randint(1, 64), rng.randint(1024, 16384), rng.randint(1024, 16384)) for _ in range(args.random)]
    out = []
    for text in args.shapes.split(","):
        text = text.strip()
        if not text:
            continue
        parts = text.lower().split("x")
        if len(parts) != 3 or not all(p.isdigit() and int(p) > 0 for p in parts):
            raise SystemExit(f"--shapes: {text!r} is not MxNxK with positive integers")
        out.append((int(parts[0]), int(parts[1]), int(parts[2])))
    return out


def sweep_variants(spec) -> list[tuple[str, Any]]:
    """(label, spec) variants of a default spec, one field changed at a time."""
    from ..ops.skinny import MERGES

    out: list[tuple[str, Any]] = []

    def add(label, **kw):
        try:
            s = spec.replace(**kw)
        except ValueError:
            return
        if s != spec and all(s != o for _, o in out):
            out.append((label, s))

    for wc in (1, 2, 8):
        add(f"warp_cols={wc}", warp_cols=wc)
    for loads in (4, 16):
        add(f"loads={loads}", loads=loads)
    for threads in (128, 512):
        add(f"threads={threads}", threads=threads)
    for waves in (1, 4):
        add(f"waves={waves}", waves=waves)
    for merge in MERGES:
        add(f"merge={merge}", merge=merge)
    add("lane_vectors=2", lane_vectors=2)
    add("min_blocks=2", min_blocks=2)
    add("k_split=1", k_split=1)
    return out


# ---------------------------------------------------------------------------------
# Timing (torch events, so kgen and cuBLAS are timed the same way on the same stream)
# ---------------------------------------------------------------------------------
def _events(torch):
    return torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)


def time_batched(torch, calls, repeats: int, inner: int) -> float:
    """Median microseconds per call over batches of `inner` back-to-back calls (rotating)."""
    for c in calls[: max(2, len(calls))]:
        c()
    torch.cuda.synchronize()
    start, stop = _events(torch)
    samples = []
    for _ in range(repeats):
        start.record()
        for i in range(inner):
            calls[i % len(calls)]()
        stop.record()
        stop.synchronize()
        samples.append(start.elapsed_time(stop) * 1e3 / inner)
    return statistics.median(samples)


def time_single(torch, calls, repeats: int) -> float:
    """Median microseconds of one call between events, started on an idle GPU."""
    for c in calls[:2]:
        c()
    torch.cuda.synchronize()
    start, stop = _events(torch)
    samples = []
    for i in range(repeats):
        torch.cuda.synchronize()
        start.record()
        calls[i % len(calls)]()
        stop.record()
        stop.synchronize()
        samples.append(start.elapsed_time(stop) * 1e3)
    return statistics.median(samples)


def time_graph(torch, fn_sets, repeats: int) -> float:
    """Device microseconds per call: every call captured once in a CUDA graph, replayed."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for f in fn_sets:
            f()
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for f in fn_sets:
            f()
    g.replay()
    torch.cuda.synchronize()
    start, stop = _events(torch)
    samples = []
    for _ in range(repeats):
        start.record()
        g.replay()
        stop.record()
        stop.synchronize()
        samples.append(start.elapsed_time(stop) * 1e3 / len(fn_sets))
    return statistics.median(samples)


def checked_graph_time(torch, fn, A, B, C, ref, repeats: int) -> tuple[float, float, list]:
    """(relative error against the float64 `ref`, device microseconds per call, the calls) of
    fn(a, b, c) over the rotated operand sets zip(A, B, C): the first set's output NaN-poisoned,
    computed and checked, then every set's call captured in a CUDA graph and replayed
    (time_graph). The calls come back for other timings of the same sets."""
    C[0].fill_(float("nan"))
    fn(A[0], B[0], C[0])
    torch.cuda.synchronize()
    err = float((C[0].double() - ref).norm() / ref.norm())
    calls = [(lambda a=a, b=b, c=c: fn(a, b, c)) for a, b, c in zip(A, B, C)]
    return err, time_graph(torch, calls, repeats), calls


def build_ways(build, specs: dict[str, Any], row: dict[str, Any]) -> dict[str, Any]:
    """{name: build(spec)} for each spec that builds; name + "_error" in row for each that does
    not (a variant the GPU or the shape rules out is reported beside the others)."""
    ways = {}
    for name, spec in specs.items():
        try:
            ways[name] = build(spec)
        except Exception as exc:  # noqa: BLE001 - reported in the row
            row[name + "_error"] = str(exc)[:200]
    return ways


def format_ways(row: dict[str, Any], names) -> str:
    """'name device/one-call' cells (µs) of measure_ways' results, nan where a way failed."""
    return "  ".join(f"{n} {row.get(n + '_dev', float('nan')):6.1f}/{row.get(n + '_one', float('nan')):6.1f}"
                     for n in names)


def measure_ways(torch, ways: dict[str, Any], A, B, ref, row: dict[str, Any], repeats: int = 30) -> None:
    """For each (name, fn) of `ways` (kgen kernels, kgen.matmul, torch.matmul: fn(A, B, out=)):
    into row, name + "_err" the relative error of fn(A, B) against the float64 `ref`, "_dev" its
    device microseconds (captured in a CUDA graph with out=, replayed), "_one" one call between
    events (host included); "_error" instead where the call raises."""
    for name, fn in ways.items():
        try:
            C = fn(A, B)
            torch.cuda.synchronize()
            row[name + "_err"] = float((C.double() - ref).norm() / ref.norm())
            out = torch.empty_like(C)
            row[name + "_dev"] = time_graph(torch, [lambda fn=fn, out=out: fn(A, B, out=out)], repeats)
            row[name + "_one"] = time_single(torch, [lambda fn=fn: fn(A, B)], repeats)
        except Exception as exc:  # noqa: BLE001 - a way that cannot run is reported beside the others
            row[name + "_error"] = str(exc)[:200]


def copy_bandwidth(torch, repeats: int) -> float:
    """Bytes per second of a device-to-device clone of 1 GiB (read + write counted)."""
    x = torch.empty(1 << 28, dtype=torch.float32, device="cuda").fill_(1.0)
    us = time_batched(torch, [x.clone], repeats, 4)
    x = None
    torch.cuda.empty_cache()
    return 2 * (1 << 30) / (us * 1e-6)


def copy_floor_us(torch, nbytes: float, l2_bytes: int, repeats: int) -> float:
    """Device µs of a device-to-device copy of nbytes / 2 bytes (nbytes moved in all),
    captured in a CUDA graph over enough buffer pairs to pass 3 L2s, replayed."""
    half = max(16, int(nbytes) // 2)
    sets = max(2, min(24, math.ceil(3 * l2_bytes / (2 * half))))
    src = [torch.empty(half, dtype=torch.uint8, device="cuda").random_(0, 255) for _ in range(sets)]
    dst = [torch.empty_like(x) for x in src]
    return time_graph(torch, [(lambda s=s, d=d: d.copy_(s)) for s, d in zip(src, dst)], repeats)


def host_us(torch, fn, calls: int, warmup: int = 50) -> float:
    """Host microseconds per call of fn over `calls` calls in a row, after `warmup` (the GPU
    work runs behind; a synchronize before and after the timed loop)."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    us = (time.perf_counter() - t0) / calls * 1e6
    torch.cuda.synchronize()
    return us


def host_overhead(torch, calls: int = 3000) -> dict[str, float]:
    """CPU microseconds per public call on a tiny product (the GPU work is shorter than the
    host's, so back-to-back calls measure the host path: argument checks, launch)."""
    from ..core.kernel import build
    from ..ops.skinny import Skinny

    A, B = torch.randn(1, 256, device="cuda"), torch.randn(256, 256, device="cuda")
    k = build(Skinny.default_spec({"M": 1, "N": 256, "K": 256}, "float32"))
    return {name: host_us(torch, fn, calls, 100)
            for name, fn in (("kgen_us", lambda: k(A, B)), ("torch_us", lambda: torch.matmul(A, B)))}


# ---------------------------------------------------------------------------------
# One shape
# ---------------------------------------------------------------------------------
class Operands:
    """Rotated copies of A (M x K) and B (K x N, as W.T or row-major) of one shape."""

    def __init__(self, torch, M, N, K, dtype, layout: str, l2_bytes: int):
        tdt = getattr(torch, dtype)
        item = torch.empty((), dtype=tdt).element_size()
        per_set = (M * K + K * N + M * N) * item
        self.sets = max(2, min(24, math.ceil(3 * l2_bytes / per_set)))
        g = torch.Generator(device="cuda")
        g.manual_seed(M * 1_000_003 + N * 1009 + K)
        self.A, self.B, self.C = [], [], []
        for _ in range(self.sets):
            self.A.append(torch.randn(M, K, device="cuda", generator=g).to(tdt))
            if layout == "col":
                self.B.append(torch.randn(N, K, device="cuda", generator=g).to(tdt).t())
            else:
                self.B.append(torch.randn(K, N, device="cuda", generator=g).to(tdt))
            self.C.append(torch.full((M, N), float("nan"), device="cuda", dtype=tdt))
        self.bytes = float(per_set)


def _check(torch, k, ops: Operands, dtype: str) -> float:
    """Relative Frobenius error of kgen's C against a float64 product of the same inputs."""
    C = k(ops.A[0], ops.B[0])
    ref = ops.A[0].double() @ ops.B[0].double()
    return float((C.double() - ref).norm() / ref.norm().clamp_min(1e-300))


def bench_shape(torch, M, N, K, dtype, layout, args, bw: float, l2: int) -> dict[str, Any]:
    from ..core.kernel import build
    from ..ops.skinny import Skinny, tolerance

    spec = Skinny.default_spec({"M": M, "N": N, "K": K}, dtype)
    k = build(spec)
    ops = Operands(torch, M, N, K, dtype, layout, l2)
    err = _check(torch, k, ops, dtype)
    ok = math.isfinite(err) and err <= tolerance(dtype, K)
    bound_us = ops.bytes / bw * 1e6
    bound = [k.bind(a, b, c) for a, b, c in zip(ops.A, ops.B, ops.C)]  # type: ignore[attr-defined]
    plan = bound[0].plan
    inner = max(ops.sets, 40)
    device_us = time_batched(torch, bound, args.repeats, inner)
    kg_calls = [(lambda a=a, b=b: k(a, b)) for a, b in zip(ops.A, ops.B)]
    tm_calls = [(lambda a=a, b=b: torch.matmul(a, b)) for a, b in zip(ops.A, ops.B)]
    kg_single = time_single(torch, kg_calls, args.repeats * 2)
    tm_single = time_single(torch, tm_calls, args.repeats * 2)
    kg_pipe = time_batched(torch, kg_calls, args.repeats, inner)
    tm_pipe = time_batched(torch, tm_calls, args.repeats, inner)
    tm_out = [(lambda a=a, b=b, c=c: torch.matmul(a, b, out=c)) for a, b, c in zip(ops.A, ops.B, ops.C)]
    tm_device = _graph_us(torch, tm_out, args.repeats, "cuBLAS")
    floor_us = copy_floor_us(torch, ops.bytes, l2, args.repeats)
    route = bench_route(torch, ops, dtype, args, bound_us, tm_single)
    return {
        **route, "floor_us": floor_us, "route_pct_floor": floor_us / route["route_device_us"],
        "M": M, "N": N, "K": K, "dtype": dtype, "layout": layout, "spec": spec.to_dict(),
        "form": plan.form, "width": plan.width, "splits": plan.splits, "mode": plan.mode,
        "grid": [list(launch.grid) for kind, launch, _ in plan.launches if kind == "main"],
        "error": err, "ok": bool(ok), "bytes": ops.bytes, "bound_us": bound_us,
        "kgen_device_us": device_us, "pct_bound": bound_us / device_us,
        "kgen_single_us": kg_single, "kgen_pipelined_us": kg_pipe,
        "cublas_single_us": tm_single, "cublas_pipelined_us": tm_pipe, "cublas_device_us": tm_device,
        "speedup_single": tm_single / kg_single, "speedup_pipelined": tm_pipe / kg_pipe,
        "cublas_pct_bound": bound_us / tm_device if tm_device == tm_device else float("nan"),
        "cublas_pct_floor": floor_us / tm_device if tm_device == tm_device else float("nan"),
    }


def _graph_us(torch, calls, repeats: int, what: str) -> float:
    """time_graph of the calls, or NaN where the capture fails (that column alone is lost)."""
    try:
        return time_graph(torch, calls, repeats)
    except Exception as exc:  # noqa: BLE001 - reported, the run goes on
        print(f"  ({what} graph timing failed: {exc})", flush=True)
        return float("nan")


def bench_route(torch, ops: Operands, dtype: str, args, bound_us: float, tm_single: float) -> dict[str, Any]:
    """kgen.matmul as users call it on these operands: the family dispatch picks, its result
    against float64, its device time (calls with out= replayed from a CUDA graph) and one call."""
    import kgen
    from ..ops.skinny import tolerance
    from ..tune.dispatch import call_family

    family = call_family(ops.A[0], ops.B[0], dtype).kernel
    err = _check(torch, kgen.matmul, ops, dtype)
    calls = [(lambda a=a, b=b, c=c: kgen.matmul(a, b, out=c)) for a, b, c in zip(ops.A, ops.B, ops.C)]
    device = _graph_us(torch, calls, args.repeats, "kgen.matmul")
    single = time_single(torch, [(lambda a=a, b=b: kgen.matmul(a, b)) for a, b in zip(ops.A, ops.B)],
                         args.repeats * 2)
    return {"route": family, "route_error": err, "route_ok": bool(math.isfinite(err) and err <= tolerance(dtype,
            ops.A[0].shape[1])), "route_device_us": device, "route_pct_bound": bound_us / device,
            "route_single_us": single, "route_speedup_single": tm_single / single}


def sweep_shape(torch, M, N, K, dtype, layout, args, bw, l2) -> list[dict[str, Any]]:
    from ..core.kernel import build
    from ..ops.skinny import Skinny, tolerance

    base = Skinny.default_spec({"M": M, "N": N, "K": K}, dtype)
    ops = Operands(torch, M, N, K, dtype, layout, l2)
    rows = []
    for label, spec in [("default", base)] + sweep_variants(base):
        k = build(spec)
        err = _check(torch, k, ops, dtype)
        bound = [k.bind(a, b, c) for a, b, c in zip(ops.A, ops.B, ops.C)]  # type: ignore[attr-defined]
        us = time_batched(torch, bound, max(5, args.repeats // 2), max(ops.sets, 40))
        rows.append({"M": M, "N": N, "K": K, "dtype": dtype, "layout": layout, "variant": label,
                     "spec": spec.to_dict(), "device_us": us, "pct_bound": ops.bytes / bw * 1e6 / us,
                     "ok": bool(math.isfinite(err) and err <= tolerance(dtype, K)), "splits": bound[0].plan.splits})
    return rows


def geomean(xs) -> float:
    xs = [x for x in xs if x > 0 and math.isfinite(x)]
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else float("nan")


def specs_needed(args) -> set:
    """Every spec a run with these arguments builds (for compiling ahead)."""
    from ..ops.skinny import Skinny

    dtypes = [d for d in args.dtypes.split(",") if d]
    shapes = shapes_from(args)
    specs = set() if args.sweep and args.sweep_only else {
        Skinny.default_spec({"M": M, "N": N, "K": K}, d) for M, N, K in shapes for d in dtypes}
    specs.add(Skinny.default_spec({"M": 1, "N": 256, "K": 256}, "float32"))
    if args.sweep:
        sweep = shapes_from(argparse.Namespace(random=0, shapes=args.sweep_shapes)) if args.sweep_shapes else shapes[:4]
        for M, N, K in sweep:
            for d in [d for d in (args.sweep_dtypes or args.dtypes).split(",") if d]:
                base = Skinny.default_spec({"M": M, "N": N, "K": K}, d)
                specs.update([base] + [s for _, s in sweep_variants(base)])
    return specs


def run(args) -> dict[str, Any]:
    import torch

    from ..core import runtime
    from ..core.compiler import ToolchainError  # noqa: F401 - fail early without nvcc
    from ..core.kernel import compile as kcompile, default_arch

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.cuda.init()
    runtime.driver()
    limits = runtime.device_limits()
    device = torch.cuda.get_device_name()
    l2 = limits["l2_bytes"]
    dtypes = [d for d in args.dtypes.split(",") if d]
    shapes = shapes_from(args)
    print(f"device: {device} ({limits['multiprocessors']} SMs, L2 {l2 / 2**20:.0f} MiB)", flush=True)

    # Compile every spec first, in parallel (nvcc only; the cache makes this free when warm).
    import concurrent.futures as cf

    specs = specs_needed(args)
    sweep = shapes_from(argparse.Namespace(random=0, shapes=args.sweep_shapes)) if args.sweep_shapes else shapes[:4]
    t0 = time.perf_counter()
    arch = default_arch()
    with cf.ThreadPoolExecutor(min(16, os.cpu_count() or 4)) as ex:
        list(ex.map(lambda s: kcompile(s, arch), specs))
    print(f"compiled {len(specs)} specs in {time.perf_counter() - t0:.1f} s", flush=True)

    bw = copy_bandwidth(torch, args.repeats)
    print(f"copy bandwidth: {bw / 1e12:.3f} TB/s (read + write)", flush=True)
    host = host_overhead(torch)
    print(f"host time per call, 1x256x256 float32 (back to back, CPU clock): kgen {host['kgen_us']:.1f} us, "
          f"torch.matmul {host['torch_us']:.1f} us", flush=True)
    result: dict[str, Any] = {"device": device, "copy_bandwidth_Bps": bw, "host_overhead": host, "rows": [],
                              "sweep": [], "command": " ".join(sys.argv)}
    start = time.perf_counter()
    hdr = (f"{'shape':>18} {'dtype':>8} {'B':>3} {'form':>4} {'split':>5} {'bound':>7} {'device':>7} {'%bound':>6} "
           f"{'kg 1x':>7} {'cb 1x':>7} {'x':>5} {'kg pipe':>7} {'cb pipe':>7} {'x':>5} {'cb dev':>7} {'err':>8} | "
           f"route: family, device, % bound, one call, x cuBLAS; floor, % floor (route, cuBLAS)")
    table = [] if args.sweep and args.sweep_only else shapes
    if table:
        print(hdr, flush=True)
    for M, N, K in table:
        if args.budget and time.perf_counter() - start > args.budget:
            print(f"budget of {args.budget} s reached: later shapes skipped", flush=True)
            break
        for d, layout in [(d, lay) for d in dtypes for lay in args.layouts.split(",") if lay]:
            r = bench_shape(torch, M, N, K, d, layout, args, bw, l2)
            result["rows"].append(r)
            print(f"{f'{M}x{N}x{K}':>18} {d:>8} {layout:>3} {r['form']:>4} {r['splits']:>5} {r['bound_us']:7.1f} "
                  f"{r['kgen_device_us']:7.1f} {100 * r['pct_bound']:5.0f}% {r['kgen_single_us']:7.1f} "
                  f"{r['cublas_single_us']:7.1f} {r['speedup_single']:5.2f} {r['kgen_pipelined_us']:7.1f} "
                  f"{r['cublas_pipelined_us']:7.1f} {r['speedup_pipelined']:5.2f} {r['cublas_device_us']:7.1f} "
                  f"{r['error']:8.1e}{'' if r['ok'] else ' WRONG'} | kgen.matmul: {r['route']} "
                  f"{r['route_device_us']:7.1f} {100 * r['route_pct_bound']:5.0f}% {r['route_single_us']:7.1f} "
                  f"{r['route_speedup_single']:5.2f}x{'' if r['route_ok'] else ' WRONG'} | floor {r['floor_us']:7.1f} "
                  f"{100 * r['route_pct_floor']:4.0f}% {100 * r['cublas_pct_floor']:4.0f}%", flush=True)
            torch.cuda.empty_cache()
    summary = {}
    for d in (dtypes if table else []):
        rows = [r for r in result["rows"] if r["dtype"] == d]
        low = [r for r in rows if min(r["M"], r["N"]) <= 16]
        mid = [r for r in rows if 17 <= min(r["M"], r["N"]) <= 256]
        summary[d] = {
            "small_rows_min_pct_bound": min((r["pct_bound"] for r in low), default=float("nan")),
            "small_rows_geomean_single": geomean(r["speedup_single"] for r in low),
            "small_rows_min_single": min((r["speedup_single"] for r in low), default=float("nan")),
            "mid_rows_geomean_single": geomean(r["speedup_single"] for r in mid),
            "mid_rows_min_single": min((r["speedup_single"] for r in mid), default=float("nan")),
            "route_small_rows_min_pct_bound": min((r["route_pct_bound"] for r in low), default=float("nan")),
            "route_small_rows_geomean_pct_floor": geomean(r["route_pct_floor"] for r in low),
            "cublas_small_rows_geomean_pct_floor": geomean(r["cublas_pct_floor"] for r in low),
            "route_small_rows_geomean_single": geomean(r["route_speedup_single"] for r in low),
            "route_mid_rows_geomean_single": geomean(r["route_speedup_single"] for r in mid),
            "all_correct": all(r["ok"] and r["route_ok"] for r in rows),
        }
        print(f"{d}: {json.dumps(summary[d])}", flush=True)
    result["summary"] = summary
    if args.sweep:
        print("sweep (device us, % of bound):", flush=True)
        for M, N, K in sweep:
            for d in [d for d in (args.sweep_dtypes or args.dtypes).split(",") if d]:
                for layout in [x for x in args.layouts.split(",") if x]:
                    rows = sweep_shape(torch, M, N, K, d, layout, args, bw, l2)
                    result["sweep"].extend(rows)
                    base = rows[0]["device_us"]
                    line = ", ".join(f"{r['variant']} {r['device_us']:.1f}{'' if r['ok'] else '!'}"
                                     f" ({base / r['device_us']:.2f}x)" for r in rows[1:])
                    print(f"  {M}x{N}x{K} {d} {layout}: default {base:.1f} us ({100 * rows[0]['pct_bound']:.0f}%); "
                          f"{line}", flush=True)
    return result


def main(argv: list[str] | None = None) -> int:
    args = _parse(sys.argv[1:] if argv is None else argv)
    result = run(args)
    if args.json:
        tmp = args.json + ".tmp"
        with open(tmp, "w") as fh:
            json.dump(result, fh, indent=1)
        os.replace(tmp, args.json)
    return 0 if all(r["ok"] and r["route_ok"] for r in result["rows"]) and all(r["ok"] for r in result["sweep"]) else 1


if __name__ == "__main__":
    sys.exit(main())
