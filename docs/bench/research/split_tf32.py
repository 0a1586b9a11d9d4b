"""float32 products (TF32 off) as three TF32 products on the wgmma kernel (TensorMatmul with
split_tf32=True) against the tiled SIMT kernels dispatch picks otherwise and cuBLAS SGEMM.

For each product: the relative norm error of kgen's split form, of the SIMT kernel and of cuBLAS
against a float64 product of the same inputs (outputs poisoned with NaN first), then the time of
one call between CUDA events (host time included, median of `REPEATS`) and of back-to-back calls.
Both kgen kernels are the ones dispatch builds for the call (`dispatch._kernel`), called as
`k(A, B)` the way kgen.matmul calls them. B is row-major (torch.randn(K, N)) unless a shape is
written with a `c` suffix (B = W.t() of an N x K weight).

Shapes: SHAPES=MxNxK,... named ones, plus COUNT random ones (seed SEED): M and N log-uniform in
[SIDE_MIN (256), 16384], K in [K_MIN (64), 16384], kept when 2^LOG2_LO (27) <= M*N*K <= 2^LOG2_HI
(36) and kgen.matmul runs neither on the skinny family. The tiled kernel is built as dispatch
builds it (repack off up to ELEMENT_LOADS_MAX_MACS). Output: $OUT/split_tf32[_SEED].json.
"""
import concurrent.futures as cf
import dataclasses
import json
import math
import os
import random
import statistics

import torch

import kgen
from kgen.bench.skinny import time_batched, time_single
from kgen.ops.matmul import Matmul
from kgen.ops.tensorcore import TensorMatmul
from kgen.tune import dispatch


def shapes():
    named = [s for s in os.environ.get("SHAPES", "").split(",") if s]
    out = []
    for s in named:
        col = s.endswith("c")
        M, N, K = (int(v) for v in s.rstrip("c").split("x"))
        out.append((M, N, K, "col" if col else "row"))
    rng = random.Random(int(os.environ.get("SEED", "1")))
    want = int(os.environ.get("COUNT", "0"))
    side, kmin = int(os.environ.get("SIDE_MIN", "256")), int(os.environ.get("K_MIN", "64"))
    lo, hi = 2 ** int(os.environ.get("LOG2_LO", "27")), 2 ** int(os.environ.get("LOG2_HI", "36"))
    from kgen.ops.skinny import Skinny
    while want:
        M, N = (int(math.exp(rng.uniform(math.log(side), math.log(16384)))) for _ in range(2))
        K = int(math.exp(rng.uniform(math.log(kmin), math.log(16384))))
        if lo <= M * N * K <= hi and not Skinny.suits(M, N, K, "float32", False, False, True):
            out.append((M, N, K, "row"))
            want -= 1
    return out


def specs(M, N, K, order):
    """The specs kernels() builds (compiled ahead in threads: loading a module needs the main thread)."""
    p = {"M": M, "N": N, "K": K}
    lay = {"layout_a": "row", "layout_b": order}
    out = []
    for cls, over in ((TensorMatmul, dict(lay, split_tf32=True)), (Matmul, _tiled(lay, M, N, K))):
        spec = dispatch.select(cls, p, "float32").spec
        fields = {f.name for f in dataclasses.fields(spec)}
        out.append(spec.for_layouts(p, **{k: v for k, v in over.items() if k in fields}))
    return out


def kernels(M, N, K, order):
    p = {"M": M, "N": N, "K": K}
    lay = {"layout_a": "row", "layout_b": order}
    return (dispatch._kernel(TensorMatmul, p, "float32", False, dict(lay, split_tf32=True)),
            dispatch._kernel(Matmul, p, "float32", False, _tiled(lay, M, N, K)))


def _tiled(lay, M, N, K):
    from kgen.ops.matmul import ELEMENT_LOADS_MAX_MACS

    return dict(lay, repack=False) if M * N * K <= ELEMENT_LOADS_MAX_MACS else lay


def main():
    out_dir = os.environ.get("OUT", ".")
    repeats = int(os.environ.get("REPEATS", "15"))
    torch.backends.cuda.matmul.allow_tf32 = False
    todo = shapes()
    with cf.ThreadPoolExecutor(16) as ex:   # compile everything first, in parallel
        list(ex.map(kgen.compile, [x for s in todo for x in specs(*s)]))
    rows = []
    for M, N, K, order in todo:
        copies = max(1, min(4, 400_000_000 // (4 * (M * K + K * N + M * N))))
        As = [torch.randn(M, K, device="cuda") for _ in range(copies)]
        Bs = [torch.randn(K, N, device="cuda") if order == "row" else torch.randn(N, K, device="cuda").t()
              for _ in range(copies)]
        split, simt = kernels(M, N, K, order)
        ref = As[0].double() @ Bs[0].double()
        row = {"M": M, "N": N, "K": K, "B": order, "split_spec": split.spec.to_json(), "simt_spec": simt.spec.to_json()}
        for name, fn in (("split", split), ("simt", simt), ("cublas", torch.matmul)):
            C = torch.full((M, N), float("nan"), device="cuda")
            if name == "cublas":
                torch.matmul(As[0], Bs[0], out=C)
            else:
                fn(As[0], Bs[0], out=C)
            torch.cuda.synchronize()
            row[name + "_err"] = float((C.double() - ref).norm() / ref.norm())
            calls = [lambda i=i, f=fn: f(As[i], Bs[i]) for i in range(copies)]
            row[name + "_single"] = time_single(torch, calls, repeats)
            row[name + "_pipelined"] = time_batched(torch, calls, 5, max(copies, 8))
        del ref
        rows.append(row)
        print(f"{M}x{N}x{K} B {order}: cuBLAS {row['cublas_single']:.0f} us | split {row['cublas_single'] / row['split_single']:.2f}x "
              f"simt {row['cublas_single'] / row['simt_single']:.2f}x (one call) | err split {row['split_err']:.1e} "
              f"simt {row['simt_err']:.1e} cuBLAS {row['cublas_err']:.1e}", flush=True)
        del As, Bs
        torch.cuda.empty_cache()
        split.release()
    json.dump({"device": torch.cuda.get_device_name(), "rows": rows}, open(f"{out_dir}/split_tf32_{os.environ.get('SEED', '1')}.json", "w"), indent=1)
    for lo, hi, label in ((0, 2 ** 29, "below 2^30 flops"), (2 ** 29, 2 ** 60, "2^30 flops and up")):
        rr = [r for r in rows if lo <= r["M"] * r["N"] * r["K"] < hi]
        if rr:
            g = lambda k: math.exp(statistics.fmean(math.log(r["cublas_single"] / r[k]) for r in rr))   # noqa: E731
            print(f"{label}: {len(rr)} shapes, x cuBLAS one call: split {g('split_single'):.3f}, simt {g('simt_single'):.3f}")


if __name__ == "__main__":
    main()
