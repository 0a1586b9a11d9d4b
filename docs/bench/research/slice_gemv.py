"""Does a few-row product against W.t() read its weight faster when the GPU sweeps the weight in
memory order? A CuPy kernel ("slices"): the weight (N x K, k-contiguous) seen as one run of 16-byte
vectors is cut into equal contiguous slices, one a warp (warp g of G takes vectors [V g / G,
V (g+1) / G)), so at any moment the warps read a few thousand short contiguous streams that march
through memory together, and every warp has the same bytes (no tail of uneven tiles). A warp walks
its slice row piece by row piece: its lanes load U vectors each, add them against the small
operand (staged whole in shared memory at the block's start, XS=1, or read through L1, XS=0),
and at a piece's end sum their M partials with shuffles and add them to y (atomicAdd on a zeroed
float32 y: a research shortcut; a shipped form would merge the two pieces of a split row in a
fixed order). Beside it, in one run: kgen.matmul's dispatched spec, cuBLAS through torch, and a
read-only launch of the same bytes. Each way is checked against float64 on a NaN-poisoned output
(y: the same, before its zeroing) and timed as CUDA graphs over operands rotated past L2.

env: SEED, COUNT, ROWS (e.g. 1-4), DTYPES (float32,bfloat16), MIN_MB, MAX_MB, N_RANGE, K_RANGE,
MULTIPLE, CONFIGS ('threads/U/blocks_per_sm/XS;...'). Output: $OUT/slice_gemv_<SEED>.json."""
import json
import math
import os
import random

import cupy
import torch

import kgen
from kgen.bench.skinny import Operands, copy_bandwidth, time_graph
from kgen.tune import dispatch

SEED = int(os.environ.get("SEED", "27001"))
COUNT = int(os.environ.get("COUNT", "6"))
ROWS = tuple(int(v) for v in os.environ.get("ROWS", "1-4").split("-"))
DTYPES = os.environ.get("DTYPES", "float32,bfloat16").split(",")
MIN_MB = float(os.environ.get("MIN_MB", "16"))
MAX_MB = float(os.environ.get("MAX_MB", "1e9"))
N_RANGE = tuple(int(v) for v in os.environ.get("N_RANGE", "1024-16384").split("-"))
K_RANGE = tuple(int(v) for v in os.environ.get("K_RANGE", "1024-16384").split("-"))
MULTIPLE = int(os.environ.get("MULTIPLE", "64"))
ROUNDS = int(os.environ.get("ROUNDS", "2"))
CONFIGS = [tuple(int(p) for p in c.split("/")) for c in os.environ.get(
    "CONFIGS", "256/8/2/1;512/8/1/1;512/4/2/1;1024/4/1/1;256/8/4/0;512/8/2/0").split(";") if c]
torch.backends.cuda.matmul.allow_tf32 = False

SOURCE = r"""
#include <cuda_bf16.h>
#define ROWS_ __ROWS__
#define VEC __VEC__
#define U __U__
#define XS __XS__

__device__ __forceinline__ void unpack(uint4 v, float* f) {
#if VEC == 4
    f[0] = __uint_as_float(v.x); f[1] = __uint_as_float(v.y);
    f[2] = __uint_as_float(v.z); f[3] = __uint_as_float(v.w);
#else
    const unsigned int u[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        f[2 * i] = __uint_as_float(u[i] << 16);
        f[2 * i + 1] = __uint_as_float(u[i] & 0xffff0000u);
    }
#endif
}

__device__ __forceinline__ uint4 load_w(const uint4* p) {
    uint4 v;
    asm volatile("ld.global.cs.v4.u32 {%0,%1,%2,%3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
    return v;
}

extern "C" __global__ void __launch_bounds__(__THREADS__) slice_gemv(
        const uint4* __restrict__ W, const uint4* __restrict__ x, float* __restrict__ y,
        int N, int KV, long long V) {
#if XS
    extern __shared__ uint4 xsh[];
    for (int i = threadIdx.x; i < ROWS_ * KV; i += blockDim.x) xsh[i] = x[i];
    __syncthreads();
    const uint4* xr = xsh;
#else
    const uint4* xr = x;
#endif
    const int warps = blockDim.x >> 5, lane = threadIdx.x & 31;
    const long long g = (long long)blockIdx.x * warps + (threadIdx.x >> 5);
    const long long G = (long long)gridDim.x * warps;
    long long v0 = V * g / G;
    const long long v1 = V * (g + 1) / G;
    while (v0 < v1) {
        const long long n = v0 / KV;
        const int ka = (int)(v0 - n * KV);
        const int kb = (int)min((long long)KV, ka + (v1 - v0));
        const uint4* row = W + n * KV;
        float acc[ROWS_];
#pragma unroll
        for (int m = 0; m < ROWS_; ++m) acc[m] = 0.f;
        int k = ka + lane;
        for (; k + (U - 1) * 32 < kb; k += U * 32) {
            uint4 w[U];
#pragma unroll
            for (int u = 0; u < U; ++u) w[u] = load_w(row + k + u * 32);
#pragma unroll
            for (int u = 0; u < U; ++u) {
                float wf[VEC];
                unpack(w[u], wf);
#pragma unroll
                for (int m = 0; m < ROWS_; ++m) {
                    float xf[VEC];
#if XS
                    unpack(xr[m * KV + k + u * 32], xf);
#else
                    unpack(__ldg(xr + m * KV + k + u * 32), xf);
#endif
#pragma unroll
                    for (int e = 0; e < VEC; ++e) acc[m] = fmaf(wf[e], xf[e], acc[m]);
                }
            }
        }
        for (; k < kb; k += 32) {
            float wf[VEC];
            unpack(load_w(row + k), wf);
#pragma unroll
            for (int m = 0; m < ROWS_; ++m) {
                float xf[VEC];
#if XS
                unpack(xr[m * KV + k], xf);
#else
                unpack(__ldg(xr + m * KV + k), xf);
#endif
#pragma unroll
                for (int e = 0; e < VEC; ++e) acc[m] = fmaf(wf[e], xf[e], acc[m]);
            }
        }
#pragma unroll
        for (int m = 0; m < ROWS_; ++m) {
#pragma unroll
            for (int o = 16; o; o >>= 1) acc[m] += __shfl_xor_sync(0xffffffffu, acc[m], o);
        }
        if (lane == 0) {
#pragma unroll
            for (int m = 0; m < ROWS_; ++m) atomicAdd(y + (long long)m * N + n, acc[m]);
        }
        v0 += kb - ka;
    }
}
"""

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

_kernels = {}


def kernel(dtype, M, threads, U, xs):
    key = (dtype, M, threads, U, xs)
    if key not in _kernels:
        src = (SOURCE.replace("__ROWS__", str(M)).replace("__VEC__", "4" if dtype == "float32" else "8")
               .replace("__U__", str(U)).replace("__XS__", str(xs)).replace("__THREADS__", str(threads)))
        _kernels[key] = cupy.RawKernel(src, "slice_gemv", options=("-std=c++17",))
    return _kernels[key]


def stream():
    return cupy.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream)


def draw(rng):
    M = int(math.exp(rng.uniform(math.log(ROWS[0]), math.log(ROWS[1] + 1))))
    N, K = (max(MULTIPLE, int(math.exp(rng.uniform(math.log(lo), math.log(hi)))) // MULTIPLE * MULTIPLE)
            for lo, hi in (N_RANGE, K_RANGE))
    return min(max(M, ROWS[0]), ROWS[1]), N, K


def main():
    rng = random.Random(SEED)
    props = torch.cuda.get_device_properties(0)
    l2, sms = props.L2_cache_size, props.multi_processor_count
    bw = copy_bandwidth(torch, 20)
    reader = cupy.RawKernel(READER, "read_sum")
    part = torch.empty(16 * sms, device="cuda")
    print(f"{torch.cuda.get_device_name()}: copy bandwidth {bw / 1e12:.3f} TB/s; configs {CONFIGS}", flush=True)
    rows = []
    for dtype in DTYPES:
        item = 4 if dtype == "float32" else 2
        got, tries = 0, 0
        while got < COUNT and tries < 200 * COUNT:
            tries += 1
            M, N, K = draw(rng)
            if not MIN_MB * 1e6 <= N * K * item <= MAX_MB * 1e6:
                continue
            got += 1
            ops = Operands(torch, M, N, K, dtype, "col", l2)
            A0, B0 = ops.A[0], ops.B[0]
            ref = A0.double() @ B0.double()
            bound = (M * K + K * N + M * N) * item / bw * 1e6
            row = {"dtype": dtype, "shape": [M, N, K], "bound_us": bound, "us": {}, "err": {}}
            spec = dispatch.call_spec(A0, B0)
            kern = kgen.build(spec)
            row["spec"] = spec.to_json()
            ops.C[0].fill_(float("nan"))
            kern(A0, B0, out=ops.C[0])
            torch.cuda.synchronize()
            row["err"]["kgen"] = float((ops.C[0].double() - ref).norm() / ref.norm())
            ways = {"kgen": [(lambda a=a, b=b, c=c: kern(a, b, out=c)) for a, b, c in zip(ops.A, ops.B, ops.C)],
                    "cuBLAS": [(lambda a=a, b=b, c=c: torch.matmul(a, b, out=c))
                               for a, b, c in zip(ops.A, ops.B, ops.C)]}
            Y = [torch.empty(M, N, device="cuda") for _ in ops.A]
            KV = K * item // 16
            V = N * KV
            for threads, U, bps, xs in CONFIGS:
                shared = M * K * item if xs else 0
                if shared > 200 * 1024 or (xs and bps * shared > 220 * 1024):
                    continue
                k_ = kernel(dtype, M, threads, U, xs)
                if shared > 48 * 1024:
                    k_.max_dynamic_shared_size_bytes = shared
                grid = sms * bps

                def call(a, b, y, k_=k_, grid=grid, threads=threads, shared=shared):
                    y.zero_()
                    with stream():
                        k_((grid,), (threads,), (cupy.uint64(b.data_ptr()), cupy.uint64(a.data_ptr()),
                                                 cupy.uint64(y.data_ptr()), cupy.int32(N), cupy.int32(KV),
                                                 cupy.int64(V)), shared_mem=shared)
                name = f"slices {threads}/{U}/{bps}/{'shared' if xs else 'l1'}"
                Y[0].fill_(float("nan"))
                call(A0, B0, Y[0])
                torch.cuda.synchronize()
                Y0 = Y[0].clone()
                call(A0, B0, Y[0])   # zeroes first: a second call must give the same sums up to order
                torch.cuda.synchronize()
                row["err"][name] = float((Y[0].double() - ref).norm() / ref.norm())
                assert torch.isfinite(Y0).all() and row["err"][name] < (3e-3 if item == 2 else 1e-5), (name, row["err"][name])
                ways[name] = [(lambda a=a, b=b, y=y, call=call: call(a, b, y)) for a, b, y in zip(ops.A, ops.B, Y)]

            def floor_call(b, grid):
                with stream():
                    reader((grid,), (512,), (cupy.uint64(b.data_ptr()), cupy.int64(b.numel() * item // 16),
                                             cupy.uint64(part.data_ptr())))
            for bps in (2, 4):
                ways[f"read {bps}"] = [(lambda b=b, bps=bps: floor_call(b, sms * bps)) for b in ops.B]
            for _ in range(ROUNDS):
                for n, calls in ways.items():
                    row["us"].setdefault(n, []).append(time_graph(torch, calls, 15))
            best = {n: min(v) for n, v in row["us"].items()}
            row["best"] = best
            floor = min(best["read 2"], best["read 4"])
            sl = min((n for n in best if n.startswith("slices")), key=best.get, default=None)
            print(f"{dtype} {M}x{N}x{K} ({N * K * item / 1e6:.0f} MB): bound {bound:.1f} floor {floor:.1f} "
                  f"({bound / floor:.0%}) kgen {best['kgen']:.1f} ({bound / best['kgen']:.0%}) cuBLAS "
                  f"{best['cuBLAS']:.1f} ({bound / best['cuBLAS']:.0%})"
                  + (f" best slices {best[sl]:.1f} ({bound / best[sl]:.0%}, x{best['kgen'] / best[sl]:.3f} kgen) [{sl}]"
                     if sl else "")
                  + " | " + " ".join(f"{n.split(' ', 1)[1]} {bound / t:.0%}" for n, t in best.items() if n.startswith("slices")),
                  flush=True)
            rows.append(row)
            del ops, Y
            torch.cuda.empty_cache()
    for dtype in DTYPES:
        rs = [r for r in rows if r["dtype"] == dtype]
        if not rs:
            continue
        names = [n for n in rs[0]["best"] if all(n in r["best"] for r in rs)]
        for n in names:
            g = math.exp(sum(math.log(r["bound_us"] / r["best"][n]) for r in rs) / len(rs))
            print(f"{dtype} {n}: {g:.0%} of the bound (geometric mean of {len(rs)})", flush=True)
    with open(os.path.join(os.environ.get("OUT", "."), f"slice_gemv_{SEED}.json"), "w") as f:
        json.dump({"device": torch.cuda.get_device_name(), "copy_bw": bw, "configs": CONFIGS, "rows": rows}, f)


if __name__ == "__main__":
    main()
