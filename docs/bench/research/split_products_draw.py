"""Draw float32 products that kgen.matmul runs as three TF32 products, for a stand-in H100 (sm_90,
132 SMs) and an empty tuning database, B row-major and W.t() in turn:
- on the wgmma kernel (the split copies first; default): M, N and K log-uniform in LO-HI
  (256-8192), at most 2^37 flops, outside the region --route deep draws from (the region the
  split took before that rule: seeds 114001-114004 were drawn then);
- with --route mma_sync, on the mma.sync kernel (the split in registers, one launch): M and N
  log-uniform in 256-4096, K in 128-4096 (to set the wgmma split beside it: `SHAPES=...
  ONLY=wgsplit short_k_split.py`), with the deep region below counted as it was before that
  rule (seeds 114101-114102 were drawn then);
- with --route deep, on the wgmma kernel from SPLIT_TF32_DEEP_MIN_MACS to SPLIT_TF32_MIN_MACS
  multiply-adds (the products the K >= SPLIT_TF32_DEEP_K rule takes): M and N log-uniform in
  512-4096, K in 256-4096.

  python docs/bench/research/split_products_draw.py SEED COUNT [LO-HI] [--route mma_sync|deep]
      # prints MxNxK:row|col,... (SHAPES of short_k_split.py; precompile.py's list with float32:)"""
import argparse
import math
import random

from precompile import strided   # this folder

from kgen.ops.tensorcore import (SPLIT_MMA_MIN_TILES, SPLIT_TF32_DEEP_K, SPLIT_TF32_DEEP_MIN_MACS, SPLIT_TF32_MIN_MACS,
                                 SPLIT_TF32_MIN_SIDE, c_tiles)
from kgen.tune import ahead, dispatch


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("seed")
    ap.add_argument("count", type=int)
    ap.add_argument("sides", nargs="?", default="256-8192", help="LO-HI of M, N and K (the wgmma route)")
    ap.add_argument("--route", choices=("wgmma", "mma_sync", "deep"), default="wgmma")
    args = ap.parse_args()
    dev = ahead.stand_in_device("sm_90", "NVIDIA H100 80GB HBM3", 132)
    if args.route == "wgmma":
        rng = random.Random(f"split copies {args.seed}")
        lo, hi = (int(v) for v in args.sides.split("-"))
        sides, k_range, max_flops = (lo, hi), (lo, hi), 2 ** 37
    elif args.route == "mma_sync":
        rng = random.Random(f"mma split region {args.seed}")
        sides, k_range, max_flops = (256, 4096), (128, 4096), math.inf
    else:
        rng = random.Random(f"deep split rule {args.seed}")
        sides, k_range, max_flops = (512, 4096), (256, 4096), math.inf
    # multiply-adds from lo up to, not including, hi
    macs = (SPLIT_TF32_DEEP_MIN_MACS, SPLIT_TF32_MIN_MACS) if args.route == "deep" else (0, math.inf)
    instruction = "wgmma" if args.route == "deep" else args.route

    def log_uniform(lo: int, hi: int) -> int:
        return int(round(2 ** rng.uniform(math.log2(lo), math.log2(hi))))

    out: list[str] = []
    while len(out) < args.count:
        M, N, K = log_uniform(*sides), log_uniform(*sides), log_uniform(*k_range)
        deep = (SPLIT_TF32_DEEP_MIN_MACS <= M * N * K < SPLIT_TF32_MIN_MACS and K >= SPLIT_TF32_DEEP_K
                and min(M, N) >= SPLIT_TF32_MIN_SIDE)
        if 2 * M * N * K > max_flops or not macs[0] <= M * N * K < macs[1] or (args.route == "wgmma" and deep):
            continue
        layout = "col" if len(out) % 2 else "row"
        B = strided(K, N, 1, K, 4) if layout == "col" else strided(K, N, N, 1, 4)
        spec = dispatch.call_spec(strided(M, K, K, 1, 4), B, device=dev, db=False)
        taken = spec.kernel == "tensor_matmul" and spec.split_tf32 and spec.instruction == instruction
        if args.route == "mma_sync" and deep:
            # drawn before the deep rule, when the mma.sync split ran these (split_mma_suits then)
            taken = c_tiles(M, N, 64, 64) >= SPLIT_MMA_MIN_TILES
        if taken:
            out.append(f"{M}x{N}x{K}:{layout}")
    print(",".join(out))


if __name__ == "__main__":
    main()
