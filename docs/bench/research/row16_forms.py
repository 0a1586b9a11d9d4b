"""4-16 rows against a row-major float16/bfloat16 weight whose rows are off a 16-byte boundary
(N no multiple of 8): what dispatch runs (the wgmma kernel's transposed tiles reading B by row
sets, b_phased, from 5 rows) against the skinny family's SIMT default (the axpy form's _shift
entry: whole granules, shifted) and its tensor-core default, beside cuBLAS. WAYS=phased adds the
transposed tiles by row sets as dispatch would give them were REALIGN_ROW_ROWS to start at 1 row
(for 1-4 rows, where dispatch runs the skinny forms). Device time from a
CUDA graph over operands rotated past L2 (median of 25, the better of two rounds), every result
first checked against float64 on a NaN-poisoned output; bound = bytes / the copy bandwidth of
the same run.

    SEED=S COUNT=C ROWS=4-16 DTYPE=bfloat16 MIN_MB=16 [WAYS=simt,skinny_tc,phased] python row16_forms.py

Output: one line a product and $OUT/row16_forms_<SEED>.json."""
import json
import math
import os
import random

import torch

import kgen
from kgen.bench.skinny import Operands, copy_bandwidth, time_graph
import kgen.ops.tensorcore as tensorcore
from kgen.ops.skinny import Skinny
from kgen.tune.dispatch import call_spec

SEED = int(os.environ.get("SEED", "1"))
COUNT = int(os.environ.get("COUNT", "8"))
ROWS = tuple(int(v) for v in os.environ.get("ROWS", "4-16").split("-"))
DTYPE = os.environ.get("DTYPE", "bfloat16")
MIN_MB = float(os.environ.get("MIN_MB", "16"))
WAYS = os.environ.get("WAYS", "simt,skinny_tc").split(",")
torch.backends.cuda.matmul.allow_tf32 = False


def draw(rng):
    out = []
    while len(out) < COUNT:
        M = rng.randint(*ROWS)
        N, K = (int(math.exp(rng.uniform(math.log(1024), math.log(16384)))) for _ in range(2))
        if N % 8 and N * K * 2 >= MIN_MB * 1e6:
            out.append((M, N, K))
    return out


def main():
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    bw = copy_bandwidth(torch, 10)
    rows = []
    for M, N, K in draw(random.Random(SEED)):
        ops = Operands(torch, M, N, K, DTYPE, "row", l2)
        problem = {"M": M, "N": N, "K": K}
        ways = {"dispatch": None, "simt": Skinny.simt_default_spec(problem, DTYPE),
                "skinny_tc": Skinny.default_spec(problem, DTYPE)}
        if "phased" in WAYS:
            kept = tensorcore.REALIGN_ROW_ROWS
            tensorcore.REALIGN_ROW_ROWS = (1, kept[1])
            try:
                ways["phased"] = call_spec(ops.A[0], ops.B[0])
            finally:
                tensorcore.REALIGN_ROW_ROWS = kept
        ways = {n: s for n, s in ways.items() if n == "dispatch" or n in WAYS}
        ref = ops.A[0].double() @ ops.B[0].double()
        row = {"shape": [M, N, K], "dispatch_spec": call_spec(ops.A[0], ops.B[0]).to_json(),
               "bound": ops.bytes / bw * 1e6}
        for name, spec in ways.items():
            k = None if spec is None else kgen.build(spec)
            call = (lambda a, b, c: kgen.matmul(a, b, out=c)) if k is None else (lambda a, b, c, k=k: k(a, b, out=c))
            ops.C[0].fill_(float("nan"))
            call(ops.A[0], ops.B[0], ops.C[0])
            row[name + "_err"] = float((ops.C[0].double() - ref).norm() / ref.norm())
            fns = [(lambda a=a, b=b, c=c, f=call: f(a, b, c)) for a, b, c in zip(ops.A, ops.B, ops.C)]
            row[name] = min(time_graph(torch, fns, 25) for _ in range(2))
        fns = [(lambda a=a, b=b, c=c: torch.matmul(a, b, out=c)) for a, b, c in zip(ops.A, ops.B, ops.C)]
        row["cuBLAS"] = min(time_graph(torch, fns, 25) for _ in range(2))
        rows.append(row)
        print("%-16s bound %5.1f %s cuBLAS %6.1f | %s" % (
            f"{M}x{N}x{K}", row["bound"], " ".join(f"{n} {row[n]:6.1f}" for n in ways), row["cuBLAS"],
            " ".join(f"{n}_err={row[n + '_err']:.1e}" for n in ways)), flush=True)
        del ops
        torch.cuda.empty_cache()
    g = {n: math.exp(sum(math.log(r["dispatch"] / r[n]) for r in rows) / len(rows)) for n in ways if n != "dispatch"}
    print("speed against dispatch's (geometric mean):", {n: round(v, 3) for n, v in g.items()})
    with open(os.path.join(os.environ.get("OUT", "."), f"row16_forms_{SEED}.json"), "w") as f:
        json.dump({"device": torch.cuda.get_device_name(), "copy_bw": bw, "dtype": DTYPE, "rows": rows}, f)


if __name__ == "__main__":
    main()
