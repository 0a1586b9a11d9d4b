"""How the order in which a block reads a row-major K x N float32 matrix bounds its read
bandwidth, apart from any product: every pattern reads each element once with 16-byte loads
(evict-first), UNROLL loads in flight a lane, and sums them (one value a thread written, so
nothing is optimised away). Device time from CUDA events over matrices rotated past L2, median
of REPEATS; bandwidth = bytes / time. Each pattern runs with two blocks an SM (dynamic shared
memory holding the rest back, as the skinny kernels' registers do) and with eight.

  strip    the SIMT axpy form's order: a block's 8 warps share one 512-byte column strip
           (128 floats a warp, a float4 a lane) and take its rows in turn (warp w: rows w,
           w + 8, ...), KS_STRIP rows a block;
  wide     8 warps side by side on 4 KB of one row (each warp its own 512 bytes), each warp
           walking down KS_WIDE rows: the same bytes a block, whole 4 KB runs of each row;
  linear   a block reads KS_WIDE x 4 KB as one contiguous run (the matrix as a flat array).

Usage: python docs/bench/research/row_stream_patterns.py   (env SHAPES=KxN,..., REPEATS)
Output: $OUT/row_stream_patterns.json and a table on stdout."""
import json
import os

import cupy as cp

SRC = r"""
#define UNROLL 8
extern "C" __global__ void __launch_bounds__(256)
strip(const float4* __restrict__ B, int K, int N4, int ks, float* out) {
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int c = blockIdx.x * 32 + lane;                 // float4 column
    const long k0 = (long)blockIdx.y * ks, k1 = min((long)K, k0 + ks);
    float acc = 0.0f;
    for (long k = k0 + warp; k < k1; k += 8 * UNROLL) {
        float4 v[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
            const long r = k + 8 * u;
            v[u] = r < k1 && c < N4 ? __ldcs(B + r * N4 + c) : make_float4(0.f, 0.f, 0.f, 0.f);
        }
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) acc += v[u].x + v[u].y + v[u].z + v[u].w;
    }
    out[(blockIdx.y * gridDim.x + blockIdx.x) * 256 + threadIdx.x] = acc;
}
extern "C" __global__ void __launch_bounds__(256)
wide(const float4* __restrict__ B, int K, int N4, int ks, float* out) {
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int c = blockIdx.x * 256 + warp * 32 + lane;
    const long k0 = (long)blockIdx.y * ks, k1 = min((long)K, k0 + ks);
    float acc = 0.0f;
    for (long k = k0; k < k1; k += UNROLL) {
        float4 v[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
            const long r = k + u;
            v[u] = r < k1 && c < N4 ? __ldcs(B + r * N4 + c) : make_float4(0.f, 0.f, 0.f, 0.f);
        }
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) acc += v[u].x + v[u].y + v[u].z + v[u].w;
    }
    out[(blockIdx.y * gridDim.x + blockIdx.x) * 256 + threadIdx.x] = acc;
}
extern "C" __global__ void __launch_bounds__(256)
linear(const float4* __restrict__ B, long total4, long per_block, float* out) {
    const long b0 = (long)(blockIdx.y * gridDim.x + blockIdx.x) * per_block;
    const long b1 = min(total4, b0 + per_block);
    float acc = 0.0f;
    for (long i = b0 + threadIdx.x; i < b1; i += 256 * UNROLL) {
        float4 v[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
            const long j = i + 256 * u;
            v[u] = j < b1 ? __ldcs(B + j) : make_float4(0.f, 0.f, 0.f, 0.f);
        }
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) acc += v[u].x + v[u].y + v[u].z + v[u].w;
    }
    out[(blockIdx.y * gridDim.x + blockIdx.x) * 256 + threadIdx.x] = acc;
}
"""


def main():
    mod = cp.RawModule(code=SRC, options=("-std=c++17",))
    kern = {n: mod.get_function(n) for n in ("strip", "wide", "linear")}
    shapes = [tuple(int(v) for v in s.split("x")) for s in os.environ.get(
        "SHAPES", "8192x8192,4096x11008,14336x4096,2000x16000,12000x3000,5000x6000").split(",")]
    repeats = int(os.environ.get("REPEATS", "25"))
    l2 = cp.cuda.Device().attributes["L2CacheSize"]
    results = []
    for K, N in shapes:
        N4 = N // 4
        nbytes = K * N4 * 16
        copies = max(2, -(-3 * l2 // nbytes))
        mats = [cp.random.standard_normal((K, N4 * 4), dtype=cp.float32) for _ in range(copies)]
        row = {"K": K, "N": N4 * 4, "MB": nbytes / 1e6}
        for ks_wide in (64, 128, 256):
            ks_strip = 8 * ks_wide
            plans = {
                "strip": ("strip", (-(-N4 // 32), -(-K // ks_strip)),
                          (cp.int32(K), cp.int32(N4), cp.int32(ks_strip))),
                "wide": ("wide", (-(-N4 // 256), -(-K // ks_wide)), (cp.int32(K), cp.int32(N4), cp.int32(ks_wide))),
                "linear": ("linear", (-(-(K * N4) // (ks_wide * 256)), 1), (cp.int64(K * N4), cp.int64(ks_wide * 256))),
            }
            for occ in (2, 8):   # blocks an SM: two as the skinny kernels run, eight as these can
                shared = 200 * 1024 // occ if occ < 8 else 0
                for name, (fname, grid, args) in plans.items():
                    fn = kern[fname]
                    if shared:
                        fn.max_dynamic_shared_size_bytes = shared
                    out = cp.empty(grid[0] * grid[1] * 256, dtype=cp.float32)
                    times = []
                    for r in range(repeats + copies):
                        a, b = cp.cuda.Event(), cp.cuda.Event()
                        a.record()
                        fn(grid, (256,), (mats[r % copies], *args, out), shared_mem=shared)
                        b.record()
                        b.synchronize()
                        if r >= copies:   # the first round over the copies is the warm-up
                            times.append(cp.cuda.get_elapsed_time(a, b) * 1e3)
                    us = sorted(times)[len(times) // 2]
                    row[f"{name}_{ks_wide}_occ{occ}"] = {"us": us, "TBps": nbytes / us / 1e6,
                                                         "blocks": grid[0] * grid[1]}
        results.append(row)
        print(f"{K}x{N} {nbytes / 1e6:.0f} MB: " + "  ".join(
            f"{k} {v['TBps']:.2f}" for k, v in row.items() if isinstance(v, dict)), flush=True)
        del mats
        cp.get_default_memory_pool().free_all_blocks()
    with open(os.path.join(os.environ.get("OUT", "."), "row_stream_patterns.json"), "w") as f:
        json.dump({"device": cp.cuda.runtime.getDeviceProperties(0)["name"].decode(), "rows": results}, f, indent=1)


if __name__ == "__main__":
    main()
