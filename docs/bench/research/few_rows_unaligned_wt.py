"""1-16 rows against W.t() of a 16-bit weight whose rows are not 16-byte aligned (K no multiple
of 8), where kgen.matmul runs the skinny forms' phased entries: those against the wgmma kernel's
transposed tiles reading W by row sets (b_phased: "sets") and by its producer threads
(b_realign: "producers"), each as dispatch's for_layouts gives it for the product, and cuBLAS.
Device time from a CUDA graph over operands rotated past L2, every result checked against
float64 first (outputs NaN-poisoned); bound = bytes / the copy bandwidth measured in the run.

    SEED=S COUNT=C ROWS=1-16 PITCH=odd|even [DTYPE=bfloat16] [MIN_MB=16] python few_rows_unaligned_wt.py

PITCH=odd moves K to an odd number, even to 2, 4 or 6 modulo 8. Output:
$OUT/few_rows_unaligned_wt_<PITCH>_<SEED>.json."""
import concurrent.futures as cf
import json
import math
import os
import random

import torch

import kgen
from kgen.bench.skinny import checked_graph_time, copy_bandwidth
from kgen.ops.tensorcore import TensorMatmul
from kgen.tune import dispatch

SEED = int(os.environ.get("SEED", "15201"))
COUNT = int(os.environ.get("COUNT", "8"))
LO, HI = (int(v) for v in os.environ.get("ROWS", "1-16").split("-"))
PITCH = os.environ.get("PITCH", "odd")
DTYPE = os.environ.get("DTYPE", "bfloat16")
MIN_MB = float(os.environ.get("MIN_MB", "16"))
torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False


def draw():
    rng = random.Random(f"{SEED}-{PITCH}")
    out = []
    while len(out) < COUNT:
        M = int(math.exp(rng.uniform(math.log(LO), math.log(HI + 1))))
        N, K = (int(math.exp(rng.uniform(math.log(1024), math.log(16384)))) for _ in range(2))
        K = K - K % 8 + (rng.choice((1, 3, 5, 7)) if PITCH == "odd" else rng.choice((2, 4, 6)))
        if N * K * 2 >= MIN_MB * 1e6:
            out.append((min(M, HI), N, K))
    return out


def main():
    tdt = getattr(torch, DTYPE)
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    bw = copy_bandwidth(torch, 20)
    plans = []
    for M, N, K in draw():
        a, b = torch.empty(M, K, device="cuda", dtype=tdt), torch.empty(N, K, device="cuda", dtype=tdt).t()
        problem = {"M": M, "N": N, "K": K}
        ways = {}
        for name, flag in (("sets", "b_phased"), ("producers", "b_realign")):
            try:
                ways[name] = dispatch.resolve_spec(TensorMatmul, problem, DTYPE,
                                                   {"layout_a": "row", "layout_b": "col", flag: True})
            except (ValueError, kgen.ArrayError) as exc:
                print(f"{M}x{N}x{K} {name}: {exc}", flush=True)
        plans.append(((M, N, K), dispatch.call_spec(a, b), ways))
    with cf.ThreadPoolExecutor(16) as ex:
        list(ex.map(kgen.compile, {s.key: s for _, r, w in plans for s in (r, *w.values())}.values()))
    rows = []
    for (M, N, K), route, specs in plans:
        nbytes = (M * K + K * N + M * N) * 2
        sets = max(2, min(24, math.ceil(3 * l2 / nbytes)))
        A = [torch.randn(M, K, device="cuda").to(tdt) for _ in range(sets)]
        B = [torch.randn(N, K, device="cuda").to(tdt).t() for _ in range(sets)]
        C = [torch.empty(M, N, device="cuda", dtype=tdt) for _ in range(sets)]
        ref = A[0].double() @ B[0].double()
        row = {"shape": [M, N, K], "bound_us": nbytes / bw * 1e6, "route_spec": route.to_json(),
               "specs": {n: s.to_json() for n, s in specs.items()}}
        ways = {"cublas": lambda a, b, c: torch.matmul(a, b, out=c), "route": lambda a, b, c: kgen.matmul(a, b, out=c)}
        for n, s in specs.items():
            k = kgen.build(s)
            ways[n] = (lambda a, b, c, k=k: k(a, b, out=c))
        for n, fn in ways.items():
            row[n + "_err"], row[n], _ = checked_graph_time(torch, fn, A, B, C, ref, 15)
        bad = [n for n in ways if not (row[n + "_err"] < 1e-2)]
        bound = row["bound_us"]
        print(f"{M}x{N}x{K} bound {bound:.1f} " + " ".join(f"{n}:{row[n]:.1f}({bound / row[n]:.0%})" for n in ways)
              + f" | route {type(route).__name__}" + (f" BAD {bad}" if bad else ""), flush=True)
        rows.append(row)
        A = B = C = None
        torch.cuda.empty_cache()
        with open(os.path.join(os.environ.get("OUT", "."), f"few_rows_unaligned_wt_{PITCH}_{SEED}.json"), "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "copy_bandwidth": bw, "rows": rows}, f, indent=1)
    for n in ("sets", "producers"):
        got = [r["route"] / r[n] for r in rows if n in r]
        if got:
            print(f"{n}: x route {math.exp(sum(map(math.log, got)) / len(got)):.3f} (geometric mean), "
                  f"{min(got):.2f}-{max(got):.2f}", flush=True)


if __name__ == "__main__":
    main()
