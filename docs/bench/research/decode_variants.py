"""The spec kgen.matmul runs on a few-row product against variants of it, any dtype and family,
on large weights: for each product drawn at random (env SEED, COUNT; M from ROWS, N and K from
N_RANGE / K_RANGE in multiples of MULTIPLE; weights of MIN_MB to MAX_MB; B = W.t() (ORDER=col) or
row-major (ORDER=row); dtype DTYPE) the dispatched spec and the same spec with each of VARIANTS
(';'-separated, each 'field=value,...', tuples written 16x128x64; 'skinny:field=value,...' starts from
the skinny family's SIMT default spec instead of the dispatched one), beside cuBLAS through torch and
a read-only launch of the weight's bytes (CuPy, the better of two grids). Device time from a CUDA
graph over operands rotated past L2, ROUNDS rounds in turn (best kept); every result first
checked against float64 on a NaN-poisoned output. Output: $OUT/decode_variants_<SEED>_<DTYPE>_<ORDER>.json."""
import json
import math
import os
import random

import cupy
import torch

import kgen
from kgen.bench.skinny import Operands, copy_bandwidth, time_graph
from kgen.ops.skinny import Skinny, tolerance
from kgen.tune import dispatch

SEED = int(os.environ.get("SEED", "27101"))
COUNT = int(os.environ.get("COUNT", "6"))
ROWS = tuple(int(v) for v in os.environ.get("ROWS", "7-16").split("-"))
DTYPE = os.environ.get("DTYPE", "bfloat16")
ORDER = os.environ.get("ORDER", "col")
MIN_MB = float(os.environ.get("MIN_MB", "100"))
MAX_MB = float(os.environ.get("MAX_MB", "1e9"))
N_RANGE = tuple(int(v) for v in os.environ.get("N_RANGE", "1024-16384").split("-"))
K_RANGE = tuple(int(v) for v in os.environ.get("K_RANGE", "1024-16384").split("-"))
MULTIPLE = int(os.environ.get("MULTIPLE", "64"))
ROUNDS = int(os.environ.get("ROUNDS", "2"))
VARIANTS = [v for v in os.environ.get("VARIANTS", "").split(";") if v]
torch.backends.cuda.matmul.allow_tf32 = False

READER = r"""
extern "C" __global__ void read_sum(const float4* __restrict__ x, long long n4, float* __restrict__ out) {
    float acc = 0.f;
    long long stride = (long long)gridDim.x * blockDim.x;
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    for (; i + 7 * stride < n4; i += 8 * stride) {
        float4 v[8];
#pragma unroll
        for (int u = 0; u < 8; ++u) v[u] = __ldcs(x + i + u * stride);
#pragma unroll
        for (int u = 0; u < 8; ++u) acc += (v[u].x + v[u].y) + (v[u].z + v[u].w);
    }
    for (; i < n4; i += stride) { float4 v = __ldcs(x + i); acc += (v.x + v.y) + (v.z + v.w); }
    if (acc == 12345.678f) out[blockIdx.x] = acc;   // keeps the loads; never true for random data
}
"""


def parse_value(v):
    if v in ("True", "False"):
        return v == "True"
    if "x" in v and all(p.isdigit() for p in v.split("x")):
        return tuple(int(p) for p in v.split("x"))
    return int(v) if v.lstrip("-").isdigit() else v


def parse_variant(text):
    return {k: parse_value(v) for k, v in (part.split("=") for part in text.split(","))}


def draw(rng):
    M = int(math.exp(rng.uniform(math.log(ROWS[0]), math.log(ROWS[1] + 1))))
    N, K = (max(MULTIPLE, int(math.exp(rng.uniform(math.log(lo), math.log(hi)))) // MULTIPLE * MULTIPLE)
            for lo, hi in (N_RANGE, K_RANGE))
    return min(max(M, ROWS[0]), ROWS[1]), N, K


def check_and_time(torch, ops, ways, ref, tol, row, rounds, repeats, label):
    """Each of `ways` (name -> kernel; refused ones are dropped) checked against `ref` on a
    NaN-poisoned output, then timed in turn with cuBLAS `rounds` times (CUDA graphs over the
    rotated operand sets): errors into row["err"], microseconds into row["us"]."""
    for n, kern in list(ways.items()):
        ops.C[0].fill_(float("nan"))
        try:
            kern(ops.A[0], ops.B[0], out=ops.C[0])
            torch.cuda.synchronize()
        except Exception as e:   # a variant the launch refuses for this shape
            print(f"  {n}: refused ({str(e)[:160]})", flush=True)
            del ways[n]
            continue
        err = float((ops.C[0].double() - ref).norm() / ref.norm())
        row["err"][n] = err
        assert math.isfinite(err) and err <= tol, (label, n, err)
    mm = [(lambda a=a, b=b, c=c: torch.matmul(a, b, out=c)) for a, b, c in zip(ops.A, ops.B, ops.C)]
    for _ in range(rounds):
        for n, kern in ways.items():
            calls = [(lambda a=a, b=b, c=c, kern=kern: kern(a, b, out=c)) for a, b, c in zip(ops.A, ops.B, ops.C)]
            row["us"].setdefault(n, []).append(time_graph(torch, calls, repeats))
        row["us"].setdefault("cuBLAS", []).append(time_graph(torch, mm, repeats))


def read_floor(torch, ops, order, item, reader, part, sms, repeats):
    """Microseconds of the read-only launch over each weight's bytes, the better of two grids."""
    def floor_call(b, grid):
        with cupy.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream):
            w = b.t() if order == "col" else b
            reader((grid,), (512,), (cupy.uint64(w.data_ptr()), cupy.int64(w.numel() * item // 16),
                                     cupy.uint64(part.data_ptr())))
    return min(time_graph(torch, [(lambda b=b, g=sms * bps: floor_call(b, g)) for b in ops.B], repeats)
               for bps in (2, 4))


def main():
    rng = random.Random(SEED)
    props = torch.cuda.get_device_properties(0)
    l2, sms = props.L2_cache_size, props.multi_processor_count
    bw = copy_bandwidth(torch, 20)
    reader = cupy.RawKernel(READER, "read_sum")
    part = torch.empty(8 * sms, device="cuda")
    item = {"float64": 8, "float32": 4}.get(DTYPE, 2)
    print(f"{torch.cuda.get_device_name()}: copy bandwidth {bw / 1e12:.3f} TB/s; {DTYPE} {ORDER}; variants {VARIANTS}",
          flush=True)
    rows, tries = [], 0
    while len(rows) < COUNT and tries < 200 * COUNT:
        tries += 1
        M, N, K = draw(rng)
        if not MIN_MB * 1e6 <= N * K * item <= MAX_MB * 1e6:
            continue
        ops = Operands(torch, M, N, K, DTYPE, ORDER, l2)
        spec = dispatch.call_spec(ops.A[0], ops.B[0])
        ways = {"default": kgen.build(spec)}
        for v in VARIANTS:
            try:
                # "skinny:..." starts from the skinny family's SIMT default, whatever dispatch ran.
                base = Skinny.simt_default_spec({"M": M, "N": N, "K": K}, DTYPE) if v.startswith("skinny:") else spec
                fields = v.removeprefix("skinny:")
                s = base.replace(**parse_variant(fields)) if fields else base
            except (ValueError, TypeError) as e:
                print(f"  {v}: not a spec here ({str(e)[:120]})", flush=True)
                continue
            if s != spec:
                ways[v] = kgen.build(s)
        ref = ops.A[0].double() @ ops.B[0].double()
        bound = (M * K + K * N + M * N) * item / bw * 1e6
        row = {"shape": [M, N, K], "dtype": DTYPE, "order": ORDER, "spec": spec.to_json(), "bound_us": bound,
               "us": {}, "err": {}}
        tol = tolerance(DTYPE, K)
        check_and_time(torch, ops, ways, ref, tol, row, ROUNDS, 15, (M, N, K))
        row["floor_us"] = read_floor(torch, ops, ORDER, item, reader, part, sms, 15)
        best = {n: min(v) for n, v in row["us"].items()}
        row["best"] = best
        d = best["default"]
        print(f"{M}x{N}x{K} ({N * K * item / 1e6:.0f} MB): bound {bound:.1f} floor {row['floor_us']:.1f} "
              f"({bound / row['floor_us']:.0%}) default {d:.1f} ({bound / d:.0%}) cuBLAS {best['cuBLAS']:.1f} "
              f"({bound / best['cuBLAS']:.0%}) | " + " ".join(
                  f"[{n}] x{d / best[n]:.3f}" for n in ways if n != "default") + f" | {spec}", flush=True)
        rows.append(row)
        del ops
        torch.cuda.empty_cache()
    for n in ["default", "cuBLAS"] + VARIANTS:
        rs = [r for r in rows if n in r["best"]]
        if rs:
            g = math.exp(sum(math.log(r["bound_us"] / r["best"][n]) for r in rs) / len(rs))
            x = math.exp(sum(math.log(r["best"]["default"] / r["best"][n]) for r in rs) / len(rs))
            print(f"{n}: {g:.0%} of the bound, x{x:.3f} the default (geometric means of {len(rs)})", flush=True)
    if rows:
        print("floor: {:.0%} of the bound".format(
            math.exp(sum(math.log(r["bound_us"] / r["floor_us"]) for r in rows) / len(rows))), flush=True)
    with open(os.path.join(os.environ.get("OUT", "."), f"decode_variants_{SEED}_{DTYPE}_{ORDER}.json"), "w") as f:
        json.dump({"device": torch.cuda.get_device_name(), "copy_bw": bw, "variants": VARIANTS, "rows": rows}, f)


if __name__ == "__main__":
    main()
