"""What one launch moving a given number of bytes reaches, timed as the decode benchmarks time
kgen (a CUDA graph over buffers rotated past L2, replayed): a device-to-device copy, a sum
(read only) and cuBLAS's one-row float32 product at 4-256 MB; the graph's cost for a
one-element kernel; then, for few-row products, kgen.matmul and cuBLAS (device time, their
kernels and CUPTI durations from torch.profiler) beside a copy of the weight's bytes (half
read, half written). Results checked against float64. Output: $OUT/floor.json."""
import json
import math
import os
import statistics

import torch

import kgen
from torch.profiler import profile, ProfilerActivity
from kgen.bench.skinny import Operands, copy_bandwidth, time_graph
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
OUT = os.environ.get("OUT", ".")
bw = copy_bandwidth(torch, 20)
l2 = torch.cuda.get_device_properties(0).L2_cache_size
res = {"device": torch.cuda.get_device_name(), "bw": bw, "sizes": [], "shapes": []}
print(f"{res['device']} copy bw {bw/1e12:.3f} TB/s, L2 {l2/2**20:.0f} MiB", flush=True)
tiny = torch.zeros(1, device="cuda")
res["node_us"] = time_graph(torch, [lambda: tiny.add_(1)] * 64, 30)
print(f"one-element kernel per graph node: {res['node_us']:.2f} us", flush=True)
for mb in (4, 8, 16, 24, 32, 48, 64, 128, 256):
    n = mb * 2**20 // 4
    sets = max(2, math.ceil(3 * l2 / (2 * n * 4)))
    src = [torch.randn(n, device="cuda") for _ in range(sets)]
    dst = [torch.empty_like(s) for s in src]
    o = torch.empty((), device="cuda")
    tc = time_graph(torch, [lambda s=s, d=d: d.copy_(s) for s, d in zip(src, dst)], 30)
    ts = time_graph(torch, [lambda s=s: torch.sum(s, dim=0, out=o) for s in src], 30)
    W = [s.view(n // 4096, 4096) for s in src]
    x = torch.randn(1, n // 4096, device="cuda")
    y = [torch.empty(1, 4096, device="cuda") for _ in src]
    tg = time_graph(torch, [lambda w=w, c=c: torch.matmul(x, w, out=c) for w, c in zip(W, y)], 30)
    row = {"MB": mb, "copy_us": tc, "sum_us": ts, "gemv_f32_us": tg,
           "copy_eff": 2 * n * 4 / bw * 1e6 / tc, "sum_eff": n * 4 / bw * 1e6 / ts, "gemv_eff": n * 4 / bw * 1e6 / tg}
    res["sizes"].append(row)
    print(f"{mb:4d} MB: copy {tc:7.1f} us ({row['copy_eff']:.0%})  sum {ts:7.1f} ({row['sum_eff']:.0%})  "
          f"cuBLAS 1-row f32 {tg:7.1f} ({row['gemv_eff']:.0%})", flush=True)
    del src, dst, W
    torch.cuda.empty_cache()

def kernels(fn, calls):
    with profile(activities=[ProfilerActivity.CUDA]) as p:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    agg = {}
    for e in p.events():
        if str(e.device_type).endswith("CUDA"):
            t = getattr(e, "device_time", None)
            if t is None:
                t = e.cuda_time
            agg.setdefault(e.name[:60], []).append(t)
    return {k: (len(v) / calls, statistics.median(v)) for k, v in agg.items()}

SH = [("float32", "col", (1, 3264, 2560)), ("float32", "col", (1, 12032, 1472)), ("float32", "col", (1, 7808, 5504)),
      ("float32", "row", (1, 7808, 5504)), ("float32", "col", (4, 9024, 4864)), ("float32", "col", (16, 2944, 3712)),
      ("float32", "col", (11, 2240, 2048)), ("float32", "row", (4, 4096, 4096)),
      ("bfloat16", "col", (5, 1984, 4864)), ("bfloat16", "col", (2, 8512, 1216)), ("bfloat16", "col", (1, 6016, 4736)),
      ("bfloat16", "row", (1, 6016, 4736)), ("bfloat16", "col", (4, 6784, 6720)), ("bfloat16", "row", (8, 4096, 4096))]
for dt, order, (M, N, K) in SH:
    ops = Operands(torch, M, N, K, dt, order, l2)
    kgen.matmul(ops.A[0], ops.B[0], out=ops.C[0])
    ref = ops.A[0].double() @ ops.B[0].double()
    err = float((ops.C[0].double() - ref).norm() / ref.norm())
    kg = [(lambda a=a, b=b, c=c: kgen.matmul(a, b, out=c)) for a, b, c in zip(ops.A, ops.B, ops.C)]
    cb = [(lambda a=a, b=b, c=c: torch.matmul(a, b, out=c)) for a, b, c in zip(ops.A, ops.B, ops.C)]
    k_us, c_us = time_graph(torch, kg, 20), time_graph(torch, cb, 20)
    wb = K * N * ops.A[0].element_size()
    sets = len(ops.B)
    wcopy = [torch.empty(K * N, dtype=ops.A[0].dtype, device="cuda") for _ in range(sets)]
    half = [b.reshape(-1)[: K * N // 2] if b.is_contiguous() else b.t().reshape(-1)[: K * N // 2] for b in ops.B]
    tcopy = time_graph(torch, [lambda s=s, d=d: d[: K * N // 2].copy_(s) for s, d in zip(half, wcopy)], 20)
    bound = ops.bytes / bw * 1e6
    i = [0]
    def one_k():
        j = i[0] % sets; i[0] += 1
        kgen.matmul(ops.A[j], ops.B[j], out=ops.C[j])
    def one_c():
        j = i[0] % sets; i[0] += 1
        torch.matmul(ops.A[j], ops.B[j], out=ops.C[j])
    kk, kc = kernels(one_k, 48), kernels(one_c, 48)
    row = {"dtype": dt, "order": order, "shape": [M, N, K], "err": err, "bound_us": bound, "kgen_us": k_us,
           "cublas_us": c_us, "copy_same_bytes_us": tcopy, "kgen_kernels": kk, "cublas_kernels": kc}
    res["shapes"].append(row)
    ksum = sum(c * t for c, t in kk.values()); csum = sum(c * t for c, t in kc.values())
    print(f"{dt} {order} {M}x{N}x{K}: bound {bound:.1f} kgen {k_us:.1f} ({bound/k_us:.0%}, kernels {ksum:.1f}) "
          f"cuBLAS {c_us:.1f} ({bound/c_us:.0%}, kernels {csum:.1f}) copy of W's bytes {tcopy:.1f} "
          f"({bound/tcopy:.0%}) err {err:.1e}", flush=True)
    for k, (c, t) in kk.items():
        print(f"    kgen  {c:.2f}x {t:6.1f} us {k}")
    for k, (c, t) in kc.items():
        print(f"    cuBLAS {c:.2f}x {t:6.1f} us {k}")
    del ops, wcopy
    torch.cuda.empty_cache()
json.dump(res, open(os.path.join(OUT, "floor.json"), "w"), indent=1)
