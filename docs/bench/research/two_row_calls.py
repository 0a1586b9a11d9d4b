"""Two row tiles of half the rows (SWAP_TWO_ROW_TILES) against the tree before, one call between
CUDA events (host time included) in one process: the built kernels of the default and of the
default with the rule off, and cuBLAS through torch, timed in turn (ROUNDS rounds, the median of
each), on the products tail_wave_variants.py SET=heldout_rows2 draws (SEED, COUNT, ROWS, N_RANGE,
K_RANGE; B as W.t(), bfloat16 unless DTYPE). Two processes (kgen bench calls on two trees) differ
by more than the rule does at 20-100 µs a call; here every way meets the same clocks. Each
result is checked against float64 first, its output NaN-poisoned.
Output: $OUT/two_row_calls_<SEED>.json and a line a product."""
import json
import math
import os
import statistics

import torch
from tail_wave_variants import SEED, changed_shapes, plan   # this folder: run from it or with it on the path

import kgen
from kgen.core.timing import time_calls

DTYPE = os.environ.get("DTYPE", "bfloat16")
ROUNDS = int(os.environ.get("ROUNDS", "5"))


def main():
    rows = []
    dt = getattr(torch, DTYPE)
    for M, N, K in changed_shapes():
        specs = plan(M, N, K, "col")
        A = torch.randn(M, K, device="cuda").to(dt)
        B = torch.randn(N, K, device="cuda").to(dt).t()
        C = torch.full((M, N), float("nan"), device="cuda", dtype=dt)
        ref = A.double() @ B.double()
        ways = {"cublas": lambda: torch.matmul(A, B, out=C)}
        for name in ("default", "before"):
            k = kgen.build(specs[name].replace(dtype=DTYPE))
            C.fill_(float("nan"))
            k(A, B, out=C)
            torch.cuda.synchronize()
            err = float((C.double() - ref).norm() / ref.norm())
            assert err < 1e-2, (M, N, K, name, err)
            ways[name] = lambda k=k: k(A, B, out=C)
        times = {n: [] for n in ways}
        for _ in range(ROUNDS):
            for n, fn in ways.items():
                times[n].append(time_calls(fn, warmup=3, repeats=30).median_ms * 1e3)
        row = {"shape": [M, N, K], **{n + "_us": statistics.median(v) for n, v in times.items()}}
        rows.append(row)
        print(f"{M}x{N}x{K}: cublas {row['cublas_us']:.1f} default {row['default_us']:.1f} "
              f"before {row['before_us']:.1f} µs", flush=True)
        with open(os.path.join(os.environ.get("OUT", "."), f"two_row_calls_{SEED}.json"), "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "dtype": DTYPE, "rows": rows}, f)

    def geo(v):
        return math.exp(sum(map(math.log, v)) / len(v))

    print(f"default over before x{geo([r['before_us'] / r['default_us'] for r in rows]):.3f}; x cuBLAS "
          f"{geo([r['cublas_us'] / r['before_us'] for r in rows]):.3f} -> "
          f"{geo([r['cublas_us'] / r['default_us'] for r in rows]):.3f} (lowest "
          f"{min(r['cublas_us'] / r['before_us'] for r in rows):.3f} -> "
          f"{min(r['cublas_us'] / r['default_us'] for r in rows):.3f}; {len(rows)} products)")


if __name__ == "__main__":
    main()
