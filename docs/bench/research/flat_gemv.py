"""One- and two-row products against a k-contiguous weight (B = W.t(), W N x K) whose rows start
anywhere (K odd, or a pitch no multiple of 16 bytes): a warp a row, the row read from the
16-byte boundary at or before its start with 16-byte loads (its first and last vector element
by element, so nothing outside the row is read), the small operand staged once a block in
shared memory with zeros around it and read as two aligned 16-byte vectors a load, the
row's offset from its boundary a compile-time case chosen once a row (uniform over the warp).
K whole: no split, no merge, one launch. Timed beside what kgen.matmul runs and cuBLAS, each in
a CUDA graph over operands rotated past L2, after each result is checked against float64 on a
NaN-poisoned output; bound = bytes / the copy bandwidth measured in the run.

    SEED=S COUNT=C DTYPES=bfloat16,float32 ROWS=1,2 MULTIPLE=1 python flat_gemv.py

MULTIPLE rounds N and K up (1 keeps them as drawn: most rows then off a boundary). Output:
$OUT/flat_gemv_<SEED>.json."""
import json
import math
import os
import random

import cupy
import torch

import kgen
from kgen.bench.skinny import Operands, copy_bandwidth, time_graph
from kgen.tune.dispatch import call_spec

SEED = int(os.environ.get("SEED", "15101"))
COUNT = int(os.environ.get("COUNT", "8"))
DTYPES = os.environ.get("DTYPES", "bfloat16,float32").split(",")
ROWS = [int(r) for r in os.environ.get("ROWS", "1,2").split(",")]
MULTIPLE = int(os.environ.get("MULTIPLE", "1"))
MIN_MB = float(os.environ.get("MIN_MB", "16"))
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False

SOURCE = r"""
// ELEM: bytes an element (2 or 4); VEC = 16 / ELEM elements a 16-byte vector.
#define VEC (16 / ELEM)
#if ELEM == 2
typedef unsigned short elem_t;
__device__ __forceinline__ float to_f(unsigned int u) {
#if HALF
    float f; unsigned short h = (unsigned short)u; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f;
#else
    return __uint_as_float(u << 16);
#endif
}
__device__ __forceinline__ elem_t from_f(float f) {
#if HALF
    unsigned short h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h;
#else
    unsigned int u = __float_as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (elem_t)((u >> 16) | 0x40);
    return (elem_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
#endif
}
// element i (0..VEC-1) of a 16-byte vector
__device__ __forceinline__ float get(const uint4& v, int i) {
    unsigned int w = i < 2 ? v.x : i < 4 ? v.y : i < 6 ? v.z : v.w;
    return to_f((i & 1) ? (w >> 16) : (w & 0xffffu));
}
#else
typedef float elem_t;
__device__ __forceinline__ float to_f(float f) { return f; }
__device__ __forceinline__ elem_t from_f(float f) { return f; }
__device__ __forceinline__ float get(const uint4& v, int i) {
    return __uint_as_float(i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w);
}
#endif

// One row of W (its elements [0, K) at `row`, SH elements past the boundary `wa`) against the
// ROWS rows of x staged in xs (row r at xs + r * xpitch, element k at index VEC + k, zeros
// around): acc[r] = sum_k W[k] * x[r][k] over this lane's vectors.
template <int SH>
__device__ __forceinline__ void row_dot(const uint4* __restrict__ wa, const elem_t* __restrict__ row, int K,
                                        const elem_t* xs, int xpitch, int lane, float* acc) {
    const int J = (SH + K + VEC - 1) / VEC;   // vectors from the boundary to past the row's end
    for (int j0 = lane; j0 < J; j0 += 32 * LOADS) {
        uint4 w[LOADS];
#pragma unroll
        for (int u = 0; u < LOADS; ++u) {
            int j = j0 + 32 * u;
            if (j > 0 && j < J - 1) {
                w[u] = __ldcs(wa + j);
            } else if (j < J) {
                // first or last vector: only the row's own elements, the rest zero
                uint4 t;
                elem_t* e = reinterpret_cast<elem_t*>(&t);
#pragma unroll
                for (int i = 0; i < VEC; ++i) {
                    int k = j * VEC + i - SH;
                    e[i] = (k >= 0 && k < K) ? row[k] : (elem_t)0;
                }
                w[u] = t;
            } else {
                w[u] = make_uint4(0, 0, 0, 0);
            }
        }
#pragma unroll
        for (int u = 0; u < LOADS; ++u) {
            int j = j0 + 32 * u;
            if (j < J) {
#pragma unroll
                for (int r = 0; r < ROWS; ++r) {
                    // x[r][j*VEC - SH + i] sits at xs index (j+1)*VEC - SH + i: within the two
                    // aligned vectors at j*VEC and (j+1)*VEC.
                    const uint4* xv = reinterpret_cast<const uint4*>(xs + r * xpitch) + j;
                    uint4 lo = xv[0], hi = xv[1];
#pragma unroll
                    for (int i = 0; i < VEC; ++i) {
                        int p = VEC - SH + i;
                        float xval = p < VEC ? get(lo, p) : get(hi, p - VEC);
                        acc[r] = fmaf(get(w[u], i), xval, acc[r]);
                    }
                }
            }
        }
    }
}

// The balanced partition (one row only): warp w of the grid takes elements [T w / Wt, T (w+1) / Wt)
// of the N x K weight in row order (T = N K, Wt warps in all), as segments of rows; a row whole
// within the warp is written at once, the warp's first and last partial rows go to a workspace,
// and the grid's last block (by a ticket) adds each split row's partials in warp order.
template <int XS>
__device__ __forceinline__ float seg_dot(const uint4* __restrict__ wa, const elem_t* __restrict__ seg, int SH, int L,
                                         const elem_t* xb, int lane) {
    const int J = (SH + L + VEC - 1) / VEC;
    float acc = 0.f;
    for (int j0 = lane; j0 < J; j0 += 32 * LOADS) {
        uint4 w[LOADS];
#pragma unroll
        for (int u = 0; u < LOADS; ++u) {
            int j = j0 + 32 * u;
            if (j > 0 && j < J - 1) {
                w[u] = __ldcs(wa + j);
            } else if (j < J) {
                uint4 t;
                elem_t* e = reinterpret_cast<elem_t*>(&t);
#pragma unroll
                for (int i = 0; i < VEC; ++i) {
                    int k = j * VEC + i - SH;
                    e[i] = (k >= 0 && k < L) ? seg[k] : (elem_t)0;
                }
                w[u] = t;
            } else {
                w[u] = make_uint4(0, 0, 0, 0);
            }
        }
#pragma unroll
        for (int u = 0; u < LOADS; ++u) {
            int j = j0 + 32 * u;
            if (j < J) {
                const uint4* xv = reinterpret_cast<const uint4*>(xb) + j;
                uint4 lo = xv[0], hi = xv[1];
#pragma unroll
                for (int i = 0; i < VEC; ++i) {
                    int p = XS + i;
                    float xval = p < VEC ? get(lo, p) : get(hi, p - VEC);
                    acc = fmaf(get(w[u], i), xval, acc);
                }
            }
        }
    }
    for (int o = 16; o; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
    return acc;
}

extern "C" __global__ void __launch_bounds__(THREADS) flat_split(
        const elem_t* __restrict__ x, const elem_t* __restrict__ W, long long ldw,
        elem_t* __restrict__ y, int N, int K, int* __restrict__ prow, float* __restrict__ pval,
        unsigned int* __restrict__ ticket) {
    extern __shared__ __align__(16) unsigned char smem[];
    elem_t* xs = reinterpret_cast<elem_t*>(smem);
    const int xpitch = ((K + VEC - 1) / VEC + 5) * VEC;
    for (int i = threadIdx.x; i < xpitch; i += THREADS) {
        int k = i - VEC;
        xs[i] = (k >= 0 && k < K) ? x[k] : (elem_t)0;
    }
    __syncthreads();
    const int lane = threadIdx.x & 31, warps = THREADS / 32;
    const long long total = (long long)gridDim.x * warps, gw = (long long)blockIdx.x * warps + (threadIdx.x >> 5);
    const long long T = (long long)N * K;
    const long long e1 = T * (gw + 1) / total;
    long long e = T * gw / total;
    int first_row = -1, last_row = -1;
    float first_val = 0.f, last_val = 0.f;
    bool first = true;
    while (e < e1) {
        const int n = (int)(e / K), k0 = (int)(e - (long long)n * K);
        const int k1 = (int)min((long long)K, e1 - (long long)n * K);
        const elem_t* seg = W + (long long)n * ldw + k0;
        const unsigned long long addr = reinterpret_cast<unsigned long long>(seg);
        const uint4* wa = reinterpret_cast<const uint4*>(addr & ~15ull);
        const int SH = (int)(addr & 15) / ELEM;
        const int XS = ((k0 - SH) % VEC + VEC) % VEC;
        const elem_t* xb = xs + VEC + k0 - SH - XS;
        float v;
        switch (XS) {
            case 0: v = seg_dot<0>(wa, seg, SH, k1 - k0, xb, lane); break;
            case 1: v = seg_dot<1>(wa, seg, SH, k1 - k0, xb, lane); break;
#if ELEM == 4
            case 2: v = seg_dot<2>(wa, seg, SH, k1 - k0, xb, lane); break;
            default: v = seg_dot<3>(wa, seg, SH, k1 - k0, xb, lane); break;
#else
            case 2: v = seg_dot<2>(wa, seg, SH, k1 - k0, xb, lane); break;
            case 3: v = seg_dot<3>(wa, seg, SH, k1 - k0, xb, lane); break;
            case 4: v = seg_dot<4>(wa, seg, SH, k1 - k0, xb, lane); break;
            case 5: v = seg_dot<5>(wa, seg, SH, k1 - k0, xb, lane); break;
            case 6: v = seg_dot<6>(wa, seg, SH, k1 - k0, xb, lane); break;
            default: v = seg_dot<7>(wa, seg, SH, k1 - k0, xb, lane); break;
#endif
        }
        if (k0 == 0 && k1 == K) {
            if (lane == 0) y[n] = from_f(v);
        } else if (first) {
            first_row = n; first_val = v;
        } else {
            last_row = n; last_val = v;
        }
        first = false;
        e = (long long)n * K + k1;
    }
    if (lane == 0) {
        prow[2 * gw] = first_row; pval[2 * gw] = first_val;
        prow[2 * gw + 1] = last_row; pval[2 * gw + 1] = last_val;
    }
    __threadfence();
    __syncthreads();
    __shared__ bool last_block;
    if (threadIdx.x == 0) last_block = atomicAdd(ticket, 1u) == gridDim.x - 1;
    __syncthreads();
    if (!last_block) return;
    __threadfence();
    const int slots = (int)(2 * total);
    for (int i = threadIdx.x; i < slots; i += THREADS) {
        const int row = __ldcg(prow + i);
        if (row < 0) continue;
        int j = i - 1;
        while (j >= 0 && __ldcg(prow + j) < 0) --j;
        if (j >= 0 && __ldcg(prow + j) == row) continue;   // not the first slot of its row
        float sum = 0.f;
        for (int m = i; m < slots; ++m) {
            const int r = __ldcg(prow + m);
            if (r == row) sum += __ldcg(pval + m);
            else if (r >= 0) break;
        }
        y[row] = from_f(sum);
    }
    if (threadIdx.x == 0) *ticket = 0;
}

extern "C" __global__ void __launch_bounds__(THREADS) flat_dot(
        const elem_t* __restrict__ x, long long ldx, const elem_t* __restrict__ W, long long ldw,
        elem_t* __restrict__ y, long long ldy, int N, int K) {
    extern __shared__ __align__(16) unsigned char smem[];
    elem_t* xs = reinterpret_cast<elem_t*>(smem);
    const int xpitch = ((K + VEC - 1) / VEC + 4) * VEC;   // zeros around x: the reads reach K + 4 VEC - 3
    for (int i = threadIdx.x; i < ROWS * xpitch; i += THREADS) {
        int r = i / xpitch, k = i % xpitch - VEC;
        xs[i] = (k >= 0 && k < K) ? x[r * ldx + k] : (elem_t)0;
    }
    __syncthreads();
    const int lane = threadIdx.x & 31, warps = THREADS / 32;
    for (int n = blockIdx.x * warps + (threadIdx.x >> 5); n < N; n += gridDim.x * warps) {
        const elem_t* row = W + (long long)n * ldw;
        const unsigned long long addr = reinterpret_cast<unsigned long long>(row);
        const uint4* wa = reinterpret_cast<const uint4*>(addr & ~15ull);
        const int sh = (int)(addr & 15) / ELEM;
        float acc[ROWS];
#pragma unroll
        for (int r = 0; r < ROWS; ++r) acc[r] = 0.f;
        switch (sh) {
            case 0: row_dot<0>(wa, row, K, xs, xpitch, lane, acc); break;
            case 1: row_dot<1>(wa, row, K, xs, xpitch, lane, acc); break;
#if ELEM == 4
            case 2: row_dot<2>(wa, row, K, xs, xpitch, lane, acc); break;
            default: row_dot<3>(wa, row, K, xs, xpitch, lane, acc); break;
#else
            case 2: row_dot<2>(wa, row, K, xs, xpitch, lane, acc); break;
            case 3: row_dot<3>(wa, row, K, xs, xpitch, lane, acc); break;
            case 4: row_dot<4>(wa, row, K, xs, xpitch, lane, acc); break;
            case 5: row_dot<5>(wa, row, K, xs, xpitch, lane, acc); break;
            case 6: row_dot<6>(wa, row, K, xs, xpitch, lane, acc); break;
            default: row_dot<7>(wa, row, K, xs, xpitch, lane, acc); break;
#endif
        }
#pragma unroll
        for (int r = 0; r < ROWS; ++r) {
            float v = acc[r];
            for (int o = 16; o; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
            if (lane == 0) y[r * ldy + n] = from_f(v);
        }
    }
}
"""


def kernel(dtype, rows, loads, threads, name="flat_dot"):
    elem = 4 if dtype == "float32" else 2
    src = (f"#define ELEM {elem}\n#define HALF {int(dtype == 'float16')}\n#define ROWS {rows}\n"
           f"#define LOADS {loads}\n#define THREADS {threads}\n" + SOURCE)
    return cupy.RawKernel(src, name, options=("-std=c++17",))


def shapes(rng, item, rows):
    out = []
    while len(out) < COUNT:
        N, K = (-(-int(math.exp(rng.uniform(math.log(1024), math.log(16384)))) // MULTIPLE) * MULTIPLE
                for _ in range(2))
        if N * K * item >= MIN_MB * 1e6:
            out.append((rows, N, K))
    return out


def split_variants(row, ops, ref, tol, splits, dtype, N, K, item, sms):
    """The balanced partition (flat_split) on one row, at 2-8 blocks an SM."""
    vec = 16 // item
    smem = ((K + vec - 1) // vec + 5) * vec * item
    for (lo, th), kern in splits.items():
        if smem > 48 * 1024:
            kern.max_dynamic_shared_size_bytes = smem
        for per_sm in (2, 4, 8):
            grid = sms * per_sm
            if th * per_sm > 2048:
                continue
            slots = 2 * grid * (th // 32)
            prow = torch.empty(slots, dtype=torch.int32, device="cuda")
            pval = torch.empty(slots, dtype=torch.float32, device="cuda")
            ticket = torch.zeros(1, dtype=torch.int32, device="cuda")

            def launch(a, b, c, kern=kern, th=th, grid=grid, prow=prow, pval=pval, ticket=ticket):
                stream = cupy.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream)
                with stream:
                    kern((grid,), (th,), (cupy.uint64(a.data_ptr()), cupy.uint64(b.data_ptr()),
                                          cupy.int64(b.stride(1)), cupy.uint64(c.data_ptr()), cupy.int32(N),
                                          cupy.int32(K), cupy.uint64(prow.data_ptr()), cupy.uint64(pval.data_ptr()),
                                          cupy.uint64(ticket.data_ptr())), shared_mem=smem)
            ops.C[0].fill_(float("nan"))
            launch(ops.A[0], ops.B[0], ops.C[0])
            torch.cuda.synchronize()
            err = float((ops.C[0].double() - ref).norm() / ref.norm())
            fl = [(lambda a=a, b=b, c=c, f=launch: f(a, b, c)) for a, b, c in zip(ops.A, ops.B, ops.C)]
            us = time_graph(torch, fl, 15) if err < tol else float("nan")
            row["flat"][f"split/loads{lo}/t{th}/x{per_sm}"] = {"us": us, "err": err}


def main():
    bw = copy_bandwidth(torch, 20)
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    out_rows = []
    variants = [(loads, threads, per_sm) for loads in (4, 8) for threads in (256, 512) for per_sm in (2, 4)]
    for dtype in DTYPES:
        tdt = getattr(torch, dtype)
        item = torch.empty((), dtype=tdt).element_size()
        for M in ROWS:
            kernels = {(lo, th): kernel(dtype, M, lo, th) for lo, th, _ in variants}
            splits = {(lo, th): kernel(dtype, 1, lo, th, "flat_split") for lo, th, _ in variants} if M == 1 else {}
            for _, N, K in shapes(random.Random(f"{SEED}-{dtype}-{M}"), item, M):
                ops = Operands(torch, M, N, K, dtype, "col", l2)
                ref = ops.A[0].double() @ ops.B[0].double()
                tol = 1e-5 if dtype == "float32" else 1e-2
                kgen.matmul(ops.A[0], ops.B[0], out=ops.C[0])
                k_err = float((ops.C[0].double() - ref).norm() / ref.norm())
                kg = [(lambda a=a, b=b, c=c: kgen.matmul(a, b, out=c)) for a, b, c in zip(ops.A, ops.B, ops.C)]
                cb = [(lambda a=a, b=b, c=c: torch.matmul(a, b, out=c)) for a, b, c in zip(ops.A, ops.B, ops.C)]
                k_us, c_us = time_graph(torch, kg, 15), time_graph(torch, cb, 15)
                row = {"shape": [M, N, K], "dtype": dtype, "bound_us": ops.bytes / bw * 1e6, "kgen_us": k_us,
                       "kgen_err": k_err, "cublas_us": c_us, "spec": call_spec(ops.A[0], ops.B[0]).to_dict(),
                       "flat": {}}
                vec = 16 // item
                smem = M * ((K + vec - 1) // vec + 4) * vec * item
                for lo, th, per_sm in variants:
                    kern = kernels[(lo, th)]
                    grid = (min(sms * per_sm, -(-N // (th // 32))),)
                    if smem > 48 * 1024:
                        kern.max_dynamic_shared_size_bytes = smem

                    def launch(a, b, c, kern=kern, th=th, grid=grid, N=N, K=K, smem=smem):
                        stream = cupy.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream)
                        with stream:
                            kern(grid, (th,), (cupy.uint64(a.data_ptr()), cupy.int64(a.stride(0)),
                                               cupy.uint64(b.data_ptr()), cupy.int64(b.stride(1)),
                                               cupy.uint64(c.data_ptr()), cupy.int64(c.stride(0)),
                                               cupy.int32(N), cupy.int32(K)), shared_mem=smem)
                    ops.C[0].fill_(float("nan"))
                    launch(ops.A[0], ops.B[0], ops.C[0])
                    torch.cuda.synchronize()
                    err = float((ops.C[0].double() - ref).norm() / ref.norm())
                    fl = [(lambda a=a, b=b, c=c, f=launch: f(a, b, c)) for a, b, c in zip(ops.A, ops.B, ops.C)]
                    us = time_graph(torch, fl, 15) if err < tol else float("nan")
                    row["flat"][f"loads{lo}/t{th}/x{per_sm}"] = {"us": us, "err": err}
                if M == 1:
                    split_variants(row, ops, ref, tol, splits, dtype, N, K, item, sms)
                b_us = row["bound_us"]
                line = f"{dtype} {M}x{N}x{K}: bound {b_us:.1f} kgen {k_us:.1f} ({b_us / k_us:.0%}) cuBLAS {c_us:.1f}"
                for kind in ("row", "split"):
                    got = [(v["us"], k) for k, v in row["flat"].items()
                           if v["us"] == v["us"] and k.startswith("split/") == (kind == "split")]
                    if got:
                        best = min(got)
                        line += f" | {kind} {best[0]:.1f} ({b_us / best[0]:.0%}, {best[1]}) x kgen {k_us / best[0]:.2f}"
                print(line + f" | worst err {max(v['err'] for v in row['flat'].values()):.1e}", flush=True)
                out_rows.append(row)
                del ops
                torch.cuda.empty_cache()
                with open(os.path.join(os.environ.get("OUT", "."), f"flat_gemv_{SEED}.json"), "w") as f:
                    json.dump({"device": torch.cuda.get_device_name(), "copy_bandwidth": bw, "rows": out_rows}, f)


if __name__ == "__main__":
    main()
