"""The skinny family's K-slab merges on shapes drawn at random: the single-pass ticket merge
(the tile's last block sums the slabs' partials) against the two-pass merge (a second
kernel), device time of bound launches captured in a CUDA graph over operands rotated past
L2, each result checked against float64 first (outputs NaN-poisoned). Run it in two trees
(TAG=before|after) to compare a change of the merge; the default spec of each product is
timed with both merges. Env: SEED (draw), COUNT (shapes a dtype), DTYPES, ORDERS (col: B =
W.t(); row: B stored K x N), ROWS (LO-HI, the small side). Output: $OUT/merge_tail_<SEED><TAG>.json.
`python skinny_merge_tail.py --compile` compiles every spec (KGEN_ARCH, no GPU) and exits."""
import dataclasses
import json
import math
import os
import random
import sys

import kgen
from kgen.ops.skinny import Skinny, tolerance

SEED = int(os.environ.get("SEED", "8201"))
COUNT = int(os.environ.get("COUNT", "10"))
DTYPES = os.environ.get("DTYPES", "float32,bfloat16").split(",")
ORDERS = os.environ.get("ORDERS", "col,row").split(",")
LO, HI = (int(v) for v in os.environ.get("ROWS", "1-16").split("-"))
MERGES = ("single_pass", "two_pass")


def draw_shapes(seed, dtype, count, lo, hi, fixed=""):
    """M log-uniform in lo..hi; N and K log-uniform in 1024..16384, half of them multiples of
    64; or the shapes of `fixed` ("MxNxK,...") where given."""
    if fixed:
        return [tuple(int(v) for v in t.split("x")) for t in fixed.split(",")]
    rng = random.Random(f"{seed}-{dtype}")
    out = []
    for i in range(count):
        M = min(hi, int(math.exp(rng.uniform(math.log(lo), math.log(hi + 1)))))
        N, K = (int(math.exp(rng.uniform(math.log(1024), math.log(16384)))) for _ in range(2))
        if i % 2:
            N, K = -(-N // 64) * 64, -(-K // 64) * 64
        out.append((M, N, K))
    return out


def shapes(dtype):
    return draw_shapes(SEED, dtype, COUNT, LO, HI)


def compile_all(specs):
    """Compile specs in parallel (nvcc only, KGEN_ARCH; no GPU needed)."""
    import concurrent.futures as cf
    todo = {s.key: s for s in specs}
    with cf.ThreadPoolExecutor(os.cpu_count() or 2) as ex:
        list(ex.map(kgen.compile, todo.values()))
    print(f"compiled {len(todo)} specs")


def products(torch, dtypes, shapes_of, orders):
    """(dtype, (M, N, K), order, operands rotated past 3 L2s, float64 reference) of every
    product drawn: shapes_of(dtype) for each dtype, in each order."""
    from kgen.bench.skinny import Operands
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    for dtype in dtypes:
        for M, N, K in shapes_of(dtype):
            for order in orders:
                ops = Operands(torch, M, N, K, dtype, order, l2)
                yield dtype, (M, N, K), order, ops, ops.A[0].double() @ ops.B[0].double()
                ops = None
                torch.cuda.empty_cache()


def write_rows(torch, name, rows):
    """$OUT/<name>.json: the device's name and the rows."""
    with open(os.path.join(os.environ.get("OUT", "."), f"{name}.json"), "w") as f:
        json.dump({"device": torch.cuda.get_device_name(), "rows": rows}, f, indent=1)


def time_spec(torch, spec, ops, ref, dtype, K):
    """(device µs from a CUDA graph of calls over the rotated operands, relative error against
    ref after a NaN-poisoned call, the launch plan) of one spec. Calls run on torch's current
    stream (captured); a bound launch keeps the stream it was bound on."""
    from kgen.bench.skinny import time_graph
    k = kgen.build(spec)
    ops.C[0].fill_(float("nan"))
    k(ops.A[0], ops.B[0], out=ops.C[0])
    err = float((ops.C[0].double() - ref).norm() / ref.norm())
    calls = [(lambda a=a, b=b, c=c: k(a, b, out=c)) for a, b, c in zip(ops.A, ops.B, ops.C)]
    return time_graph(torch, calls, 15), err, k.bind(ops.A[0], ops.B[0], ops.C[0]).plan


def specs_of(M, N, K, dtype):
    base = Skinny.default_spec({"M": M, "N": N, "K": K}, dtype)
    return {m: dataclasses.replace(base, merge=m) for m in MERGES}


def main():
    if "--compile" in sys.argv:
        compile_all(s for d in DTYPES for M, N, K in shapes(d) for s in specs_of(M, N, K, d).values())
        return
    import torch
    rows = []
    for dtype, (M, N, K), order, ops, ref in products(torch, DTYPES, shapes, ORDERS):
        row = {"shape": [M, N, K], "dtype": dtype, "order": order}
        for merge, spec in specs_of(M, N, K, dtype).items():
            row[merge], err, plan = time_spec(torch, spec, ops, ref, dtype, K)
            row[merge + "_ok"] = bool(err <= tolerance(dtype, K))
            row["form"], row["splits"] = plan.form, plan.splits
        rows.append(row)
        print(f"{dtype} {order} {row['form']:7s} {M}x{N}x{K} splits {row['splits']:3d}: single pass "
              f"{row['single_pass']:7.1f} two pass {row['two_pass']:7.1f} us "
              f"({row['two_pass'] / row['single_pass']:.2f}x){'' if row['single_pass_ok'] and row['two_pass_ok'] else ' WRONG'}",
              flush=True)
    write_rows(torch, f"merge_tail_{SEED}{os.environ.get('TAG', '')}", rows)


if __name__ == "__main__":
    main()
