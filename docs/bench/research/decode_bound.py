"""Few-row products (1-16 rows) against weights of 16 MB or more, drawn at random (env SEED,
COUNT, DTYPES, ORDERS): device time of what kgen.matmul runs (kgen.matmul(A, B, out=C)
captured in a CUDA graph over operands rotated past L2) and of cuBLAS (torch.matmul, TF32
and reduced-precision reductions off), each against the bandwidth bound: (A + B + C bytes) /
the copy bandwidth measured in the same run (a 1 GiB clone, read + write). Each result is
checked against float64 first (outputs NaN-poisoned). FLOOR=1 (default) also times a copy
of the same bytes (what one launch of that size reaches); each row names the spec kgen ran;
MIN_MB sets the least weight size (default 16); MULTIPLE the multiple N and K are drawn in (default
64, model layers; 1: any length, so most K leave the weight's rows off a 16-byte boundary);
TWIN=1 also times kgen on the same product with K rounded up to a whole 16 bytes (the aligned
twin: what the misalignment costs). Output: $OUT/decode_bound_<SEED>.json."""
import json
import math
import os
import random

import torch

import kgen
from kgen.bench.skinny import Operands, copy_bandwidth, copy_floor_us, time_graph
from kgen.tune.dispatch import call_spec

SEED = int(os.environ.get("SEED", "7701"))
COUNT = int(os.environ.get("COUNT", "12"))
DTYPES = os.environ.get("DTYPES", "float32,bfloat16").split(",")
ORDERS = os.environ.get("ORDERS", "col,row").split(",")
FLOOR = os.environ.get("FLOOR", "1") == "1"
MIN_MB = float(os.environ.get("MIN_MB", "16"))
MULTIPLE = int(os.environ.get("MULTIPLE", "64"))
TWIN = os.environ.get("TWIN", "0") == "1"
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False


def shapes(rng, item):
    """M log-uniform in 1..16; N and K log-uniform in 1024..16384, multiples of MULTIPLE,
    redrawn until the weight holds at least MIN_MB."""
    out = []
    while len(out) < COUNT:
        M = min(16, int(math.exp(rng.uniform(0, math.log(17)))))
        N, K = (-(-int(math.exp(rng.uniform(math.log(1024), math.log(16384)))) // MULTIPLE) * MULTIPLE
                for _ in range(2))
        if N * K * item >= MIN_MB * 1e6:
            out.append((max(1, M), N, K))
    return out


def brief(spec):
    """The spec's family and the fields that differ from their defaults."""
    import dataclasses
    out = []
    for f in dataclasses.fields(spec):
        v = getattr(spec, f.name)
        if f.default is not dataclasses.MISSING and v != f.default:
            out.append(f"{f.name}={v}")
    return type(spec).__name__ + " " + " ".join(out)


def main():
    bw = copy_bandwidth(torch, 20)
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    rows = []
    for dtype in DTYPES:
        item = torch.empty((), dtype=getattr(torch, dtype)).element_size()
        for M, N, K in shapes(random.Random(f"{SEED}-{dtype}"), item):
            for order in ORDERS:
                ops = Operands(torch, M, N, K, dtype, order, l2)
                ref = ops.A[0].double() @ ops.B[0].double()
                kgen.matmul(ops.A[0], ops.B[0], out=ops.C[0])
                err = float((ops.C[0].double() - ref).norm() / ref.norm())
                kg = [(lambda a=a, b=b, c=c: kgen.matmul(a, b, out=c)) for a, b, c in zip(ops.A, ops.B, ops.C)]
                cb = [(lambda a=a, b=b, c=c: torch.matmul(a, b, out=c)) for a, b, c in zip(ops.A, ops.B, ops.C)]
                k_us, c_us = time_graph(torch, kg, 15), time_graph(torch, cb, 15)
                bound = ops.bytes / bw * 1e6
                floor = copy_floor_us(torch, ops.bytes, l2, 15) if FLOOR else float("nan")
                spec = call_spec(ops.A[0], ops.B[0])
                twin = twin_share(M, N, K, dtype, order, l2, bw, item) if TWIN else None
                rows.append({"shape": [M, N, K], "dtype": dtype, "order": order, "err": err, "bound_us": bound,
                             "kgen_us": k_us, "cublas_us": c_us, "floor_us": floor, "spec": spec.to_dict(),
                             "twin": twin})
                print(f"{dtype} {order} {M}x{N}x{K}: bound {bound:.1f} kgen {k_us:.1f} ({bound / k_us:.0%}) "
                      f"cuBLAS {c_us:.1f} ({bound / c_us:.0%}) x{c_us / k_us:.2f} floor {floor:.1f} "
                      f"({floor / k_us:.0%}) err {err:.1e}"
                      + (f" | aligned K={twin['K']}: {twin['share']:.0%}" if twin else "") + f" | {brief(spec)}",
                      flush=True)
                del ops
                torch.cuda.empty_cache()
                save(bw, rows)
    for dtype in DTYPES:
        for order in ORDERS:
            sel = [r for r in rows if r["dtype"] == dtype and r["order"] == order]
            g = math.exp(sum(math.log(r["bound_us"] / r["kgen_us"]) for r in sel) / len(sel))
            x = math.exp(sum(math.log(r["cublas_us"] / r["kgen_us"]) for r in sel) / len(sel))
            print(f"{dtype} {order}: kgen at {g:.0%} of the bound (geometric mean; lowest "
                  f"{min(r['bound_us'] / r['kgen_us'] for r in sel):.0%}), {x:.2f}x cuBLAS", flush=True)
            pairs = [r for r in sel if r.get("twin")]
            if pairs:
                t = math.exp(sum(math.log(r["twin"]["share"]) for r in pairs) / len(pairs))
                o = math.exp(sum(math.log(r["bound_us"] / r["kgen_us"]) for r in pairs) / len(pairs))
                print(f"  {len(pairs)} with rows off 16 bytes: {o:.0%} of the bound, {t:.0%} with K rounded up",
                      flush=True)
    save(bw, rows)


def twin_share(M, N, K, dtype, order, l2, bw, item):
    """kgen's share of the bound on the product with K rounded up to whole 16 bytes (None
    where K already is): what the rows' offsets from a 16-byte boundary cost."""
    K2 = -(-K * item // 16) * 16 // item
    if K2 == K:
        return None
    ops = Operands(torch, M, N, K2, dtype, order, l2)
    ref = ops.A[0].double() @ ops.B[0].double()
    kgen.matmul(ops.A[0], ops.B[0], out=ops.C[0])
    err = float((ops.C[0].double() - ref).norm() / ref.norm())
    k_us = time_graph(torch, [(lambda a=a, b=b, c=c: kgen.matmul(a, b, out=c)) for a, b, c in zip(ops.A, ops.B, ops.C)],
                      15)
    share = ops.bytes / bw * 1e6 / k_us
    del ops
    return {"K": K2, "kgen_us": k_us, "share": share, "err": err}


def save(bw, rows):
    """Every row so far (written after each product, so a run cut short keeps what it timed)."""
    with open(os.path.join(os.environ.get("OUT", "."), f"decode_bound_{SEED}.json"), "w") as f:
        json.dump({"device": torch.cuda.get_device_name(), "copy_bandwidth": bw, "rows": rows}, f)


if __name__ == "__main__":
    main()
