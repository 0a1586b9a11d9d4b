"""float32 products of 1-16 rows against weights of 16 MB or more (drawn at random: env SEED,
COUNT, ORDERS; N and K multiples of 64), where kgen.matmul runs the skinny family: the spec it
runs against the same spec with K in a fixed number of slabs (k_split 1-16), one or four waves,
other column counts a warp and load depths, and cuBLAS (TF32 off). Device time from a CUDA
graph over operands rotated past L2; each result checked against float64 first (outputs
NaN-poisoned). SHAPES=MxNxK,... replaces the draw; VARIANTS=tc times the split-TF32 tensor-core
forms' fields instead (K slabs to 64, waves, tiles a warp, threads, merges, loads, min_blocks, the
wgmma instruction), VARIANTS=tiles only one or two 16-column tiles a warp (one with one or two waves) and the
atomic merge; SPLITS_ONLY=1 times only the k_split
variants; VARIANTS=axpy times the row-major (axpy) form's fields instead (waves, lane_vectors,
loads, and their pairs); ROWS=LO-HI draws M from LO to HI (default 1-16) and MULTIPLE=1 keeps N
as drawn (a third odd) instead of multiples of 64; N_RANGE=LO-HI draws N from LO to HI (default
1024-16384). Output: $OUT/skinny_f32_splits_<SEED>.json."""
import concurrent.futures as cf
import json
import math
import os
import random

import torch

import kgen
from kgen.bench.skinny import Operands, time_graph
from kgen.ops.skinny import Skinny, tolerance
from kgen.tune import dispatch

SEED = int(os.environ.get("SEED", "7801"))
COUNT = int(os.environ.get("COUNT", "14"))
ORDERS = os.environ.get("ORDERS", "col").split(",")
ROWS = tuple(int(v) for v in os.environ.get("ROWS", "1-16").split("-"))
MULTIPLE = int(os.environ.get("MULTIPLE", "64"))
N_RANGE = tuple(int(v) for v in os.environ.get("N_RANGE", "1024-16384").split("-"))
torch.backends.cuda.matmul.allow_tf32 = False


def shapes(rng):
    if os.environ.get("SHAPES"):
        return [tuple(int(v) for v in t.split("x")) for t in os.environ["SHAPES"].split(",")]
    out = []
    while len(out) < COUNT:
        M = max(ROWS[0], min(ROWS[1], int(math.exp(rng.uniform(math.log(ROWS[0]), math.log(ROWS[1] + 1))))))
        N, K = (-(-int(math.exp(rng.uniform(math.log(lo), math.log(hi)))) // MULTIPLE) * MULTIPLE
                for lo, hi in (N_RANGE, (1024, 16384)))
        if MULTIPLE == 1:
            N = N - N % 2 + (rng.random() < 1 / 3)   # a third of N odd, K any
        if N * K * 4 >= 16e6:
            out.append((M, N, K))
    return out


def variants(spec):
    out = {"default": spec}

    def add(name, **kw):
        try:
            s = spec.replace(**kw)
        except ValueError:
            return
        if s not in out.values():
            out[name] = s

    if os.environ.get("VARIANTS") == "axpy":
        for w in (1, 3):
            add(f"waves={w}", waves=w)
        for ld in (4, 16):
            add(f"loads={ld}", loads=ld)
        add("lane_vectors=2", lane_vectors=2)
        for w in (1, 3):
            add(f"lane_vectors=2,waves={w}", lane_vectors=2, waves=w)
        add("lane_vectors=2,loads=4", lane_vectors=2, loads=4)
        return out
    if os.environ.get("VARIANTS") == "tiles":
        add("tc_tiles=1", tc_tiles=1)
        add("tc_tiles=2", tc_tiles=2)
        add("tc_tiles=1,waves=2", tc_tiles=1, waves=2)
        add("merge=atomic", merge="atomic")
        return out
    if os.environ.get("VARIANTS") == "tc":
        for s in (8, 16, 32, 64):
            add(f"k_split={s}", k_split=s)
        for w in (2, 4):
            add(f"waves={w}", waves=w)
        add("tc_tiles=1", tc_tiles=1)
        add("tc_tiles=1,waves=2", tc_tiles=1, waves=2)
        add("threads=128", threads=128)
        add("threads=128,tc_tiles=1", threads=128, tc_tiles=1)
        add("merge=single_pass", merge="single_pass")
        add("merge=atomic", merge="atomic")
        for ld in (4, 16):
            add(f"loads={ld}", loads=ld)
        add("min_blocks=2", min_blocks=2)
        for threads in (128, 256):
            for tiles in (1, 2):
                add(f"wgmma,threads={threads},tc_tiles={tiles}", instruction="wgmma", threads=threads, tc_tiles=tiles,
                    warp_cols=1, lane_vectors=1, loads=4, rows=-(-spec.rows // 8) * 8)
        return out
    for s in (1, 2, 3, 4, 6, 8, 12, 16):
        add(f"k_split={s}", k_split=s)
    if os.environ.get("SPLITS_ONLY"):
        return out
    for w in (1, 4):
        add(f"waves={w}", waves=w)
    for wc in (2, 8):
        add(f"warp_cols={wc}", warp_cols=wc)
    for ld in (4, 16):
        add(f"loads={ld}", loads=ld)
    add("k_split=1,loads=16", k_split=1, loads=16)
    add("k_split=2,loads=16", k_split=2, loads=16)
    return out


def main():
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    cases = []
    for M, N, K in shapes(random.Random(SEED)):
        for order in ORDERS:
            A = torch.randn(M, K, device="cuda")
            B = torch.randn(N, K, device="cuda").t() if order == "col" else torch.randn(K, N, device="cuda")
            kgen.matmul(A, B)
            k = dispatch._fast[("matmul", A.shape, A.stride(), B.shape, B.stride(), A.dtype, False)]
            if isinstance(k.spec, Skinny):
                cases.append(((M, N, K), order, variants(k.spec)))
    with cf.ThreadPoolExecutor(16) as ex:
        list(ex.map(kgen.compile, {s.key: s for _, _, v in cases for s in v.values()}.values()))
    rows = []
    for (M, N, K), order, v in cases:
        ops = Operands(torch, M, N, K, "float32", order, l2)
        ref = ops.A[0].double() @ ops.B[0].double()
        row = {"shape": [M, N, K], "order": order, "bytes": ops.bytes, "specs": {n: s.to_json() for n, s in v.items()}}
        ways = {"cublas": None, **{n: kgen.build(s) for n, s in v.items()}}
        for n, k in ways.items():
            fn = (lambda a, b, c: torch.matmul(a, b, out=c)) if k is None else (lambda a, b, c, k=k: k(a, b, out=c))
            ops.C[0].fill_(float("nan"))
            fn(ops.A[0], ops.B[0], ops.C[0])
            torch.cuda.synchronize()
            err = float((ops.C[0].double() - ref).norm() / ref.norm())
            row[n + "_ok"] = bool(math.isfinite(err) and err <= tolerance("float32", K)) if k is not None else True
            calls = [(lambda a=a, b=b, c=c, fn=fn: fn(a, b, c)) for a, b, c in zip(ops.A, ops.B, ops.C)]
            row[n] = time_graph(torch, calls, 12)
            if k is not None:
                row[n + "_splits"] = k.bind(ops.A[0], ops.B[0], ops.C[0]).plan.splits
        best = min((n for n in ways if n != "cublas"), key=lambda n: row[n])
        print(f"{M}x{N}x{K} {order}: cublas {row['cublas']:.1f} default {row['default']:.1f} "
              f"(splits {row['default_splits']}) best {best} {row[best]:.1f} (splits {row[best + '_splits']}) | "
              + " ".join(f"{n}={row[n]:.1f}" for n in ways if n not in ("cublas", "default")), flush=True)
        rows.append(row)
        del ops
        torch.cuda.empty_cache()
    with open(os.path.join(os.environ.get("OUT", "."), f"skinny_f32_splits_{SEED}.json"), "w") as f:
        json.dump({"device": torch.cuda.get_device_name(), "rows": rows}, f)


if __name__ == "__main__":
    main()
