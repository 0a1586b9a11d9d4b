"""Short-K 16-bit products of large outputs under Nsight Compute: for each of env CASES
("dtype:MxNxK:order ...", order "row" for a row-major B, "col" for W.t()), kgen.matmul(A, B, out=C),
torch.mm(A, B, out=C) (cuBLAS) and C.fill_(1) (a write of the output alone), each once between
cudaProfilerStart/Stop after three warm-up calls. Prints the spec dispatch picks.
    ncu --clock-control none --profile-from-start off --section SpeedOfLight \\
        --section MemoryWorkloadAnalysis --section WarpStateStats python ncu_short_k.py"""
import os

import torch

import kgen
from kgen.tune.dispatch import call_spec

torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False
runs = []
for dt, shape, order in (c.split(":") for c in os.environ["CASES"].split()):
    M, N, K = map(int, shape.split("x"))
    dtype = getattr(torch, dt)
    A = torch.randn(M, K, device="cuda", dtype=dtype)
    B = (torch.randn(N, K, device="cuda", dtype=dtype).t() if order == "col"
         else torch.randn(K, N, device="cuda", dtype=dtype))
    C = torch.empty(M, N, device="cuda", dtype=dtype)
    print(dt, shape, order, call_spec(A, B).to_json(), flush=True)
    calls = [lambda A=A, B=B, C=C: kgen.matmul(A, B, out=C), lambda A=A, B=B, C=C: torch.mm(A, B, out=C),
             lambda C=C: C.fill_(1)]
    for call in calls:
        for _ in range(3):
            call()
    runs.append(calls)
torch.cuda.synchronize()
torch.cuda.profiler.start()
for calls in runs:
    for call in calls:
        call()
torch.cuda.synchronize()
torch.cuda.profiler.stop()
