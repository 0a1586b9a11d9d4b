"""For Nsight Compute (--profile-from-start off): kgen.matmul on float64 products of env CASES
("MxNxK ...") against a row-major weight (K x N) and W.t() (an N x K weight, transposed), the
specs dispatch picks. Three warm-up calls each, then one profiled call of each; prints the specs
in the order profiled."""
import os

import torch

import kgen
from kgen.tune import dispatch

runs = []
for case in os.environ["CASES"].split():
    M, N, K = map(int, case.split("x"))
    A = torch.randn(M, K, device="cuda", dtype=torch.float64)
    for w_t in (False, True):
        B = torch.randn(N, K, device="cuda", dtype=torch.float64).t() if w_t else \
            torch.randn(K, N, device="cuda", dtype=torch.float64)
        C = torch.empty(M, N, device="cuda", dtype=torch.float64)
        for _ in range(3):
            kgen.matmul(A, B, out=C)
        print(case, "W.t()" if w_t else "row-major", dispatch.call_spec(A, B).to_json(), flush=True)
        runs.append((A, B, C))
torch.cuda.synchronize()
torch.cuda.profiler.start()
for A, B, C in runs:
    kgen.matmul(A, B, out=C)
torch.cuda.synchronize()
torch.cuda.profiler.stop()
