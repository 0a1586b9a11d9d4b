"""A 16-bit B whose rows TMA cannot read, 65-256 rows against more column tiles than SMs: the
default there (64 x 256 streaming tiles, or 128 x 256 general ones) cannot take b_realign (its
staging does not fit beside a 256-column ring), so B is copied aligned before each product.
Variants that read B in place: the same rows with 128-column tiles, and A's rows as the wgmma
N (swap_ab) with 128 columns a block (one wave) or 64 columns two blocks an SM, each with
b_realign; against the default (copy) and cuBLAS. Device time, each call captured in a CUDA
graph over four copies of B, every result checked against float64 first. Env: SHAPES
(MxNxK[:col],...; ":col" for B = W.t() of an N x K weight). Output $OUT/realign_wide.json."""
import json
import os

import torch

import kgen
from kgen.bench.skinny import time_graph
from kgen.ops.tensorcore import TensorMatmul as T
from kgen.ops.tensorcore import wgmma_ring_stages

SHAPES = os.environ.get("SHAPES", "69x9537x9265,120x10001x4099,200x12001x2049,90x8999x7001,"
                                  "100x9600x4099:col,180x12288x3001:col,150x16001x4096,75x11111x2222:col")


def variants(M, N, K, order):
    p = {"M": M, "N": N, "K": K}
    default = T.default_spec(p, "bfloat16").replace(layout_b=order)
    out = {"default": default}
    BM, BN, BK = default.tile
    if BN > 128 and not default.swap_ab:
        out["tile128"] = default.replace(tile=(BM, 128, BK), warp_tile=(BM if BM == 64 else 64, 128),
                                         stages=wgmma_ring_stages(BM, 128)).with_realigned_b()
    bm = -(-M // 8) * 8
    for bn, per_sm in ((128, 1), (64, 2)):
        spec = T(dtype="bfloat16", tile=(bm, bn, 64), warp_tile=(bm, 64), stages=wgmma_ring_stages(bm, bn, per_sm),
                 instruction="wgmma", swap_ab=True, layout_b=order)
        out[f"swap{bn}/{per_sm}"] = spec.with_realigned_b()
    return {n: s for n, s in out.items() if n == "default" or s.b_realign}


def main():
    torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
    rows = []
    for text in SHAPES.split(","):
        dims, _, order = text.partition(":")
        order = order or "row"
        M, N, K = (int(v) for v in dims.split("x"))
        ways = {n: kgen.build(s) for n, s in variants(M, N, K, order).items()}
        A = torch.randn(M, K, device="cuda").to(torch.bfloat16)
        Bs = [torch.randn(N, K, device="cuda").to(torch.bfloat16).t() if order == "col" else
              torch.randn(K, N, device="cuda").to(torch.bfloat16) for _ in range(4)]
        ref = A.double() @ Bs[0].double()
        out = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
        row = {"shape": [M, N, K], "order": order, "specs": {n: k.spec.to_json() for n, k in ways.items()}}
        for name, fn in list(ways.items()) + [("cublas", torch.matmul)]:
            out.fill_(float("nan"))
            (fn if name != "cublas" else torch.mm)(A, Bs[0], out=out)
            torch.cuda.synchronize()
            row[name + "_err"] = float((out.double() - ref).norm() / ref.norm())
            run = fn if name != "cublas" else torch.mm
            calls = [lambda a=A, b=b, c=out, run=run: run(a, b, out=c) for b in Bs]
            row[name + "_us"] = time_graph(torch, calls * 4, 15)
        rows.append(row)
        print(f"{M}x{N}x{K} {order}: " + "  ".join(f"{n} {row[n + '_us']:.1f}" for n in list(ways) + ["cublas"])
              + f"  err {max(row[n + '_err'] for n in list(ways) + ['cublas']):.1e}", flush=True)
    with open(os.path.join(os.environ.get("OUT", "."), "realign_wide.json"), "w") as f:
        json.dump({"device": torch.cuda.get_device_name(), "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
