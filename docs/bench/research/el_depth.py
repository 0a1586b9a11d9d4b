"""Whether the 16-bit element tiles (element_spec: 64x64 blocks, 2 stages, four an SM, K split)
want a deeper ring where K is long and the tiles are few: each block then walks many k tiles
one after another with two in flight, so DRAM latency rather than bandwidth may set its pace
(542x62x5890 bfloat16 as users call it: 0.79x cuBLAS, H100, docs/bench/staged_pairs_h100_1207).
Device time (a CUDA graph over operands and outputs rotated past L2) of kgen.matmul's default and
of the same spec with 3 and 4 stages, and with twice the K slices (up to 16), beside cuBLAS; each
result first checked against float64 with the output NaN-poisoned. Shapes: kgen bench calls'
general draw (SEED, 3000 drawn) kept where dispatch's element-load rule sends them to these tiles
with K split (K of ELEMENT_SPLIT_MIN_K or more, fewer than ELEMENT_SPLIT_TILES tiles), both sides
17 or more; the first COUNT (10). DTYPE (bfloat16). Output: $OUT/el_depth_<SEED>.json."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from el_tiles import element_products, measure  # noqa: E402

from kgen.ops.tensorcore import ELEMENT_SPLIT_MIN_K, ELEMENT_SPLIT_TILES  # noqa: E402
from kgen.ops.tensorcore import TensorMatmul as T  # noqa: E402
from kgen.ops.tensorcore import c_tiles  # noqa: E402

SEED = int(os.environ.get("SEED", "9801"))
COUNT = int(os.environ.get("COUNT", "10"))
DTYPE = os.environ.get("DTYPE", "bfloat16")


def shapes():
    return element_products(SEED, COUNT, DTYPE, lambda M, N, K: K >= ELEMENT_SPLIT_MIN_K and min(M, N) >= 17
                            and c_tiles(M, N, 64, 64) < ELEMENT_SPLIT_TILES)


def variants(M, N, K):
    base = T.element_spec({"M": M, "N": N, "K": K}, DTYPE)
    out = {"default": base}
    for stages in (3, 4):
        out[f"s{stages}"] = base.replace(stages=stages)
    more = min(16, 2 * base.split_k)   # both merges take up to 16 slices
    if more > base.split_k and base.split_plan(K, more)[0] > base.split_k:
        out["split2x"] = base.replace(split_k=base.split_plan(K, more)[0])
        out["split2x_s4"] = out["split2x"].replace(stages=4)
    return out


def main():
    measure([(s, variants(*s)) for s in shapes()], "el_depth")


if __name__ == "__main__":
    main()
