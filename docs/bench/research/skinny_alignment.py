"""What a large operand whose rows are not 16-byte aligned costs the skinny forms: the kernel
kgen.matmul picks for x (M x K) @ B, B a transposed N x K weight ("weights": rows of K
elements) or row-major K x N ("row": rows of N elements), with the leading dimension a
multiple of 16 bytes and one element longer, at several row counts and both dtypes.
Device time of bound launches over rotated copies of the weight (median of 7 batches),
cuBLAS beside, the copy-bandwidth bound from the same run.

Each product is first checked against float64 (relative norm error).

    python skinny_alignment.py [N K]        # output: $OUT/skinny_alignment.json
    ROWS=1,2,3,4,6,8,16 DTYPES=float32,bfloat16 NAME=after python skinny_alignment.py 4096 4096"""

import concurrent.futures as cf
import json
import os
import sys

import kgen
import torch

from kgen.bench.skinny import time_batched
from kgen.tune import dispatch

OUT = os.environ.get("OUT", ".")
ROWS = [int(r) for r in os.environ.get("ROWS", "1,3,6,8,12,16,24,48,100,200").split(",")]
DTYPES = os.environ.get("DTYPES", "float32,bfloat16").split(",")


def copy_bandwidth() -> float:
    a = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    b = torch.empty_like(a)
    t = time_batched(torch, [lambda: b.copy_(a)], 7, 20)
    return 2 * a.numel() / (t * 1e-6)


def main():
    N0, K0 = (int(v) for v in sys.argv[1:3]) if len(sys.argv) > 2 else (4096, 4096)
    torch.backends.cuda.matmul.allow_tf32 = False
    bw = copy_bandwidth()
    print(f"{torch.cuda.get_device_name()}: copy bandwidth {bw / 1e12:.2f} TB/s", flush=True)
    configs = [(dtype, order, extra, M) for dtype in [getattr(torch, d) for d in DTYPES] for order in ("weights", "row")
               for extra in (0, 1) for M in ROWS]

    # The spec each product runs, found through kgen.matmul with the build step stubbed out,
    # then compiled in parallel (kgen.compile needs no CUDA context).
    import kgen.core.kernel as kernel_module

    class Found(Exception):
        pass

    specs, real_build = set(), kernel_module.build

    def record(spec):
        specs.add(spec)
        raise Found

    kernel_module.build = record
    for dtype, order, extra, M in configs:
        N, K = (N0, K0 + extra) if order == "weights" else (N0 + extra, K0)
        W = torch.empty(N, K, device="cuda", dtype=dtype).t() if order == "weights" else \
            torch.empty(K, N, device="cuda", dtype=dtype)
        try:
            kgen.matmul(torch.empty(M, K, device="cuda", dtype=dtype), W)
        except Found:
            pass
    kernel_module.build = real_build
    with cf.ThreadPoolExecutor(16) as ex:
        list(ex.map(kgen.compile, specs))
    print(len(specs), "specs compiled", flush=True)
    torch.cuda.synchronize()
    rows = []
    for dtype in [getattr(torch, d) for d in DTYPES]:
        item = torch.tensor([], dtype=dtype).element_size()
        for order in ("weights", "row"):
            for extra in (0, 1):
                N, K = (N0, K0 + extra) if order == "weights" else (N0 + extra, K0)
                copies = max(2, -(-200_000_000 // (N * K * item)))
                Ws = [torch.randn(N, K, device="cuda").to(dtype).t() if order == "weights"
                      else torch.randn(K, N, device="cuda").to(dtype) for _ in range(copies)]
                for M in ROWS:
                    xs = [torch.randn(M, K, device="cuda").to(dtype) for _ in range(copies)]
                    Cs = [torch.empty(M, N, device="cuda", dtype=dtype) for _ in range(copies)]
                    Cs[0].fill_(float("nan"))
                    kgen.matmul(xs[0], Ws[0], out=Cs[0])
                    ref = xs[0].double() @ Ws[0].double()
                    err = float((Cs[0].double() - ref).norm() / ref.norm())
                    assert err < (1e-5 if dtype == torch.float32 else 1e-2), (M, N, K, err)
                    k = dispatch._fast[("matmul", xs[0].shape, xs[0].stride(), Ws[0].shape, Ws[0].stride(),
                                        xs[0].dtype, False)]
                    if hasattr(k, "bind"):
                        calls = [k.bind(xs[i], Ws[i], Cs[i]) for i in range(copies)]
                        plan = list(k._plans.values())[-1]
                        what = f"{plan.form} v{plan.width} s{plan.splits}"
                    else:
                        calls = [lambda i=i: kgen.matmul(xs[i], Ws[i], out=Cs[i]) for i in range(copies)]
                        what = type(k.spec).__name__ + " (public call)"
                    t = time_batched(torch, calls, 7, max(copies, 30))
                    tc = time_batched(torch, [lambda i=i: torch.matmul(xs[i], Ws[i], out=Cs[i])
                                              for i in range(copies)], 7, max(copies, 30))
                    bound = (N * K + M * K + M * N) * item / bw * 1e6
                    r = {"dtype": str(dtype)[6:], "order": order, "aligned": extra == 0, "M": M, "N": N, "K": K,
                         "kernel": what, "kgen_us": t, "cublas_us": tc, "bound_us": bound}
                    rows.append(r)
                    print(f"{r['dtype']:8s} {order:7s} {'aligned' if not extra else 'offset1'} {M:4d}x{N}x{K}: "
                          f"kgen {t:7.1f} ({bound / t:4.0%} bound) cuBLAS {tc:7.1f} ({bound / tc:4.0%}) "
                          f"x{tc / t:4.2f}  {what}", flush=True)
                del Ws
    json.dump({"device": torch.cuda.get_device_name(), "bandwidth": bw, "rows": rows},
              open(f"{OUT}/" + os.environ.get("NAME", "skinny_alignment") + ".json", "w"), indent=1)


if __name__ == "__main__":
    main()
