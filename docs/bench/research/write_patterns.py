"""Why products of a short K run 3-5x above the time of a fill of their output: the store
pattern alone. Device time of kernels that only write an M x N output (no loads, no
arithmetic) in the orders a tiled product stores it, beside a flat fill of the same bytes,
cuBLAS and kgen.matmul's default on the product of that output with a short K:
- flat: grid-stride 16-byte stores over the whole buffer (the floor);
- rows BMxBN: one block a C tile, tiles in row-major order, each tile's rows written with
  16-byte stores by consecutive threads (what an epilogue staged through shared memory does);
- frag BMxBN: one block a C tile, each lane storing pairs of elements in the mma.sync
  accumulator layout (warps of 64 x 32, lane (g, t) at rows g, g + 8 and columns 2t, 2t + 1 of
  each 16 x 8 piece): a warp instruction writes 16 bytes in each of 8 rows;
- frag1 BMxBN: the same with one element a store (an output whose rows are not aligned).
Outputs rotated over buffers past L2; a CUDA graph of the launches, replayed, median.
SHAPES (MxNxK, comma separated), DTYPE (bfloat16). Output: $OUT/write_patterns.json."""
import json
import os

import cupy as cp
import torch

import kgen
from kgen.bench.skinny import time_graph

DTYPE = os.environ.get("DTYPE", "bfloat16")
SHAPES = [tuple(int(v) for v in s.split("x")) for s in
          os.environ.get("SHAPES", "6193x7880x49,3866x3240x85,2340x6852x36").split(",")]

SRC = r"""
typedef unsigned short u16;
extern "C" __global__ void flat(uint4* __restrict__ c, long long n16) {
    const uint4 v = make_uint4(1, 2, 3, 4);
    const long long step = (long long)gridDim.x * blockDim.x;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n16; i += step) c[i] = v;
}
// One block a BM x BN tile; ES the element size; 16-byte stores along rows.
extern "C" __global__ void rows(char* __restrict__ c, int M, int N, int BM, int BN, int es) {
    const int tiles_n = (N + BN - 1) / BN;
    const int tm = blockIdx.x / tiles_n, tn = blockIdx.x % tiles_n;
    const int per_row = BN * es / 16;
    const uint4 v = make_uint4(1, 2, 3, 4);
    for (int e = threadIdx.x; e < BM * per_row; e += blockDim.x) {
        const int r = tm * BM + e / per_row;
        const long long col = (long long)tn * BN * es + (e % per_row) * 16;
        if (r < M && col + 16 <= (long long)N * es)
            *reinterpret_cast<uint4*>(c + (long long)r * N * es + col) = v;
    }
}
// mma.sync accumulator order: 8 warps of 64 x 32 (BM = 128, BN = 128) or 4 of 32 x 32 (64 x 64).
extern "C" __global__ void frag(char* __restrict__ c, int M, int N, int BM, int BN, int es, int pair) {
    const int tiles_n = (N + BN - 1) / BN;
    const int tm = blockIdx.x / tiles_n, tn = blockIdx.x % tiles_n;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const int WM = BM == 128 ? 64 : 32, WN = 32, warps_n = BN / WN;
    const int m_w = (warp / warps_n) * WM, n_w = (warp % warps_n) * WN;
    for (int mi = 0; mi < WM / 16; ++mi)
        for (int h = 0; h < 2; ++h) {
            const int r = tm * BM + m_w + mi * 16 + g + 8 * h;
            if (r >= M) continue;
            for (int ni = 0; ni < WN / 8; ++ni) {
                const int n = tn * BN + n_w + ni * 8 + 2 * t;
                if (n + 1 >= N) continue;
                char* p = c + ((long long)r * N + n) * es;
                if (pair) {
                    if (es == 2) *reinterpret_cast<unsigned*>(p) = 0x3c003c00u;
                    else *reinterpret_cast<float2*>(p) = make_float2(1.f, 1.f);
                } else {
                    if (es == 2) { reinterpret_cast<u16*>(p)[0] = 0x3c00; reinterpret_cast<u16*>(p)[1] = 0x3c00; }
                    else { reinterpret_cast<float*>(p)[0] = 1.f; reinterpret_cast<float*>(p)[1] = 1.f; }
                }
            }
        }
}
"""


def main():
    mod = cp.RawModule(code=SRC)
    k_flat, k_rows, k_frag = (mod.get_function(n) for n in ("flat", "rows", "frag"))
    tdt = getattr(torch, DTYPE)
    es = torch.empty((), dtype=tdt).element_size()
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    out = {"device": torch.cuda.get_device_name(), "dtype": DTYPE, "rows": []}
    for M, N, K in SHAPES:
        nbytes = M * N * es
        sets = max(3, -(-3 * l2 // nbytes))
        Cs = [torch.empty(M, N, dtype=tdt, device="cuda") for _ in range(sets)]
        A = [torch.randn(M, K, device="cuda").to(tdt) for _ in range(sets)]
        B = [torch.randn(K, N, device="cuda").to(tdt) for _ in range(sets)]

        def launch(kern, grid, block, args):
            def go():
                kern((grid,), (block,), args, stream=cp.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream))
            return go

        ways = {"flat": [launch(k_flat, sms * 8, 256, (cp.uint64(c.data_ptr()), cp.int64(nbytes // 16))) for c in Cs]}
        # 16-byte stores along rows need rows 16 bytes apart.
        for BM, BN in ((128, 128), (64, 256), (32, 512), (16, 1024), (64, 64)) if N * es % 16 == 0 else ():
            grid = -(-M // BM) * -(-N // BN)
            args = [(cp.uint64(c.data_ptr()), cp.int32(M), cp.int32(N), cp.int32(BM), cp.int32(BN), cp.int32(es))
                    for c in Cs]
            ways[f"rows_{BM}x{BN}"] = [launch(k_rows, grid, 256, a) for a in args]
        for BM, BN, th in ((128, 128, 256), (64, 64, 128)):
            grid = -(-M // BM) * -(-N // BN)
            for pair in (1, 0):
                ways[f"frag{'' if pair else '1'}_{BM}x{BN}"] = [
                    launch(k_frag, grid, th, (cp.uint64(c.data_ptr()), cp.int32(M), cp.int32(N), cp.int32(BM),
                                              cp.int32(BN), cp.int32(es), cp.int32(pair))) for c in Cs]
        ways["cublas"] = [(lambda a=a, b=b, c=c: torch.mm(a, b, out=c)) for a, b, c in zip(A, B, Cs)]
        ways["kgen"] = [(lambda a=a, b=b, c=c: kgen.matmul(a, b, out=c)) for a, b, c in zip(A, B, Cs)]
        row = {"shape": [M, N, K], "bytes": nbytes}
        for name, fns in ways.items():
            row[name + "_us"] = time_graph(torch, fns, 15)
        out["rows"].append(row)
        print(f"{M}x{N}x{K} ({nbytes / 1e6:.0f} MB): " + " ".join(
            f"{n} {row[n + '_us']:.1f}" for n in ways), flush=True)
        del Cs, A, B
        torch.cuda.empty_cache()
    with open(os.path.join(os.environ.get("OUT", "."), "write_patterns.json"), "w") as f:
        json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
