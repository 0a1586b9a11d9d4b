"""The transposed 16-bit tiles (TensorMatmul.swap_ab) against weights of more than one wave of
64-column tiles (N of 8449-16896: the MLP sides of model layers, 11008, 14336): the rule runs two
blocks an SM, each with half the ring, and no K split. Does another tile, split or residency
stream the weight faster?

Products drawn at random (env SEED, COUNT, ROWS "lo-hi", default 1-16): M log-uniform in ROWS, N
of TILES "lo-hi" tiles of 64 columns (default 133-264) and K log-uniform in 1024-16384, both multiples of 64, weights
of 16 MB or more; both storage orders of B; bfloat16. Variants: the default, and A's rows in one
tile of the next multiple of 8 with 64-256 columns a block, one or two blocks an SM, K in 1-8
slices merged in clusters wherever the clusters all run at once (swap_fill_sweep.add_slices).
Device time from a CUDA graph, operands rotated past L2 ("_cold") and the same every call
("_warm"), each result checked against float64 first (outputs NaN-poisoned). The bandwidth bound
is the bytes of A, B and C over the copy bandwidth measured in the same run. SHAPES="MxNxK,...":
those products instead. Output: $OUT/swap_many_tiles_<SEED>.json."""
import json
import math
import os
import random

from swap_fill_sweep import CLUSTER_CAPACITY, add_slices, sweep  # this folder: run from it or with it on the path
from swap_wide_sweep import compiled_only

from kgen.ops.tensorcore import TensorMatmul as T
from kgen.ops.tensorcore import wgmma_ring_stages

SEED = int(os.environ.get("SEED", "10601"))
COUNT = int(os.environ.get("COUNT", "8"))
ROWS = tuple(int(r) for r in os.environ.get("ROWS", "1-16").split("-"))
TILES = tuple(int(t) for t in os.environ.get("TILES", "133-264").split("-"))
# SHAPES="MxNxK,...": these products instead of a draw.
SHAPES = [tuple(int(v) for v in s.split("x")) for s in os.environ.get("SHAPES", "").split(",") if s]


def shapes():
    if SHAPES:
        return SHAPES
    rng = random.Random(SEED)
    out = []
    while len(out) < COUNT:
        M = min(ROWS[1], int(math.exp(rng.uniform(math.log(ROWS[0]), math.log(ROWS[1] + 1)))))
        N = 64 * rng.randint(*TILES)
        K = -(-int(math.exp(rng.uniform(math.log(1024), math.log(16384)))) // 64) * 64
        if N * K * 2 >= 16e6:
            out.append((M, N, K))
    return out


def variants(M, N, K, order):
    p = {"M": M, "N": N, "K": K}
    out = {"default": T.default_spec(p, "bfloat16").replace(layout_b=order)}
    bm = -(-M // 8) * 8
    for BN in (64, 128, 192, 256):
        for per_sm in (1, 2):
            try:
                base = T(dtype="bfloat16", tile=(bm, BN, 64), warp_tile=(bm, 64),
                         stages=wgmma_ring_stages(bm, BN, per_sm), instruction="wgmma", swap_ab=True, layout_b=order)
            except ValueError:
                continue
            add_slices(out, f"w{BN}/{per_sm}", base, -(-N // BN), K, CLUSTER_CAPACITY[per_sm])
    return out


def main():
    import torch

    from kgen.bench.skinny import copy_bandwidth

    bw = copy_bandwidth(torch, 20)
    todo = compiled_only([((M, N, K), order, variants(M, N, K, order)) for M, N, K in shapes()
                          for order in ("col", "row")])
    rows = []
    for row, ways in sweep(torch, todo, 10):
        (M, N, K), order = row["shape"], row["order"]
        row["bound_us"] = 2 * (M * K + K * N + M * N) / bw * 1e6
        rows.append(row)
        best = min((n for n in ways if n not in ("cublas", "default")), key=lambda n: row[n + "_cold"])
        print(f"{M}x{N}x{K} {order}: bound {row['bound_us']:.1f} cublas {row['cublas_cold']:.1f} default "
              f"{row['default_cold']:.1f} best {best} {row[best + '_cold']:.1f} | "
              + " ".join(f"{n} {row[n + '_cold']:.1f}" for n in ways if n not in ("cublas", "default"))
              + f"  err {max(row[n + '_err'] for n in ways):.1e}", flush=True)
        with open(os.path.join(os.environ.get("OUT", "."), f"swap_many_tiles_{SEED}.json"), "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "seed": SEED, "copy_bandwidth": bw,
                       "rows_range": ROWS, "rows": rows}, f)


if __name__ == "__main__":
    main()
