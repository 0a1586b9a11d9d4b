"""How fast the float32 tensor-core dot form's read of a k-contiguous weight (B = W.t()) can go,
apart from any product: kernels that only read an N x K float32 matrix (row n = column n of
the large operand, K contiguous) in the form's geometry and sum what they read, so nothing is
optimised away. A block is 256 threads (8 warps); K is split into slabs of whole 32-k windows
so that the blocks fill the SMs once, as kgen's geometry does. Variants (VARIANTS below):

  regs       the form's loads: lane (g, t) of a warp reads, for each of its CPL columns (4:
             32 columns a warp, as the form's two tiles), two 16-byte loads at k = 8t..8t+7 of
             a 32-k window into registers; DEPTH windows a warp (DEPTH - 1 in flight while one
             is summed), __ldcs as the form. ROT 1 or 2 start each warp at a different window
             of its slab (wrapping around), so a block's columns are read at different k;
  async_ring the same reads with 16-byte cp.async.cg copies into a ring of DEPTH windows a warp
             in shared memory, each lane reading back what it copied;
  bulk       each warp's 32 columns copied to shared memory with cp.async.bulk, 128 bytes (one
             window) a column and lane, DEPTH stages a warp, each completed on an mbarrier;
  kwarps     KW warps of a block share 8 * CPL columns and deal the slab's windows round-robin, so
             the block reads KW adjacent windows of a column at a time (longer runs of each
             column, fewer columns read at once across the GPU);
  flat       the matrix as one flat array: 8 blocks of 256 threads an SM, 8 loads of 16 bytes in
             flight a thread, a grid-stride loop (the read_floor.py kernel's shape).

Blocks an SM are set by the grid (blocks x SMs) and the registers; dynamic shared memory (with
the carve-out asked for no larger than the blocks need) sets how much of the SM's unified
memory is left to L1. Device time of one launch between CUDA events (a launch's fixed cost
included), median of REPEATS over copies rotated past L2 (three L2s of bytes or more); each
sum checked against torch's where K is whole windows. Share of the bound = (N x K x 4 bytes /
the device-to-device copy bandwidth measured in the same run) / time.

Usage: python docs/bench/research/dot_read_paths.py   (env SHAPES=NxK,..., REPEATS, ONLY=label,...)
Output: $OUT/dot_read_paths.json and one JSON line a shape on stdout."""
import ctypes
import json
import math
import os

import cupy as cp
import torch

from kgen.bench.skinny import copy_bandwidth

SRC = r"""
#define WARPS 8
#define PITCH 144   // bytes between a stage's column rows in shared memory (128 + 16: no bank conflicts)
// The regs kernel's ROT 3-5 keep the warps' window order (no rotation) and change a lane's loads:
// FULL: lane t's load q reads k = 4t + 16q of the window (the 4 lanes of a column cover whole
// 32-byte sectors a load) instead of k = 8t + 4q (half of each of 4 sectors a load, the other
// half the next load); ROT 4: the form's order through __ldg, ROT 5: FULL through __ldg.
#define FULL (ROT == 3 || ROT == 5)
#define LOADW(p) (ROT >= 4 ? __ldg(p) : __ldcs(p))
#define LANE_K (FULL ? 4 : 8)
#define Q_K (FULL ? 16 : 4)

__device__ __forceinline__ float sum4(float4 v) { return (v.x + v.y) + (v.z + v.w); }

__device__ __forceinline__ void finish(float acc, float* out) {
    for (int o = 16; o; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
    __shared__ float part[WARPS];
    if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = acc;
    __syncthreads();
    if (threadIdx.x == 0) {
        float s = 0.f;
        for (int w = 0; w < WARPS; ++w) s += part[w];
        out[blockIdx.y * gridDim.x + blockIdx.x] = s;
    }
}

// The lane's CPL columns of its warp's 8 * CPL (past NC: the last column, not live), each at
// the lane's 8 values of the first window of the block's K slab; returns the slab's whole windows.
__device__ __forceinline__ int lane_columns(const float* L, long long ldl, int NC, long long K, long long ks,
                                            const float* (&colp)[CPL], bool (&live)[CPL]) {
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const int n0 = blockIdx.x * 64 * CPL + warp * 8 * CPL;
    const long long kb = blockIdx.y * ks, ke = min(K, kb + ks);
#pragma unroll
    for (int c = 0; c < CPL; ++c) {
        live[c] = n0 + 8 * c + g < NC;
        colp[c] = L + (long long)min(n0 + 8 * c + g, NC - 1) * ldl + kb + LANE_K * t;
    }
    return (int)((ke - kb) / 32);
}

extern "C" __global__ void __launch_bounds__(256, MINB)
regs(const float* __restrict__ L, long long ldl, int NC, long long K, long long ks, float* out) {
    const int warp = threadIdx.x >> 5;
    const float* colp[CPL];
    bool live[CPL];
    const int nw = lane_columns(L, ldl, NC, K, ks, colp, live);
    // ROT 1: warp w of a block starts w/8 of the way into the slab's windows and wraps around,
    // so the block's warps read different k at a time; ROT 2: a start drawn per warp.
    const int rot = nw == 0 ? 0 : ROT == 1 ? warp * nw / WARPS
                  : ROT == 2 ? (int)(((blockIdx.x * WARPS + warp) * 7919u + blockIdx.y * 104729u) % (unsigned)nw) : 0;
    float acc = 0.f;
    float4 w[DEPTH][CPL][2];
#pragma unroll
    for (int r = 0; r + 1 < DEPTH; ++r)
        if (r < nw)
#pragma unroll
            for (int c = 0; c < CPL; ++c)
#pragma unroll
                for (int q = 0; q < 2; ++q)
                    w[r][c][q] = LOADW(reinterpret_cast<const float4*>(colp[c] + 32 * ((r + rot) % nw) + Q_K * q));
#pragma unroll 1
    for (int base = 0; base < nw; base += DEPTH) {
#pragma unroll
        for (int r = 0; r < DEPTH; ++r) {
            if (base + r < nw) {
                const int nx = base + r + DEPTH - 1;
                if (nx < nw)
#pragma unroll
                    for (int c = 0; c < CPL; ++c)
#pragma unroll
                        for (int q = 0; q < 2; ++q)
                            w[(r + DEPTH - 1) % DEPTH][c][q] =
                                LOADW(reinterpret_cast<const float4*>(colp[c] + 32 * ((nx + rot) % nw) + Q_K * q));
#pragma unroll
                for (int c = 0; c < CPL; ++c)
                    if (live[c]) acc += sum4(w[r][c][0]) + sum4(w[r][c][1]);
            }
        }
    }
    finish(acc, out);
}

__device__ __forceinline__ unsigned smem_addr(const void* p) { return (unsigned)__cvta_generic_to_shared(p); }

// The regs kernel's reads with cp.async (16 bytes a copy, L2 only) into a ring of DEPTH windows
// a warp in shared memory instead of registers: each lane reads back only what it copied (slot
// [window][column][q][lane], conflict-free), so its own cp.async.wait_group is the only wait.
extern "C" __global__ void __launch_bounds__(256, MINB)
async_ring(const float* __restrict__ L, long long ldl, int NC, long long K, long long ks, float* out) {
    extern __shared__ __align__(128) unsigned char sm[];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    float4* ring = reinterpret_cast<float4*>(sm) + warp * DEPTH * CPL * 2 * 32;
    const float* colp[CPL];
    bool live[CPL];
    const int nw = lane_columns(L, ldl, NC, K, ks, colp, live);
    auto issue = [&](int win) {
        if (win < nw) {
#pragma unroll
            for (int c = 0; c < CPL; ++c)
#pragma unroll
                for (int q = 0; q < 2; ++q)
                    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;"
                                 :: "r"(smem_addr(ring + (((win % DEPTH) * CPL + c) * 2 + q) * 32 + lane)),
                                    "l"(colp[c] + 32 * win + 4 * q) : "memory");
        }
        asm volatile("cp.async.commit_group;" ::: "memory");   // empty past the last window: counts stay even
    };
#pragma unroll
    for (int r = 0; r + 1 < DEPTH; ++r) issue(r);
    float acc = 0.f;
#pragma unroll 1
    for (int win = 0; win < nw; ++win) {
        issue(win + DEPTH - 1);   // into the slot read (and summed) one window ago
        asm volatile("cp.async.wait_group %0;" :: "n"(DEPTH - 1) : "memory");
        const float4* slot = ring + (win % DEPTH) * CPL * 2 * 32 + lane;
#pragma unroll
        for (int c = 0; c < CPL; ++c)
            if (live[c]) acc += sum4(slot[(2 * c) * 32]) + sum4(slot[(2 * c + 1) * 32]);
    }
    finish(acc, out);
}

extern "C" __global__ void __launch_bounds__(256, 1)
bulk(const float* __restrict__ L, long long ldl, int NC, long long K, long long ks, float* out) {
    extern __shared__ __align__(128) unsigned char sm[];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    unsigned char* ring = sm + warp * DEPTH * 32 * PITCH;
    unsigned long long* bars = reinterpret_cast<unsigned long long*>(sm + WARPS * DEPTH * 32 * PITCH) + warp * DEPTH;
    if (lane < DEPTH)
        asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(smem_addr(bars + lane)) : "memory");
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    __syncwarp();
    const int n0 = blockIdx.x * 256 + warp * 32;
    const long long kb = blockIdx.y * ks, ke = min(K, kb + ks);
    const float* src = L + (long long)min(n0 + lane, NC - 1) * ldl + kb;   // this lane copies column n0 + lane
    bool live[4];
#pragma unroll
    for (int c = 0; c < 4; ++c) live[c] = n0 + 8 * c + g < NC;
    const int nw = (int)((ke - kb) / 32);
    auto issue = [&](int win) {
        const int s = win % DEPTH;
        const unsigned bar = smem_addr(bars + s);
        if (lane == 0)
            asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;"
                         :: "r"(bar), "r"(32 * 128) : "memory");
        __syncwarp();
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
        asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], 128, [%2];"
                     :: "r"(smem_addr(ring + s * 32 * PITCH + lane * PITCH)), "l"(src + 32 * win), "r"(bar) : "memory");
    };
    for (int r = 0; r + 1 < DEPTH && r < nw; ++r) issue(r);
    float acc = 0.f;
#pragma unroll 1
    for (int win = 0; win < nw; ++win) {
        if (win + DEPTH - 1 < nw) issue(win + DEPTH - 1);
        const int s = win % DEPTH;
        const unsigned bar = smem_addr(bars + s), parity = (win / DEPTH) & 1;
        asm volatile("{\n .reg .pred p;\n W: mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n @!p bra W;\n}"
                     :: "r"(bar), "r"(parity) : "memory");
        const unsigned char* st = ring + s * 32 * PITCH;
#pragma unroll
        for (int c = 0; c < 4; ++c) {
            const float4* row = reinterpret_cast<const float4*>(st + (8 * c + g) * PITCH + 32 * t);
            if (live[c]) acc += sum4(row[0]) + sum4(row[1]);
        }
        __syncwarp();   // every lane has read stage s before it is copied into again
    }
    finish(acc, out);
}

// ROT (here the number of warps that share columns, KW) warps of a block read the same 8 * CPL
// columns and deal the slab's 32-k windows round-robin (warp rank r reads windows r, r + KW, ...),
// so at a time the block reads KW adjacent windows (KW x 128 bytes) of each of its columns; the
// block covers 8 / KW x 8 x CPL columns. KW = 1 reads as regs does.
extern "C" __global__ void __launch_bounds__(256, MINB)
kwarps(const float* __restrict__ L, long long ldl, int NC, long long K, long long ks, float* out) {
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const int rank = warp % ROT, grp = warp / ROT;
    const int n0 = (blockIdx.x * (WARPS / ROT) + grp) * 8 * CPL;
    const long long kb = blockIdx.y * ks, ke = min(K, kb + ks);
    const float* colp[CPL];
    bool live[CPL];
#pragma unroll
    for (int c = 0; c < CPL; ++c) {
        live[c] = n0 + 8 * c + g < NC;
        colp[c] = L + (long long)min(n0 + 8 * c + g, NC - 1) * ldl + kb + 8 * t;
    }
    const int nwin = (int)((ke - kb) / 32);
    const int nw = nwin > rank ? (nwin - rank + ROT - 1) / ROT : 0;
    float acc = 0.f;
    float4 w[DEPTH][CPL][2];
#pragma unroll
    for (int r = 0; r + 1 < DEPTH; ++r)
        if (r < nw)
#pragma unroll
            for (int c = 0; c < CPL; ++c)
#pragma unroll
                for (int q = 0; q < 2; ++q)
                    w[r][c][q] = __ldcs(reinterpret_cast<const float4*>(colp[c] + 32 * (rank + r * ROT) + 4 * q));
#pragma unroll 1
    for (int base = 0; base < nw; base += DEPTH) {
#pragma unroll
        for (int r = 0; r < DEPTH; ++r) {
            if (base + r < nw) {
                const int nx = base + r + DEPTH - 1;
                if (nx < nw)
#pragma unroll
                    for (int c = 0; c < CPL; ++c)
#pragma unroll
                        for (int q = 0; q < 2; ++q)
                            w[(r + DEPTH - 1) % DEPTH][c][q] =
                                __ldcs(reinterpret_cast<const float4*>(colp[c] + 32 * (rank + nx * ROT) + 4 * q));
#pragma unroll
                for (int c = 0; c < CPL; ++c)
                    if (live[c]) acc += sum4(w[r][c][0]) + sum4(w[r][c][1]);
            }
        }
    }
    finish(acc, out);
}

// Each warp reads 8 * CPL / 4 columns in runs of 512 bytes: all 32 lanes of a load on one
// column (lane l at k = 4l of a 128-k window), the same 4 KB a window a warp as regs with CPL 4
// but in 8 runs of 512 contiguous bytes instead of 32 runs of 128; a block covers 64 * CPL / 4
// columns. DEPTH windows a warp (DEPTH - 1 in flight). Whole 128-k windows only (K % 128 == 0
// is where the sum is checked against the whole matrix's: the caller passes ks in 128s).
extern "C" __global__ void __launch_bounds__(256, MINB)
runs(const float* __restrict__ L, long long ldl, int NC, long long K, long long ks, float* out) {
    constexpr int RC = 2 * CPL;   // columns a warp
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int n0 = (blockIdx.x * WARPS + warp) * RC;
    const long long kb = blockIdx.y * ks, ke = min(K, kb + ks);
    const float* colp[RC];
    bool live[RC];
#pragma unroll
    for (int c = 0; c < RC; ++c) {
        live[c] = n0 + c < NC;
        colp[c] = L + (long long)min(n0 + c, NC - 1) * ldl + kb + 4 * lane;
    }
    const int nw = (int)((ke - kb) / 128);
    float acc = 0.f;
    float4 w[DEPTH][RC];
#pragma unroll
    for (int r = 0; r + 1 < DEPTH; ++r)
        if (r < nw)
#pragma unroll
            for (int c = 0; c < RC; ++c) w[r][c] = __ldcs(reinterpret_cast<const float4*>(colp[c] + 128 * r));
#pragma unroll 1
    for (int base = 0; base < nw; base += DEPTH) {
#pragma unroll
        for (int r = 0; r < DEPTH; ++r) {
            if (base + r < nw) {
                const int nx = base + r + DEPTH - 1;
                if (nx < nw)
#pragma unroll
                    for (int c = 0; c < RC; ++c)
                        w[(r + DEPTH - 1) % DEPTH][c] = __ldcs(reinterpret_cast<const float4*>(colp[c] + 128 * nx));
#pragma unroll
                for (int c = 0; c < RC; ++c)
                    if (live[c]) acc += sum4(w[r][c]);
            }
        }
    }
    finish(acc, out);
}

// A form's data path with runs of RUNK k a column (RUNK * 4 bytes): each warp owns 16 columns (one
// mma tile's rows); a load covers 32 / (RUNK / 4) columns, lane by lane along k. runs_t keeps
// DEPTH windows a warp in registers and passes each through the warp's tile in shared memory
// (column rows TPITCH bytes apart), from which lane (g, t) reads columns g and g + 8 at
// k = 4 (t + 4m) as an mma fragment would (16-byte reads, no bank conflicts); runs_async copies
// the runs with cp.async.cg straight into a ring of DEPTH such tiles a warp.
#define RC 16
#define LPC (RUNK / 4)
#define CPI (32 / LPC)
#define NLD (RC / CPI)
#define TPITCH (RUNK * 4 + 64)

__device__ __forceinline__ float tile_sum(const unsigned char* tile, int g, int t, bool live0, bool live1) {
    float acc = 0.f;
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
        for (int m = 0; m < RUNK / 16; ++m) {
            const float4 v = *reinterpret_cast<const float4*>(tile + (g + 8 * h) * TPITCH + 16 * (t + 4 * m));
            if (h ? live1 : live0) acc += sum4(v);
        }
    return acc;
}

extern "C" __global__ void __launch_bounds__(256, MINB)
runs_t(const float* __restrict__ L, long long ldl, int NC, long long K, long long ks, float* out) {
    extern __shared__ __align__(128) unsigned char sm[];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    unsigned char* tile = sm + warp * RC * TPITCH;
    const int n0 = (blockIdx.x * WARPS + warp) * RC;
    const long long kb = blockIdx.y * ks, ke = min(K, kb + ks);
    const int cl = lane / LPC, kl = (lane % LPC) * 4;
    const float* colp[NLD];
#pragma unroll
    for (int j = 0; j < NLD; ++j) colp[j] = L + (long long)min(n0 + j * CPI + cl, NC - 1) * ldl + kb + kl;
    const bool live0 = n0 + g < NC, live1 = n0 + g + 8 < NC;
    const int nw = (int)((ke - kb) / RUNK);
    float acc = 0.f;
    float4 w[DEPTH][NLD];
#pragma unroll
    for (int r = 0; r + 1 < DEPTH; ++r)
        if (r < nw)
#pragma unroll
            for (int j = 0; j < NLD; ++j) w[r][j] = __ldcs(reinterpret_cast<const float4*>(colp[j] + RUNK * r));
#pragma unroll 1
    for (int base = 0; base < nw; base += DEPTH) {
#pragma unroll
        for (int r = 0; r < DEPTH; ++r) {
            if (base + r < nw) {
                const int nx = base + r + DEPTH - 1;
                if (nx < nw)
#pragma unroll
                    for (int j = 0; j < NLD; ++j)
                        w[(r + DEPTH - 1) % DEPTH][j] = __ldcs(reinterpret_cast<const float4*>(colp[j] + RUNK * nx));
#pragma unroll
                for (int j = 0; j < NLD; ++j)
                    *reinterpret_cast<float4*>(tile + (j * CPI + cl) * TPITCH + 4 * kl) = w[r][j];
                __syncwarp();
                acc += tile_sum(tile, g, t, live0, live1);
                __syncwarp();
            }
        }
    }
    finish(acc, out);
}

extern "C" __global__ void __launch_bounds__(256, MINB)
runs_async(const float* __restrict__ L, long long ldl, int NC, long long K, long long ks, float* out) {
    extern __shared__ __align__(128) unsigned char sm[];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    unsigned char* ring = sm + warp * DEPTH * RC * TPITCH;
    const int n0 = (blockIdx.x * WARPS + warp) * RC;
    const long long kb = blockIdx.y * ks, ke = min(K, kb + ks);
    const int cl = lane / LPC, kl = (lane % LPC) * 4;
    const float* colp[NLD];
#pragma unroll
    for (int j = 0; j < NLD; ++j) colp[j] = L + (long long)min(n0 + j * CPI + cl, NC - 1) * ldl + kb + kl;
    const bool live0 = n0 + g < NC, live1 = n0 + g + 8 < NC;
    const int nw = (int)((ke - kb) / RUNK);
    auto issue = [&](int win) {
        if (win < nw) {
            unsigned char* slot = ring + (win % DEPTH) * RC * TPITCH;
#pragma unroll
            for (int j = 0; j < NLD; ++j)
                asm volatile("cp.async.cg.shared.global [%0], [%1], 16;"
                             :: "r"(smem_addr(slot + (j * CPI + cl) * TPITCH + 4 * kl)), "l"(colp[j] + RUNK * win)
                             : "memory");
        }
        asm volatile("cp.async.commit_group;" ::: "memory");
    };
#pragma unroll
    for (int r = 0; r + 1 < DEPTH; ++r) issue(r);
    float acc = 0.f;
#pragma unroll 1
    for (int win = 0; win < nw; ++win) {
        issue(win + DEPTH - 1);   // into the slot read one window ago (the __syncwarp below ended those reads)
        asm volatile("cp.async.wait_group %0;" :: "n"(DEPTH - 1) : "memory");
        __syncwarp();
        acc += tile_sum(ring + (win % DEPTH) * RC * TPITCH, g, t, live0, live1);
        __syncwarp();
    }
    finish(acc, out);
}

extern "C" __global__ void __launch_bounds__(256)
flat(const float4* __restrict__ x, long long n4, float* __restrict__ out) {
    float acc = 0.f;
    const long long stride = (long long)gridDim.x * blockDim.x;
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    for (; i + 7 * stride < n4; i += 8 * stride) {
        float4 v[8];
#pragma unroll
        for (int u = 0; u < 8; ++u) v[u] = __ldcs(x + i + u * stride);
#pragma unroll
        for (int u = 0; u < 8; ++u) acc += sum4(v[u]);
    }
    for (; i < n4; i += stride) acc += sum4(__ldcs(x + i));
    finish(acc, out);
}
"""

REPEATS = int(os.environ.get("REPEATS", "30"))
SHAPES = [tuple(map(int, s.split("x"))) for s in
          os.environ.get("SHAPES", "1856x10240,4096x4096,3968x6272,12424x6888,10672x15380,14336x4096").split(",")]
# (label, kernel, windows a warp, columns a lane, blocks an SM, dynamic shared bytes a block,
# the warps' order over their windows (ROT)):
# the shared bytes, with the carveout asked for no larger than the blocks need, set how much of
# the SM's unified memory is left to L1.
VARIANTS = [("regs3", "regs", 3, 4, 1, 0, 0), ("regs3_s64k", "regs", 3, 4, 1, 64 << 10, 0),
            ("regs3_s120k", "regs", 3, 4, 1, 120 << 10, 0), ("regs3_s226k", "regs", 3, 4, 1, 226 << 10, 0),
            ("regs2", "regs", 2, 4, 1, 0, 0), ("regs6", "regs", 6, 4, 1, 0, 0), ("regs3_2sm", "regs", 3, 4, 2, 0, 0),
            ("regs3_c2_4sm", "regs", 3, 2, 4, 0, 0), ("bulk4", "bulk", 4, 4, 1, None, 0),
            ("regs3_rot", "regs", 3, 4, 1, 0, 1), ("regs3_rand", "regs", 3, 4, 1, 0, 2),
            ("regs3_2sm_rot", "regs", 3, 4, 2, 0, 1),
            # cp.async rings: shared bytes = the ring (DEPTH x CPL x 8 KB a block) + 32 KB for S's staging
            ("async3", "async_ring", 3, 4, 1, 3 * 4 * 8192 + 32768, 0),
            ("async3_2sm", "async_ring", 3, 4, 2, 3 * 4 * 8192, 0),
            ("async2_2sm", "async_ring", 2, 4, 2, 2 * 4 * 8192 + 32768, 0),
            ("async4_c2_2sm", "async_ring", 4, 2, 2, 4 * 2 * 8192 + 32768, 0),
            # kwarps: the last field is KW, the warps of a block that share columns
            ("kw1", "kwarps", 3, 4, 1, 0, 1), ("kw2", "kwarps", 3, 4, 1, 0, 2), ("kw4", "kwarps", 3, 4, 1, 0, 4),
            ("kw8", "kwarps", 3, 4, 1, 0, 8), ("kw4_2sm", "kwarps", 3, 4, 2, 0, 4),
            ("kw8_2sm", "kwarps", 3, 4, 2, 0, 8), ("kw8_c2_4sm", "kwarps", 3, 2, 4, 0, 8),
            # the regs kernel's load orders and cache operators (ROT 3-5 above)
            ("regs3_full", "regs", 3, 4, 1, 0, 3), ("regs3_2sm_full", "regs", 3, 4, 2, 0, 3),
            ("regs3_ldg", "regs", 3, 4, 1, 0, 4), ("regs3_full_ldg", "regs", 3, 4, 1, 0, 5),
            ("regs3_2sm_full_ldg", "regs", 3, 4, 2, 0, 5),
            # 512-byte runs a load (the runs kernel; 8 columns a warp with CPL 4)
            ("runs3", "runs", 3, 4, 1, 0, 0), ("runs3_2sm", "runs", 3, 4, 2, 0, 0),
            ("runs6", "runs", 6, 4, 1, 0, 0),
            # a form's data path with runs of 64 or 128 k (256 or 512 bytes): the last field is RUNK;
            # shared bytes = 8 warps x DEPTH (async) x 16 columns x TPITCH
            ("runs_t64_3_2sm", "runs_t", 3, 4, 2, 8 * 16 * 320, 64),
            ("runs_t64_2_2sm", "runs_t", 2, 4, 2, 8 * 16 * 320, 64),
            ("runs_t128_2_1sm", "runs_t", 2, 4, 1, 8 * 16 * 576, 128),
            ("runs_async64_2_2sm", "runs_async", 2, 4, 2, 2 * 8 * 16 * 320, 64),
            ("runs_async64_4_1sm", "runs_async", 4, 4, 1, 4 * 8 * 16 * 320, 64),
            ("runs_async128_2_1sm", "runs_async", 2, 4, 1, 2 * 8 * 16 * 576, 128)]
if os.environ.get("ONLY"):   # e.g. ONLY=regs3,regs3_2sm: these variants alone (for a profiler)
    VARIANTS = [v for v in VARIANTS if v[0] in os.environ["ONLY"].split(",")]
_CARVEOUT = 9   # CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT
_libcuda = ctypes.CDLL("libcuda.so.1")


def set_carveout(fn, percent: int) -> None:
    """fn: a cupy RawKernel (its CUfunction is fn.kernel.ptr)."""
    rc = _libcuda.cuFuncSetAttribute(ctypes.c_void_p(fn.kernel.ptr), _CARVEOUT, int(percent))
    if rc:
        raise RuntimeError(f"cuFuncSetAttribute(carveout {percent}) failed: {rc}")


def module(depth: int, cpl: int, minb: int, rot: int) -> cp.RawModule:
    """rot is RUNK for the runs_t and runs_async variants (ROT 0 there), ROT otherwise."""
    runk = rot if rot >= 64 else 64
    return cp.RawModule(code=SRC, options=("--std=c++17", f"-DDEPTH={depth}", f"-DCPL={cpl}", f"-DMINB={minb}",
                                           f"-DROT={rot if rot < 64 else 0}", f"-DRUNK={runk}"))


def time_launches(launch, sets: int) -> float:
    """Median device µs of one launch (rotating over `sets` copies), after a warm-up."""
    for i in range(3 * sets):
        launch(i % sets)
    times = []
    for i in range(REPEATS):
        a, b = cp.cuda.Event(), cp.cuda.Event()
        a.record()
        launch(i % sets)
        b.record()
        b.synchronize()
        times.append(cp.cuda.get_elapsed_time(a, b) * 1000.0)
    times.sort()
    return times[len(times) // 2]


def launcher(fn, grid, shared, mats, N, K, ks, out):
    def launch(i):
        fn(grid, (256, 1, 1), (mats[i], cp.int64(K), cp.int32(N), cp.int64(K), cp.int64(ks), out), shared_mem=shared)
    return launch


def flat_launcher(fn, blocks, mats, n4, out):
    def launch(i):
        fn((blocks, 1, 1), (256, 1, 1), (mats[i], cp.int64(n4), out))
    return launch


def main() -> None:
    dev = cp.cuda.Device()
    sms = dev.attributes["MultiProcessorCount"]
    l2 = dev.attributes["L2CacheSize"]
    smem = dev.attributes["MaxSharedMemoryPerMultiprocessor"]
    bw = copy_bandwidth(torch, 20)
    mods = {v[2:5] + v[6:]: module(*v[2:5], *v[6:]) for v in VARIANTS}
    rows = []
    for N, K in SHAPES:
        nbytes = N * K * 4
        sets = max(1, math.ceil(3 * l2 / nbytes))
        mats = [cp.random.standard_normal((N, K), dtype=cp.float32) for _ in range(sets)]
        want = float(torch.as_tensor(mats[0], device="cuda").double().sum())
        bound = nbytes / bw * 1e6
        res = {"N": N, "K": K, "MB": nbytes / 1e6, "bound_us": bound}
        for label, kind, depth, cpl, bps, shared, rot in VARIANTS:
            fn = mods[(depth, cpl, bps, rot)].get_function(kind)
            staged = kind in ("runs_t", "runs_async")
            per_block = (16 * cpl if kind == "runs" else 128 if staged
                         else (8 // rot if kind == "kwarps" else 8) * 8 * cpl)
            col_tiles = -(-N // per_block)
            # K slabs of whole windows so that the blocks fill the SMs once (bps blocks each)
            win = 128 if kind == "runs" else rot if staged else 32
            ks = math.ceil(math.ceil(K / max(1, bps * sms // col_tiles)) / win) * win
            splits = -(-K // ks)
            out = cp.empty(col_tiles * splits, dtype=cp.float32)
            if shared is None:   # the bulk kernel's stages and barriers
                shared = 8 * depth * 32 * 144 + 8 * depth * 8
            fn.max_dynamic_shared_size_bytes = max(shared, 1)
            set_carveout(fn, -(-100 * bps * (shared + 1024 + 128) // smem))
            launch = launcher(fn, (col_tiles, splits, 1), shared, mats, N, K, ks, out)
            launch(0)
            dev.synchronize()
            # Only whole 32-k windows of each slab are read: the sum is checked where K and the
            # slabs are whole windows.
            ok = None if K % win else abs(float(out.sum()) - want) <= 1e-3 * math.sqrt(N * K)
            us = time_launches(launch, sets)
            res[label] = {"us": round(us, 2), "share": round(bound / us, 3), "grid": [col_tiles, splits],
                          "shared": shared, "sum_ok": ok}
        ffn = mods[VARIANTS[0][2:5] + VARIANTS[0][6:]].get_function("flat")
        fout = cp.empty(sms * 8, dtype=cp.float32)
        flat_launch = flat_launcher(ffn, sms * 8, mats, N * K // 4, fout)
        flat_launch(0)
        dev.synchronize()
        okf = abs(float(fout.sum()) - want) <= 1e-3 * math.sqrt(N * K)
        us = time_launches(flat_launch, sets)
        res["flat"] = {"us": round(us, 2), "share": round(bound / us, 3), "sum_ok": okf}
        rows.append(res)
        print(json.dumps(res), flush=True)
        del mats
        cp.get_default_memory_pool().free_all_blocks()
    with open(os.path.join(os.environ.get("OUT", "."), "dot_read_paths.json"), "w") as f:
        json.dump({"device": dev.compute_capability, "copy_bandwidth_Bps": bw, "sms": sms, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
