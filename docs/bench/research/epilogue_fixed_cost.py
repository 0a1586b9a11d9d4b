"""What a block of the wgmma kernel costs besides its k steps, and what the staged epilogue
(TensorMatmul.staged_epilogue) changed. Run it in two trees (before and after) in one command
and compare the outputs. Every result is checked against float64 first.

MODE=fixed (default): the transposed tiles (swap_ab, bfloat16, B = W.t(), 64 columns a block, A's
rows in one tile of the next multiple of 8) for 24, 120, 168 and 232 rows, at one block (N = 64)
and at 104 blocks (N = 6656), K = 64, 1728 and 6912: device time from a CUDA graph of 20 calls
on the same operands, beside torch.mm. With K = 64 (one k step) the time is the block's fixed
cost. Output $OUT/epilogue_fixed_<TAG>.json.

MODE=dispatch: kgen.matmul(A, B, out=C) with the spec dispatch picks (empty tuning database
assumed: KGEN_TUNE_DB) on general, streaming and transposed-tile shapes in 16-bit types and on
float32 (split TF32 on sm_90), device time from a CUDA graph over four copies of B, beside
torch.mm (TF32 off). Output $OUT/epilogue_dispatch_<TAG>.json.

TAG: the first argument (e.g. "before" / "after")."""
import json
import os
import sys

import torch

import kgen
from kgen.bench.skinny import time_graph
from kgen.ops.tensorcore import TensorMatmul as T
from kgen.ops.tensorcore import wgmma_ring_stages

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
DISPATCH_CASES = [((4096, 4096, 4096), "col", "bfloat16"), ((4096, 4096, 4096), "row", "bfloat16"),
                  ((2000, 3000, 1000), "row", "bfloat16"), ((8192, 8192, 2048), "col", "bfloat16"),
                  ((4096, 4096, 4096), "row", "float32"), ((3000, 5000, 700), "row", "float32"),
                  ((88, 8640, 1152), "col", "bfloat16"), ((200, 12416, 4096), "row", "bfloat16"),
                  ((165, 6656, 1728), "row", "bfloat16"), ((113, 4608, 1792), "col", "bfloat16"),
                  ((22, 10752, 4608), "row", "bfloat16"), ((128, 5824, 10176), "row", "bfloat16"),
                  ((26, 2246, 5632), "row", "bfloat16"), ((69, 9537, 9265), "row", "bfloat16"),
                  ((250, 3000, 2500), "col", "float16"), ((12, 4096, 4096), "col", "bfloat16")]


def rel_err(C, A, B) -> float:
    ref = A.double() @ B.double()
    return float((C.double() - ref).norm() / ref.norm())


def fixed():
    dt, rows = torch.bfloat16, []
    for M in (24, 120, 168, 232):
        bm = -(-M // 8) * 8
        spec = T(dtype="bfloat16", tile=(bm, 64, 64), warp_tile=(bm, 64), stages=wgmma_ring_stages(bm, 64, 1),
                 instruction="wgmma", swap_ab=True, layout_b="col")
        kernel = kgen.build(spec)
        for N in (64, 6656):
            for K in (64, 1728, 6912):
                A = torch.randn(M, K, device="cuda", dtype=dt)
                B = torch.randn(N, K, device="cuda", dtype=dt).t()
                C = torch.empty(M, N, device="cuda", dtype=dt)
                C.fill_(float("nan"))
                kernel(A, B, out=C)
                torch.cuda.synchronize()
                row = dict(M=M, N=N, K=K, err=rel_err(C, A, B),
                           us=time_graph(torch, [lambda k=kernel, a=A, b=B, c=C: k(a, b, out=c)] * 20, 15),
                           cublas_us=time_graph(torch, [lambda a=A, b=B, c=C: torch.mm(a, b, out=c)] * 20, 15))
                rows.append(row)
                print(json.dumps(row), flush=True)
    return rows


def dispatch():
    rows = []
    for (M, N, K), order, dtype in DISPATCH_CASES:
        t = getattr(torch, dtype)
        A = torch.randn(M, K, device="cuda", dtype=t)
        Bs = [torch.randn(K, N, device="cuda", dtype=t) if order == "row" else
              torch.randn(N, K, device="cuda", dtype=t).t() for _ in range(4)]
        C = torch.empty(M, N, device="cuda", dtype=t)
        C.fill_(float("nan"))
        kgen.matmul(A, Bs[0], out=C)
        torch.cuda.synchronize()
        err = rel_err(C, A, Bs[0])
        kg = time_graph(torch, [lambda a=A, b=b, c=C: kgen.matmul(a, b, out=c) for b in Bs] * 4, 15)
        cb = time_graph(torch, [lambda a=A, b=b, c=C: torch.mm(a, b, out=c) for b in Bs] * 4, 15)
        rows.append(dict(shape=[M, N, K], order=order, dtype=dtype, kgen_us=kg, cublas_us=cb, err=err))
        print(f"{M}x{N}x{K} {order} {dtype}: kgen {kg:.1f} µs, cuBLAS {cb:.1f} ({cb / kg:.2f}x) err {err:.1e}",
              flush=True)
    return rows


def main():
    tag = sys.argv[1] if len(sys.argv) > 1 else "run"
    mode = os.environ.get("MODE", "fixed")
    rows = fixed() if mode == "fixed" else dispatch()
    with open(os.path.join(os.environ.get("OUT", "."), f"epilogue_{mode}_{tag}.json"), "w") as f:
        json.dump({"device": torch.cuda.get_device_name(), "mode": mode, "tag": tag, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
