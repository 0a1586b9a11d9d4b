"""Which tensor-core spec a 16-bit product of a short K (and so a large output beside its inputs)
wants: device time (a CUDA graph over operands and outputs rotated past L2) of kgen.matmul's
default and of mma.sync and wgmma variants that keep more blocks on an SM (smaller tiles, fewer
stages, min_blocks), beside cuBLAS (torch.mm) and a fill of the output (the write floor).
Each result is first checked against float64 with the output NaN-poisoned.
Shapes: M, N log-uniform from 512 to 8192, K from 16 to KMAX (128), N odd half the time, drawn
with SEED (9401); COUNT of them (12); B row-major (LAYOUT=col: W.t()). DTYPE (bfloat16). ALIGNED=1
rounds every N up to a multiple of 8 (the products the wgmma kernel keeps against a row-major B).
Output: $OUT/short_k_tiles_<SEED>.json and a line a product."""
import json
import math
import os
import random

import kgen
from kgen.ops.tensorcore import TensorMatmul as T

SEED = int(os.environ.get("SEED", "9401"))
COUNT = int(os.environ.get("COUNT", "12"))
KMAX = int(os.environ.get("KMAX", "128"))
DTYPE = os.environ.get("DTYPE", "bfloat16")
LAYOUT = os.environ.get("LAYOUT", "row")
ALIGNED = os.environ.get("ALIGNED", "0") == "1"


def short_k_shapes(seed: int, count: int, kmax: int):
    """M, N log-uniform from 512 to 8192, K from 16 to kmax, N odd half the time."""
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        M, N = (int(2 ** rng.uniform(9, 13)) for _ in range(2))
        K = int(2 ** rng.uniform(4, math.log2(kmax)))
        N = N | 1 if rng.random() < 0.5 else N
        out.append((M, -(-N // 8) * 8 if ALIGNED else N, K))
    return out


def shapes():
    return short_k_shapes(SEED, COUNT, KMAX)


def variants():
    d = DTYPE

    def el(tile, warp, stages, mb=0):
        return T(dtype=d, tile=tile, warp_tile=warp, stages=stages, repack=False, min_blocks=mb)

    def wg(tile, stages):
        return T(dtype=d, tile=tile, warp_tile=(64, tile[1]), stages=stages, instruction="wgmma")

    return {"el_64x64_s2_b4": el((64, 64, 32), (32, 32), 2, 4),
            "el_64x64_s4_b4": el((64, 64, 32), (32, 32), 4, 4),
            "el_128x64_s3_b3": el((128, 64, 32), (32, 32), 3, 3),
            "el_128x128w64x32_s4_b2": el((128, 128, 32), (64, 32), 4, 2),
            "el_64x128_s4_b3": el((64, 128, 32), (32, 64), 4, 3),
            "el_64x128_k64_s2_b2": el((64, 128, 64), (32, 64), 2, 2),
            "wg_64x128_s2": wg((64, 128, 64), 2),
            "wg_64x256_s2": wg((64, 256, 64), 3),
            "wg_128x128_s3": wg((128, 128, 64), 3),
            "wg_128x64_s3": wg((128, 64, 64), 3),
            # A short K fills one or two k tiles: stages past that only take shared memory, and
            # two stages let two 128x256 blocks share an SM where four hold it to one.
            "wg_128x256_s2": wg((128, 256, 64), 2),
            "wg_128x128_s2": wg((128, 128, 64), 2),
            # One block an SM walking the C tiles: its producer loads the next tile's k tiles
            # while the consumers store this one, where one block a tile stores with the SM idle.
            "wg_128x256_s2_p": wg((128, 256, 64), 2).replace(persistent=True),
            "wg_128x256_s3_p": wg((128, 256, 64), 3).replace(persistent=True),
            "wg_128x128_s4_p": wg((128, 128, 64), 4).replace(persistent=True)}


def main():
    import concurrent.futures as cf

    import torch

    from kgen.bench.skinny import Operands, checked_graph_time, time_graph

    todo = shapes()
    fixed = variants()
    defaults = {}
    for M, N, K in todo:
        p = {"M": M, "N": N, "K": K}
        defaults[(M, N, K)] = {"mma_default_el": T.mma_default_spec(p, DTYPE).replace(repack=False),
                               "wgmma_default": T.wgmma_default_spec(p, DTYPE)}
    specs = {s.replace(layout_b=LAYOUT).key: s.replace(layout_b=LAYOUT)
             for s in list(fixed.values()) + [s for v in defaults.values() for s in v.values()]}
    with cf.ThreadPoolExecutor(16) as ex:
        list(ex.map(kgen.compile, specs.values()))
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    result = {"device": torch.cuda.get_device_name(), "dtype": DTYPE, "seed": SEED, "layout": LAYOUT, "rows": []}
    for M, N, K in todo:
        ops = Operands(torch, M, N, K, DTYPE, LAYOUT, l2)
        ref = ops.A[0].double() @ ops.B[0].double()
        ways = {"cublas": lambda a, b, out: torch.mm(a, b, out=out), "public": kgen.matmul,
                **{n: kgen.build(s.replace(layout_b=LAYOUT)) for n, s in {**defaults[(M, N, K)], **fixed}.items()}}
        row = {"shape": [M, N, K]}
        for n, fn in ways.items():
            row[n + "_err"], row[n + "_us"], _ = checked_graph_time(
                torch, lambda a, b, c, fn=fn: fn(a, b, out=c), ops.A, ops.B, ops.C, ref, 15)
        row["fill_us"] = time_graph(torch, [(lambda c=c: c.fill_(1.0)) for c in ops.C], 15)
        result["rows"].append(row)
        best = min((n for n in ways if n != "cublas"), key=lambda n: row[n + "_us"])
        print(f"{M}x{N}x{K}: cublas {row['cublas_us']:.1f} fill {row['fill_us']:.1f} public {row['public_us']:.1f} "
              f"best {best} {row[best + '_us']:.1f} | " + " ".join(f"{n} {row[n + '_us']:.1f}" for n in ways
                                                                   if n not in ("cublas", "public"))
              + f" err {max(row[n + '_err'] for n in ways):.1e}", flush=True)
        del ops
        torch.cuda.empty_cache()
    with open(os.path.join(os.environ.get("OUT", "."), f"short_k_tiles_{SEED}.json"), "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    main()
