"""Compile specs drawn at random for sm_90 (kgen.compile, no GPU) and report those that fail to
compile and the entry points that spill. MODE=space: specs drawn from the search spaces of Skinny,
TensorMatmul and Matmul for problems drawn from a small grid of sides (1 to 14336) and every dtype
each family takes. MODE=dispatch: the spec kgen.matmul's dispatch picks for a stand-in H200 on
random shapes (half few-row, a third 17-256 rows, the rest any shape; half with sides rounded to
multiples of 64), B stored as W.t() or row-major, float32 / float16 / float64. Env: MODE, SEED,
SECONDS (time budget). A spill here is in any entry point of the module, launched or not
(launched_spills.py narrows it to the launched ones); the tuner prunes candidates that spill more
than 128 bytes (kgen.tune.prune)."""
import math
import os
import random
import sys
import time

import numpy as np

import kgen
from kgen.ops.matmul import Matmul
from kgen.ops.skinny import Skinny
from kgen.ops.tensorcore import TensorMatmul
from kgen.tune import dispatch
from kgen.tune.device import DeviceInfo, arch_limits

MODE = os.environ.get("MODE", "space")
SEED = int(os.environ.get("SEED", "7"))
SECONDS = float(os.environ.get("SECONDS", "600"))
FAMILIES = [(Skinny, ["float32", "float16", "bfloat16", "float64"]),
            (TensorMatmul, ["float16", "bfloat16", "float32", "float64"]), (Matmul, ["float32", "float64"])]


def stand_in_h200():
    """Dispatch answering for an H200 (132 SMs, sm_90, the wgmma kernel) on a machine without a GPU."""
    dev = DeviceInfo("NVIDIA H200", "sm_90", dict(arch_limits("sm_90"), multiprocessors=132, compute_capability=90))
    dispatch._this_device = lambda: dev
    dispatch._runs_wgmma = lambda: True
    return dev


def from_spaces(rng):
    family, dtypes = rng.choice(FAMILIES)
    dtype = rng.choice(dtypes)
    problem = {"M": rng.choice([1, 3, 8, 13, 16, 17, 40, 64, 100, 256, 777, 2048]),
               "N": rng.choice([1, 5, 64, 1000, 1024, 4096, 5555, 14336]),
               "K": rng.choice([1, 7, 64, 300, 1024, 4097, 8192])}
    space = family.search_space(problem, dtype)
    return (f"{family.__name__} {dtype} {problem}", rng.choice(space)) if space else (None, None)


def from_dispatch(rng, dev):
    def side(lo, hi):
        return max(1, int(math.exp(rng.uniform(math.log(lo), math.log(hi)))))
    kind = rng.random()
    M = side(1, 17) if kind < 0.5 else side(17, 257) if kind < 0.8 else side(1, 5000)
    N, K = (side(1, 16384), side(1, 16384)) if kind > 0.8 else (side(1024, 16384), side(1024, 16384))
    if rng.random() < 0.5:
        N, K = -(-N // 64) * 64, -(-K // 64) * 64
    dtype = rng.choice([np.float32, np.float16, np.float64])
    A = np.ones((M, K), dtype)
    B = np.ones((N, K), dtype).T if rng.random() < 0.5 else np.ones((K, N), dtype)
    return f"{M}x{N}x{K} {dtype.__name__}", dispatch.call_spec(A, B, device=dev, db=False)


def main():
    rng = random.Random(SEED)
    dev = stand_in_h200()
    seen, failed, spilling = set(), 0, 0
    t0 = time.time()
    while time.time() - t0 < SECONDS:
        what, spec = from_spaces(rng) if MODE == "space" else from_dispatch(rng, dev)
        if spec is None or spec.key in seen:
            continue
        seen.add(spec.key)
        try:
            resources = kgen.compile(spec, "sm_90").resources
        except Exception as exc:   # the finding this sweep looks for
            failed += 1
            print(f"FAILED {what}: {spec.to_json()} {str(exc)[:400]}", flush=True)
            continue
        spills = {n: (r["registers"], r["spill_stores"], r["spill_loads"]) for n, r in resources.items()
                  if r["spill_stores"] or r["spill_loads"]}
        if spills:
            spilling += 1
            print(f"spills {what}: {spills} | {spec.to_json()}", flush=True)
    print(f"{len(seen)} specs compiled ({MODE}): {failed} failed, {spilling} with an entry point that spills")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
