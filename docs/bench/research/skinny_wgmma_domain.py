"""Where the float32 wgmma skinny forms beat the rest of dispatch (sm_90). For random shapes,
one call between CUDA events (host time included, median; kgen.bench.calls' timing) of
kgen.matmul as dispatch routes it, of the wgmma default spec's built kernel k(A, B) (the same
call path), and of torch.matmul (cuBLAS SGEMM, TF32 off); the wgmma result is checked against
the float64 product first.

    python skinny_wgmma_domain.py SEED COUNT          # three regions in turn (below)
    WIDE=1 python skinny_wgmma_domain.py SEED COUNT   # 17-512 rows, large side 128-16384, K 32-16384

Regions: 257-512 rows against large sides and K of 1024-16384; 17-512 rows against a large
side of 128-1024, K 64-16384; 17-64 rows against 600-16384, K 400-1100. A third of the shapes
have few columns instead of few rows; B is row-major or a transposed N x K weight at random.
Output: $OUT/wgdomain_SEED.json. Measured with the dispatch of the tree before wgmma_suits
took its present bounds (docs/matmul-record.md, "Where the wgmma forms run")."""
import concurrent.futures as cf
import json
import math
import os
import random
import sys
import time

import torch

import kgen
from kgen.bench.calls import _time_pair
from kgen.ops.skinny import Skinny, tolerance
from kgen.tune.dispatch import call_family

OUT = os.environ.get("OUT", ".")


def shapes(n, seed):
    rng = random.Random(seed)
    out = []
    regions = [((257, 512), (1024, 16384), (1024, 16384)), ((17, 512), (128, 1024), (64, 16384)),
               ((17, 64), (600, 16384), (400, 1100))]
    if os.environ.get("WIDE"):
        regions = [((17, 512), (128, 16384), (32, 16384))]
    while len(out) < n:
        (s0, s1), (l0, l1), (k0, k1) = regions[len(out) % len(regions)]
        lg = lambda a, b: int(round(2 ** rng.uniform(math.log2(a), math.log2(b))))  # noqa: E731
        small, large, K = lg(s0, s1), lg(l0, l1), lg(k0, k1)
        if large < small or 2.0 * small * large * K > 2 ** 37:
            continue
        few_cols = rng.random() < 0.3
        M, N = (large, small) if few_cols else (small, large)
        out.append((M, N, K, rng.choice(["row", "weights"])))
    return out


def main():
    seed = int(sys.argv[1])
    n = int(sys.argv[2])
    torch.backends.cuda.matmul.allow_tf32 = False
    sh = shapes(n, seed)
    specs = {Skinny.wgmma_default_spec({"M": M, "N": N, "K": K}) for M, N, K, _ in sh}
    t0 = time.time()
    with cf.ThreadPoolExecutor(16) as ex:
        list(ex.map(kgen.compile, specs))
    print(f"seed {seed}: {len(sh)} shapes, {len(specs)} wgmma specs compiled in {time.time() - t0:.0f}s", flush=True)
    rows = []
    for M, N, K, b in sh:
        A = torch.randn(M, K, device="cuda")
        B = torch.randn(N, K, device="cuda").t() if b == "weights" else torch.randn(K, N, device="cuda")
        ref = A.double() @ B.double()
        fam = call_family(A, B, "float32").kernel
        C = kgen.matmul(A, B)
        wk = kgen.build(Skinny.wgmma_default_spec({"M": M, "N": N, "K": K}))
        W = torch.full((M, N), float("nan"), device="cuda")
        wk(A, B, out=W)
        torch.cuda.synchronize()
        err = float((W.double() - ref).norm() / ref.norm())
        ok = err <= tolerance("float32", K)
        t = _time_pair(lambda: kgen.matmul(A, B), lambda: torch.matmul(A, B), 100.0)
        w = _time_pair(lambda: wk(A, B), lambda: torch.matmul(A, B), 100.0)
        row = dict(M=M, N=N, K=K, b=b, family=fam, err=err, ok=ok, kgen=t["kgen_single"], cublas=t["peer_single"],
                   wg=w["kgen_single"], cublas2=w["peer_single"], kgen_pipe=t["kgen_pipe"], wg_pipe=w["kgen_pipe"],
                   cublas_pipe=t["peer_pipe"])
        rows.append(row)
        cb = min(row["cublas"], row["cublas2"])
        print(f"{M:6d}x{N:6d}x{K:6d} {b:7s} {fam:13s} now {cb / row['kgen']:.2f}x wg {cb / row['wg']:.2f}x "
              f"cublas {cb * 1e3:.1f}us {'' if ok else 'WRONG %.2e' % err}", flush=True)
        del A, B, C, W, ref
    json.dump({"device": torch.cuda.get_device_name(), "seed": seed, "rows": rows},
              open(f"{OUT}/wgdomain_{seed}.json", "w"), indent=1)


if __name__ == "__main__":
    main()
