"""Whether a launch that only reads can pass the single-launch read floor (read_floor.py) when
launches run back to back with programmatic stream serialization and each kernel asks L2 for
its own slab before it waits for the kernel before it.

A weight read by a few-row product is, in a model, written long before the product: only the
small operand comes from the kernel just before. An L2 prefetch (cp.async.bulk.prefetch.L2)
changes no value a later load returns (L2 is where every SM's writes meet), so it may be issued
before griddepcontrol.wait; the loads themselves come after it. Modes, each timed as the decode
benchmarks time kgen (CUDA graph over buffers rotated past L2, replayed):
  plain    - launched plainly;
  pdl      - programmatic launch, wait then trigger at the start;
  pf<F>    - programmatic, the block's first 1/F of its slab prefetched into L2 before the wait.
Each block reads one contiguous slab (LOADS 16-byte loads in flight a thread) and writes its
sum, which is checked against torch. Output: $OUT/read_pdl.json."""
import json
import math
import os
import subprocess
import tempfile

import torch

from kgen.bench.skinny import copy_bandwidth, time_graph
from kgen.core.launch import DriverModule, Launch

SOURCE = r"""
extern "C" __global__ void __launch_bounds__(THREADS) read_slab(const float4* __restrict__ x, long long n4,
                                                                float* __restrict__ out) {
    long long per = (n4 + gridDim.x - 1) / gridDim.x;
    per = (per + 7) & ~7LL;                      // slabs start on 128-byte lines
    long long lo = (long long)blockIdx.x * per;
    long long hi = lo + per < n4 ? lo + per : n4;
#if PF_DIV > 0
    if (threadIdx.x < 32 && lo < hi) {
        // The slab's first 1/PF_DIV in chunks of 16 KiB, one chunk a lane in turn.
        long long bytes = (hi - lo) * 16 / PF_DIV;
        const char* base = (const char*)(x + lo);
        for (long long off = (long long)threadIdx.x * 16384; off < bytes; off += 32 * 16384) {
            long long left = bytes - off;
            unsigned size = (unsigned)((left < 16384 ? left : 16384) & ~15LL);
            if (size) asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;\n" :: "l"(base + off), "r"(size) : "memory");
        }
    }
#endif
#if PDL
    asm volatile("griddepcontrol.wait;\n" ::: "memory");
    asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
    float acc = 0.f;
    long long i = lo + threadIdx.x;
    for (; i + (LOADS - 1) * THREADS < hi; i += LOADS * THREADS) {
        float4 v[LOADS];
#pragma unroll
        for (int u = 0; u < LOADS; ++u) v[u] = __ldcs(x + i + u * THREADS);
#pragma unroll
        for (int u = 0; u < LOADS; ++u) acc += (v[u].x + v[u].y) + (v[u].z + v[u].w);
    }
    for (; i < hi; i += THREADS) { float4 v = __ldcs(x + i); acc += (v.x + v.y) + (v.z + v.w); }
    for (int o = 16; o; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
    __shared__ float part[32];
    if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = acc;
    __syncthreads();
    if (threadIdx.x == 0) {
        float s = 0.f;
        for (int w = 0; w < THREADS / 32; ++w) s += part[w];
        out[blockIdx.x] = s;
    }
}
"""

MODES = {"plain": (0, 0), "pdl": (1, 0), "pf1": (1, 1), "pf2": (1, 2), "pf4": (1, 4)}


def build(threads: int, loads: int, pdl: int, pf_div: int) -> Launch:
    with tempfile.TemporaryDirectory() as tmp:
        src, cubin = os.path.join(tmp, "r.cu"), os.path.join(tmp, "r.cubin")
        with open(src, "w") as f:
            f.write(SOURCE)
        subprocess.run(["nvcc", "-cubin", "-O3", "-gencode=arch=compute_90a,code=sm_90a", f"-DTHREADS={threads}",
                        f"-DLOADS={loads}", f"-DPDL={pdl}", f"-DPF_DIV={pf_div}", "-o", cubin, src], check=True)
        with open(cubin, "rb") as f:
            return DriverModule(f.read())


def main():
    out_dir = os.environ.get("OUT", ".")
    torch.cuda.init()
    props = torch.cuda.get_device_properties(0)
    sms, l2 = props.multi_processor_count, props.L2_cache_size
    bw = copy_bandwidth(torch, 20)
    res = {"device": torch.cuda.get_device_name(), "copy_bw": bw, "l2": l2, "sizes": []}
    print(f"{res['device']}: copy bandwidth {bw / 1e12:.3f} TB/s, L2 {l2 >> 20} MB", flush=True)
    configs = [(t, lo, ps) for t in (256, 512) for lo in (4, 8) for ps in (1, 2, 4) if t * ps <= 2048]
    modules = {}
    for mode, (pdl, pf) in MODES.items():
        for t, lo, _ in configs:
            if (mode, t, lo) not in modules:
                modules[(mode, t, lo)] = build(t, lo, pdl, pf)
    for mb in [int(s) for s in os.environ.get("SIZES", "16,24,32,48,64").split(",")]:
        n = mb * 2**20 // 4
        sets = max(2, math.ceil(3 * l2 / (n * 4)))
        bufs = [torch.randn(n, device="cuda") for _ in range(sets)]
        bound = n * 4 / bw * 1e6
        row = {"mb": mb, "bound_us": bound, "read": {}}
        for mode, (pdl, _) in MODES.items():
            for t, lo, ps in configs:
                grid = sms * ps
                part = torch.empty(grid, device="cuda")
                mod = modules[(mode, t, lo)]
                launch = Launch(mod.function("read_slab"), "read_slab", (grid, 1, 1), (t, 1, 1), 0, "PqP",
                                programmatic=bool(pdl))

                def call(x, launch=launch, part=part, n4=n // 4):
                    launch(torch.cuda.current_stream().cuda_stream, x.data_ptr(), n4, part.data_ptr())

                part.fill_(float("nan"))
                call(bufs[0])
                torch.cuda.synchronize()
                want = float(bufs[0].double().sum())
                got = float(part.double().sum())
                assert abs(got - want) <= 1e-3 * math.sqrt(n) + 1e-4 * abs(want), (mb, mode, got, want)
                us = time_graph(torch, [lambda x=x: call(x) for x in bufs], 15)
                row["read"][f"{mode}/t{t}/l{lo}/x{ps}"] = us
        best = {m: min((v, k) for k, v in row["read"].items() if k.startswith(m + "/")) for m in MODES}
        print(f"{mb:4d} MB: bound {bound:6.1f} us; " + "; ".join(
            f"{m} {v:6.2f} ({bound / v:.0%}) {k.split('/', 1)[1]}" for m, (v, k) in best.items()), flush=True)
        res["sizes"].append(row)
        del bufs
        torch.cuda.empty_cache()
    with open(os.path.join(out_dir, "read_pdl.json"), "w") as f:
        json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
