"""float32 products of 17-256 rows against a large operand, as the wgmma skinny forms run them
(the split-TF32 forms, Skinny instruction="wgmma"), against the other ways kgen has: fields of
that spec one at a time (two 64-column tiles a warpgroup, one or two warpgroups a block, one or
four waves, K in 1-8 slabs, the slabs merged in a cluster or by atomics) and the other families
(the split-TF32 wgmma tiles, TensorMatmul split_tf32; the tiled SIMT kernels, Matmul), beside
cuBLAS SGEMM (TF32 off).
Products: SHAPES ("MxNxK,...") and/or COUNT drawn as `kgen bench calls matmul --random COUNT
--seed SEED --rows ROWS --dtype float32` draws them, kept where dispatch runs the wgmma skinny
forms and (MAX_GFLOP) the product is at most that many GFLOP (2 flops a multiply-add).
ORDERS ("row", "col" or "row,col"): B row-major or W.t().
Two figures a way: device time from a CUDA graph with operands rotated past L2 ("_cold"), and
one call between CUDA events on one operand set, host time included ("_single"). Every result
is checked against float64 first, its output NaN-poisoned (swap_fill_sweep.time_ways).
Output: $OUT/f32_row_routes_<SEED>.json and a line a product.
`python f32_row_routes.py --specs`: the specs the draw needs, compiled (no GPU; KGEN_ARCH=sm_90)."""
import concurrent.futures as cf
import json
import math
import os
import sys

import numpy as np

import kgen
from kgen.bench.calls import random_matmul_shapes
from kgen.ops.matmul import Matmul
from kgen.ops.skinny import Skinny
from kgen.ops.tensorcore import TensorMatmul
from kgen.tune import dispatch

SEED = int(os.environ.get("SEED", "22001"))
COUNT = int(os.environ.get("COUNT", "16"))
ROWS = tuple(int(r) for r in os.environ.get("ROWS", "17-256").split("-"))
MAX_GFLOP = float(os.environ.get("MAX_GFLOP", "inf"))
ORDERS = os.environ.get("ORDERS", "row").split(",")
# WAYS ("name,name"): only these ways beside cuBLAS (default: all); w1 and w2 are the call's
# wgmma spec with K split for one and for two waves of resident blocks.
WAYS = [w for w in os.environ.get("WAYS", "").split(",") if w]


def stand_ins(M, N, K, order):
    A = np.empty((M, K), np.float32)
    B = np.empty((N, K), np.float32).T if order == "col" else np.empty((K, N), np.float32)
    return A, B


def shapes():
    named = [tuple(int(v) for v in s.split("x")) for s in os.environ.get("SHAPES", "").split(",") if s]
    drawn = random_matmul_shapes(COUNT, SEED, rows=ROWS) if COUNT else []
    keep = []
    for M, N, K in named + drawn:
        if 2 * M * N * K > MAX_GFLOP * 1e9 and (M, N, K) not in named:
            continue
        keep.append((M, N, K))
    return keep


def variants(M, N, K, order, device=None):
    """{name: spec}: the call's spec ("default") and the ways beside it."""
    A, B = stand_ins(M, N, K, order)
    where = {"device": device} if device is not None else {}
    d = dispatch.call_spec(A, B, db=False, **where)
    out = {"default": d}
    p = {"M": M, "N": N, "K": K}
    if isinstance(d, Skinny) and d.instruction == "wgmma":
        changes = {"w1": {"waves": 1}, "w2": {"waves": 2}, "tiles2": {"tc_tiles": 2}, "groups": {"threads": 384 - d.threads},
                   "waves1": {"waves": 1}, "waves4": {"waves": 4}, "atomic": {"merge": "atomic"}}
        changes.update({f"ks{s}": {"k_split": s} for s in (1, 2, 4, 8)})
        changes.update({f"cl{s}": {"merge": "cluster", "k_split": s} for s in (2, 4)})
        for name, kw in changes.items():
            try:
                out[name] = d.replace(**kw)
            except ValueError:
                pass
    for name, fam in (("split", TensorMatmul), ("simt", Matmul)):
        if WAYS and name not in WAYS:
            continue
        over = dispatch.call_overrides(A, B, fam, "float32", False, stand_in=True, **where)
        if fam is TensorMatmul:
            over["split_tf32"] = True
        try:
            out[name] = dispatch.resolve_spec(fam, p, "float32", over, db=False, **where)
        except Exception as exc:   # a family that cannot take the product is left out
            print(f"{M}x{N}x{K} {order}: no {name} ({exc})", flush=True)
    return {n: s for n, s in out.items() if not WAYS or n in WAYS or n == "default"}


def single_us(torch, fn, a, b, c, repeats=40):
    from kgen.core.timing import time_calls

    return time_calls(lambda: fn(a, b, out=c), warmup=3, repeats=repeats).median_ms * 1e3


def main():
    import torch
    from swap_fill_sweep import time_ways   # this folder: the scripts run from it or with it on the path

    from kgen.bench.skinny import Operands

    torch.backends.cuda.matmul.allow_tf32 = False
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    todo = [((M, N, K), o, variants(M, N, K, o)) for M, N, K in shapes() for o in ORDERS]
    every = {s.key: s for _, _, v in todo for s in v.values()}
    print(len(todo), "products,", len(every), "specs", flush=True)
    with cf.ThreadPoolExecutor(16) as ex:
        list(ex.map(kgen.compile, every.values()))
    rows = []
    for (M, N, K), order, specs in todo:
        ops = Operands(torch, M, N, K, "float32", order, l2)
        ways = {"cublas": torch.matmul, **{n: kgen.build(s) for n, s in specs.items()}}
        row = {"shape": [M, N, K], "order": order, "specs": {n: s.to_json() for n, s in specs.items()}}
        row.update(time_ways(torch, ops, ways, 15))
        for n, fn in ways.items():
            row[n + "_single"] = single_us(torch, fn, ops.A[0], ops.B[0], ops.C[0])
        del ops
        torch.cuda.empty_cache()
        rows.append(row)
        err = max(row[n + "_err"] for n in ways if n != "cublas")
        print(f"{M}x{N}x{K} {order}: " + "  ".join(f"{n} {row[n + '_cold']:.1f}/{row[n + '_single']:.1f}"
                                                  for n in ways) + f"  err {err:.1e}", flush=True)
        assert err < 1e-4, f"{M}x{N}x{K} {order}: relative error {err:.1e}"
        with open(os.path.join(os.environ.get("OUT", "."), f"f32_row_routes_{SEED}.json"), "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "seed": SEED, "rows": rows}, f)

    def geo(values):
        return math.exp(sum(math.log(v) for v in values) / len(values))

    names = sorted({k[:-5] for r in rows for k in r if k.endswith("_cold")} - {"cublas"})
    for name in names:
        have = [r for r in rows if name + "_cold" in r]
        for kind in ("cold", "single"):
            print(f"{name} {kind}: x{geo([r['default_' + kind] / r[name + '_' + kind] for r in have]):.3f} the "
                  f"default, x{geo([r['cublas_' + kind] / r[name + '_' + kind] for r in have]):.3f} cuBLAS "
                  f"(lowest x{min(r['cublas_' + kind] / r[name + '_' + kind] for r in have):.3f}; {len(have)})")


if __name__ == "__main__":
    if sys.argv[1:] == ["--specs"]:   # no GPU: the specs of the draw on an H200, compiled
        from kgen.tune.device import DeviceInfo, arch_limits

        h200 = DeviceInfo("NVIDIA H200", "sm_90", dict(arch_limits("sm_90"), multiprocessors=132))
        dispatch._runs_wgmma = lambda: True
        dispatch._this_device = lambda: h200
        every = {}
        for M, N, K in shapes():
            for o in ORDERS:
                v = variants(M, N, K, o, device=h200)
                print(f"{M}x{N}x{K} {o}: " + " ".join(v), flush=True)
                every.update({s.key: s for s in v.values()})
        print(len(every), "specs", flush=True)
        with cf.ThreadPoolExecutor(2) as ex:
            list(ex.map(kgen.compile, every.values()))
    else:
        main()
