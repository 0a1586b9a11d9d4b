"""kgen.matmul on a batch of token rows (batch, tokens, K) and on one token (K,) against a
weight W.t(), beside the same rows passed as one matrix and beside torch.matmul on the same
tensors. Shapes drawn at run time (env SEED, COUNT, DTYPE): tokens log-uniform in 1..64,
batch 1..4, N and K multiples of 128 in 1024..16384. For each: the result against float64,
then "1 call" (one call between CUDA events, host time included, median of 60, the four
callers interleaved) and "host" (the host's time a call over 200 calls back to back, from
the clock). Output: $OUT/folded_calls_<SEED>.json."""
import json
import math
import os
import random
import statistics
import time

import torch

import kgen
from kgen.core.timing import time_calls

SEED = int(os.environ.get("SEED", "19101"))
COUNT = int(os.environ.get("COUNT", "8"))
DTYPE = os.environ.get("DTYPE", "bfloat16")
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False


def draw(rng):
    tokens = max(1, min(64, int(math.exp(rng.uniform(0, math.log(65))))))
    batch = rng.randint(1, 4)
    N, K = (-(-int(math.exp(rng.uniform(math.log(1024), math.log(16384)))) // 128) * 128 for _ in range(2))
    return batch, tokens, N, K


def host_us(fn, calls=200):
    fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    t1 = time.perf_counter()
    torch.cuda.synchronize()
    return (t1 - t0) / calls * 1e6


def main():
    rng = random.Random(SEED)
    tdt = getattr(torch, DTYPE)
    rows = []
    for _ in range(COUNT):
        batch, tokens, N, K = draw(rng)
        W = torch.randn(N, K, device="cuda", dtype=tdt)
        x3 = torch.randn(batch, tokens, K, device="cuda", dtype=tdt)
        x2 = x3.reshape(-1, K)
        v = x2[0].clone()
        Wt = W.t()
        ref3 = x3.double() @ Wt.double()
        refv = v.double() @ Wt.double()
        err3 = float((kgen.matmul(x3, Wt).double() - ref3).norm() / ref3.norm())
        errv = float((kgen.matmul(v, Wt).double() - refv).norm() / refv.norm())
        callers = {"kgen batch": lambda: kgen.matmul(x3, Wt), "kgen rows": lambda: kgen.matmul(x2, Wt),
                   "torch batch": lambda: torch.matmul(x3, Wt), "kgen vector": lambda: kgen.matmul(v, Wt),
                   "kgen one row": lambda: kgen.matmul(v[None], Wt), "torch vector": lambda: torch.matmul(v, Wt)}
        one: dict[str, list[float]] = {k: [] for k in callers}
        for _ in range(3):
            for name, fn in callers.items():
                one[name].append(time_calls(fn, warmup=3, repeats=20).median_ms * 1e3)
        row = {"batch": batch, "tokens": tokens, "N": N, "K": K, "dtype": DTYPE, "err_batch": err3,
               "err_vector": errv, "one_call_us": {k: statistics.median(v) for k, v in one.items()},
               "host_us": {k: host_us(fn) for k, fn in callers.items()}}
        rows.append(row)
        o, h = row["one_call_us"], row["host_us"]
        print(f"{batch}x{tokens}x{K} @ {K}x{N} {DTYPE}: 1 call kgen batch {o['kgen batch']:.1f} rows "
              f"{o['kgen rows']:.1f} torch {o['torch batch']:.1f} | vector kgen {o['kgen vector']:.1f} one row "
              f"{o['kgen one row']:.1f} torch {o['torch vector']:.1f} µs | host kgen batch {h['kgen batch']:.1f} "
              f"rows {h['kgen rows']:.1f} vector {h['kgen vector']:.1f} one row {h['kgen one row']:.1f} "
              f"torch {h['torch batch']:.1f} | err {err3:.1e} {errv:.1e}", flush=True)
        del W, x3, x2, v, Wt, ref3, refv
        torch.cuda.empty_cache()
    gm = {k: math.exp(statistics.fmean(math.log(r["one_call_us"]["torch batch" if "batch" in k or "rows" in k
                                                                 else "torch vector"] / r["one_call_us"][k])
                                       for r in rows))
          for k in ("kgen batch", "kgen rows", "kgen vector", "kgen one row")}
    print("x torch.matmul (1 call, geometric mean):", {k: round(v, 3) for k, v in gm.items()})
    with open(os.path.join(os.environ.get("OUT", "."), f"folded_calls_{SEED}.json"), "w") as fh:
        json.dump({"seed": SEED, "dtype": DTYPE, "rows": rows, "x_torch": gm}, fh, indent=1)


if __name__ == "__main__":
    main()
