"""Launches of the float32 wgmma skinny forms on small products (where the host's launches, not
the kernel, set the time): the default plan (image launch past WG_DIRECT_MAX_COLUMN_TILES, K
slabs merged by a second kernel) against one-launch variants: the slabs merged in the main
kernel (merge="single_pass"), S split in each block (the direct entry at any grid), both, and
one slab (k_split=1) with the direct entry. Each result is checked against float64 (output
poisoned), then one call between CUDA events (host time included) of each, beside torch.matmul
(cuBLAS, TF32 off), on COUNT shapes drawn in Skinny.wgmma_suits' range of at most 2^30 flops.

    python skinny_wgmma_small.py SEED COUNT     # output: $OUT/wgmma_small_SEED.json"""

import concurrent.futures as cf
import json
import os
import sys

import kgen
import kgen.ops.skinny as sk
import torch
from kgen.bench.calls import _time_pair
from kgen.bench.results import geomean, poisoned_error
from kgen.ops.skinny import Skinny, tolerance
from wgmma_shapes import wgmma_shapes

OUT = os.environ.get("OUT", ".")
VARIANTS = {"default": ({}, False), "single": ({"merge": "single_pass"}, False), "direct": ({}, True),
            "single_direct": ({"merge": "single_pass"}, True), "one_slab_direct": ({"k_split": 1}, True)}


def main():
    seed, n = int(sys.argv[1]), int(sys.argv[2])
    shapes = wgmma_shapes(seed, n, 2**30)
    torch.backends.cuda.matmul.allow_tf32 = False
    default_direct = sk.WG_DIRECT_MAX_COLUMN_TILES
    specs = {(M, N, K): {v: Skinny.wgmma_default_spec({"M": M, "N": N, "K": K}).replace(**kw)
                         for v, (kw, _) in VARIANTS.items()} for M, N, K, _ in shapes}
    with cf.ThreadPoolExecutor(16) as ex:
        list(ex.map(kgen.compile, {s for d in specs.values() for s in d.values()}))
    rows, bad = [], 0
    for M, N, K, b in shapes:
        A = torch.randn(M, K, device="cuda")
        B = torch.randn(N, K, device="cuda").t() if b == "weights" else torch.randn(K, N, device="cuda")
        C = torch.empty(M, N, device="cuda")
        ref = A.double() @ B.double()
        row = {"shape": [M, N, K, b], "flops": 2.0 * M * N * K}
        cb = None
        for v, (_, direct) in VARIANTS.items():
            sk.WG_DIRECT_MAX_COLUMN_TILES = 10**9 if direct else default_direct
            k = kgen.build(specs[(M, N, K)][v])
            k._plans.clear()
            err = poisoned_error(lambda k=k: k(A, B, out=C), C, ref)
            if not err <= tolerance("float32", K):
                bad += 1
                print("WRONG", v, M, N, K, b, err, flush=True)
            plan = list(k._plans.values())[-1]
            row[v + "_launches"] = [kind for kind, _, _ in plan.launches]
            t = _time_pair(lambda k=k: k(A, B, out=C), lambda: torch.matmul(A, B, out=C), 60.0)
            cb = t["peer_single"] if cb is None else min(cb, t["peer_single"])
            row[v] = t["kgen_single"]
            row[v + "_pipe"] = t["kgen_pipe"]
        sk.WG_DIRECT_MAX_COLUMN_TILES = default_direct
        row["cublas"] = cb
        rows.append(row)
        print(f"{M}x{N}x{K} {b} {row['flops']:.2g} flops: cuBLAS {cb * 1e3:.1f}us " +
              " ".join(f"{v} {cb / row[v]:.2f}({len(row[v + '_launches'])})" for v in VARIANTS), flush=True)
    for v in VARIANTS:
        xs = [r["cublas"] / r[v] for r in rows]
        print(f"{v:16s} geomean {geomean(xs):.3f}x cuBLAS, lowest {min(xs):.2f}x")
    print("wrong results:", bad)
    json.dump({"device": torch.cuda.get_device_name(), "seed": seed, "rows": rows},
              open(f"{OUT}/wgmma_small_{seed}.json", "w"), indent=1)


if __name__ == "__main__":
    main()
