"""Whether the short-K rule's tiles (two to four blocks an SM) beat the mma.sync default
(128x128 blocks of four warps, 255 registers) on the mid-size 16-bit products that run mma.sync
with element loads (TensorMatmul.element_loads_suits; operands whose rows are not 16-byte
aligned): device time (a CUDA graph over operands and outputs rotated past L2) of kgen.matmul's
default and of each tile, K split as the mma.sync default splits it, or so that the blocks fill
the SMs' slots (132 x blocks an SM, slices of 128 k or more), beside cuBLAS. Each result is
first checked against float64 with the output NaN-poisoned. Shapes: kgen bench calls' general
draw (SEED, 3000 drawn) kept where the element-load rule or SMALL_PRODUCT_MACS sends them to
mma.sync, K is longer than SHORT_K_MAX and both sides are 128 or more; the first COUNT (12).
DTYPE (bfloat16). Output: $OUT/el_tiles_<SEED>.json and a line a product."""
import json
import os

import kgen
from kgen.bench.calls import random_matmul_shapes
from kgen.ops.tensorcore import SHORT_K_MAX, UNALIGNED_ELEMENT_MACS
from kgen.ops.tensorcore import TensorMatmul as T

SEED = int(os.environ.get("SEED", "9601"))
COUNT = int(os.environ.get("COUNT", "12"))
DTYPE = os.environ.get("DTYPE", "bfloat16")


def element_products(seed: int, count: int, dtype: str, keep) -> list[tuple[int, int, int]]:
    """The first `count` products of kgen bench calls' general draw (3000 drawn with `seed`) that
    the element-load rule sends to mma.sync (rows not 16-byte aligned, K past SHORT_K_MAX, not the
    swap or streaming tiles) and `keep(M, N, K)` accepts."""
    from kgen.tune.dispatch import matmul_family

    out = []
    for M, N, K in random_matmul_shapes(3000, seed):
        if (K > SHORT_K_MAX and M * N * K <= UNALIGNED_ELEMENT_MACS and (N % 8 or K % 8) and keep(M, N, K)
                and matmul_family(M, N, K, dtype) is T and not T.swap_suits(M, N, K, dtype)
                and not T.stream_suits(M, N, K, dtype)):
            out.append((M, N, K))
    return out[:count]


def shapes():
    return element_products(SEED, COUNT, DTYPE, lambda M, N, K: min(M, N) >= 128)


def variants(M, N, K):
    p = {"M": M, "N": N, "K": K}
    base = T.mma_default_spec(p, DTYPE).replace(repack=False)
    out = {"mma_default_el": base}
    for name, tile, warp, stages, blocks in (("b2", (128, 128, 32), (64, 32), 4, 2),
                                             ("b3", (128, 64, 32), (32, 32), 3, 3),
                                             ("b4", (64, 64, 32), (32, 32), 2, 4)):
        spec = base.replace(tile=tile, warp_tile=warp, stages=stages, min_blocks=blocks, split_k=1)
        out[name] = spec.replace(split_k=base.split_k)
        tiles = -(-M // tile[0]) * -(-N // tile[1])
        # slices of at least 128 k, so that the blocks fill the SMs' slots
        fill = min(16, -(-132 * blocks // tiles), max(1, K // 128)) if tiles < 132 * blocks else 1
        out[name + "_fill"] = spec.replace(split_k=fill)
    return out


def measure(todo, name: str, seed: int = SEED, dtype: str = DTYPE, public: bool = True):
    """Device time of each spec of [(shape, {name: spec})] in `dtype` beside cuBLAS (and
    kgen.matmul where `public`), each first checked against float64; rows printed and written
    to $OUT/<name>_<seed>.json."""
    import concurrent.futures as cf

    import torch

    from kgen.bench.skinny import Operands, checked_graph_time

    specs = {sp.key: sp for _, v in todo for sp in v.values()}
    with cf.ThreadPoolExecutor(16) as ex:
        list(ex.map(kgen.compile, specs.values()))
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    result = {"device": torch.cuda.get_device_name(), "dtype": dtype, "seed": seed, "rows": []}
    for (M, N, K), v in todo:
        ops = Operands(torch, M, N, K, dtype, "row", l2)
        ref = ops.A[0].double() @ ops.B[0].double()
        ways = {"cublas": lambda a, b, out: torch.mm(a, b, out=out), **({"public": kgen.matmul} if public else {}),
                **{n: kgen.build(s) for n, s in v.items()}}
        row = {"shape": [M, N, K], "splits": {n: s.split_k for n, s in v.items()}}
        for n, fn in ways.items():
            row[n + "_err"], row[n + "_us"], _ = checked_graph_time(
                torch, lambda a, b, c, fn=fn: fn(a, b, out=c), ops.A, ops.B, ops.C, ref, 15)
        result["rows"].append(row)
        print(f"{M}x{N}x{K}: " + " ".join(f"{n} {row[n + '_us']:.1f}" for n in ways) + f" splits {row['splits']}"
              + f" err {max(row[n + '_err'] for n in ways):.1e}", flush=True)
        del ops
        torch.cuda.empty_cache()
    with open(os.path.join(os.environ.get("OUT", "."), f"{name}_{seed}.json"), "w") as f:
        json.dump(result, f)


def main():
    measure([(s, variants(*s)) for s in shapes()], "el_tiles")


if __name__ == "__main__":
    main()
