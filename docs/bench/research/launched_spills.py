"""Which entry points kgen.matmul would launch for few-row products drawn at random, and whether
ptxas spills in them. No GPU: dispatch answers for a stand-in H200 (132 SMs, sm_90, wgmma), the
skinny family's plan is made with a stand-in driver (it resolves no function and launches
nothing), and each spec is compiled for sm_90 (kgen.compile). Products: M from 1 to 64, N from 64
and K from 16 to 16384 (log-uniform, as drawn), float32 / float16 / float64, B stored as W.t() or
row-major, B's pointer 0-3 elements past a 16-byte boundary. Env: SEED, SECONDS (time budget).
Prints one line per spilling launched entry, then counts by dtype, form and rows."""
import collections
import math
import os
import random
import sys
import time

import numpy as np

import kgen
import kgen.core.launch as launch
from kgen.ops.skinny import Skinny, SkinnyKernel
from kgen.tune import dispatch

from compile_sweep import stand_in_h200   # beside this script

SEED = int(os.environ.get("SEED", "1"))
SECONDS = float(os.environ.get("SECONDS", "600"))


class _Driver:
    """Every driver entry point a plan binds; none is called."""

    def __getattr__(self, name):
        return lambda *args: 0


def stand_in_kernel(spec):
    k = object.__new__(SkinnyKernel)
    k.spec, k._plans, k._sms, k._slots = spec, {}, 132, {}
    k._fmt_main = k._fmt_merge = k._fmt_prescale = k._fmt_image = "P"
    k.handle = lambda name, shared=0, carveout=None: 0
    k._resident_slots = lambda name, shared: 264
    return k


def main():
    launch._libcuda = lambda: _Driver()
    dev = stand_in_h200()
    rng = random.Random(SEED)

    def side(lo, hi):
        return max(1, int(math.exp(rng.uniform(math.log(lo), math.log(hi)))))

    seen, counts, spilled = set(), collections.Counter(), collections.Counter()
    t0 = time.time()
    while time.time() - t0 < SECONDS:
        M, N, K = side(1, 65), side(64, 16384), side(16, 16384)
        dt = rng.choice([np.float32, np.float16, np.float64])
        col = rng.random() < 0.5
        A = np.ones((M, K), dt)
        B = np.ones((N, K), dt).T if col else np.ones((K, N), dt)
        spec = dispatch.call_spec(A, B, device=dev, db=False)
        if not isinstance(spec, Skinny):
            continue
        off = rng.choice([0, 0, 1, 2, 3])
        plan = stand_in_kernel(spec)._plan(M, K, (K, 1), K, N, (1, K) if col else (N, 1), (M, N), (N, 1),
                                           1 << 20, (1 << 20) + off * A.itemsize)
        mains = tuple(lc.name for kind, lc, _ in plan.launches if kind == "main")
        if (spec.key, mains) in seen:
            continue
        seen.add((spec.key, mains))
        resources = kgen.compile(spec, "sm_90").resources
        for name in mains:
            r = resources[name]
            group = (dt.__name__, name.rsplit("_", 1)[0], spec.rows)
            counts[group] += 1
            if r["spill_stores"] or r["spill_loads"]:
                spilled[group] += 1
                print(f"{M}x{N}x{K} {dt.__name__} {'W.t()' if col else 'row-major'} offset {off}: {name} "
                      f"{r['registers']} registers, spills {r['spill_stores']} / {r['spill_loads']} bytes | {spec}",
                      flush=True)
    print(f"{len(seen)} launched configurations; entries that spill, by dtype, form and rows:")
    for group in sorted(spilled):
        print(f"  {group}: {spilled[group]} of {counts[group]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
