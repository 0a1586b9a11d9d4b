"""Programmatic launches of the skinny family's SIMT and mma.sync forms (Skinny.programmatic,
Skinny.l2_prefetch): the spec kgen.matmul runs against the same spec launched programmatically
(its blocks wait for the kernel before with griddepcontrol.wait) and with an L2 prefetch of the
first KiB of each block's slab ahead of that wait, for each KiB in KIB.

Products of ROWS rows (log-uniform) against weights of MIN_MB or more (N and K log-uniform in
1024-16384, multiples of MULTIPLE), for each of DTYPES and ORDERS (col: B = W.t(); row: B
stored K x N), drawn at random from SEED; only products whose dispatch spec is a Skinny spec of
the mma.sync or SIMT forms are kept (16-bit W.t() on an H200 mostly goes to the wgmma kernel).
Device time: every call captured in a CUDA graph over operands rotated past L2, replayed
(back to back, as a model's layers run), each variant ROUNDS times in turn, the best kept; each
variant's result is first checked against float64 on a NaN-poisoned output. The bound is the
operands' bytes over the copy bandwidth measured in the run. Output: $OUT/skinny_pdl_<SEED>.json."""
import json
import math
import os
import random

import torch

import kgen
from kgen.bench.skinny import Operands, copy_bandwidth, time_graph
from kgen.ops.skinny import Skinny, tolerance
from kgen.tune import dispatch

SEED = int(os.environ.get("SEED", "17001"))
COUNT = int(os.environ.get("COUNT", "8"))
ROWS = tuple(int(v) for v in os.environ.get("ROWS", "1-16").split("-"))
DTYPES = os.environ.get("DTYPES", "float32").split(",")
ORDERS = os.environ.get("ORDERS", "col,row").split(",")
MIN_MB = float(os.environ.get("MIN_MB", "16"))
MULTIPLE = int(os.environ.get("MULTIPLE", "64"))
ROUNDS = int(os.environ.get("ROUNDS", "2"))
KIB = [int(v) for v in os.environ.get("KIB", "8,16,32").split(",") if v]
torch.backends.cuda.matmul.allow_tf32 = False


def draw(rng, item):
    while True:
        M = int(math.exp(rng.uniform(math.log(ROWS[0]), math.log(ROWS[1] + 1))))
        N, K = (max(MULTIPLE, int(math.exp(rng.uniform(math.log(1024), math.log(16384)))) // MULTIPLE * MULTIPLE)
                for _ in range(2))
        if N * K * item >= MIN_MB * 1e6:
            return min(max(M, ROWS[0]), ROWS[1]), N, K


def main():
    bw = copy_bandwidth(torch, 20)
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    rows = []
    for dtype in DTYPES:
        item = torch.empty((), dtype=getattr(torch, dtype)).element_size()
        rng = random.Random(f"{SEED}-{dtype}")
        for order in ORDERS:
            kept, tries = 0, 0
            while kept < COUNT and tries < 40 * COUNT:
                tries += 1
                M, N, K = draw(rng, item)
                ops = Operands(torch, M, N, K, dtype, order, l2)
                spec = dispatch.call_spec(ops.A[0], ops.B[0])
                if not isinstance(spec, Skinny) or spec.instruction == "wgmma":
                    del ops
                    continue
                kept += 1
                specs = {"plain": spec.replace(programmatic=False, l2_prefetch=0),
                         "pdl": spec.replace(programmatic=True, l2_prefetch=0)}
                for f in KIB:
                    specs[f"pf{f}k"] = spec.replace(programmatic=True, l2_prefetch=f)
                ways = {n: kgen.build(s) for n, s in specs.items()}
                ref = ops.A[0].double() @ ops.B[0].double()
                row = {"shape": [M, N, K], "dtype": dtype, "order": order, "spec": spec.to_json(),
                       "bound_us": ops.bytes / bw * 1e6, "err": {}, "us": {}}
                for n, kern in ways.items():
                    ops.C[0].fill_(float("nan"))
                    kern(ops.A[0], ops.B[0], out=ops.C[0])
                    torch.cuda.synchronize()
                    err = float((ops.C[0].double() - ref).norm() / ref.norm())
                    assert math.isfinite(err) and err <= tolerance(dtype, K), (M, N, K, dtype, order, n, err)
                    row["err"][n] = err
                for _ in range(ROUNDS):
                    for n, kern in ways.items():
                        calls = [(lambda a=a, b=b, c=c, kern=kern: kern(a, b, out=c))
                                 for a, b, c in zip(ops.A, ops.B, ops.C)]
                        row["us"].setdefault(n, []).append(time_graph(torch, calls, 15))
                best = {n: min(v) for n, v in row["us"].items()}
                plan = ways["plain"].bind(ops.A[0], ops.B[0], ops.C[0]).plan
                row["form"], row["splits"] = plan.form, plan.splits
                print(f"{dtype} {order} {M}x{N}x{K} {plan.form} splits {plan.splits}: bound {row['bound_us']:.1f} "
                      + " ".join(f"{n} {best[n]:.2f} ({row['bound_us'] / best[n]:.0%}, x{best['plain'] / best[n]:.3f})"
                                 for n in ways), flush=True)
                rows.append(row)
                del ops, ways
                torch.cuda.empty_cache()
    names = list(rows[0]["us"]) if rows else []
    summary = {}
    for n in names:
        gains = [min(r["us"]["plain"]) / min(r["us"][n]) for r in rows]
        fracs = [r["bound_us"] / min(r["us"][n]) for r in rows]
        summary[n] = {"x_plain": math.exp(sum(map(math.log, gains)) / len(gains)), "min_x": min(gains),
                      "bound_frac": math.exp(sum(map(math.log, fracs)) / len(fracs))}
        print(f"{n}: x plain {summary[n]['x_plain']:.3f} (min {summary[n]['min_x']:.3f}), "
              f"{summary[n]['bound_frac']:.0%} of bound", flush=True)
    with open(os.path.join(os.environ.get("OUT", "."), f"skinny_pdl_{SEED}.json"), "w") as f:
        json.dump({"device": torch.cuda.get_device_name(), "copy_bw": bw, "rows": rows, "summary": summary}, f)


if __name__ == "__main__":
    main()
