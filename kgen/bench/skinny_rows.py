"""Where the skinny family should stop: products of 9-32 rows against a large weight,
timed three ways in one run (the measurement behind kgen.ops.skinny.SUITS_ROWS).

    python -m kgen.bench.skinny_rows [--seed 5] [--rows 9,12,16,20,24,32] [--json FILE]

For each M, N and K are drawn log-uniformly from 2048..14336 at run time and B = W.t()
(W stored N x K, as torch's Linear holds it). Device time of one launch between CUDA
events, median of --repeats: cuBLAS through torch (TF32 off), kgen.matmul as dispatch
chooses today, and the fastest of the Skinny variants (rows = M, 16 or 32; warp_cols 2, 4
or 8; loads 4 or 8), each checked against a float64 reference before it is timed.
"""
from __future__ import annotations

import argparse
import random
import sys
from typing import Any

from .results import log_uniform, poisoned_error, write_rows


def variants(M: int, dtype: str = "float32") -> list[Any]:
    from ..ops.skinny import Skinny

    out = []
    for rows in sorted({min(M, 16), 16, 32} | ({M} if M <= 32 else set())):
        for warp_cols in (2, 4, 8):
            for loads in (4, 8):
                try:
                    out.append(Skinny(dtype=dtype, rows=rows, warp_cols=warp_cols, lane_vectors=1, threads=256,
                                      vector_bytes=16, loads=loads, k_split=0, waves=2, merge="single_pass"))
                except ValueError:
                    continue
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m kgen.bench.skinny_rows", description=__doc__.splitlines()[0])
    ap.add_argument("--rows", default="9,12,16,20,24,32", help="comma list of M")
    ap.add_argument("--seed", type=int, default=None, help="seed for N and K (default: from the clock)")
    ap.add_argument("--repeats", type=int, default=25)
    ap.add_argument("--bandwidth", type=float, default=3.35e12, help="bytes/s for the memory bound")
    ap.add_argument("--json", default="", help="write the rows here")
    args = ap.parse_args(argv)
    import torch

    import kgen

    torch.backends.cuda.matmul.allow_tf32 = False
    rng = random.Random(args.seed)

    def draw() -> int:
        return log_uniform(rng, 2048, 14336)

    from ..core.timing import time_calls

    def timed(f) -> float:
        return time_calls(f, warmup=1, repeats=args.repeats).median_ms

    rows = []
    for M in (int(t) for t in args.rows.split(",") if t.strip()):
        N, K = draw(), draw()
        A = torch.randn(M, K, device="cuda")
        B = torch.randn(N, K, device="cuda").t()
        C = torch.empty(M, N, device="cuda")
        ref = A.double() @ B.double()
        cublas = timed(lambda A=A, B=B, C=C: torch.matmul(A, B, out=C))
        now = timed(lambda A=A, B=B, C=C: kgen.matmul(A, B, out=C))
        best = None
        for spec in variants(M):
            k = kgen.build(spec)
            err = poisoned_error(lambda k=k, A=A, B=B, C=C: k(A, B, out=C), C, ref)
            if not err < 1e-5:
                print(f"wrong result ({err:.3g}): {spec.to_json()}", file=sys.stderr)
                continue
            ms = timed(lambda k=k, A=A, B=B, C=C: k(A, B, out=C))
            if best is None or ms < best[0]:
                best = (ms, spec)
        if best is None:
            continue
        bound = (M * K + K * N + M * N) * 4 / args.bandwidth * 1e3
        row = dict(shape=[M, N, K], cublas_ms=cublas, kgen_matmul_ms=now, skinny_ms=best[0],
                   skinny_spec=best[1].to_dict(), bound_ms=bound)
        rows.append(row)
        print(f"{M:3d}x{N:6d}x{K:6d}  cuBLAS {cublas:.4f} ms  kgen.matmul {cublas / now:.2f}x  best Skinny "
              f"{cublas / best[0]:.2f}x ({100 * bound / best[0]:.0f}% of bound; rows={best[1].rows} "
              f"warp_cols={best[1].warp_cols} loads={best[1].loads})")
    if args.json:
        write_rows(args.json, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
