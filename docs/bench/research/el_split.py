"""K splits for element_spec's 64x64 blocks (four an SM) where they are 100 or more: device time
(a CUDA graph over operands and outputs rotated past L2) of element_spec with K split 1-4 ways
(slices of at least 128 k), beside cuBLAS; each result first checked against float64 with the
output NaN-poisoned. Shapes: kgen bench calls' general draw (SEED, 6000 drawn) kept where the
element-load rule takes them (rows not 16-byte aligned), K is at least 512 and the 64x64 tiles
number 100-399; the first COUNT (12). DTYPE (bfloat16). Output: $OUT/el_split_<SEED>.json."""
import os

from kgen.bench.calls import random_matmul_shapes
from kgen.ops.tensorcore import TensorMatmul as T

SEED = int(os.environ.get("SEED", "9611"))
COUNT = int(os.environ.get("COUNT", "12"))
DTYPE = os.environ.get("DTYPE", "bfloat16")


def shapes():
    out = []
    for M, N, K in random_matmul_shapes(6000, SEED):
        tiles = -(-M // 64) * -(-N // 64)
        if (K >= 512 and 100 <= tiles < 400 and (N % 8 or K % 8)
                and T.element_loads_suits(M, N, K, DTYPE) and not T.short_k_suits(M, N, K, DTYPE)):
            out.append((M, N, K))
    return out[:COUNT]


def main():
    from el_tiles import measure   # this folder: the same measurement

    todo = []
    for M, N, K in shapes():
        base = T.element_spec({"M": M, "N": N, "K": K}, DTYPE)
        todo.append(((M, N, K), {f"split{s}": base.replace(split_k=s) for s in (1, 2, 3, 4) if K // s >= 128}))
    measure(todo, "el_split", SEED, DTYPE, public=False)


if __name__ == "__main__":
    main()
