"""16-bit products of 65-256 rows that TensorMatmul.default_spec runs on the general wgmma tiles
(N too wide for the transposed and the streaming tiles: 129-192 rows past N = 11264, 65-128 past
16896, as a fused MLP or an output layer gives a prefill chunk), against cuBLAS and other tiles
of the same kernel: 64x256 (a row tile of 64, more blocks), 128x128, the default's tiles with
the persistent schedule or in clusters of two (B's tile multicast to both row tiles), and the
transposed (swap_spec) and streaming (stream_spec, where it differs from those) tiles.
Products: SHAPES ("MxNxK,...") or a draw of COUNT (SEED; M log-uniform in ROWS, N log-uniform
in N_RANGE, K in K_RANGE, multiples of 128 and 64), kept where the default is the general tiles.
Device time from a CUDA graph with the same operands every call (from L2) and with operands
rotated past L2 (from HBM); every result checked against float64 first (swap_fill_sweep.sweep).
ORDERS picks B's storage orders (default col: B = W.t()).
SET=rows192: instead, products drawn whatever tiles the default takes (ROWS 129-192 suits), the
default against tiles of 192 rows (three consumer warpgroups) of 128 columns in 4 or 5 stages
and of 64 columns in 6. SET=rows192b: the default against 192 x 128 in 5 stages (where the
default is not that), 192 x 192 in 3 or 4, and 128 x 256 in 4 (the tiles before TALL_ROWS).
SET=heldout: the default against the spec the tree before TALL_ROWS picks (the recorded run,
heldout_20431.log, took an earlier form of the rule: 192 x 192 where its blocks filled 70% of
their last wave); SET=final: those two and 192 x 128 in 5 stages and 192 x 192 in 4 (where they
differ from the default).
Output: $OUT/wide_general_<SEED>.json."""
import json
import math
import os
import random

import torch
from swap_fill_sweep import sweep  # this folder: the scripts run from it or with it on the path

import kgen.ops.tensorcore as tc
from kgen.ops.tensorcore import TensorMatmul as T

SEED = int(os.environ.get("SEED", "20401"))
COUNT = int(os.environ.get("COUNT", "8"))
ROWS = tuple(int(v) for v in os.environ.get("ROWS", "65-256").split("-"))
N_RANGE = tuple(int(v) for v in os.environ.get("N_RANGE", "8448-65536").split("-"))
K_RANGE = tuple(int(v) for v in os.environ.get("K_RANGE", "1024-16384").split("-"))
ORDERS = os.environ.get("ORDERS", "col").split(",")
SET = os.environ.get("SET", "tiles")


def general(M, N, K):
    return not (T.swap_suits(M, N, K, "bfloat16") or T.stream_suits(M, N, K, "bfloat16"))


def shapes():
    if os.environ.get("SHAPES"):
        return [tuple(int(v) for v in s.split("x")) for s in os.environ["SHAPES"].split(",")]
    rng, out = random.Random(SEED), []
    while len(out) < COUNT:
        M = int(math.exp(rng.uniform(math.log(ROWS[0]), math.log(ROWS[1] + 1))))
        N = -(-int(math.exp(rng.uniform(*map(math.log, N_RANGE)))) // 128) * 128
        K = -(-int(math.exp(rng.uniform(*map(math.log, K_RANGE)))) // 64) * 64
        if ROWS[0] <= M <= ROWS[1] and (SET != "tiles" or general(M, N, K)):
            out.append((M, N, K))
    return out


def variants(M, N, K, order):
    p = {"M": M, "N": N, "K": K}
    d = T.default_spec(p, "bfloat16")
    if SET in ("heldout", "final"):   # the default against the tree before the rows-of-192 rules
        kept = tc.TALL_ROWS
        tc.TALL_ROWS = (0, -1)
        try:
            ways = {"default": d, "before": T.default_spec(p, "bfloat16")}
        finally:
            tc.TALL_ROWS = kept
        for BN, stages in ((128, 5), (192, 4)) if SET == "final" else ():
            ways[f"t192x{BN}/{stages}"] = T(dtype="bfloat16", tile=(192, BN, 64), warp_tile=(64, BN), stages=stages,
                                            instruction="wgmma")
    elif SET in ("rows192", "rows192b"):
        ways = {"default": d}
        tiles = ((128, 4), (128, 5), (64, 6)) if SET == "rows192" else ((128, 5), (192, 3), (192, 4))
        for BN, stages in tiles:
            ways[f"t192x{BN}/{stages}"] = T(dtype="bfloat16", tile=(192, BN, 64), warp_tile=(64, BN), stages=stages,
                                            instruction="wgmma")
        if SET == "rows192b":
            ways["t128x256/4"] = T(dtype="bfloat16", tile=(128, 256, 64), warp_tile=(64, 256), stages=4,
                                   instruction="wgmma")
    if SET != "tiles":
        return {n: s.replace(layout_b=order) for n, s in ways.items() if n == "default" or s != d}
    ways = {"default": d,
            "t64x256": d.replace(tile=(64, 256, 64), warp_tile=(64, 256), stages=5, split_k=1),
            "t128x128": d.replace(tile=(128, 128, 64), warp_tile=(64, 128), stages=6, split_k=1),
            "persistent": d.replace(persistent=True),
            "cluster2": d.replace(cluster=2),
            "swap": T.swap_spec(p, "bfloat16"),
            "stream": T.stream_spec(p, "bfloat16")}
    if ways["stream"] in (ways["t64x256"], d):
        del ways["stream"]
    return {n: s.replace(layout_b=order) for n, s in ways.items()}


def main():
    cases = [((M, N, K), order, variants(M, N, K, order)) for M, N, K in shapes() for order in ORDERS]
    rows = []
    for row, ways in sweep(torch, cases, 15):
        rows.append(row)
        (M, N, K), order = row["shape"], row["order"]
        err = max(row[n + "_err"] for n in ways if n != "cublas")
        print(f"{M}x{N}x{K} {order}: " + "  ".join(f"{n} {row[n + '_warm']:.1f}/{row[n + '_cold']:.1f}" for n in ways)
              + f"  err {err:.1e}", flush=True)
        assert err < 1e-2, f"{M}x{N}x{K} {order}: relative error {err:.1e}"
        with open(os.path.join(os.environ.get("OUT", "."), f"wide_general_{SEED}.json"), "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "rows": rows}, f)
    names = [n for n in (rows[0] if rows else []) if n.endswith("_cold") and n != "cublas_cold"
             and all(n in r for r in rows)]
    for n in names:
        g = math.exp(sum(math.log(r["cublas_cold"] / r[n]) for r in rows) / len(rows))
        w = math.exp(sum(math.log(r["cublas_warm"] / r[n[:-5] + "_warm"]) for r in rows) / len(rows))
        print(f"{n[:-5]}: x{w:.3f} cuBLAS from L2, x{g:.3f} from HBM (geometric means of {len(rows)})", flush=True)


if __name__ == "__main__":
    main()
