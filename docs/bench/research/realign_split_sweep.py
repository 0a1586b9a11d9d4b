"""16-bit products of 17-256 rows against a B whose rows TMA cannot read (a row-major B of N
columns, or W.t() of a weight of K columns, with N or K no multiple of 8): what kgen.matmul runs
against the transposed tiles reading B in place (b_realign) with 64 or 128 columns a block, one
or two blocks an SM, and K in 1-8 slices merged in clusters where all the clusters run at once,
and cuBLAS. Device time from a CUDA graph over operands rotated past L2; each result checked
against float64 first (outputs NaN-poisoned). Env SHAPES ("MxNxK:order,..."; order col or
row); ONLY_DEFAULT=1: cuBLAS and what kgen.matmul runs only (to compare trees); TAG names the
output: $OUT/realign_split_sweep[_TAG].json."""
import concurrent.futures as cf
import json
import math
import os

import torch

import kgen
from kgen.bench.skinny import Operands, time_graph
from kgen.ops.tensorcore import TensorMatmul as T
from kgen.ops.tensorcore import _swap_rows, wgmma_ring_stages
from kgen.tune import dispatch

SHAPES = [(tuple(int(d) for d in s.split(":")[0].split("x")), s.split(":")[1]) for s in os.environ.get(
    "SHAPES", "77x2506x9946:col,152x1400x1122:col,88x5607x8323:col,111x3358x10780:col,51x2013x11398:row,"
              "21x5198x9437:row,88x1258x5876:row,30x9434x6285:row").split(",")]
# Blocks in clusters of s an H100 runs at once, one and two blocks an SM
# (docs/bench/swap16/cluster_capacity_h100.json).
CAPACITY = {1: {1: 10 ** 9, 2: 132, 3: 117, 4: 120, 5: 110, 6: 102, 7: 105, 8: 120},
            2: {1: 10 ** 9, 2: 264, 3: 237, 4: 248, 5: 235, 6: 234, 7: 224, 8: 240}}
torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False


def variants(M, N, K, order):
    out: dict = {}
    if os.environ.get("ONLY_DEFAULT") == "1":
        return out
    BM = _swap_rows(M)
    for BN in (64, 128):
        tiles = -(-N // BN)
        for per_sm in (1, 2):
            base = T(dtype="bfloat16", tile=(BM, BN, 64), warp_tile=(BM, 64), stages=wgmma_ring_stages(BM, BN, per_sm),
                     instruction="wgmma", swap_ab=True, layout_b=order)
            for s in (1, 2, 3, 4, 6, 8):
                if tiles * s > CAPACITY[per_sm][s] or (s > 1 and K < 256 * s):
                    continue
                try:
                    spec = (base if s == 1 else base.replace(split_k=s, split_merge="cluster")).with_realigned_b()
                except ValueError:
                    continue
                if spec.b_realign:
                    out[f"{BN}/{per_sm}/{s}"] = spec
    return out


def main():
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    cases = []
    for (M, N, K), order in SHAPES:
        ops = Operands(torch, M, N, K, "bfloat16", order, l2)
        kgen.matmul(ops.A[0], ops.B[0])
        A, B = ops.A[0], ops.B[0]
        k = dispatch._fast[("matmul", A.shape, A.stride(), B.shape, B.stride(), A.dtype, False)]
        cases.append(((M, N, K), order, ops, k, variants(M, N, K, order)))
    with cf.ThreadPoolExecutor(16) as ex:
        list(ex.map(kgen.compile, {s.key: s for *_, v in cases for s in v.values()}.values()))
    rows = []
    for (M, N, K), order, ops, k, v in cases:
        ref = ops.A[0].double() @ ops.B[0].double()
        ways = {"cublas": None, "default": k, **{n: kgen.build(s) for n, s in v.items()}}
        row = {"shape": [M, N, K], "order": order, "default_spec": getattr(k.spec, "to_json", lambda: "")(),
               "specs": {n: s.to_json() for n, s in v.items()}}
        for n, kk in ways.items():
            fn = (lambda a, b, c: torch.matmul(a, b, out=c)) if kk is None else (lambda a, b, c, kk=kk: kk(a, b, out=c))
            ops.C[0].fill_(float("nan"))
            fn(ops.A[0], ops.B[0], ops.C[0])
            torch.cuda.synchronize()
            row[n + "_err"] = float((ops.C[0].double() - ref).norm() / ref.norm())
            calls = [(lambda a=a, b=b, c=c, fn=fn: fn(a, b, c)) for a, b, c in zip(ops.A, ops.B, ops.C)]
            row[n] = time_graph(torch, calls, 12)
        bad = [n for n in ways if not (math.isfinite(row[n + "_err"]) and row[n + "_err"] < 1e-2)]
        best = min((n for n in ways if n not in ("cublas",) and n not in bad), key=lambda n: row[n])
        print(f"{M}x{N}x{K} {order}: cublas {row['cublas']:.1f} default {row['default']:.1f} best {best} "
              f"{row[best]:.1f} bad {bad} | " + " ".join(f"{n}={row[n]:.1f}" for n in v), flush=True)
        rows.append(row)
    tag = os.environ.get("TAG", "")
    name = f"realign_split_sweep{'_' + tag if tag else ''}.json"
    with open(os.path.join(os.environ.get("OUT", "."), name), "w") as f:
        json.dump({"device": torch.cuda.get_device_name(), "rows": rows}, f)


if __name__ == "__main__":
    main()
