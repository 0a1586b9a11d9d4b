"""kgen.matmul on env CASES ("dtype:MxNxK:order ...") between cudaProfilerStart/Stop, after three
warm-up calls each, for Nsight Compute with --profile-from-start off:
    ncu --clock-control none --profile-from-start off --section SpeedOfLight ... python ncu_skinny.py
Prints the spec dispatch picks for each case. SKINNY=1 runs Skinny.default_spec for each case's
shape instead (the same skinny spec on a weight whose rows lie off a 16-byte boundary and on its
aligned twin, where dispatch would give the twin the wgmma kernel)."""
import os

import torch

import kgen
from kgen.ops.skinny import Skinny
from kgen.tune.dispatch import call_spec
torch.backends.cuda.matmul.allow_tf32 = False
cases = [c.split(":") for c in os.environ["CASES"].split()]
SKINNY = os.environ.get("SKINNY") == "1"
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
    spec = Skinny.default_spec({"M": M, "N": N, "K": K}, dt) if SKINNY else call_spec(A, B)
    run = kgen.build(spec) if SKINNY else kgen.matmul
    for _ in range(3):
        run(A, B, out=C)
    torch.cuda.synchronize()
    print(dt, shp, order, spec.to_dict(), flush=True)
    runs.append((run, A, B, C))
torch.cuda.synchronize()
torch.cuda.profiler.start()
for run, A, B, C in runs:
    run(A, B, out=C)
torch.cuda.synchronize()
torch.cuda.profiler.stop()
