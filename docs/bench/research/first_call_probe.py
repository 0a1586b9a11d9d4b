"""kgen.matmul's first call on float32 few-row products (empty caches: the call renders,
compiles and loads the skinny module), then the device time of the kernel it runs (a CUDA graph
over operands rotated past L2, median of 25, the result checked against float64 first). Run it
in two trees, each with its own KGEN_CACHE_DIR, to compare a change of the compile options."""
import time

import torch

import kgen
from kgen.bench.skinny import Operands, checked_graph_time
from kgen.ops.skinny import tolerance
from kgen.tune import dispatch

PRODUCTS = ((1, 4096, 4096, "col"), (8, 4096, 4096, "col"), (24, 4096, 4096, "col"), (8, 5000, 3001, "row"))
torch.backends.cuda.matmul.allow_tf32 = False


def main():
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    for M, N, K, order in PRODUCTS:
        A = torch.randn(M, K, device="cuda")
        B = torch.randn(N, K, device="cuda").t() if order == "col" else torch.randn(K, N, device="cuda")
        start = time.time()
        kgen.matmul(A, B)
        torch.cuda.synchronize()
        first = time.time() - start
        k = dispatch._fast[("matmul", A.shape, A.stride(), B.shape, B.stride(), A.dtype, False)]
        ops = Operands(torch, M, N, K, "float32", order, l2)
        ref = ops.A[0].double() @ ops.B[0].double()
        err, us, _ = checked_graph_time(torch, lambda a, b, c, k=k: k(a, b, out=c), ops.A, ops.B, ops.C, ref, 25)
        print(f"{M}x{N}x{K} {order}: first call {first:.1f} s, device {us:.2f} us, err {err:.1e} "
              f"ok {err <= tolerance('float32', K)} {k.spec.compile_options()}", flush=True)


if __name__ == "__main__":
    main()
