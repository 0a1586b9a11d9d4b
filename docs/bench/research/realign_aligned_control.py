"""Where b_realign's time goes: for each product (SHAPES "MxNxK,...", DTYPE, B row-major with a
pitch N that is no multiple of 8), the kernel kgen.matmul runs for that B (b_realign) on it and
on the same values stored at an aligned pitch, the TMA kernel kgen.matmul runs for the aligned
copy, and cuBLAS on the unaligned B. Device time from a CUDA graph over operands rotated past
L2; every result checked against float64 first (outputs NaN-poisoned). Prints one line a
product (B's bytes over the time in the brackets, GB/s)."""
import os

import torch

import kgen
from kgen.bench.skinny import Operands, checked_graph_time
from kgen.tune import dispatch

SHAPES = [tuple(int(v) for v in s.split("x")) for s in os.environ["SHAPES"].split(",")]
DTYPE = os.environ.get("DTYPE", "float16")
tdt = getattr(torch, DTYPE)
l2 = torch.cuda.get_device_properties(0).L2_cache_size
for M, N, K in SHAPES:
    ops = Operands(torch, M, N, K, DTYPE, "row", l2)
    A, B, C = ops.A, ops.B, ops.C
    Ba = []
    for b in B:
        w = torch.zeros(K, -(-N // 8) * 8, device="cuda", dtype=tdt)
        w[:, :N].copy_(b)
        Ba.append(w[:, :N])
    ref = A[0].double() @ B[0].double()
    kgen.matmul(A[0], B[0])
    kgen.matmul(A[0], Ba[0])

    def key(a, b):
        return ("matmul", a.shape, a.stride(), b.shape, b.stride(), a.dtype, False)
    route, aligned = dispatch._fast[key(A[0], B[0])], dispatch._fast[key(A[0], Ba[0])]
    ways = {"cublas": (None, B), "realign_unaligned": (route, B), "realign_on_aligned": (route, Ba),
            "tma_aligned": (aligned, Ba)}
    out = {}
    for name, (k, Bs) in ways.items():
        def fn(a, b, c, k=k):
            return torch.matmul(a, b, out=c) if k is None else k(a, b, out=c)
        err, t, _ = checked_graph_time(torch, fn, A, Bs, C, ref, 15)
        assert err < 1e-2, (name, err)
        out[name] = t
    mb = K * N * 2 / 1e3
    print(f"{M}x{N}x{K}", " ".join(f"{n} {t:.1f} us ({mb / t:.0f} GB/s)" for n, t in out.items()),
          "| route spec", route.spec.tile, route.spec.stages, route.spec.split_k, flush=True)
    A = B = Ba = C = None
    torch.cuda.empty_cache()
