"""Print a comma-separated list of model-layer products for `kgen bench calls matmul --shapes`:
COUNT products drawn with SEED at run time, the rows log-uniform in LO-HI, (N, K) one of the
projection sides of common decoder models (attention, gate/up and down projections of
4096- to 8192-wide models, several sizes). The sides are a family, not a list fitted to: a draw
decides which of them, and with how many rows, a run measures.

    kgen bench calls matmul --shapes $(python model_layer_shapes.py SEED COUNT LO HI) --weights --dtype D
"""
import math
import random
import sys

DIMS = [(4096, 4096), (12288, 4096), (11008, 4096), (4096, 11008), (14336, 4096), (4096, 14336),
        (6144, 4096), (1024, 4096), (5120, 5120), (15360, 5120), (13824, 5120), (5120, 13824),
        (8192, 8192), (10240, 8192), (28672, 8192), (8192, 28672), (3072, 3072), (9216, 3072),
        (8192, 3072), (3072, 8192), (2048, 2048), (5632, 2048), (2048, 5632), (18944, 3584),
        (3584, 18944), (4608, 3584), (27648, 5120), (5120, 27648), (7168, 5120), (2560, 2560)]


def draw(seed: int, count: int, lo: int, hi: int) -> list[str]:
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        m = int(round(math.exp(rng.uniform(math.log(lo), math.log(hi)))))
        n, k = rng.choice(DIMS)
        out.append(f"{m}x{n}x{k}")
    return out


if __name__ == "__main__":
    seed, count, lo, hi = (int(v) for v in sys.argv[1:5])
    print(",".join(draw(seed, count, lo, hi)))
