"""The wgmma kernel's L2 prefetch ahead of griddepcontrol.wait (TensorMatmul.l2_prefetch): the
spec kgen.matmul runs for 16-bit products of ROWS rows against weights of MIN_MB or more (N and K
log-uniform in 1024-16384, multiples of MULTIPLE; ORDERS: col = W.t(), row = B stored K x N),
drawn at random from SEED, against the same spec asking L2 for the first KiB (each of KIB) of
each block's B tiles before the wait. Products whose spec cannot take the prefetch (B read by
the producer threads or as row sets) are skipped. Device time of calls back to back (a CUDA graph
over operands rotated past L2, replayed), each variant ROUNDS times in turn, the best kept,
each result first checked against float64 on a NaN-poisoned output; `programmatic` says whether
the launch overlaps the kernel before (TensorMatmul.launches_programmatically). Output:
$OUT/wgmma_prefetch_<SEED>.json."""
import json
import math
import os
import random

import torch

import kgen
from kgen.bench.skinny import Operands, copy_bandwidth, time_graph
from kgen.ops.tensorcore import TensorMatmul
from kgen.tune import dispatch

SEED = int(os.environ.get("SEED", "17101"))
COUNT = int(os.environ.get("COUNT", "8"))
ROWS = tuple(int(v) for v in os.environ.get("ROWS", "1-16").split("-"))
DTYPES = os.environ.get("DTYPES", "bfloat16,float16").split(",")
ORDERS = os.environ.get("ORDERS", "col").split(",")
MIN_MB = float(os.environ.get("MIN_MB", "16"))
MULTIPLE = int(os.environ.get("MULTIPLE", "64"))
ROUNDS = int(os.environ.get("ROUNDS", "2"))
KIB = [int(v) for v in os.environ.get("KIB", "16,32,64").split(",") if v]


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
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    rows = []
    for dtype in DTYPES:
        rng = random.Random(f"{SEED}-{dtype}")
        for order in ORDERS:
            kept, tries = 0, 0
            while kept < COUNT and tries < 40 * COUNT:
                tries += 1
                M, N, K = draw(rng, 2)
                ops = Operands(torch, M, N, K, dtype, order, l2)
                spec = dispatch.call_spec(ops.A[0], ops.B[0])
                if not isinstance(spec, TensorMatmul):
                    continue
                try:
                    specs = {"route": spec, **{f"pf{k}k": spec.replace(l2_prefetch=k) for k in KIB}}
                except ValueError:
                    continue
                kept += 1
                ways = {n: kgen.build(s) for n, s in specs.items()}
                ref = ops.A[0].double() @ ops.B[0].double()
                row = {"shape": [M, N, K], "dtype": dtype, "order": order, "spec": spec.to_json(),
                       "programmatic": spec.launches_programmatically(M, N, K, sms),
                       "bound_us": ops.bytes / bw * 1e6, "err": {}, "us": {}}
                for n, kern in ways.items():
                    ops.C[0].fill_(float("nan"))
                    kern(ops.A[0], ops.B[0], out=ops.C[0])
                    torch.cuda.synchronize()
                    err = float((ops.C[0].double() - ref).norm() / ref.norm())
                    assert math.isfinite(err) and err <= 2e-2, (M, N, K, dtype, order, n, err)
                    row["err"][n] = err
                for _ in range(ROUNDS):
                    for n, kern in ways.items():
                        calls = [(lambda a=a, b=b, c=c, kern=kern: kern(a, b, out=c))
                                 for a, b, c in zip(ops.A, ops.B, ops.C)]
                        row["us"].setdefault(n, []).append(time_graph(torch, calls, 15))
                best = {n: min(v) for n, v in row["us"].items()}
                print(f"{dtype} {order} {M}x{N}x{K} tile {spec.tile} split {spec.split_k} programmatic "
                      f"{row['programmatic']}: bound {row['bound_us']:.1f} "
                      + " ".join(f"{n} {best[n]:.2f} ({row['bound_us'] / best[n]:.0%}, x{best['route'] / best[n]:.3f})"
                                 for n in ways), flush=True)
                rows.append(row)
                del ops, ways
                torch.cuda.empty_cache()
    summary = {}
    for n in (list(rows[0]["us"]) if rows else []):
        gains = [min(r["us"]["route"]) / min(r["us"][n]) for r in rows]
        fracs = [r["bound_us"] / min(r["us"][n]) for r in rows]
        summary[n] = {"x_route": math.exp(sum(map(math.log, gains)) / len(gains)), "min_x": min(gains),
                      "bound_frac": math.exp(sum(map(math.log, fracs)) / len(fracs))}
        print(f"{n}: x route {summary[n]['x_route']:.3f} (min {summary[n]['min_x']:.3f}), "
              f"{summary[n]['bound_frac']:.0%} of bound", flush=True)
    with open(os.path.join(os.environ.get("OUT", "."), f"wgmma_prefetch_{SEED}.json"), "w") as f:
        json.dump({"device": torch.cuda.get_device_name(), "copy_bw": bw, "rows": rows, "summary": summary}, f)


if __name__ == "__main__":
    main()
