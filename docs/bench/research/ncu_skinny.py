"""kgen.matmul on env CASES ("dtype:MxNxK:order ...") between cudaProfilerStart/Stop, after three
warm-up calls each, for Nsight Compute with --profile-from-start off:
    ncu --clock-control none --profile-from-start off --section SpeedOfLight ... python ncu_skinny.py
Prints the spec dispatch picks for each case."""
import os

import torch

import kgen
from kgen.tune.dispatch import call_spec
torch.backends.cuda.matmul.allow_tf32 = False
cases = [c.split(":") for c in os.environ["CASES"].split()]
runs = []
for dt, shp, order in cases:
    M, N, K = map(int, shp.split("x"))
    dtype = getattr(torch, dt)
    A = torch.randn(M, K, device="cuda", dtype=dtype)
    if order == "col":
        B = torch.randn(N, K, device="cuda", dtype=dtype).t()
    else:
        B = torch.randn(K, N, device="cuda", dtype=dtype)
    C = torch.empty(M, N, device="cuda", dtype=dtype)
    for _ in range(3):
        kgen.matmul(A, B, out=C)
    torch.cuda.synchronize()
    print(dt, shp, order, call_spec(A, B).to_dict(), flush=True)
    runs.append((A, B, C))
torch.cuda.synchronize()
torch.cuda.profiler.start()
for A, B, C in runs:
    kgen.matmul(A, B, out=C)
torch.cuda.synchronize()
torch.cuda.profiler.stop()
