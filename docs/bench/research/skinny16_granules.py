"""16-bit products of 5-64 rows against W.t() whose rows are not 16-byte aligned, on the
skinny family's tensor-core dot form: device time of Skinny.default_spec's kernel on B as
given and on the same values stored at an aligned pitch (16-byte loads), and cuBLAS (torch;
bfloat16 with reduced-precision reductions off, float16 at torch's default). Device time
from a CUDA graph over operands rotated past L2 (NOROT=1: the same operands every call), and
the same calls launched back to back on a stream ("given_stream", "aligned_stream"); every
result checked against float64 first (outputs NaN-poisoned). Env: DTYPE (bfloat16), SEED,
COUNT (drawn products: M 5-64 log-uniform, N and K 1024-16384, K moved off a multiple of 8:
odd in every other draw, or in all with ODD=1), SHAPES ("MxNxK,..." before the draw).
Output $OUT/gr_<name>.json, name the first argument. Run it in two trees (as a script, so
that PYTHONPATH picks the tree) to compare them."""
import concurrent.futures as cf
import json
import math
import os
import random
import sys

import torch

import kgen
from kgen.bench.skinny import checked_graph_time, time_batched
from kgen.ops.skinny import Skinny

DTYPE = os.environ.get("DTYPE", "bfloat16")
SEED = int(os.environ.get("SEED", "9201"))
COUNT = int(os.environ.get("COUNT", "14"))


def shapes():
    out = [tuple(int(v) for v in s.split("x")) for s in os.environ.get("SHAPES", "").split(",") if s]
    rng = random.Random(SEED)
    for i in range(COUNT):
        M = int(math.exp(rng.uniform(math.log(5), math.log(65))))
        N, K = (int(math.exp(rng.uniform(math.log(1024), math.log(16384)))) for _ in range(2))
        odd = i % 2 or os.environ.get("ODD")
        out.append((M, N, K - K % 8 + (rng.choice((1, 3, 5, 7)) if odd else rng.choice((2, 4, 6)))))
    return out


def main(name):
    torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
    tdt = getattr(torch, DTYPE)
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    todo = shapes()
    specs = {s: Skinny.default_spec({"M": s[0], "N": s[1], "K": s[2]}, DTYPE) for s in todo}
    with cf.ThreadPoolExecutor(16) as ex:
        list(ex.map(kgen.compile, set(specs.values())))
    rows = []
    for M, N, K in todo:
        spec = specs[(M, N, K)]
        k = kgen.build(spec)
        per_set = (M * K + K * N + M * N) * 2
        sets = 1 if os.environ.get("NOROT") else max(2, min(24, math.ceil(3 * l2 / per_set)))
        A = [torch.randn(M, K, device="cuda").to(tdt) for _ in range(sets)]
        W = [torch.randn(N, K, device="cuda").to(tdt) for _ in range(sets)]
        Wa = []   # the same values at a pitch of a multiple of 8 elements
        for w in W:
            z = torch.zeros(N, -(-K // 8) * 8, device="cuda", dtype=tdt)
            z[:, :K].copy_(w)
            Wa.append(z[:, :K])
        C = [torch.empty(M, N, device="cuda", dtype=tdt) for _ in range(sets)]
        ref = A[0].double() @ W[0].double().t()
        row = {"shape": [M, N, K], "spec": spec.to_json()}
        for way, Bs, fn in (("cublas", W, None), ("given", W, k), ("aligned", Wa, k)):
            def f(a, b, c, fn=fn):
                return torch.matmul(a, b.t(), out=c) if fn is None else fn(a, b.t(), out=c)
            row[way + "_err"], row[way], calls = checked_graph_time(torch, f, A, Bs, C, ref, 15)
            if fn is not None:
                row[way + "_stream"] = time_batched(torch, calls, 7, 40)
        print(f"{M}x{N}x{K} K%8={K % 8}: cublas {row['cublas']:.1f} given {row['given']:.1f} "
              f"stream {row['given_stream']:.1f} aligned {row['aligned']:.1f} "
              f"errs {row['given_err']:.1e} {row['aligned_err']:.1e}", flush=True)
        rows.append(row)
        A = W = Wa = C = None
        torch.cuda.empty_cache()
    with open(os.path.join(os.environ.get("OUT", "."), f"gr_{name}.json"), "w") as out:
        json.dump({"device": torch.cuda.get_device_name(), "rows": rows}, out, indent=1)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "run")
