"""What an output whose rows are not 16-byte aligned (an odd N) costs kgen.matmul's default
against the same product at N + 1: device time (a CUDA graph over operands and outputs rotated
past L2, replayed), cuBLAS beside it, each result first checked against float64 on a NaN-poisoned
output. SHAPES (MxNxK, N odd), or SEED and COUNT: COUNT shapes drawn with M, N log-uniform from
256 to 8192 (N odd) and K from 16 to 1024; DTYPES (float32,bfloat16,float64).
Output: $OUT/odd_n_penalty.json (odd_n_penalty_<SEED>.json for drawn shapes)."""
import json
import os
import random

import torch

import kgen
from kgen.bench.skinny import Operands, checked_graph_time, time_graph

SEED = os.environ.get("SEED")


def drawn_shapes(seed: int, count: int):
    rng = random.Random(seed)
    return [(int(2 ** rng.uniform(8, 13)), int(2 ** rng.uniform(8, 13)) | 1, int(2 ** rng.uniform(4, 10)))
            for _ in range(count)]


SHAPES = drawn_shapes(int(SEED), int(os.environ.get("COUNT", "10"))) if SEED else [
    tuple(int(v) for v in s.split("x")) for s in os.environ.get(
        "SHAPES", "2340x6851x36,3001x4095x64,1999x3333x128,2500x2801x256,1501x4001x1024").split(",")]
DTYPES = os.environ.get("DTYPES", "float32,bfloat16,float64").split(",")


def main():
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    out = {"device": torch.cuda.get_device_name(), "rows": []}
    for dtype in DTYPES:
        for M, N, K in SHAPES:
            row = {"dtype": dtype, "shape": [M, N, K]}
            for n in (N, N + 1):
                ops = Operands(torch, M, n, K, dtype, "row", l2)
                ref = ops.A[0].double() @ ops.B[0].double()
                parity = "odd" if n % 2 else "even"
                for name, fn in (("kgen", kgen.matmul), ("cublas", lambda a, b, out: torch.mm(a, b, out=out))):
                    err, us, _ = checked_graph_time(torch, lambda a, b, c, fn=fn: fn(a, b, out=c),
                                                    ops.A, ops.B, ops.C, ref, 15)
                    row[f"{name}_{parity}_us"] = us
                    row[f"{name}_{parity}_err"] = err
                row[f"fill_{parity}_us"] = time_graph(torch, [(lambda c=c: c.fill_(1.0)) for c in ops.C], 15)
                del ops
                torch.cuda.empty_cache()
            out["rows"].append(row)
            print(f"{dtype} {M}x{N}(+1)x{K}: kgen odd {row['kgen_odd_us']:.1f} even {row['kgen_even_us']:.1f} | "
                  f"cuBLAS odd {row['cublas_odd_us']:.1f} even {row['cublas_even_us']:.1f} | "
                  f"fill {row['fill_odd_us']:.1f} | err "
                  f"{max(row['kgen_odd_err'], row['kgen_even_err']):.1e}", flush=True)
    name = f"odd_n_penalty_{SEED}.json" if SEED else "odd_n_penalty.json"
    with open(os.path.join(os.environ.get("OUT", "."), name), "w") as f:
        json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
