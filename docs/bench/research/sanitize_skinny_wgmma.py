"""The wgmma skinny forms (float32; DTYPE=bfloat16 or float16 for the 16-bit ones) on edge
shapes (1 row and several row tiles, K of 1 and past a chunk, N past a 64-column tile, odd
element offsets, both storage orders of each operand, few rows and few columns, every merge,
a fixed K split, alpha and beta), each result checked against float64. Run it under
`compute-sanitizer --tool memcheck` (and racecheck) with PYTORCH_NO_CUDA_MEMORY_CACHING=1 so
that a read past a buffer is a read past an allocation."""
import functools
import os

import torch

import kgen
from kgen.ops.skinny import Skinny

DTYPE = os.environ.get("DTYPE", "float32")
base = functools.partial(Skinny.wgmma_default_spec, dtype=DTYPE)
specs = [base({"M": 20, "N": 4096, "K": 4096}), base({"M": 100, "N": 4096, "K": 4096}),
         base({"M": 24, "N": 4096, "K": 4096}).replace(tc_tiles=2, threads=128, merge="single_pass"),
         base({"M": 64, "N": 4096, "K": 4096}).replace(threads=256,
                                                       merge="atomic" if DTYPE == "float32" else "single_pass"),
         base({"M": 40, "N": 4096, "K": 4096}).replace(k_split=3)]
shapes = ((1, 1, 1), (17, 67, 1), (40, 130, 200), (129, 65, 517), (3, 200, 1031), (300, 70, 33))
bad = cases = 0
for spec in specs:
    k = kgen.build(spec)
    for M, N, K in shapes:
        for few_cols in (False, True):
            m, n = (N, M) if few_cols else (M, N)
            for la, lb, off in (("row", "row", 0), ("row", "col", 1), ("col", "row", 1), ("col", "col", 0)):
                def make(r, c, lay, off=off):
                    if lay == "row":
                        return torch.randn(r, c + off + 1, device="cuda").to(getattr(torch, DTYPE))[:, off:off + c]
                    return torch.randn(c, r + off + 1, device="cuda").to(getattr(torch, DTYPE))[:, off:off + r].t()
                A, B = make(m, K, la), make(K, n, lb)
                C0 = torch.randn(m, n, device="cuda").to(getattr(torch, DTYPE))
                C = C0.clone()
                k(A, B, out=C, alpha=0.5, beta=-1.0)
                ref = 0.5 * (A.double() @ B.double()) - C0.double()
                torch.cuda.synchronize()
                rel = ((C.double() - ref).norm() / ref.norm()).item()
                tol = 2 * spec.tolerance_for({"M": m, "N": n, "K": K})
                cases += 1
                if not rel <= tol:
                    bad += 1
                    print("wrong:", spec.to_json(), m, n, K, la, lb, off, rel, tol, flush=True)
print(f"{cases} cases done, wrong: {bad}", flush=True)
