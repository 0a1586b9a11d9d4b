"""Shapes the float32 wgmma skinny forms take (Skinny.wgmma_suits), drawn at random for the
research scripts beside this file: 17-512 rows, a large side and K of 128-16384 (log-uniform),
a third with few columns instead of few rows, B row-major or a transposed N x K weight."""
import math
import random

from kgen.ops.skinny import Skinny


def wgmma_shapes(seed: int, count: int, max_flops: float) -> list[tuple[int, int, int, str]]:
    """(M, N, K, "row" | "weights") for `count` products of at most `max_flops` flops."""
    rng = random.Random(seed)

    def log_uniform(lo: int, hi: int) -> int:
        return int(round(2 ** rng.uniform(math.log2(lo), math.log2(hi))))

    shapes: list[tuple[int, int, int, str]] = []
    while len(shapes) < count:
        small, large, K = log_uniform(17, 512), log_uniform(128, 16384), log_uniform(128, 16384)
        if large < small or 2.0 * small * large * K > max_flops or not Skinny.wgmma_suits(small, large, K):
            continue
        M, N = (large, small) if rng.random() < 0.3 else (small, large)
        shapes.append((M, N, K, rng.choice(["row", "weights"])))
    return shapes
