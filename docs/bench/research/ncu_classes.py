"""For Nsight Compute (--profile-from-start off): b_classes (W.t()'s row sets a tile) on a 16-bit
weight whose rows lie off a 16-byte boundary, beside the spec it comes from (what dispatch picks
for the aligned twin, K rounded up to 8) on that twin, for each of env CASES ("dtype:MxNxK ...").
Three warm-up calls each, then one profiled call of each; prints the specs."""
import os

import torch

import kgen
from kgen.tune import dispatch

runs = []
for case in os.environ["CASES"].split():
    dt, shape = case.split(":")
    M, N, K = map(int, shape.split("x"))
    K2 = -(-K // 8) * 8
    dtype = getattr(torch, dt)
    for k_len, classes in ((K, True), (K2, False)):
        A = torch.randn(M, k_len, device="cuda", dtype=dtype)
        B = torch.randn(N, k_len, device="cuda", dtype=dtype).t()
        C = torch.empty(M, N, device="cuda", dtype=dtype)
        twin = dispatch.call_spec(torch.empty(M, K2, device="cuda", dtype=dtype),
                                  torch.empty(N, K2, device="cuda", dtype=dtype).t())
        spec = twin.replace(b_classes=True, l2_prefetch=0) if classes else twin
        k = kgen.build(spec)
        for _ in range(3):
            k(A, B, out=C)
        print(dt, M, N, k_len, spec.to_json(), flush=True)
        runs.append((k, A, B, C))
torch.cuda.synchronize()
torch.cuda.profiler.start()
for k, A, B, C in runs:
    k(A, B, out=C)
torch.cuda.synchronize()
torch.cuda.profiler.stop()
