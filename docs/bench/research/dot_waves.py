"""The SIMT dot form's K split where its column tiles are fewer than DOT_WHOLE_K_SM_SHARE of the
SMs (there `waves` sets the split: waves x resident blocks / tiles slabs): the spec kgen.matmul
runs against the same spec with waves = 1, 3 and 4, for float32 products of ROWS rows against
W.t() of 16 MB or more drawn at random (env SEED, COUNT; N from N_RANGE, K from 1024-16384,
multiples of 64 unless MULTIPLE=1). Only products whose dispatch spec is the SIMT dot form with
few tiles are kept. Device time from a CUDA graph over operands rotated past L2, each variant
timed ROUNDS times in turn (the best kept), each result checked against float64 first (outputs
NaN-poisoned). Output: $OUT/dot_waves_<SEED>.json."""
import json
import math
import os
import random

import torch

import kgen
from kgen.bench.skinny import Operands, time_graph
from kgen.ops.skinny import DOT_WHOLE_K_SM_SHARE, Skinny, tolerance
from kgen.tune import dispatch

SEED = int(os.environ.get("SEED", "16101"))
COUNT = int(os.environ.get("COUNT", "12"))
ROWS = tuple(int(v) for v in os.environ.get("ROWS", "1-6").split("-"))
N_RANGE = tuple(int(v) for v in os.environ.get("N_RANGE", "1024-4096").split("-"))
MULTIPLE = int(os.environ.get("MULTIPLE", "64"))
ROUNDS = int(os.environ.get("ROUNDS", "2"))
WAVES = [int(w) for w in os.environ.get("WAVES", "1,3,4").split(",")]
torch.backends.cuda.matmul.allow_tf32 = False


def draw(rng):
    M = int(math.exp(rng.uniform(math.log(ROWS[0]), math.log(ROWS[1] + 1))))
    N, K = (max(MULTIPLE, int(math.exp(rng.uniform(math.log(lo), math.log(hi)))) // MULTIPLE * MULTIPLE)
            for lo, hi in (N_RANGE, (1024, 16384)))
    return min(max(M, ROWS[0]), ROWS[1]), N, K


def main():
    rng = random.Random(SEED)
    props = torch.cuda.get_device_properties(0)
    l2, sms = props.L2_cache_size, props.multi_processor_count
    rows, tries = [], 0
    while len(rows) < COUNT and tries < 50 * COUNT:
        tries += 1
        M, N, K = draw(rng)
        if N * K * 4 < 16e6:
            continue
        ops = Operands(torch, M, N, K, "float32", "col", l2)
        kgen.matmul(ops.A[0], ops.B[0], out=ops.C[0])
        spec = dispatch.call_spec(ops.A[0], ops.B[0])
        if not isinstance(spec, Skinny) or spec.tensor_cores:
            continue
        k = kgen.build(spec)
        plan = k.bind(ops.A[0], ops.B[0], ops.C[0]).plan
        tiles = -(-N // spec.dot_cols())
        if plan.form != "dot" or tiles >= DOT_WHOLE_K_SM_SHARE * sms:
            continue
        ways = {"default": k}
        for w in WAVES:
            s = spec.replace(waves=w)
            if s != spec:
                ways[f"waves={w}"] = kgen.build(s)
        ref = ops.A[0].double() @ ops.B[0].double()
        row = {"shape": [M, N, K], "tiles": tiles, "spec": spec.to_json(), "us": {}, "splits": {}}
        for n, kern in ways.items():
            ops.C[0].fill_(float("nan"))
            kern(ops.A[0], ops.B[0], out=ops.C[0])
            torch.cuda.synchronize()
            err = float((ops.C[0].double() - ref).norm() / ref.norm())
            assert math.isfinite(err) and err <= tolerance("float32", K), (M, N, K, n, err)
            row["splits"][n] = kern.bind(ops.A[0], ops.B[0], ops.C[0]).plan.splits
        for _ in range(ROUNDS):
            for n, kern in ways.items():
                calls = [(lambda a=a, b=b, c=c, kern=kern: kern(a, b, out=c)) for a, b, c in zip(ops.A, ops.B, ops.C)]
                row["us"].setdefault(n, []).append(time_graph(torch, calls, 15))
        best = {n: min(v) for n, v in row["us"].items()}
        print(f"{M}x{N}x{K} tiles {tiles}: " + " ".join(
            f"{n} {best[n]:.2f} (splits {row['splits'][n]}, x{best['default'] / best[n]:.3f})" for n in ways), flush=True)
        rows.append(row)
        del ops
        torch.cuda.empty_cache()
    with open(os.path.join(os.environ.get("OUT", "."), f"dot_waves_{SEED}.json"), "w") as f:
        json.dump({"device": torch.cuda.get_device_name(), "rows": rows}, f)


if __name__ == "__main__":
    main()
