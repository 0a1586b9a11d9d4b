"""What one wave of 132 blocks reaches when each only reads its band of a wide weight the way the
general wgmma tiles read it, beside the wgmma kernel's own whole-wave launch on the same columns
and cuBLAS (16-bit products of 65-256 rows against wide weights at short K, B = W.t()).

Each block of the readers takes BN rows of W (N x K, row-major: the BN columns of B = W.t() of one
C tile of the default's tiles) and reads
them whole through a ring of STAGES shared-memory stages filled by TMA from one thread, as the wgmma
kernel's producer does, and does nothing else (one word of each stage is added so that the reads
are used). Ways:
- tma64x<S>: one 2-D box of 64 k x BN rows a stage (128 bytes of each row, swizzled as the kernel
  reads it), S stages: the kernel's B stream alone;
- tma64a<S>: the same with A's box (64 k x BM rows of M rows, the rest zero-filled) a stage beside it;
- tma128x<S>: two boxes a stage (k and k + 64: 256 bytes of each row);
- tma256r64x<S>: boxes of 256 k x 64 rows without swizzle (512 bytes of each row), k outer;
- flat<S>: the band as one contiguous run of bulk copies of BN x 128 bytes (its rows are adjacent in W).
The kgen way is TensorMatmul's default for the product with wave_tail 1 on the first 132 x BN
columns (the launch that fills whole waves), and "default" the full product as dispatch runs it.
Device time from CUDA graphs over copies of W rotated past L2; every kgen and cuBLAS result
checked against float64 on a NaN-poisoned output first; each reader's sum checked. cuBLAS's kernel
names from torch.profiler. Products: SHAPES (MxNxK,...) or a draw (SEED, COUNT: rows 65-256,
N 17000-65536, K 1024-2560, multiples of 64). Output: $OUT/band_read.json."""
import concurrent.futures as cf
import functools
import json
import math
import os
import random

import cupy
import torch

import kgen
from kgen.bench.skinny import copy_bandwidth, time_graph
from kgen.core.tma import encode_tiled_2d
from kgen.ops.tensorcore import TensorMatmul as T

SMS = 132

SOURCE = r"""
typedef unsigned int u32;
typedef unsigned long long u64;

__device__ __forceinline__ u32 smem_addr(const void* p) { return (u32)__cvta_generic_to_shared(p); }

__device__ __forceinline__ void wait_phase(u32 bar, u32 phase) {
    u32 done = 0;
    do {
        asm volatile("{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                     " selp.u32 %0, 1, 0, p;\n}" : "=r"(done) : "r"(bar), "r"(phase) : "memory");
    } while (!done);
}

__device__ __forceinline__ void tma2d(u32 dst, const void* map, int x, int y, u32 bar) {
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%2, %3}], [%4];" :: "r"(dst), "l"(map), "r"(x), "r"(y), "r"(bar) : "memory");
}

__device__ __forceinline__ void bulk1d(u32 dst, const void* src, u32 bytes, u32 bar) {
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                 :: "r"(dst), "l"(src), "r"(bytes), "r"(bar) : "memory");
}

// MODE 0: 2-D boxes of BOX_K x BOX_R (BOXES a stage along k), k outer, row groups inner;
//         A_ON adds a box of BOX_K x A_ROWS rows of A a stage.
// MODE 1: the band as contiguous chunks of CHUNK bytes.
extern "C" __global__ void __launch_bounds__(32) band_read(const void* __restrict__ map_b,
                                                           const void* __restrict__ map_a,
                                                           const char* __restrict__ w, long long K,
                                                           float* __restrict__ out) {
    extern __shared__ __align__(1024) unsigned char smem[];
    const long long row0 = (long long)blockIdx.x * BAND;
#if MODE == 0
    const int STAGE_BYTES = BOXES * BOX_K * BOX_R * 2 + (A_ON ? BOXES * BOX_K * A_ROWS * 2 : 0);
    const int k_chunks = (int)(K / (BOX_K * BOXES));
    const int groups = BAND / BOX_R;
    const int steps = k_chunks * groups;
#else
    const int STAGE_BYTES = CHUNK;
    const long long band_bytes = (long long)BAND * K * 2;
    const int steps = (int)(band_bytes / CHUNK);
#endif
    u64* bars = reinterpret_cast<u64*>(smem + (size_t)STAGES * STAGE_BYTES);
    float acc = 0.f;
    if (threadIdx.x == 0) {
        for (int s = 0; s < STAGES; ++s)
            asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(smem_addr(&bars[s])));
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
        auto issue = [&](int step, int s) {
            u32 bar = smem_addr(&bars[s]);
            u32 dst = smem_addr(smem + (size_t)s * STAGE_BYTES);
            asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;"
                         :: "r"(bar), "r"(STAGE_BYTES) : "memory");
#if MODE == 0
            int kc = step / groups, g = step % groups;
            for (int b = 0; b < BOXES; ++b) {
                int k = (kc * BOXES + b) * BOX_K;
                tma2d(dst + b * BOX_K * BOX_R * 2, map_b, k, (int)(row0 + g * BOX_R), bar);
                if (A_ON) tma2d(dst + BOXES * BOX_K * BOX_R * 2 + b * BOX_K * A_ROWS * 2, map_a, k, 0, bar);
            }
#else
            bulk1d(dst, w + row0 * K * 2 + (long long)step * CHUNK, CHUNK, bar);
#endif
        };
        for (int s = 0; s < STAGES && s < steps; ++s) issue(s, s);
        for (int step = 0; step < steps; ++step) {
            int s = step % STAGES;
            wait_phase(smem_addr(&bars[s]), (step / STAGES) & 1);
            const unsigned char* word = smem + (size_t)s * STAGE_BYTES + 2 * (step & 63);
            acc += __uint_as_float((u32)*reinterpret_cast<const unsigned short*>(word) << 16);
            asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
            if (step + STAGES < steps) issue(step + STAGES, s);
        }
        out[blockIdx.x] = acc;
    }
}
"""

WAYS = {   # name: (MODE, BOX_K, BOX_R (0: the band), BOXES, A_ON, STAGES, CHUNK)
    "tma64x4": (0, 64, 0, 1, 0, 4, 0),
    "tma64x6": (0, 64, 0, 1, 0, 6, 0),
    "tma64a4": (0, 64, 0, 1, 1, 4, 0),
    "tma128x2": (0, 64, 0, 2, 0, 2, 0),
    "tma128x3": (0, 64, 0, 2, 0, 3, 0),
    "tma256r64x4": (0, 256, 64, 1, 0, 4, 0),
    "flat4": (1, 0, 0, 0, 0, 4, 0),
}


@functools.lru_cache(maxsize=None)
def reader(way, band, bm):
    """The way's kernel for bands of `band` rows (the tile's BN) and A boxes of `bm` rows."""
    mode, box_k, box_r, boxes, a_on, stages, chunk = WAYS[way]
    box_r = box_r or band
    chunk = chunk or band * 128
    defs = "".join(f"#define {k} {v}\n" for k, v in dict(MODE=mode, BOX_K=box_k or 64, BOX_R=box_r,
                                                        BOXES=boxes or 1, A_ON=a_on, STAGES=stages,
                                                        CHUNK=chunk or 1, BAND=band, A_ROWS=bm).items())
    src = defs + SOURCE
    kern = cupy.RawKernel(src, "band_read", options=("-std=c++17",))
    stage = boxes * box_k * box_r * 2 + (boxes * box_k * bm * 2 if a_on else 0) if mode == 0 else chunk
    smem = stages * stage + 8 * stages
    kern.max_dynamic_shared_size_bytes = smem
    return kern, smem, (box_k, box_r)


def shapes():
    if os.environ.get("SHAPES"):
        return [tuple(int(v) for v in s.split("x")) for s in os.environ["SHAPES"].split(",")]
    rng = random.Random(int(os.environ.get("SEED", "20601")))
    out = []
    for _ in range(int(os.environ.get("COUNT", "6"))):
        M = rng.randint(65, 256)
        N = 64 * rng.randint(17000 // 64, 65536 // 64)
        K = 64 * rng.randint(1024 // 64, 2560 // 64)
        out.append((M, N, K))
    return out


def cublas_names(A, B):
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        torch.matmul(A, B)
        torch.cuda.synchronize()
    return sorted({e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA})


def product_row(M, N, K, spec, bw, l2):
    BM, BN = spec.tile[:2]
    readers = {w: reader(w, BN, BM) for w in WAYS}
    n0 = min(N, SMS * BN) // BN * BN
    sets = max(2, math.ceil(3 * l2 / (N * K * 2)))
    W = [torch.randn(N, K, device="cuda").to(torch.bfloat16) for _ in range(sets)]
    A = [torch.randn(M, K, device="cuda").to(torch.bfloat16) for _ in range(sets)]
    C = [torch.empty(M, N, device="cuda", dtype=torch.bfloat16) for _ in range(sets)]
    C0 = [torch.empty(M, n0, device="cuda", dtype=torch.bfloat16) for _ in range(sets)]
    row = {"shape": [M, N, K], "spec": spec.to_json(), "n0": n0, "bound_us": N * K * 2 / bw * 1e6,
           "wave_bound_us": n0 * K * 2 / bw * 1e6, "cublas_kernels": cublas_names(A[0], W[0].t())}
    whole = kgen.build(spec)
    wave = kgen.build(spec.replace(wave_tail=1))
    ref = A[0].double() @ W[0].double().t()
    calls = {
        "cublas": lambda a, w, c, c0: torch.matmul(a, w.t(), out=c),
        "default": lambda a, w, c, c0: whole(a, w.t(), out=c),
        "cublas_wave": lambda a, w, c, c0: torch.matmul(a, w[:n0].t(), out=c0),
        "kgen_wave": lambda a, w, c, c0: wave(a, w[:n0].t(), out=c0),
    }
    for name, fn in calls.items():
        C[0].fill_(float("nan"))
        C0[0].fill_(float("nan"))
        fn(A[0], W[0], C[0], C0[0])
        torch.cuda.synchronize()
        got, want = (C0[0], ref[:, :n0]) if name.endswith("wave") else (C[0], ref)
        row[name + "_err"] = float((got.double() - want).norm() / want.norm())
        assert row[name + "_err"] < 1e-2, (name, row[name + "_err"])
        row[name + "_us"] = time_graph(torch, [lambda fn=fn, a=a, w=w, c=c, c0=c0: fn(a, w, c, c0)
                                               for a, w, c, c0 in zip(A, W, C, C0)], 15)
    maps = []
    for w in W:
        per = {}
        for _kern, _smem, (box_k, box_r) in readers.values():
            if box_k and (box_k, box_r) not in per:
                per[(box_k, box_r)] = encode_tiled_2d("bfloat16", w.data_ptr(), K, N, K, (box_k, box_r),
                                                      128 if box_k * 2 == 128 else 0)
        maps.append(per)
    map_a = encode_tiled_2d("bfloat16", A[0].data_ptr(), K, M, K, (64, BM), 128)
    dev_maps = [{k: torch.frombuffer(bytearray(v), dtype=torch.uint8).cuda() for k, v in per.items()}
                for per in maps]
    dev_a = torch.frombuffer(bytearray(map_a), dtype=torch.uint8).cuda()
    part = torch.empty(SMS, device="cuda")
    grid = n0 // BN
    for way, (kern, smem, box) in readers.items():
        mode, box_k, box_r, boxes, a_on, stages, chunk = WAYS[way]
        if mode == 0 and K % (box_k * boxes):
            continue

        def launch(i, kern=kern, smem=smem, box=box, grid=grid):
            stream = cupy.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream)
            mb = dev_maps[i][box].data_ptr() if box[0] else dev_a.data_ptr()
            with stream:
                kern((grid,), (32,), (cupy.uint64(mb), cupy.uint64(dev_a.data_ptr()), cupy.uint64(W[i].data_ptr()),
                                      cupy.int64(K), cupy.uint64(part.data_ptr())), shared_mem=smem)

        part.fill_(float("nan"))
        launch(0)
        torch.cuda.synchronize()
        assert torch.isfinite(part[:grid]).all(), way
        row[way + "_us"] = time_graph(torch, [lambda i=i: launch(i) for i in range(sets)], 15)
    wb = row["wave_bound_us"]
    print(f"{M}x{N}x{K} {spec.tile} stages {spec.stages} wave_tail {spec.wave_tail}: bound {row['bound_us']:.1f}, "
          f"cuBLAS {row['cublas_us']:.1f}, default {row['default_us']:.1f}; first {n0} columns (bound {wb:.1f}): "
          f"cuBLAS {row['cublas_wave_us']:.1f}, kgen {row['kgen_wave_us']:.1f}; readers "
          + " ".join(f"{w}={row[w + '_us']:.1f}({wb / row[w + '_us']:.0%})" for w in WAYS if w + "_us" in row)
          + f"; cuBLAS kernels {row['cublas_kernels']}", flush=True)
    return row


def main():
    out_dir = os.environ.get("OUT", ".")
    torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    bw = copy_bandwidth(torch, 20)
    res = {"device": torch.cuda.get_device_name(), "copy_bw": bw, "rows": []}
    print(f"{res['device']}: copy bandwidth {bw / 1e12:.3f} TB/s", flush=True)
    todo = []
    for M, N, K in shapes():
        p = {"M": M, "N": N, "K": K}
        todo.append((M, N, K, T.default_spec(p, "bfloat16").for_layouts(p, layout_a="row", layout_b="col")))
    builds = {s.key: s for *_, spec in todo for s in (spec, spec.replace(wave_tail=1))
              + ((spec.tail_spec(),) if spec.wave_tail > 1 else ())}
    with cf.ThreadPoolExecutor(16) as ex:
        list(ex.map(kgen.compile, builds.values()))
    for M, N, K, spec in todo:
        res["rows"].append(product_row(M, N, K, spec, bw, l2))
        torch.cuda.empty_cache()
    with open(os.path.join(out_dir, "band_read.json"), "w") as f:
        json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
