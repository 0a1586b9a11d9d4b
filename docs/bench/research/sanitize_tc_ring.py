"""The float32 tensor-core dot form's ring of windows (TC_DOT_RING) and the merge kernel's
batched loads on edge shapes: K around whole windows and rings (1, 31-33, 63-65, 95-97,
127-129, 543, 1057), slabs of such K (k_split up to 37, so that the merge takes a batch of
16 and a partial one), odd offsets and pitches (NaN around every operand), both storage
orders of the large operand, alpha and beta; each result checked against float64. Run it
under `compute-sanitizer --tool memcheck` (PYTORCH_NO_CUDA_MEMORY_CACHING=1) as well as
plainly; it prints `bad N` (results off their tolerance) last."""
import torch

import kgen
from kgen.ops.skinny import Skinny


def operand(rows, cols, order, offset, pad):
    outer, inner = (rows, cols) if order == "row" else (cols, rows)
    ld = inner + pad
    buf = torch.full((offset + max(outer, 1) * ld + 1,), float("nan"), device="cuda")
    x = torch.as_strided(buf, (outer, inner), (ld, 1), offset)
    x.copy_(torch.randn(outer, inner, device="cuda"))
    return x if order == "row" else x.t()


specs = [Skinny(dtype="float32", rows=r, warp_cols=1, tensor_cores=True, tc_tiles=t, merge=m, k_split=ks,
                min_blocks=mb, threads=th)
         for r, t, m, ks, mb, th in ((16, 2, "two_pass", 0, 1, 256), (9, 2, "two_pass", 37, 1, 256),
                                     (24, 1, "two_pass", 17, 2, 128), (13, 2, "single_pass", 5, 1, 256),
                                     (8, 1, "two_pass", 16, 1, 256), (32, 2, "two_pass", 3, 1, 128))]
bad = 0
runs = 0
for spec in specs:
    k = kgen.build(spec)
    for M, N, K, off in ((5, 300, 1, 0), (16, 257, 31, 1), (13, 129, 33, 0), (9, 515, 63, 1), (3, 64, 65, 0),
                         (16, 200, 95, 1), (11, 333, 97, 0), (7, 130, 127, 1), (16, 77, 129, 0), (29, 401, 543, 1),
                         (2, 1000, 1057, 0), (16, 96, 4099, 1)):
        for order in ("col", "row"):
            A = operand(M, K, "row", off, 1 + off)
            B = operand(K, N, order, off, 3)
            C0 = torch.randn(M, N, device="cuda")
            for alpha, beta in ((1.0, 0.0), (0.5, -1.0)):
                C = C0.clone() if beta else torch.full((M, N), float("nan"), device="cuda")
                k(A, B, out=C, alpha=alpha, beta=beta)
                ref = alpha * (A.double() @ B.double()) + (beta * C0.double() if beta else 0)
                torch.cuda.synchronize()
                rel = ((C.double() - ref).norm() / ref.norm()).item()
                tol = spec.tolerance_for({"M": M, "N": N, "K": K})
                runs += 1
                if not rel <= tol:
                    bad += 1
                    print("wrong:", spec.to_json(), M, N, K, off, order, alpha, beta, rel, tol, flush=True)
print(f"runs {runs} bad {bad}", flush=True)
