"""K slices of element_spec's 64x64 blocks (16-bit operands read in place by mma.sync) added in a
thread block cluster (split_merge="cluster": one launch) against the spec kgen.matmul runs now
(K whole where it is short or the tiles many; else slices summed through a workspace by a
second launch). For each product: the dispatched spec, and the same spec with K split s ways
for each s of SPLITS (2,3,4,5,6,8; up to 16) that leaves every slice a 32-deep k step, merged in
a cluster, and "workspace": element_spec's split for a GPU without clusters (slices summed through
a workspace by a second launch). Each is timed three ways by kgen.bench.skinny.measure_ways: its error against float64
(output of a first call), device time (CUDA graph, out= given) and one call between CUDA
events (host time included), beside cuBLAS (torch.mm) and kgen.matmul.

Shapes: kgen bench calls' general draw (random_matmul_shapes(8000, SEED)) kept where the
spec kgen.matmul would run for LAYOUT ("row": B row-major, "col": B = W.t()) is element_spec's
64 x 64 x 32 tile with fewer than ELEMENT_SPLIT_TILES tiles and K is at least KMIN (64); the
first COUNT (24). DTYPE (bfloat16). Output: $OUT/el_cluster_<DTYPE>_<LAYOUT>_<SEED>.json, a line a
product.

  SEED=1 LAYOUT=col DTYPE=float16 python docs/bench/research/el_cluster.py
  SEED=117004 KMIN=2561 SPLITS=8,12,16 python docs/bench/research/el_cluster.py
  python docs/bench/research/el_cluster.py --list     # the shapes and specs only (no GPU)"""
import json
import os
import sys

import numpy as np

from kgen.bench.calls import random_matmul_shapes
from kgen.ops.tensorcore import ELEMENT_SPLIT_TILES, TensorMatmul, c_tiles

SEED = int(os.environ.get("SEED", "1"))
COUNT = int(os.environ.get("COUNT", "24"))
DTYPE = os.environ.get("DTYPE", "bfloat16")
LAYOUT = os.environ.get("LAYOUT", "row")
SPLITS = [int(s) for s in os.environ.get("SPLITS", "2,3,4,5,6,8").split(",") if s]
KMIN = int(os.environ.get("KMIN", "64"))


def stand_ins(M: int, N: int, K: int):
    """numpy arrays of the call's shapes and strides (no storage behind them)."""
    one = np.empty(1, np.float16)
    A = np.lib.stride_tricks.as_strided(one, (M, K), (2 * K, 2))
    strides = (2, 2 * K) if LAYOUT == "col" else (2 * N, 2)
    return A, np.lib.stride_tricks.as_strided(one, (K, N), strides)


def products(device=None):
    """[((M, N, K), {name: spec})] of the draw, as the docstring says."""
    from kgen.tune import ahead, dispatch

    device = device or ahead.stand_in_device("sm_90", "NVIDIA H100 80GB HBM3", 132)
    out = []
    for M, N, K in random_matmul_shapes(8000, SEED):
        if K < KMIN:
            continue
        spec = dispatch.call_spec(*stand_ins(M, N, K), device=device, db=False, dtype=DTYPE)
        if not (isinstance(spec, TensorMatmul) and not spec.wgmma and not spec.repack
                and spec.tile == (64, 64, 32) and c_tiles(M, N, 64, 64) < ELEMENT_SPLIT_TILES):
            continue
        ways = {"dispatched": spec}
        workspace = TensorMatmul.element_spec({"M": M, "N": N, "K": K}, DTYPE, clusters=False).replace(
            layout_b=spec.layout_b)
        if workspace != spec:
            ways["workspace"] = workspace
        for s in SPLITS:
            if -(-K // 32) >= s:
                ways[f"c{s}"] = spec.replace(split_k=s, split_merge="cluster")
        out.append(((M, N, K), ways))
        if len(out) == COUNT:
            break
    return out


def main():
    if "--list" in sys.argv:
        for (M, N, K), ways in products():
            print(f"{M}x{N}x{K} tiles {c_tiles(M, N, 64, 64)} dispatched split {ways['dispatched'].split_k} "
                  f"{ways['dispatched'].split_merge}")
        return
    import torch

    import kgen
    from kgen.bench.skinny import build_ways, format_ways, measure_ways

    result = {"device": torch.cuda.get_device_name(), "dtype": DTYPE, "layout": LAYOUT, "seed": SEED, "rows": []}
    tdt = getattr(torch, DTYPE)
    for (M, N, K), specs in products():
        torch.manual_seed(M * 7919 + N * 31 + K)
        A = torch.randn(M, K, device="cuda").to(tdt)
        B = (torch.randn(N, K, device="cuda").to(tdt).t() if LAYOUT == "col"
             else torch.randn(K, N, device="cuda").to(tdt))
        ref = A.double() @ B.double()
        row = {"shape": [M, N, K], "tiles": c_tiles(M, N, 64, 64),
               "splits": {n: [s.split_k, s.split_merge] for n, s in specs.items()}}
        ways = {"cublas": lambda a, b, out=None: torch.mm(a, b, out=out), "public": kgen.matmul,
                **build_ways(kgen.build, specs, row)}
        measure_ways(torch, ways, A, B, ref, row)
        result["rows"].append(row)
        errs = [row[n + "_err"] for n in ways if n + "_err" in row]
        print(f"{M}x{N}x{K} ({row['tiles']} tiles, split {specs['dispatched'].split_k}): "
              + format_ways(row, ways) + f"  err {max(errs):.1e}", flush=True)
    with open(os.path.join(os.environ.get("OUT", "."), f"el_cluster_{DTYPE}_{LAYOUT}_{SEED}.json"), "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    main()
