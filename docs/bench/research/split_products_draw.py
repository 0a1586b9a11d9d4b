"""Draw float32 products that kgen.matmul runs as three TF32 products, for a stand-in H100 (sm_90,
132 SMs) and an empty tuning database, B row-major and W.t() in turn:
- on the wgmma kernel (the split copies first; default): M, N and K log-uniform in LO-HI
  (256-8192), at most 2^37 flops;
- with --route mma_sync, on the mma.sync kernel (the split in registers, one launch): M and N
  log-uniform in 256-4096, K in 128-4096 (to set the wgmma split beside it: `SHAPES=...
  ONLY=wgsplit short_k_split.py`).

  python docs/bench/research/split_products_draw.py SEED COUNT [LO-HI] [--route mma_sync]
      # prints MxNxK:row|col,... (SHAPES of short_k_split.py; precompile.py's list with float32:)"""
import argparse
import math
import random

from precompile import strided   # this folder

from kgen.tune import ahead, dispatch


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("seed")
    ap.add_argument("count", type=int)
    ap.add_argument("sides", nargs="?", default="256-8192", help="LO-HI of M, N and K (the wgmma route)")
    ap.add_argument("--route", choices=("wgmma", "mma_sync"), default="wgmma")
    args = ap.parse_args()
    dev = ahead.stand_in_device("sm_90", "NVIDIA H100 80GB HBM3", 132)
    if args.route == "wgmma":
        rng = random.Random(f"split copies {args.seed}")
        lo, hi = (int(v) for v in args.sides.split("-"))
        sides, k_range, max_flops = (lo, hi), (lo, hi), 2 ** 37
    else:
        rng = random.Random(f"mma split region {args.seed}")
        sides, k_range, max_flops = (256, 4096), (128, 4096), math.inf

    def log_uniform(lo: int, hi: int) -> int:
        return int(round(2 ** rng.uniform(math.log2(lo), math.log2(hi))))

    out: list[str] = []
    while len(out) < args.count:
        M, N, K = log_uniform(*sides), log_uniform(*sides), log_uniform(*k_range)
        if 2 * M * N * K > max_flops:
            continue
        layout = "col" if len(out) % 2 else "row"
        B = strided(K, N, 1, K, 4) if layout == "col" else strided(K, N, N, 1, 4)
        spec = dispatch.call_spec(strided(M, K, K, 1, 4), B, device=dev, db=False)
        if spec.kernel == "tensor_matmul" and spec.split_tf32 and spec.instruction == args.route:
            out.append(f"{M}x{N}x{K}:{layout}")
    print(",".join(out))


if __name__ == "__main__":
    main()
