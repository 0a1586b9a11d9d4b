"""One public call between CUDA events (host time included) of kgen.matmul(A, B),
kgen.matmul(A, B, out=C) and torch.matmul(A, B), median of 400, three rounds interleaved
(the median round reported), and host µs a call over 300 calls in a row, on eight few-row
products whose results are batched (at most 256 KiB) or not. Run it in two trees, each in
its own process, alternating: a process's host speed varies from one start to the next,
so compare kgen's time to torch's within each process. Each result is checked against
float64 first. Usage: python result_ahead.py TAG; output $OUT/single_TAG.json."""
import json
import os
import statistics
import sys

import torch

import kgen
from kgen.bench.skinny import host_us
from kgen.core.timing import time_calls

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
# (dtype, order of B: "col" = W.t() of an N x K weight, "row" = K x N row-major, M, N, K)
PRODUCTS = [("bfloat16", "col", 125, 3712, 3456), ("bfloat16", "row", 64, 4096, 4096),
            ("bfloat16", "col", 17, 11008, 4096), ("bfloat16", "row", 200, 5120, 5120),
            ("bfloat16", "col", 40, 2048, 2048), ("float32", "col", 8, 14336, 4096),
            ("float32", "row", 16, 4096, 4096), ("bfloat16", "col", 4, 4096, 4096)]


def main(tag):
    rows = []
    for dt, order, M, N, K in PRODUCTS:
        d = getattr(torch, dt)
        A = torch.randn(M, K, device="cuda", dtype=d)
        if order == "col":
            B = torch.randn(N, K, device="cuda", dtype=d).t()
        else:
            B = torch.randn(K, N, device="cuda", dtype=d)
        out = torch.empty(M, N, device="cuda", dtype=d)
        ref = A.double() @ B.double()
        err = float((kgen.matmul(A, B).double() - ref).norm() / ref.norm())
        fns = {"kgen": lambda A=A, B=B: kgen.matmul(A, B),
               "kgen_out": lambda A=A, B=B, out=out: kgen.matmul(A, B, out=out),
               "torch": lambda A=A, B=B: torch.matmul(A, B)}
        for f in fns.values():
            for _ in range(30):
                f()
        torch.cuda.synchronize()
        row = {"shape": [M, N, K], "dtype": dt, "order": order, "err": err}
        for _ in range(3):
            for n, f in fns.items():
                row.setdefault(n, []).append(time_calls(f, warmup=3, repeats=400).median_ms * 1e3)
        for n, f in fns.items():
            row[n + "_host"] = host_us(torch, f, 300)
        print(tag, dt, order, f"{M}x{N}x{K}", " ".join(f"{n} {statistics.median(row[n]):.1f}" for n in fns),
              " host", " ".join(f"{row[n + '_host']:.1f}" for n in fns), f"err {err:.1e}", flush=True)
        rows.append(row)
    with open(os.path.join(os.environ.get("OUT", "."), f"single_{tag}.json"), "w") as f:
        json.dump(rows, f)


if __name__ == "__main__":
    main(sys.argv[1])
