"""Where b_realign's time goes when B's rows sit at different 16-byte phases: the kernel
kgen.matmul runs for a row-major float16 B whose pitch N is 6 modulo 8 (SHAPES "MxNxK,..."),
called on the same values stored three ways: a pitch of a multiple of 8 at an aligned pointer
(every row at phase 0), the same pitch one element in (every row at phase 2: each window
crosses a 128-byte line, every thread takes the same branch of the shift), and the unaligned
pitch (rows at four phases). Device time from a CUDA graph over operands rotated past L2,
every result checked against float64 first (outputs NaN-poisoned). Prints one line a product."""
import os

import torch

import kgen
from kgen.bench.skinny import Operands, checked_graph_time
from kgen.tune import dispatch

SHAPES = [tuple(int(v) for v in s.split("x")) for s in os.environ["SHAPES"].split(",")]
DTYPE = "float16"
tdt = getattr(torch, DTYPE)
l2 = torch.cuda.get_device_properties(0).L2_cache_size
for M, N, K in SHAPES:
    ops = Operands(torch, M, N, K, DTYPE, "row", l2)
    A, B, C = ops.A, ops.B, ops.C
    pitch = -(-N // 8) * 8 + 8
    aligned, shifted = [], []
    for b in B:
        w = torch.zeros(K, pitch, device="cuda", dtype=tdt)
        w[:, :N].copy_(b)
        aligned.append(w[:, :N])
        w2 = torch.zeros(K, pitch, device="cuda", dtype=tdt)
        w2[:, 1:N + 1].copy_(b)
        shifted.append(w2[:, 1:N + 1])
    ref = A[0].double() @ B[0].double()
    kgen.matmul(A[0], B[0])
    route = dispatch._fast[("matmul", A[0].shape, A[0].stride(), B[0].shape, B[0].stride(), A[0].dtype, False)]

    def run(a, b, c, route=route):
        return route(a, b, out=c)

    out = {}
    for name, Bs in (("pitch_aligned", aligned), ("pitch_aligned_pointer_plus_2", shifted), ("pitch_unaligned", B)):
        err, t, _ = checked_graph_time(torch, run, A, Bs, C, ref, 15)
        assert err < 1e-2, (name, err)
        out[name] = t
    print(f"{M}x{N}x{K}", " ".join(f"{n} {t:.1f} us" for n, t in out.items()), flush=True)
    A = B = aligned = shifted = C = None
    torch.cuda.empty_cache()
