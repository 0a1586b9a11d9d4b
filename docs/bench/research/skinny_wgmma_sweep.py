"""Fields of the wgmma skinny default spec, one at a time, as users call a built kernel (one call
between CUDA events, host time included, kgen.bench.calls' timing) beside torch.matmul (cuBLAS,
TF32 off). Without DRAW: ten named small and mid shapes and nine variants (merge, waves,
threads, min_blocks, tc_tiles). DRAW=seed: 30 shapes drawn in Skinny.wgmma_suits' range and
waves=1 (with and without min_blocks=2) only, to check a variant on shapes it was not picked
on. Output: $OUT/wgsweep[DRAW].json."""

import concurrent.futures as cf
import json
import math
import os

import torch

import kgen
from kgen.bench.calls import _time_pair
from kgen.ops.skinny import Skinny
from wgmma_shapes import wgmma_shapes

OUT = os.environ.get("OUT", ".")
SH = [
    (50, 4625, 1138, "row"),
    (120, 1853, 1536, "row"),
    (24, 1853, 1536, "row"),
    (31, 509, 1778, "row"),
    (86, 556, 4572, "row"),
    (147, 1962, 2090, "weights"),
    (59, 1562, 1747, "weights"),
    (21, 2691, 12577, "row"),
    (100, 4096, 4096, "row"),
    (300, 3000, 3000, "weights"),
]
if os.environ.get("DRAW"):
    SH = wgmma_shapes(int(os.environ["DRAW"]), 30, 2**37)

def variants(p):
    d = Skinny.wgmma_default_spec(p)
    out = {"default": d}
    vs = [
        ("single", dict(merge="single_pass")),
        ("atomic", dict(merge="atomic")),
        ("w1", dict(waves=1)),
        ("w4", dict(waves=4)),
        ("t128", dict(threads=128)),
        ("t256", dict(threads=256)),
        ("mb2", dict(min_blocks=2)),
        ("t128mb2", dict(threads=128, min_blocks=2)),
        ("tiles2", dict(tc_tiles=2)),
    ]
    if os.environ.get("DRAW"):
        vs = [("w1", dict(waves=1)), ("w1mb2", dict(waves=1, min_blocks=2))]
    for name, kw in vs:
        try:
            s = d.replace(**kw)
            if s != d:
                out[name] = s
        except ValueError:
            pass
    return out


def main():
    torch.backends.cuda.matmul.allow_tf32 = False
    allspecs = {s for M, N, K, b in SH for s in variants({"M": M, "N": N, "K": K}).values()}
    with cf.ThreadPoolExecutor(16) as ex:
        list(ex.map(kgen.compile, allspecs))
    res = []
    for M, N, K, b in SH:
        A = torch.randn(M, K, device="cuda")
        B = torch.randn(N, K, device="cuda").t() if b == "weights" else torch.randn(K, N, device="cuda")
        C = torch.empty(M, N, device="cuda")
        row = {"shape": [M, N, K, b]}
        cb = None
        for name, s in variants({"M": M, "N": N, "K": K}).items():
            k = kgen.build(s)
            t = _time_pair(lambda: k(A, B, out=C), lambda: torch.matmul(A, B, out=C), 80.0)
            cb = t["peer_single"] if cb is None else min(cb, t["peer_single"])
            row[name] = (t["kgen_single"], t["kgen_pipe"])
        row["cublas"] = cb
        res.append(row)
        print(
            f"{M}x{N}x{K} {b}: cuBLAS {cb * 1e3:.1f}us "
            + " ".join(f"{n} {cb / v[0]:.2f}" for n, v in row.items() if n not in ("shape", "cublas")),
            flush=True,
        )
    json.dump(
        {"device": torch.cuda.get_device_name(), "rows": res},
        open(f"{OUT}/wgsweep{os.environ.get('DRAW', '')}.json", "w"),
        indent=1,
    )
    names = ["default", "single", "atomic", "w1", "w4", "t128", "t256", "mb2", "t128mb2", "tiles2", "w1mb2"]
    for n in names:
        xs = [r["cublas"] / r[n][0] for r in res if n in r]
        xd = [r["cublas"] / r["default"][0] for r in res if n in r]
        if xs:
            print(
                f"{n:8s} n={len(xs)} geo {math.exp(sum(map(math.log, xs)) / len(xs)):.3f} (default on same {math.exp(sum(map(math.log, xd)) / len(xd)):.3f})"
            )


if __name__ == "__main__":
    main()
