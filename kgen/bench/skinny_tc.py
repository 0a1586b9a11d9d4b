"""Few-row float32 products (13-256 rows against a large operand) on the split-TF32
tensor-core skinny forms, beside cuBLAS and the tiled family: the measurement behind
kgen.ops.skinny.TC_SUITS_ROWS and the default tensor-core spec.

    python -m kgen.bench.skinny_tc [--seed 11] [--count 12] [--json FILE]

Shapes are drawn at run time (M log-uniform in 13..256, N and K in 1024..16384, at most
2^26 elements in the large operand), each in both storage orders of B: "col" = W.t() of a
weight stored N x K (k-contiguous, torch's Linear), "row" = B row-major (n-contiguous).
Device time of one launch between CUDA events, median of --repeats, cuBLAS through torch
with TF32 off, for: kgen.matmul as dispatch chooses; the tiled family's shipped spec for
the shape; the tensor-core default spec; and its variants (tc_tiles, merge, waves,
min_blocks). Every spec is compiled first, in parallel processes. Every kgen result is
checked against a float64 reference first, and its error is reported beside cuBLAS's own
float32 error on the same inputs.
"""
from __future__ import annotations

import argparse
import math
import random
import sys
from typing import Any

from .results import log_uniform, poisoned_error, write_rows


def variants(M: int) -> list[Any]:
    """The default tensor-core spec for M rows, then one change of each searched field."""
    from ..ops.skinny import Skinny

    base = Skinny.default_spec({"M": M, "N": 4096, "K": 4096}, "float32")
    out = [base]
    for change in (dict(tc_tiles=1), dict(merge="atomic"), dict(merge="single_pass"), dict(waves=1), dict(waves=4),
                   dict(tc_tiles=1, min_blocks=2), dict(threads=128)):
        try:
            out.append(base.replace(**change))
        except ValueError:
            continue
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m kgen.bench.skinny_tc", description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=None, help="seed for the shapes (default: from the clock)")
    ap.add_argument("--count", type=int, default=12, help="shapes to draw")
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--bandwidth", type=float, default=3.0e12, help="bytes/s for the memory bound")
    ap.add_argument("--json", default="", help="write the rows here")
    args = ap.parse_args(argv)
    import torch

    import kgen
    from ..core.kernel import default_arch
    from ..core.timing import time_calls
    from ..ops.matmul import Matmul
    from ..tune.dispatch import select
    from ..core.compiler import default_workers
    from ..tune.pool import CompilePool

    torch.backends.cuda.matmul.allow_tf32 = False
    rng = random.Random(args.seed)

    def draw(lo: int, hi: int) -> int:
        return log_uniform(rng, lo, hi)

    def timed(f) -> float:
        return time_calls(f, warmup=1, repeats=args.repeats).median_ms

    shapes: list[tuple[int, int, int]] = []
    while len(shapes) < args.count:
        M, N, K = draw(13, 256), draw(1024, 16384), draw(1024, 16384)
        if N * K <= 1 << 26:
            shapes.append((M, N, K))
    # Every spec the run builds, compiled up front in parallel (the disk cache then serves kgen.build).
    plans = {}
    for M, N, K in shapes:
        base = select(Matmul, {"M": M, "N": N, "K": K}, "float32", db=False).spec
        for layout in ("col", "row"):
            plans[(M, N, K, layout)] = [base.replace(layout_b=layout)] + variants(M)
    pool = CompilePool(default_arch(), default_workers())
    unique = {s.key: s for specs in plans.values() for s in specs}
    for spec in unique.values():
        pool.submit(spec)
    for spec in unique.values():
        if pool.result(spec)[1]:
            print(f"compile failed: {spec.to_json()}", file=sys.stderr)
    pool.shutdown()
    rows = []
    for M, N, K in shapes:
        for layout in ("col", "row"):
            A = torch.randn(M, K, device="cuda")
            B = torch.randn(N, K, device="cuda").t() if layout == "col" else torch.randn(K, N, device="cuda")
            C = torch.empty(M, N, device="cuda")
            ref = A.double() @ B.double()
            norm = float(ref.norm())
            cublas_err = float((torch.matmul(A, B).double() - ref).norm()) / norm
            cublas = timed(lambda A=A, B=B, C=C: torch.matmul(A, B, out=C))
            user = timed(lambda A=A, B=B, C=C: kgen.matmul(A, B, out=C))
            timings: list[dict[str, Any]] = []
            for spec in plans[(M, N, K, layout)]:
                k = kgen.build(spec)
                err = poisoned_error(lambda k=k, A=A, B=B, C=C: k(A, B, out=C), C, ref)
                if not err < 1e-5:
                    print(f"wrong result ({err:.3g}): {spec.to_json()}", file=sys.stderr)
                    continue
                timings.append(dict(spec=spec.to_dict(), ms=timed(lambda k=k, A=A, B=B, C=C: k(A, B, out=C)),
                                    rel_error=err))
                if hasattr(k, "release"):
                    k.release()
            tc = [t for t in timings if t["spec"].get("tensor_cores")]
            if not tc or timings[0]["spec"].get("tensor_cores"):
                continue
            default, best = tc[0], min(tc, key=lambda t: t["ms"])
            bound = (M * K + K * N + M * N) * 4 / args.bandwidth * 1e3
            row = dict(shape=[M, N, K], layout_b=layout, cublas_ms=cublas, cublas_rel_error=cublas_err,
                       kgen_matmul_ms=user, tiled_ms=timings[0]["ms"], tc_default_ms=default["ms"],
                       tc_default_rel_error=default["rel_error"], tc_best_ms=best["ms"], tc_best_spec=best["spec"],
                       bound_ms=bound, variants=timings[1:])
            rows.append(row)
            print(f"{M:3d}x{N:5d}x{K:5d} B {layout}  cuBLAS {cublas:.4f} ms  kgen.matmul {cublas / user:.2f}x  "
                  f"tiled {cublas / row['tiled_ms']:.2f}x  tensor-core default {cublas / default['ms']:.2f}x "
                  f"(best variant {cublas / best['ms']:.2f}x, {100 * bound / default['ms']:.0f}% of the bound)  "
                  f"error {default['rel_error']:.1e} vs cuBLAS {cublas_err:.1e}", flush=True)
            del A, B, C, ref
    def geo(sub: list[dict[str, Any]], key: str) -> float:
        return math.exp(sum(math.log(r["cublas_ms"] / r[key]) for r in sub) / len(sub))

    for layout in ("col", "row"):
        sub = [r for r in rows if r["layout_b"] == layout]
        if sub:
            print(f"geometric mean x cuBLAS, B {layout}: kgen.matmul {geo(sub, 'kgen_matmul_ms'):.2f}  tiled "
                  f"{geo(sub, 'tiled_ms'):.2f}  tensor-core default {geo(sub, 'tc_default_ms'):.2f}")
    if rows:
        print(f"all: kgen.matmul {geo(rows, 'kgen_matmul_ms'):.2f}x cuBLAS")
    if args.json:
        write_rows(args.json, rows, seed=args.seed)
    return 0


if __name__ == "__main__":
    sys.exit(main())
