"""kgen.matmul's first call on few-row products (empty caches: the call renders, compiles and
loads what it launches), then the device time of the kernel it runs (a CUDA graph over operands
rotated past L2, median of 25, the result checked against float64 first). Run it in two trees,
each with its own KGEN_CACHE_DIR, to compare a change of how kernels are compiled.

env PRODUCTS: "dtype:order:MxNxK,..." (order col = B as W.t(), row = B stored K x N); the
default is four float32 products. A float64 product of 64x64x64 is called first, untimed, so the
toolchain's one-time checks (nvcc's version, the driver) fall on none of the timed calls."""
import os
import time

import torch

import kgen
from kgen.bench.skinny import Operands, checked_graph_time
from kgen.ops.skinny import tolerance
from kgen.tune import dispatch

PRODUCTS = [("float32", "col", 1, 4096, 4096), ("float32", "col", 8, 4096, 4096),
            ("float32", "col", 24, 4096, 4096), ("float32", "row", 8, 5000, 3001)]
if os.environ.get("PRODUCTS"):
    PRODUCTS = [(d, o, *map(int, s.split("x")))
                for d, o, s in (p.split(":") for p in os.environ["PRODUCTS"].split(","))]
torch.backends.cuda.matmul.allow_tf32 = False


def main():
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    x = torch.randn(64, 64, device="cuda", dtype=torch.float64)
    kgen.matmul(x, x)
    torch.cuda.synchronize()
    for dtype, order, M, N, K in PRODUCTS:
        d = getattr(torch, dtype)
        A = torch.randn(M, K, device="cuda", dtype=d)
        B = torch.randn(N, K, device="cuda", dtype=d).t() if order == "col" else torch.randn(K, N, device="cuda", dtype=d)
        start = time.time()
        kgen.matmul(A, B)
        torch.cuda.synchronize()
        first = time.time() - start
        start = time.time()
        kgen.matmul(A, B)
        torch.cuda.synchronize()
        second = time.time() - start
        k = dispatch._fast[("matmul", A.shape, A.stride(), B.shape, B.stride(), A.dtype, False)]
        ops = Operands(torch, M, N, K, dtype, order, l2)
        ref = ops.A[0].double() @ ops.B[0].double()
        err, us, _ = checked_graph_time(torch, lambda a, b, c, k=k: k(a, b, out=c), ops.A, ops.B, ops.C, ref, 25)
        print(f"{dtype} {order} {M}x{N}x{K}: first call {first:.2f} s, second {second * 1e3:.1f} ms, "
              f"device {us:.2f} us, err {err:.1e} ok {err <= tolerance(dtype, K)} | {type(k.spec).__name__}",
              flush=True)


if __name__ == "__main__":
    main()
