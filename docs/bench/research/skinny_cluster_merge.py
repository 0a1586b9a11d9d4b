"""The skinny family's K slabs merged in a thread block cluster (merge="cluster", k_split 2, 4
or 8) against the default spec (its own merge and split), on products drawn at random: device
time from a CUDA graph over operands rotated past L2, each result checked against float64
first (outputs NaN-poisoned). Env: SEED, COUNT (shapes a dtype), DTYPES, ORDERS (col: B =
W.t(); row: B stored K x N), ROWS (LO-HI), SPLITS (comma list), SHAPES (MxNxK,... instead of
the draw). Output: $OUT/cluster_merge_<SEED>.json. `--compile` compiles every spec and exits."""
import os
import sys

from skinny_merge_tail import compile_all, draw_shapes, products, time_spec, write_rows   # the sibling script's helpers

from kgen.ops.skinny import Skinny, tolerance

SEED = int(os.environ.get("SEED", "8401"))
COUNT = int(os.environ.get("COUNT", "8"))
DTYPES = os.environ.get("DTYPES", "float32").split(",")
ORDERS = os.environ.get("ORDERS", "col,row").split(",")
LO, HI = (int(v) for v in os.environ.get("ROWS", "7-16").split("-"))
SPLITS = [int(v) for v in os.environ.get("SPLITS", "2,4,8").split(",")]


def shapes(dtype):
    return draw_shapes(SEED, dtype, COUNT, LO, HI, os.environ.get("SHAPES", ""))


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
        compile_all(s for d in DTYPES for M, N, K in shapes(d) for s in specs_of(M, N, K, d).values())
        return
    import torch
    from kgen.bench.skinny import time_graph
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
    rows = []
    for dtype, (M, N, K), order, ops, ref in products(torch, DTYPES, shapes, ORDERS):
        row = {"shape": [M, N, K], "dtype": dtype, "order": order, "ok": True}
        cb = [(lambda a=a, b=b, c=c: torch.matmul(a, b, out=c)) for a, b, c in zip(ops.A, ops.B, ops.C)]
        row["cublas"] = time_graph(torch, cb, 15)
        for name, spec in specs_of(M, N, K, dtype).items():
            row[name], err, plan = time_spec(torch, spec, ops, ref, dtype, K)
            row[name + "_err"] = err
            row["ok"] &= bool(err <= tolerance(dtype, K))
            row[name + "_splits"], row["form"] = plan.splits, plan.form
            row[name + "_grid"] = [list(launch.grid) for kind, launch, _ in plan.launches if kind == "main"]
        rows.append(row)
        best = min((n for n in row if n.startswith("cluster") and "_" not in n), key=lambda n: row[n], default=None)
        print(f"{dtype} {order} {row['form']:8s} {M}x{N}x{K}: cuBLAS {row['cublas']:6.1f} default {row['default']:6.1f} "
              f"(splits {row['default_splits']}) " + " ".join(f"{n} {row[n]:6.1f}" for n in row
                                                               if n.startswith("cluster") and "_" not in n)
              + (f"  best/default {row['default'] / row[best]:.2f}x" if best else "")
              + ("" if row["ok"] else " WRONG"), flush=True)
    write_rows(torch, f"cluster_merge_{SEED}", rows)


if __name__ == "__main__":
    main()
