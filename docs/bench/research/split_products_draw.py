"""Draw float32 products that kgen.matmul runs as three TF32 products on the wgmma kernel (the
split copies first), for a stand-in H100 (sm_90, 132 SMs) and an empty tuning database: M, N and
K log-uniform in LO-HI (256-8192), at most 2^37 flops, B row-major and W.t() in turn.

  python docs/bench/research/split_products_draw.py SEED COUNT [LO-HI]
      # prints MxNxK:row|col,... (SHAPES of short_k_split.py; precompile.py's list with float32:)"""
import math
import random
import sys

from precompile import strided   # this folder

from kgen.tune import ahead, dispatch


def main() -> None:
    seed, count = sys.argv[1], int(sys.argv[2])
    lo, hi = (int(v) for v in (sys.argv[3] if len(sys.argv) > 3 else "256-8192").split("-"))
    dev = ahead.stand_in_device("sm_90", "NVIDIA H100 80GB HBM3", 132)
    rng = random.Random(f"split copies {seed}")

    def log_uniform(lo: int, hi: int) -> int:
        return int(round(2 ** rng.uniform(math.log2(lo), math.log2(hi))))

    out: list[str] = []
    while len(out) < count:
        M, N, K = log_uniform(lo, hi), log_uniform(lo, hi), log_uniform(lo, hi)
        if 2 * M * N * K > 2 ** 37:
            continue
        layout = "col" if len(out) % 2 else "row"
        B = strided(K, N, 1, K, 4) if layout == "col" else strided(K, N, N, 1, 4)
        spec = dispatch.call_spec(strided(M, K, K, 1, 4), B, device=dev, db=False)
        if spec.kernel == "tensor_matmul" and spec.instruction == "wgmma" and spec.split_tf32:
            out.append(f"{M}x{N}x{K}:{layout}")
    print(",".join(out))


if __name__ == "__main__":
    main()
