"""Clusters of two transposed tiles that share the weight's tile (swap_ab with cluster=2: row
tiles 2i and 2i + 1 of one column tile, each block loading half of B's tile into both by TMA
multicast, so B's share of the L2 reads halves). For each 16-bit product (B as W.t() or
row-major), device time of
- default: the spec dispatch picks with an empty database;
- default_c2: the default in clusters of two, where it is a transposed tile B reads by TMA as
  it is, K whole or split in a workspace, with two row tiles or more;
- pair<BN>: the rows in two tiles of half (rounded up to 8), BN columns (each of BNS), the
  deepest ring for one block an SM (two where the pairs' blocks pass the SMs), cluster=2 (left
  out where it is default_c2);
and cuBLAS through torch, every result checked against float64 first on a NaN-poisoned output
(swap_fill_sweep.time_ways: CUDA graphs, operands rotated past L2 "_cold" and the same every
call "_warm").
Products: SHAPES (MxNxK,...) or COUNT drawn with SEED: rows ROWS, N in N_RANGE, K in K_RANGE,
log-uniform, N and K rounded up to a multiple of MULTIPLE (1); ORDERS (col, row); DTYPE
(bfloat16). Output: $OUT/swap_cluster_<SEED>.json and a line a product. `--specs` builds every
spec without a GPU (KGEN_ARCH, default sm_90)."""
import json
import math
import os
import random
import sys

from swap_fill_sweep import build_specs, env_range   # this folder: run from it or with it on the path

from kgen.ops.tensorcore import TensorMatmul as T
from kgen.ops.tensorcore import wgmma_ring_stages

SEED = int(os.environ.get("SEED", "26001"))
COUNT = int(os.environ.get("COUNT", "8"))
ROWS = env_range("ROWS", "129-256")
N_RANGE = env_range("N_RANGE", "4096-16384")
K_RANGE = env_range("K_RANGE", "2048-16384")
ORDERS = os.environ.get("ORDERS", "col").split(",")
DTYPE = os.environ.get("DTYPE", "bfloat16")
MULTIPLE = int(os.environ.get("MULTIPLE", "1"))
BNS = tuple(int(v) for v in os.environ.get("BNS", "128,192").split(","))
SMS = 132


def draw() -> list[tuple[int, int, int]]:
    if os.environ.get("SHAPES"):
        return [tuple(int(v) for v in s.split("x")) for s in os.environ["SHAPES"].split(",")]
    rng = random.Random(SEED)

    def log_uniform(lo, hi):
        return int(round(math.exp(rng.uniform(math.log(lo), math.log(hi)))))

    out = []
    for _ in range(COUNT):
        M = rng.randint(*ROWS)
        N, K = (-(-log_uniform(*r) // MULTIPLE) * MULTIPLE for r in (N_RANGE, K_RANGE))
        out.append((M, N, K))
    return out


def variants(M: int, N: int, K: int, order: str) -> dict:
    p = {"M": M, "N": N, "K": K}
    default = T.default_spec(p, DTYPE).replace(layout_b=order)
    out = {"default": default}
    plain = (default.swap_ab and not (default.b_realign or default.b_phased or default.stream_k)
             and default.wave_tail == 1 and default.split_merge == "workspace")
    if plain and -(-M // default.tile[0]) >= 2:
        out["default_c2"] = default.replace(cluster=2)
    bm = -(-((M + 1) // 2) // 8) * 8
    for BN in BNS:
        blocks = 2 * -(-N // BN)
        per_sm = 2 if blocks > SMS else 1
        try:
            pair = T(dtype=DTYPE, tile=(bm, BN, 64), warp_tile=(bm, 64), stages=wgmma_ring_stages(bm, BN, per_sm),
                     instruction="wgmma", swap_ab=True, layout_b=order, cluster=2)
        except ValueError:
            continue
        if pair not in out.values():
            out[f"pair{BN}"] = pair
    return out


def cases() -> list:
    return [((M, N, K), order, variants(M, N, K, order)) for M, N, K in draw() for order in ORDERS]


def main() -> None:
    import torch
    from swap_fill_sweep import sweep

    rows = []
    for row, ways in sweep(torch, cases(), 10, DTYPE):
        rows.append(row)
        (M, N, K), order = row["shape"], row["order"]
        cub = row["cublas_cold"]
        print(f"{M}x{N}x{K} {order}: cublas {cub:.1f} " + "  ".join(
            f"{n} {row[n + '_cold']:.1f} ({cub / row[n + '_cold']:.3f}x)" for n in ways if n != "cublas")
              + f"  err {max(row[n + '_err'] for n in ways):.1e}", flush=True)
        with open(os.path.join(os.environ.get("OUT", "."), f"swap_cluster_{SEED}.json"), "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "seed": SEED, "dtype": DTYPE, "rows": rows}, f)


if __name__ == "__main__":
    if sys.argv[1:] == ["--specs"]:
        build_specs(cases(), os.environ.get("KGEN_ARCH", "sm_90"))
    else:
        main()
