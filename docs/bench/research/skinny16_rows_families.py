"""float16/bfloat16 products of 17-256 rows: which family is fastest, as users call it and in
device time. For each drawn shape, B row-major (K x N) and B = W.t() (W stored N x K), with
N and K as drawn (rows mostly not 16-byte aligned) and rounded up to multiples of 64
(ALIGNED=1 adds those), the variants are: kgen.matmul as dispatch routes it; TensorMatmul's
wgmma default (operand copies where TMA cannot read in place); its mma.sync default, with
repack (copies) and with element loads in place (repack off); the skinny family's
tensor-core default (row tiles of at most 64 rows); cuBLAS through torch. Device time: the
call captured in a CUDA graph and replayed; one call: between CUDA events, host included.
Every result is checked against the float64 product.
Env: DTYPE (bfloat16), COUNT (12), SEED (1), ROWS (17-256), ALIGNED (1), ORDERS (row,col).
Output: $OUT/skinny16_rows_families.json."""
import concurrent.futures as cf
import json
import os

import torch

import kgen
from kgen.bench.calls import random_matmul_shapes
from kgen.bench.skinny import build_ways, format_ways, measure_ways
from kgen.ops.skinny import Skinny
from kgen.ops.tensorcore import TensorMatmul

DTYPE = os.environ.get("DTYPE", "bfloat16")
TORCH_DTYPE = getattr(torch, DTYPE)


def shapes():
    lo, hi = (int(v) for v in os.environ.get("ROWS", "17-256").split("-"))
    drawn = random_matmul_shapes(int(os.environ.get("COUNT", "12")), int(os.environ.get("SEED", "1")), (lo, hi))
    out = [(s, False) for s in drawn]
    if os.environ.get("ALIGNED", "1") == "1":
        out += [((M, -(-N // 64) * 64, -(-K // 64) * 64), True) for (M, N, K) in drawn]
    return out


def variants(M, N, K, order):
    p = {"M": M, "N": N, "K": K}
    lay = {"layout_b": "col" if order == "col" else "row"}
    out = {"tm_wgmma": TensorMatmul.wgmma_default_spec(p, DTYPE).replace(**lay),
           "tm_mma": TensorMatmul.mma_default_spec(p, DTYPE).replace(**lay)}
    out["tm_mma_elem"] = out["tm_mma"].replace(repack=False)
    if min(M, N) <= 128:
        out["skinny_tc"] = Skinny.default_spec(p, DTYPE)
    return out


def main():
    torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
    torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False
    todo = [(s, al, o) for s, al in shapes() for o in os.environ.get("ORDERS", "row,col").split(",")]
    specs = {}
    for (M, N, K), _, o in todo:
        for s in variants(M, N, K, o).values():
            specs[s.key] = s
    with cf.ThreadPoolExecutor(16) as ex:
        list(ex.map(kgen.compile, specs.values()))
    rows = []
    for (M, N, K), aligned, order in todo:
        A = torch.randn(M, K, device="cuda").to(TORCH_DTYPE)
        B = torch.randn(K, N, device="cuda") if order == "row" else torch.randn(N, K, device="cuda").t()
        B = B.to(TORCH_DTYPE)
        ref = A.double() @ B.double()
        row = {"shape": [M, N, K], "order": order, "aligned": aligned, "dtype": DTYPE}
        ways = {"dispatch": kgen.matmul, "cublas": torch.matmul}
        ways.update(build_ways(kgen.build, variants(M, N, K, order), row))
        measure_ways(torch, ways, A, B, ref, row)
        rows.append(row)
        cells = format_ways(row, ways)
        print(f"{M}x{N}x{K} {order}{' al' if aligned else ''}: (device/one-call us) {cells}", flush=True)
    with open(os.path.join(os.environ.get("OUT", "."), "skinny16_rows_families.json"), "w") as f:
        json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
