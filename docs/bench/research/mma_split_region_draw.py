"""Draw float32 products that kgen.matmul runs as three TF32 products on mma.sync (split_mma_spec:
the split in registers, one launch), for a stand-in H100 (sm_90, 132 SMs) and an empty tuning
database: M and N log-uniform in 256-4096, K in 128-4096, B row-major and W.t() in turn. Used to
set the wgmma split (copies first) beside the mma.sync split on the products the latter runs
(`SHAPES=... ONLY=wgsplit short_k_split.py`).

  python docs/bench/research/mma_split_region_draw.py SEED COUNT    # prints MxNxK:row|col,..."""
import math
import random
import sys

from precompile import strided   # this folder

from kgen.tune import ahead, dispatch


def main() -> None:
    seed, count = sys.argv[1], int(sys.argv[2])
    dev = ahead.stand_in_device("sm_90", "NVIDIA H100 80GB HBM3", 132)
    rng = random.Random(f"mma split region {seed}")

    def log_uniform(lo: int, hi: int) -> int:
        return int(round(2 ** rng.uniform(math.log2(lo), math.log2(hi))))

    out: list[str] = []
    while len(out) < count:
        M, N, K = log_uniform(256, 4096), log_uniform(256, 4096), log_uniform(128, 4096)
        layout = "col" if len(out) % 2 else "row"
        B = strided(K, N, 1, K, 4) if layout == "col" else strided(K, N, N, 1, 4)
        spec = dispatch.call_spec(strided(M, K, K, 1, 4), B, device=dev, db=False)
        if spec.kernel == "tensor_matmul" and spec.instruction == "mma_sync" and spec.split_tf32:
            out.append(f"{M}x{N}x{K}:{layout}")
    print(",".join(out))


if __name__ == "__main__":
    main()
