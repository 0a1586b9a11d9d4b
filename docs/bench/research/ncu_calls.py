"""For Nsight Compute (--profile-from-start off): kgen.matmul beside cuBLAS (torch.mm, TF32 off) on
each product of env CASES ("dtype:MxNxK:row|wt ...", wt = B given as W.t() of an N x K weight),
so the two kernels of one product can be read side by side (occupancy, warp stalls, L2 and DRAM
traffic, waves). Three warm-up calls of each, then one profiled call of kgen and one of cuBLAS a
product, in the order of CASES; prints each product's dispatched spec before profiling.

  ncu --profile-from-start off --clock-control none --section SpeedOfLight --section Occupancy \\
      --section LaunchStats --section WarpStateStats python docs/bench/research/ncu_calls.py
"""
import os

import torch

import kgen
from kgen.tune import dispatch


def operands(case: str):
    dtype_name, shape, order = case.split(":")
    M, N, K = (int(v) for v in shape.split("x"))
    dtype = getattr(torch, dtype_name)
    A = torch.randn(M, K, device="cuda", dtype=dtype)
    if order == "wt":
        B = torch.randn(N, K, device="cuda", dtype=dtype).t()
    elif order == "row":
        B = torch.randn(K, N, device="cuda", dtype=dtype)
    else:
        raise SystemExit(f"{case}: the order is 'row' or 'wt', not {order!r}")
    return A, B, torch.empty(M, N, device="cuda", dtype=dtype)


def main() -> None:
    torch.backends.cuda.matmul.allow_tf32 = False
    runs = []
    for case in os.environ["CASES"].split():
        A, B, C = operands(case)
        for _ in range(3):
            kgen.matmul(A, B, out=C)
            torch.mm(A, B, out=C)
        print(case, dispatch.call_spec(A, B).to_json(), flush=True)
        runs.append((A, B, C))
    torch.cuda.synchronize()
    torch.cuda.profiler.start()
    for A, B, C in runs:
        kgen.matmul(A, B, out=C)
        torch.mm(A, B, out=C)
    torch.cuda.synchronize()
    torch.cuda.profiler.stop()


if __name__ == "__main__":
    main()
