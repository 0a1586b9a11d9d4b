"""float16/bfloat16 products of few rows: the skinny family's 16-bit wgmma form
(Skinny.wgmma_default_spec(problem, dtype): m64nNk16, the weight from registers) against
kgen.matmul as dispatch routes it and cuBLAS through torch. Device time: the call captured in
a CUDA graph and replayed; one call: between CUDA events, host included. Every result is
checked against the float64 product.
Env: DTYPE (bfloat16), COUNT (12), SEED (1), ROWS (17-64), MULTIPLE (64: N and K rounded up to
it; 1 keeps them as drawn), ORDERS (col,row: B = W.t() of an N x K weight, or K x N), VARIANTS
(a JSON list of field changes to the wgmma default, each timed too, e.g. '[{"min_blocks": 2}]').
Output: $OUT/skinny16_wgmma.json."""
import concurrent.futures as cf
import json
import os

import torch

import kgen
from kgen.bench.calls import random_matmul_shapes
from kgen.bench.skinny import measure_ways
from kgen.ops.skinny import Skinny

DTYPE = os.environ.get("DTYPE", "bfloat16")
VARIANTS = json.loads(os.environ.get("VARIANTS", "[]"))


def wg_specs(M, N, K):
    base = Skinny.wgmma_default_spec({"M": M, "N": N, "K": K}, DTYPE)
    out = {"wg16": base}
    for change in VARIANTS:
        try:
            out["wg16 " + ",".join(f"{k}={v}" for k, v in change.items())] = base.replace(**change)
        except ValueError:   # a variant this shape's spec cannot take (registers, rows)
            pass
    return out


def cases():
    lo, hi = (int(v) for v in os.environ.get("ROWS", "17-64").split("-"))
    drawn = random_matmul_shapes(int(os.environ.get("COUNT", "12")), int(os.environ.get("SEED", "1")), (lo, hi),
                                 int(os.environ.get("MULTIPLE", "64")))
    return [(s, o) for s in drawn for o in os.environ.get("ORDERS", "col,row").split(",")]


def main():
    torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
    torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False
    todo = cases()
    specs = {s.key: s for (M, N, K), _ in todo for s in wg_specs(M, N, K).values()}
    with cf.ThreadPoolExecutor(16) as ex:
        list(ex.map(kgen.compile, specs.values()))
    rows = []
    for (M, N, K), order in todo:
        A = torch.randn(M, K, device="cuda").to(getattr(torch, DTYPE))
        B = torch.randn(K, N, device="cuda") if order == "row" else torch.randn(N, K, device="cuda").t()
        B = B.to(getattr(torch, DTYPE))
        ref = A.double() @ B.double()
        row = {"shape": [M, N, K], "order": order, "dtype": DTYPE}
        ways = {"cublas": torch.matmul, "dispatch": kgen.matmul}
        ways.update({name: kgen.build(spec) for name, spec in wg_specs(M, N, K).items()})
        measure_ways(torch, ways, A, B, ref, row)
        rows.append(row)
        cells = "  ".join(f"{n} {row[n + '_dev']:.1f}" for n in ways)
        worst = max(row[n + "_err"] for n in ways)
        print(f"{M}x{N}x{K} {order}: device us {cells} | one call cublas {row['cublas_one']:.1f} dispatch "
              f"{row['dispatch_one']:.1f} wg16 {row['wg16_one']:.1f} | largest error {worst:.1e}", flush=True)
    with open(os.path.join(os.environ.get("OUT", "."), "skinny16_wgmma.json"), "w") as f:
        json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
