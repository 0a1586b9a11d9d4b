"""The mma.sync kernel's staged store of an unaligned output (TensorMatmul.staged_unaligned_output),
to run under compute-sanitizer (--tool racecheck, --tool memcheck): products of odd N, alpha and
beta, each result checked against float64 (NaN-poisoned where beta is 0); prints the failures."""
import torch

import kgen
from kgen.ops.tensorcore import TensorMatmul as T

torch.manual_seed(0)
bad = 0
for M, N, K, dt, beta in ((300, 301, 77, "float32", 0.0), (130, 259, 45, "bfloat16", 0.5), (7, 13, 5, "float16", 0.0),
                          (257, 129, 300, "bfloat16", 0.0), (65, 191, 33, "float16", -1.0)):
    p = {"M": M, "N": N, "K": K}
    spec = T.mma_default_spec(p, dt).replace(repack=False)
    assert spec.staged_unaligned_output
    k = kgen.build(spec)
    tdt = getattr(torch, dt)
    A = torch.randn(M, K, device="cuda").to(tdt)
    B = torch.randn(K, N, device="cuda").to(tdt)
    C0 = torch.randn(M, N, device="cuda").to(tdt)
    C = C0.clone() if beta else torch.full((M, N), float("nan"), device="cuda", dtype=tdt)
    k(A, B, out=C, alpha=1.5, beta=beta)
    torch.cuda.synchronize()
    ref = 1.5 * (A.double() @ B.double()) + beta * C0.double()
    err = float((C.double() - ref).norm() / ref.norm())
    ok = err < (3e-3 if dt != "float32" else 1e-2)
    bad += not ok
    print(M, N, K, dt, beta, f"{err:.1e}", "ok" if ok else "BAD", flush=True)
print("failures", bad)
