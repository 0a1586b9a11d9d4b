"""kgen.matmul on bfloat16 and float16 products whose B rows are not 16-byte aligned, on the
wgmma kernel whose producer threads read B in place (b_realign): transposed tiles of 8-256
rows and 64 or 128 columns (5-16 rows against a row-major B of an odd pitch among them), K whole and in slices merged in clusters (realign_split_spec); B
row-major and W.t(), A at an odd offset in some. Every result NaN-poisoned first and checked
against float64. Run under compute-sanitizer --tool memcheck|racecheck with
PYTORCH_NO_CUDA_MEMORY_CACHING=1, so that each tensor is its own allocation.

B lies at the start of an allocation with 16 bytes after it (SLACK, bytes, default 16). The
producer threads copy B in aligned 16-byte granules (cp.async, source size clipped to B), and
memcheck counts all 16 bytes of the granule that holds B's last value; with SLACK=0 (B's
allocation ending inside that granule, as an exact-size cudaMalloc can) it reports that copy
as a read past the allocation (docs/tensorcore-record.md, "Rows TMA cannot read")."""
import os

import torch

import kgen
from kgen.tune import dispatch

SLACK = int(os.environ.get("SLACK", "16"))
torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False


def weight(rows, cols, dt):
    """A rows x cols tensor at the start of an allocation SLACK bytes longer."""
    buf = torch.randn(rows * cols + (SLACK + 1) // 2, device="cuda").to(dt)
    return buf[:rows * cols].view(rows, cols)


worst = 0.0
for M, N, K, order, dt, odd_a in ((61, 3001, 1000, "row", torch.bfloat16, False),
                                  (29, 2001, 1501, "col", torch.bfloat16, True),
                                  (150, 2999, 700, "row", torch.float16, False),
                                  (250, 1501, 600, "row", torch.bfloat16, False),
                                  (100, 9601, 300, "col", torch.bfloat16, False),
                                  (70, 4520, 901, "col", torch.float16, True),
                                  (19, 4918, 1745, "row", torch.bfloat16, True),
                                  (82, 4520, 2853, "col", torch.bfloat16, False),
                                  (33, 8447, 3001, "row", torch.bfloat16, False),
                                  (5, 1107, 1331, "row", torch.bfloat16, False),
                                  (9, 7001, 2049, "row", torch.float16, True),
                                  (16, 1025, 4101, "row", torch.bfloat16, False)):
    A = torch.randn(M, K + 1, device="cuda").to(dt)[:, 1:] if odd_a else torch.randn(M, K, device="cuda").to(dt)
    B = weight(N, K, dt).t() if order == "col" else weight(K, N, dt)
    C = torch.full((M, N), float("nan"), device="cuda", dtype=dt)
    kgen.matmul(A, B, out=C)
    ref = A.double() @ B.double()
    err = float((C.double() - ref).norm() / ref.norm())
    k = dispatch._fast.get(("matmul", A.shape, A.stride(), B.shape, B.stride(), A.dtype, False))
    spec = getattr(k, "spec", None)
    print(M, N, K, order, dt, "err %.1e" % err, getattr(spec, "tile", None), getattr(spec, "split_k", None),
          getattr(spec, "b_realign", None), "B ends %d bytes past a 16-byte boundary" % ((B.numel() * 2) % 16),
          flush=True)
    worst = max(worst, err)
torch.cuda.synchronize()
assert worst < 1e-2, worst
print("ok, slack", SLACK)
