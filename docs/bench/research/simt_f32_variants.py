"""The float32 SIMT forms kgen.matmul runs at 1-6 rows, against variants of the same spec: for each
product drawn at random (env SEED, COUNT; M from ROWS, N from N_RANGE, K from K_RANGE, multiples of
MULTIPLE; B = W.t() (ORDER=col) or row-major (ORDER=row); weights of MIN_MB or more), the spec
dispatch picks and the same spec with each of VARIANTS (';'-separated, each 'field=value,...'; or
RULE_OFF:<method>, the spec dispatch picks with that Skinny rule method answering False: the tree
before the rule; or WG_DEFAULT, the float32 wgmma form's default spec for the shape), beside cuBLAS
through torch and a read-only launch of the same bytes (a CuPy grid-stride reader, the best of a few
grids: the floor under the product). Device time from a CUDA graph over operands rotated past L2
(kgen.bench.skinny.time_graph), each variant timed ROUNDS times in turn (best kept), each result
first checked against float64 on a NaN-poisoned output. Bound = bytes over the copy bandwidth of the
same run. ONLY_CHANGED=1 keeps only products where some variant differs from the default. TC=1 keeps
the products dispatch runs on the tensor-core forms (float32 as three TF32 products) instead of the
SIMT ones. Output: $OUT/simt_f32_variants_<SEED>_<ORDER>.json."""
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

SEED = int(os.environ.get("SEED", "18001"))
COUNT = int(os.environ.get("COUNT", "8"))
ROWS = tuple(int(v) for v in os.environ.get("ROWS", "1-2").split("-"))
N_RANGE = tuple(int(v) for v in os.environ.get("N_RANGE", "1024-16384").split("-"))
K_RANGE = tuple(int(v) for v in os.environ.get("K_RANGE", "1024-16384").split("-"))
MULTIPLE = int(os.environ.get("MULTIPLE", "64"))
MIN_MB = float(os.environ.get("MIN_MB", "16"))
ORDER = os.environ.get("ORDER", "col")
ROUNDS = int(os.environ.get("ROUNDS", "2"))
VARIANTS = [v for v in os.environ.get("VARIANTS", "warp_cols=2;waves=2;waves=3;loads=16").split(";") if v]
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


def parse_variant(text):
    kw = {}
    for part in text.split(","):
        k, v = part.split("=")
        kw[k] = v == "True" if v in ("True", "False") else (int(v) if v.lstrip("-").isdigit() else v)
    return kw


def spec_without(rule, ops):
    """The spec dispatch picks for ops' first product with Skinny.<rule> answering False."""
    kept = getattr(Skinny, rule)
    setattr(Skinny, rule, lambda self, *a, **kw: False)
    try:
        dispatch.forget()
        return dispatch.call_spec(ops.A[0], ops.B[0])
    finally:
        setattr(Skinny, rule, kept)
        dispatch.forget()


def draw(rng):
    M = int(math.exp(rng.uniform(math.log(ROWS[0]), math.log(ROWS[1] + 1))))
    N, K = (max(MULTIPLE, int(math.exp(rng.uniform(math.log(lo), math.log(hi)))) // MULTIPLE * MULTIPLE)
            for lo, hi in (N_RANGE, K_RANGE))
    return min(max(M, ROWS[0]), ROWS[1]), N, K


def floor_us(ops, sms, reader, part):
    best = float("inf")
    for per_sm, threads in ((2, 512), (4, 512), (8, 256)):
        grid = sms * per_sm

        def call(b, grid=grid, threads=threads):
            stream = cupy.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream)
            with stream:
                w = b.t() if ORDER == "col" else b
                reader((grid,), (threads,), (cupy.uint64(w.data_ptr()), cupy.int64(w.numel() // 4),
                                             cupy.uint64(part.data_ptr())))
        best = min(best, time_graph(torch, [lambda b=b: call(b) for b in ops.B], 15))
    return best


def main():
    rng = random.Random(SEED)
    props = torch.cuda.get_device_properties(0)
    l2, sms = props.L2_cache_size, props.multi_processor_count
    bw = copy_bandwidth(torch, 20)
    reader = cupy.RawKernel(READER, "read_sum")
    part = torch.empty(8 * sms, device="cuda")
    print(f"{torch.cuda.get_device_name()}: copy bandwidth {bw / 1e12:.3f} TB/s; variants {VARIANTS}", flush=True)
    rows, tries = [], 0
    while len(rows) < COUNT and tries < 50 * COUNT:
        tries += 1
        M, N, K = draw(rng)
        if N * K * 4 < MIN_MB * 1e6:
            continue
        ops = Operands(torch, M, N, K, "float32", ORDER, l2)
        spec = dispatch.call_spec(ops.A[0], ops.B[0])
        if not isinstance(spec, Skinny) or spec.tensor_cores != bool(os.environ.get("TC")):
            del ops
            continue
        ways = {"default": kgen.build(spec)}
        for v in VARIANTS:
            if v == "WG_DEFAULT":
                s = Skinny.wgmma_default_spec({"M": M, "N": N, "K": K})
                if s != spec:
                    ways[v] = kgen.build(s)
                continue
            if v.startswith("RULE_OFF:"):
                s = spec_without(v.split(":", 1)[1], ops)
                if s != spec:
                    ways[v] = kgen.build(s)
                continue
            try:
                s = spec.replace(**parse_variant(v))
            except ValueError as e:
                print(f"  {v}: not a spec here ({e})", flush=True)
                continue
            if s != spec:
                ways[v] = kgen.build(s)
        if os.environ.get("ONLY_CHANGED") and len(ways) == 1:
            del ops
            continue   # no variant differs from the default here
        ref = ops.A[0].double() @ ops.B[0].double()
        bound = (M * K + K * N + M * N) * 4 / bw * 1e6
        row = {"shape": [M, N, K], "order": ORDER, "spec": spec.to_json(), "bound_us": bound, "us": {}, "plan": {}}
        for n, kern in ways.items():
            ops.C[0].fill_(float("nan"))
            kern(ops.A[0], ops.B[0], out=ops.C[0])
            torch.cuda.synchronize()
            err = float((ops.C[0].double() - ref).norm() / ref.norm())
            assert math.isfinite(err) and err <= tolerance("float32", K), (M, N, K, n, err)
            plan = kern.bind(ops.A[0], ops.B[0], ops.C[0]).plan
            row["plan"][n] = {"form": plan.form, "splits": plan.splits}
        mm = [(lambda a=a, b=b, c=c: torch.matmul(a, b, out=c)) for a, b, c in zip(ops.A, ops.B, ops.C)]
        for _ in range(ROUNDS):
            for n, kern in ways.items():
                calls = [(lambda a=a, b=b, c=c, kern=kern: kern(a, b, out=c)) for a, b, c in zip(ops.A, ops.B, ops.C)]
                row["us"].setdefault(n, []).append(time_graph(torch, calls, 15))
            row["us"].setdefault("cuBLAS", []).append(time_graph(torch, mm, 15))
        row["floor_us"] = floor_us(ops, sms, reader, part)
        best = {n: min(v) for n, v in row["us"].items()}
        row["best"] = best
        d = best["default"]
        print(f"{M}x{N}x{K} {ORDER} {row['plan']['default']['form']} splits {row['plan']['default']['splits']}: "
              f"bound {bound:.1f} floor {row['floor_us']:.1f} ({bound / row['floor_us']:.0%}) default {d:.2f} "
              f"({bound / d:.0%}) cuBLAS {best['cuBLAS']:.2f} | "
              + " ".join(f"{n} x{d / best[n]:.3f}" for n in ways if n != "default")
              + f" | {spec.instruction if spec.tensor_cores else 'simt'} rows={spec.rows} warp_cols={spec.warp_cols}"
              f" tc_tiles={spec.tc_tiles} waves={spec.waves} merge={spec.merge}", flush=True)
        rows.append(row)
        del ops
        torch.cuda.empty_cache()
    names = [v for v in VARIANTS if rows and all(v in r["best"] for r in rows)]
    for n in names:
        g = math.exp(sum(math.log(r["best"]["default"] / r["best"][n]) for r in rows) / len(rows))
        print(f"{n}: x{g:.3f} over the default (geometric mean of {len(rows)})", flush=True)
    if rows:
        print("default: {:.0%} of the bound, {:.0%} of the floor".format(
            math.exp(sum(math.log(r["bound_us"] / r["best"]["default"]) for r in rows) / len(rows)),
            math.exp(sum(math.log(r["floor_us"] / r["best"]["default"]) for r in rows) / len(rows))), flush=True)
    with open(os.path.join(os.environ.get("OUT", "."), f"simt_f32_variants_{SEED}_{ORDER}.json"), "w") as f:
        json.dump({"device": torch.cuda.get_device_name(), "copy_bw": bw, "variants": VARIANTS, "rows": rows}, f)


if __name__ == "__main__":
    main()
