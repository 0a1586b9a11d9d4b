"""16-bit few-row products with short K on the mma.m16n8k16 skinny forms: the shortest K slab
a block may take (TC_MIN_SLAB_K, TC16_AXPY_MIN_SLAB_K per warp sharing the slab) bounds how many
blocks a short-K product gets. One call between CUDA events (host time included) of kgen.matmul's
kernel with both set to 128, 64 and 32 (the defaults: 128 for the dot form, 32 for the axpy form), beside torch.matmul, on COUNT bfloat16 shapes:
2-16 rows, N 1024-16384, K 1024-4096, B row-major or a transposed N x K weight. Each result is
checked against float64 (output poisoned).

    python skinny16_short_k.py SEED COUNT [float32]    # output: $OUT/short_k_SEED.json

With float32: 7-16 rows (the split-TF32 mma.sync forms), both forms' slab set alike (the float32
axpy form follows TC_MIN_SLAB_K)."""

import json
import math
import os
import random
import sys

import kgen
import kgen.ops.skinny as sk
import torch
from kgen.bench.calls import _time_pair
from kgen.ops.skinny import Skinny, tolerance

OUT = os.environ.get("OUT", ".")
SLABS = (128, 64, 32)


def main():
    seed, n = int(sys.argv[1]), int(sys.argv[2])
    dtype = sys.argv[3] if len(sys.argv) > 3 else "bfloat16"
    tdt = getattr(torch, dtype)
    torch.backends.cuda.matmul.allow_tf32 = False
    rng = random.Random(seed)
    torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
    shapes = []
    while len(shapes) < n:
        M = int(round(2 ** rng.uniform(1, 4))) if dtype != "float32" else rng.randint(7, 16)
        N, K = int(2 ** rng.uniform(10, 14)), int(2 ** rng.uniform(10, 12))
        shapes.append((M, N, K, rng.choice(["row", "weights"])))
    rows, bad = [], 0
    for M, N, K, b in shapes:
        A = torch.randn(M, K, device="cuda").to(tdt)
        B = (torch.randn(N, K, device="cuda").to(tdt).t() if b == "weights"
             else torch.randn(K, N, device="cuda").to(tdt))
        C = torch.empty(M, N, device="cuda", dtype=tdt)
        kgen.matmul(A, B, out=C)
        from kgen.tune import dispatch
        k = dispatch._fast[("matmul", A.shape, A.stride(), B.shape, B.stride(), A.dtype, False)]
        if not isinstance(k.spec, Skinny) or not k.spec.tensor_cores:
            continue
        ref = A.double() @ B.double()
        row = {"shape": [M, N, K, b], "spec": k.spec.to_json()}
        cb = None
        for slab in SLABS:
            sk.TC_MIN_SLAB_K = sk.TC16_AXPY_MIN_SLAB_K = slab
            k._plans.clear()
            C.fill_(float("nan"))
            k(A, B, out=C)
            torch.cuda.synchronize()
            err = float((C.double() - ref).norm() / ref.norm())
            if not err <= tolerance(dtype, K):
                bad += 1
                print("WRONG", slab, M, N, K, b, err, flush=True)
            plan = list(k._plans.values())[-1]
            row[f"splits_{slab}"] = plan.splits
            t = _time_pair(lambda: k(A, B, out=C), lambda: torch.matmul(A, B, out=C), 60.0)
            cb = t["peer_single"] if cb is None else min(cb, t["peer_single"])
            row[str(slab)] = t["kgen_single"]
        sk.TC_MIN_SLAB_K, sk.TC16_AXPY_MIN_SLAB_K = 128, 32
        k._plans.clear()
        row["cublas"] = cb
        rows.append(row)
        print(f"{M}x{N}x{K} {b}: cuBLAS {cb * 1e3:.1f}us " +
              " ".join(f"{s}: {cb / row[str(s)]:.2f} (s{row[f'splits_{s}']})" for s in SLABS), flush=True)
    for s in SLABS:
        xs = [r["cublas"] / r[str(s)] for r in rows]
        print(f"slab {s:4d}: geomean {math.exp(sum(map(math.log, xs)) / len(xs)):.3f}x cuBLAS, lowest {min(xs):.2f}x")
    print("wrong results:", bad)
    json.dump({"device": torch.cuda.get_device_name(), "seed": seed, "dtype": dtype, "rows": rows},
              open(f"{OUT}/short_k_{dtype}_{seed}.json", "w"), indent=1)


if __name__ == "__main__":
    main()
