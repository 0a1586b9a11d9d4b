"""The SIMT axpy form's _shift entry (float16 and bfloat16) under compute-sanitizer: row-major
weights whose rows lie off a 16-byte boundary, each weight the last elements of its own
allocation (run with PYTORCH_NO_CUDA_MEMORY_CACHING=1 so that every tensor is one cudaMalloc and
a granule read past the weight's end is outside any allocation), 0..V-1 elements past its
allocation's start, 1-4 rows, K whole and split; each result checked against float64.
    PYTORCH_NO_CUDA_MEMORY_CACHING=1 compute-sanitizer --tool memcheck python sanitize_axpy_shift.py"""
import torch

import kgen
from kgen.ops.skinny import Skinny, tolerance

checked = 0
for dtype in ("bfloat16", "float16"):
    tdt = getattr(torch, dtype)
    base = Skinny.simt_default_spec({"M": 2, "N": 4096, "K": 4096}, dtype)
    V = base.axpy_vec
    for rows, N, K, offset, split in ((1, 1283, 97, 1, 0), (2, 600, 1001, 0, 3), (3, 33, 65, 3, 0),
                                      (4, 1027, 40, 2, 2), (2, 5 * 32 * V + V + 1, 31, 1, 0)):
        offset %= V
        spec = base.replace(k_split=split, merge="two_pass" if split else base.merge)
        buf = torch.empty(offset + K * N, device="cuda", dtype=tdt)
        W = buf[offset:].view(K, N)
        W.copy_(torch.randn(K, N, device="cuda").to(tdt))
        A = torch.randn(rows, K, device="cuda").to(tdt)
        C = torch.full((rows, N), float("nan"), device="cuda", dtype=tdt)
        kgen.build(spec)(A, W, out=C)
        ref = A.double() @ W.double()
        err = float((C.double() - ref).norm() / ref.norm())
        assert err <= tolerance(dtype, K), (dtype, rows, N, K, offset, err)
        checked += 1
torch.cuda.synchronize()
print(f"{checked} products checked")
