"""16-bit products of 2-8 rows against W.t() with K odd (rows 2 bytes off a 4-byte boundary in
turn): the skinny family's SIMT default spec (Skinny.simt_default_spec) against its tensor-core
dot form (Skinny.default_spec, whose odd-pitch entry reads whole granules). Two draws (seeds
9301 and 9302, 14 products each: M from {2, 3, 4, 5, 6, 8}, N and K log-uniform in
1024-16384, K made odd, bfloat16 and float16 in turn); device time from a CUDA graph over
operands rotated past L2, every result checked against float64 first (output NaN-poisoned).
Output $OUT/simt_tc_odd_rows_h100.json."""
import concurrent.futures as cf
import json
import math
import os
import random

import torch

import kgen
from kgen.bench.skinny import time_graph
from kgen.ops.skinny import Skinny


def draw(seed):
    rng = random.Random(seed)
    out = []
    for i in range(14):
        M = rng.choice((2, 3, 4, 5, 6, 8))
        N, K = (int(math.exp(rng.uniform(math.log(1024), math.log(16384)))) for _ in range(2))
        out.append((M, N, K | 1, "bfloat16" if i % 2 else "float16"))
    return out


def main():
    rows = []
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    for seed in (9301, 9302):
        specs = {}
        for M, N, K, dt in draw(seed):
            p = {"M": M, "N": N, "K": K}
            specs[(M, N, K, dt)] = (Skinny.simt_default_spec(p, dt), Skinny.default_spec(p, dt))
        with cf.ThreadPoolExecutor(16) as ex:
            list(ex.map(kgen.compile, {s for v in specs.values() for s in v}))
        for (M, N, K, dt), (simt, tc) in specs.items():
            tdt = getattr(torch, dt)
            sets = max(2, min(24, math.ceil(3 * l2 / ((M * K + K * N + M * N) * 2))))
            A = [torch.randn(M, K, device="cuda").to(tdt) for _ in range(sets)]
            W = [torch.randn(N, K, device="cuda").to(tdt) for _ in range(sets)]
            C = [torch.empty(M, N, device="cuda", dtype=tdt) for _ in range(sets)]
            ref = A[0].double() @ W[0].double().t()
            row = {"seed": seed, "shape": [M, N, K], "dtype": dt}
            for name, spec in (("simt", simt), ("tc", tc)):
                k = kgen.build(spec)
                C[0].fill_(float("nan"))
                k(A[0], W[0].t(), out=C[0])
                torch.cuda.synchronize()
                row[name + "_err"] = float((C[0].double() - ref).norm() / ref.norm())
                calls = [(lambda a=a, w=w, c=c, k=k: k(a, w.t(), out=c)) for a, w, c in zip(A, W, C)]
                row[name] = time_graph(torch, calls, 15)
            print(seed, f"{M}x{N}x{K} {dt}: simt {row['simt']:.1f} tc {row['tc']:.1f} "
                  f"tc/simt speed {row['simt'] / row['tc']:.2f} errs {row['simt_err']:.1e} {row['tc_err']:.1e}",
                  flush=True)
            rows.append(row)
            A = W = C = None
            torch.cuda.empty_cache()
    with open(os.path.join(os.environ.get("OUT", "."), "simt_tc_odd_rows_h100.json"), "w") as out:
        json.dump({"device": torch.cuda.get_device_name(), "rows": rows}, out, indent=1)


if __name__ == "__main__":
    main()
