"""float16/bfloat16 products of 17-256 rows on TensorMatmul's wgmma kernel: block tile and
split-K, in device time (the call captured in a CUDA graph and replayed) and one call between
CUDA events (host included), beside cuBLAS through torch. Shapes: COUNT drawn by `kgen bench
calls`' generator (seed SEED, rows ROWS), with N and K as drawn and rounded up to multiples of
64; B row-major and B = W.t(). Every result is checked against the float64 product.
Env: DTYPE (bfloat16), COUNT (10), SEED (1), ROWS (17-256), UNALIGNED (1), ORDERS (row,col), TILES
(64x64,64x128,128x64,128x128,64x256), SPLITS (1,2,3,4,6,8).
Output: $OUT/tensorcore16_few_rows_sweep.json."""
import concurrent.futures as cf
import json
import os

import torch

import kgen
from kgen.bench.calls import random_matmul_shapes
from kgen.bench.skinny import measure_ways
from kgen.ops.tensorcore import TensorMatmul

DTYPE = os.environ.get("DTYPE", "bfloat16")
TILES = [tuple(int(v) for v in t.split("x")) for t in os.environ.get(
    "TILES", "64x64,64x128,128x64,128x128,64x256").split(",")]
SPLITS = [int(v) for v in os.environ.get("SPLITS", "1,2,3,4,6,8").split(",")]


def cases():
    lo, hi = (int(v) for v in os.environ.get("ROWS", "17-256").split("-"))
    drawn = random_matmul_shapes(int(os.environ.get("COUNT", "10")), int(os.environ.get("SEED", "1")), (lo, hi))
    shapes = [(M, -(-N // 64) * 64, -(-K // 64) * 64) for M, N, K in drawn]
    if os.environ.get("UNALIGNED", "1") == "1":
        shapes += drawn
    return [(s, o) for s in shapes for o in os.environ.get("ORDERS", "row,col").split(",")]


def variants(M, N, K, order):
    p = {"M": M, "N": N, "K": K}
    base = TensorMatmul.wgmma_default_spec(p, DTYPE).replace(layout_b="col" if order == "col" else "row")
    out = {"default": base}
    for BM, BN in TILES:
        stages = {(128, 256): 4, (64, 256): 5}.get((BM, BN), 6)
        for split in SPLITS:
            if split > 1 and K < 512 * split:
                continue
            out[f"{BM}x{BN}/{split}"] = base.replace(tile=(BM, BN, base.tile[2]), warp_tile=(64, BN), stages=stages,
                                                     split_k=split)
    return out


def main():
    torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
    torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False
    todo = cases()
    specs = {}
    for (M, N, K), o in todo:
        for s in variants(M, N, K, o).values():
            specs[s.key] = s
    with cf.ThreadPoolExecutor(16) as ex:
        list(ex.map(kgen.compile, specs.values()))
    rows = []
    for (M, N, K), order in todo:
        A = torch.randn(M, K, device="cuda").to(getattr(torch, DTYPE))
        B = (torch.randn(K, N, device="cuda") if order == "row" else torch.randn(N, K, device="cuda").t())
        B = B.to(getattr(torch, DTYPE))
        ref = A.double() @ B.double()
        row = {"shape": [M, N, K], "order": order, "dtype": DTYPE, "dev": {}, "one": {}, "err": {}}
        ways = {"cublas": torch.matmul, "dispatch": kgen.matmul}
        ways.update({name: kgen.build(spec) for name, spec in variants(M, N, K, order).items()})
        row["default_spec"] = variants(M, N, K, order)["default"].to_json()
        flat: dict = {}
        measure_ways(torch, ways, A, B, ref, flat, 25)
        for name in ways:
            for part in ("err", "dev", "one"):
                row[part][name] = flat[f"{name}_{part}"]
        rows.append(row)
        best = min((v, k) for k, v in row["dev"].items() if k not in ("cublas", "dispatch"))
        print(f"{M}x{N}x{K} {order}: cublas {row['dev']['cublas']:.1f} default {row['dev']['default']:.1f} "
              f"best {best[1]} {best[0]:.1f} (device us); one call: cublas {row['one']['cublas']:.1f} "
              f"default {row['one']['default']:.1f} best {row['one'][best[1]]:.1f}; max err "
              f"{max(row['err'].values()):.1e}", flush=True)
    with open(os.path.join(os.environ.get("OUT", "."), "tensorcore16_few_rows_sweep.json"), "w") as f:
        json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
