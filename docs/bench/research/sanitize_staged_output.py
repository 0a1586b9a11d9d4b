"""The mma.sync kernel's staged store of an unaligned output (TensorMatmul.staged_unaligned_output),
to run under compute-sanitizer (--tool racecheck, --tool memcheck): products of odd N, alpha and
beta, each result checked against float64 (NaN-poisoned where beta is 0); prints the failures.
SHORT_K=1: the short-K rule's tiles (TensorMatmul.short_k_spec, min_blocks) on the 16-bit products,
and on each with N even too (pairs stored from the registers); ELEMENT=1: TensorMatmul.element_spec
(64x64 blocks four an SM, K split where they are few) the same way, and products of a long K
(300x201x3001 in 14 slices, 29x41x7833 in 16: one cluster past the portable 8 blocks)."""
import os

import torch

import kgen
from kgen.ops.tensorcore import TensorMatmul as T

torch.manual_seed(0)
SHORT = os.environ.get("SHORT_K") == "1"
ELEMENT = os.environ.get("ELEMENT") == "1"
bad = 0
for M, N, K, dt, beta in ((300, 301, 77, "float32", 0.0), (130, 259, 45, "bfloat16", 0.5), (7, 13, 5, "float16", 0.0),
                          (257, 129, 300, "bfloat16", 0.0), (65, 191, 33, "float16", -1.0),
                          (300, 201, 3001, "bfloat16", 0.5), (29, 41, 7833, "float16", -1.0)):
    if (SHORT or ELEMENT) and dt == "float32":
        continue
    p = {"M": M, "N": N, "K": K}
    spec = (T.short_k_spec(p, dt) if SHORT else T.element_spec(p, dt) if ELEMENT
            else T.mma_default_spec(p, dt).replace(repack=False))
    assert spec.staged_unaligned_output
    k = kgen.build(spec)
    tdt = getattr(torch, dt)
    for n in (N, N + 1) if SHORT or ELEMENT else (N,):
        A = torch.randn(M, K, device="cuda").to(tdt)
        B = torch.randn(K, n, device="cuda").to(tdt)
        C0 = torch.randn(M, n, device="cuda").to(tdt)
        C = C0.clone() if beta else torch.full((M, n), float("nan"), device="cuda", dtype=tdt)
        k(A, B, out=C, alpha=1.5, beta=beta)
        torch.cuda.synchronize()
        ref = 1.5 * (A.double() @ B.double()) + beta * C0.double()
        err = float((C.double() - ref).norm() / ref.norm())
        ok = err < (3e-3 if dt != "float32" else 1e-2)
        bad += not ok
        print(M, n, K, dt, beta, spec.tile, spec.split_k, f"{err:.1e}", "ok" if ok else "BAD", flush=True)
print("failures", bad)
