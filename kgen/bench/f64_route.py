"""float64 products: the FP64 tensor cores or the SIMT tiles? The measurement behind
kgen.tune.dispatch.TENSOR_F64_MIN_MACS.

    python -m kgen.bench.f64_route [--shapes 1000x1000x1000,...] [--json FILE]

For each shape: TensorMatmul's default spec and the SIMT spec the shipped table picks, each
checked against torch's float64 product, then timed as a bound call between CUDA events
(median of --repeats) beside cuBLAS DGEMM through torch.
"""
from __future__ import annotations

import argparse
import sys

from .results import poisoned_error, write_rows

SHAPES = ("1000x1000x1000,2000x3000x777,512x512x512,300x2000x1500,777x555x999,4096x4096x256,"
          "128x4096x4096,1500x1500x3000,64x2048x2048,200x200x200")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m kgen.bench.f64_route", description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", default=SHAPES, help="comma list of MxNxK")
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--json", default="", help="write the rows here")
    args = ap.parse_args(argv)
    import torch

    import kgen
    from kgen.ops.matmul import Matmul
    from kgen.ops.tensorcore import TensorMatmul
    from kgen.tune.dispatch import select

    from ..core.timing import time_calls

    def timed(f) -> float:
        return time_calls(f, warmup=1, repeats=args.repeats).median_ms

    rows = []
    for text in args.shapes.split(","):
        M, N, K = (int(v) for v in text.lower().split("x"))
        A = torch.randn(M, K, device="cuda", dtype=torch.float64)
        B = torch.randn(K, N, device="cuda", dtype=torch.float64)
        C = torch.empty(M, N, device="cuda", dtype=torch.float64)
        ref = A @ B
        problem = {"M": M, "N": N, "K": K}
        row: dict = {"shape": [M, N, K]}
        for name, spec in (("tensor", TensorMatmul.default_spec(problem, "float64")),
                           ("simt", select(Matmul, problem, "float64").spec)):
            k = kgen.build(spec)
            err = poisoned_error(lambda k=k, A=A, B=B, C=C: k(A, B, out=C), C, ref)
            row[name + "_error"] = err
            row[name] = timed(lambda k=k, A=A, B=B, C=C: k(A, B, out=C)) if err < 1e-12 else None
        row["cublas"] = timed(lambda A=A, B=B, C=C: torch.matmul(A, B, out=C))
        rows.append(row)

        def ratio(ms, row=row):
            return f"{row['cublas'] / ms:.2f}x" if ms else "wrong"
        print(f"{M:5d}x{N:5d}x{K:5d}  cuBLAS {row['cublas']:.4f} ms  tensor cores {ratio(row['tensor'])}  "
              f"SIMT {ratio(row['simt'])}")
    if args.json:
        write_rows(args.json, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
