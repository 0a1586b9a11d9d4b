"""What a launch that only reads a given number of bytes reaches, timed as the decode benchmarks
time kgen (a CUDA graph over buffers rotated past L2, replayed), beside a device-to-device copy
of the same bytes (half read, half written): the floor under a few-row product, which reads its
weight and writes little. The reader is a CuPy kernel: each thread keeps LOADS 16-byte loads in
flight over a grid-stride loop and adds them (the sum is written per block, and checked against
torch), grids of 1-8 blocks an SM of 256 or 512 threads. Output: $OUT/read_floor.json."""
import json
import math
import os

import cupy
import torch

from kgen.bench.skinny import copy_bandwidth, copy_floor_us, time_graph

SOURCE = r"""
extern "C" __global__ void read_sum(const float4* __restrict__ x, long long n4, float* __restrict__ out) {
    float acc = 0.f;
    long long stride = (long long)gridDim.x * blockDim.x;
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    for (; i + (LOADS - 1) * stride < n4; i += LOADS * stride) {
        float4 v[LOADS];
#pragma unroll
        for (int u = 0; u < LOADS; ++u) v[u] = __ldcs(x + i + u * stride);
#pragma unroll
        for (int u = 0; u < LOADS; ++u) acc += (v[u].x + v[u].y) + (v[u].z + v[u].w);
    }
    for (; i < n4; i += stride) { float4 v = __ldcs(x + i); acc += (v.x + v.y) + (v.z + v.w); }
    for (int o = 16; o; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
    __shared__ float part[32];
    if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = acc;
    __syncthreads();
    if (threadIdx.x == 0) {
        float s = 0.f;
        for (int w = 0; w < (int)(blockDim.x >> 5); ++w) s += part[w];
        out[blockIdx.x] = s;
    }
}
"""


def main():
    out_dir = os.environ.get("OUT", ".")
    props = torch.cuda.get_device_properties(0)
    sms, l2 = props.multi_processor_count, props.L2_cache_size
    bw = copy_bandwidth(torch, 20)
    kernels = {loads: cupy.RawKernel(SOURCE.replace("LOADS", str(loads)), "read_sum") for loads in (2, 4, 8)}
    res = {"device": torch.cuda.get_device_name(), "copy_bw": bw, "sizes": []}
    print(f"{res['device']}: copy bandwidth {bw / 1e12:.3f} TB/s", flush=True)
    for mb in (16, 24, 32, 48, 64, 96, 128, 256):
        n = mb * 2**20 // 4
        sets = max(2, math.ceil(3 * l2 / (n * 4)))
        bufs = [torch.randn(n, device="cuda") for _ in range(sets)]
        bound = n * 4 / bw * 1e6
        row = {"mb": mb, "bound_us": bound, "copy_us": copy_floor_us(torch, n * 4, l2, 20), "read": {}}
        for loads, kern in kernels.items():
            for threads in (256, 512):
                for per_sm in (1, 2, 4, 8):
                    if threads * per_sm > 2048:
                        continue
                    grid = sms * per_sm
                    part = torch.empty(grid, device="cuda")

                    def call(x, kern=kern, grid=grid, threads=threads, part=part, n4=n // 4):
                        stream = cupy.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream)
                        with stream:
                            kern((grid,), (threads,),
                                 (cupy.uint64(x.data_ptr()), cupy.int64(n4), cupy.uint64(part.data_ptr())))

                    call(bufs[0])
                    torch.cuda.synchronize()
                    want = float(bufs[0].double().sum())
                    got = float(part.double().sum())
                    assert abs(got - want) <= 1e-3 * math.sqrt(n) + 1e-4 * abs(want), (mb, loads, got, want)
                    us = time_graph(torch, [lambda x=x: call(x) for x in bufs], 15)
                    row["read"][f"loads{loads}/t{threads}/x{per_sm}"] = us
        best = min(row["read"], key=row["read"].get)
        print(f"{mb:4d} MB: bound {bound:6.1f} us, copy {row['copy_us']:6.1f} ({bound / row['copy_us']:.0%}), "
              f"read best {best} {row['read'][best]:6.1f} ({bound / row['read'][best]:.0%}); "
              + " ".join(f"{k}={v:.1f}" for k, v in row["read"].items()), flush=True)
        res["sizes"].append(row)
        del bufs
        torch.cuda.empty_cache()
    with open(os.path.join(out_dir, "read_floor.json"), "w") as f:
        json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
