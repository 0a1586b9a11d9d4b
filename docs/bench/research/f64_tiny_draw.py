"""Draw float64 products of a small side of 9-64 against a large side below 1024 (K 64-8192,
all log-uniform; few rows or few columns in turn), leaving out those the float64 few-column
tiles take (TensorMatmul.few_columns_f64_suits). They ran on the tiled SIMT family (the shipped
table's choice); the check is whether the skinny SIMT forms (K split across blocks, one
launch) run them faster as users call.

  python docs/bench/research/f64_tiny_draw.py SEED COUNT [LARGE_MAX]     # prints MxNxK,...

LARGE_MAX (default 1023) bounds the large side: 511 draws only products the float64 rule
(Skinny.suits, SMALL_SIMT_F64_LARGE) sends to the skinny forms."""
import math
import random
import sys

from kgen.ops.tensorcore import TensorMatmul


def main() -> None:
    seed, count = sys.argv[1], int(sys.argv[2])
    large_max = int(sys.argv[3]) if len(sys.argv) > 3 else 1023
    rng = random.Random(f"f64 tiny {seed}")

    def log_uniform(lo: int, hi: int) -> int:
        return int(round(2 ** rng.uniform(math.log2(lo), math.log2(hi))))

    out: list[str] = []
    while len(out) < count:
        small, K = log_uniform(9, 64), log_uniform(64, 8192)
        large = log_uniform(small, large_max)
        M, N = (small, large) if len(out) % 2 == 0 else (large, small)
        if TensorMatmul.few_columns_f64_suits(M, N, K):
            continue
        out.append(f"{M}x{N}x{K}")
    print(",".join(out))


if __name__ == "__main__":
    main()
