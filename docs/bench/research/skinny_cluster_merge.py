"""The skinny family's K slabs merged in a thread block cluster (merge="cluster", k_split 2, 4
or 8) against the default spec (its own merge and split), on products drawn at random: device
time from a CUDA graph over operands rotated past L2, each result checked against float64
first (outputs NaN-poisoned). Env: SEED, COUNT (shapes a dtype), DTYPES, ORDERS (col: B =
W.t(); row: B stored K x N), ROWS (LO-HI), SPLITS (comma list), SHAPES (MxNxK,... instead of
the draw). Output: $OUT/cluster_merge_<SEED>.json. `--compile` compiles every spec and exits."""
import json
import math
import os
import random
import sys

import kgen
from kgen.ops.skinny import Skinny, tolerance

SEED = int(os.environ.get("SEED", "8401"))
COUNT = int(os.environ.get("COUNT", "8"))
DTYPES = os.environ.get("DTYPES", "float32").split(",")
ORDERS = os.environ.get("ORDERS", "col,row").split(",")
LO, HI = (int(v) for v in os.environ.get("ROWS", "7-16").split("-"))
SPLITS = [int(v) for v in os.environ.get("SPLITS", "2,4,8").split(",")]


def shapes(dtype):
    """M log-uniform in LO..HI; N and K log-uniform in 1024..16384, half of them multiples of 64."""
    if os.environ.get("SHAPES"):
        return [tuple(int(v) for v in t.split("x")) for t in os.environ["SHAPES"].split(",")]
    rng = random.Random(f"{SEED}-{dtype}")
    out = []
    for i in range(COUNT):
        M = min(HI, int(math.exp(rng.uniform(math.log(LO), math.log(HI + 1)))))
        N, K = (int(math.exp(rng.uniform(math.log(1024), math.log(16384)))) for _ in range(2))
        if i % 2:
            N, K = -(-N // 64) * 64, -(-K // 64) * 64
        out.append((M, N, K))
    return out


def specs_of(M, N, K, dtype):
    base = Skinny.default_spec({"M": M, "N": N, "K": K}, dtype)
    out = {"default": base}
    for s in SPLITS:
        try:
            out[f"cluster{s}"] = base.replace(merge="cluster", k_split=s)
        except ValueError:
            pass
    return out


def main():
    if "--compile" in sys.argv:
        import concurrent.futures as cf
        todo = {s.key: s for d in DTYPES for M, N, K in shapes(d) for s in specs_of(M, N, K, d).values()}
        with cf.ThreadPoolExecutor(os.cpu_count() or 2) as ex:
            list(ex.map(kgen.compile, todo.values()))
        print(f"compiled {len(todo)} specs")
        return
    import torch
    from kgen.bench.skinny import Operands, time_graph
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    rows = []
    for dtype in DTYPES:
        for M, N, K in shapes(dtype):
            for order in ORDERS:
                ops = Operands(torch, M, N, K, dtype, order, l2)
                ref = ops.A[0].double() @ ops.B[0].double()
                row = {"shape": [M, N, K], "dtype": dtype, "order": order, "ok": True}
                cb = [(lambda a=a, b=b, c=c: torch.matmul(a, b, out=c)) for a, b, c in zip(ops.A, ops.B, ops.C)]
                row["cublas"] = time_graph(torch, cb, 15)
                for name, spec in specs_of(M, N, K, dtype).items():
                    k = kgen.build(spec)
                    ops.C[0].fill_(float("nan"))
                    k(ops.A[0], ops.B[0], out=ops.C[0])
                    err = float((ops.C[0].double() - ref).norm() / ref.norm())
                    row[name + "_err"] = err
                    row["ok"] &= bool(err <= tolerance(dtype, K))
                    calls = [(lambda a=a, b=b, c=c: k(a, b, out=c)) for a, b, c in zip(ops.A, ops.B, ops.C)]
                    row[name] = time_graph(torch, calls, 15)
                    plan = k.bind(ops.A[0], ops.B[0], ops.C[0]).plan
                    row[name + "_splits"], row["form"] = plan.splits, plan.form
                    row[name + "_grid"] = [list(launch.grid) for kind, launch, _ in plan.launches if kind == "main"]
                rows.append(row)
                best = min((n for n in row if n.startswith("cluster") and "_" not in n), key=lambda n: row[n], default=None)
                print(f"{dtype} {order} {row['form']:8s} {M}x{N}x{K}: cuBLAS {row['cublas']:6.1f} default {row['default']:6.1f} "
                      f"(splits {row['default_splits']}) " + " ".join(f"{n} {row[n]:6.1f}" for n in row
                                                                       if n.startswith("cluster") and "_" not in n)
                      + (f"  best/default {row['default'] / row[best]:.2f}x" if best else "")
                      + ("" if row["ok"] else " WRONG"), flush=True)
                del ops
                torch.cuda.empty_cache()
    with open(os.path.join(os.environ.get("OUT", "."), f"cluster_merge_{SEED}.json"), "w") as f:
        json.dump({"device": torch.cuda.get_device_name(), "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
