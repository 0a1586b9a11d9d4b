"""Results batched up to BATCH_BYTES (env, default 1 MiB: kgen.core.runtime.TorchResults'
batch_bytes) in one process: kgen.matmul's one call between CUDA events (host time included) and
back to back, beside torch.matmul in the same process, on few-row products whose results are
256 KiB-1 MiB (a spare made after each launch at 1 MiB, a list pop at 4 MiB) and one that
batches either way. Run the process once per setting, alternating: a process's host speed moves
from one start to the next, so compare the x-torch ratios. Output: one line a product."""
import os
import statistics

import torch

import kgen.core.runtime as runtime

_defaults = list(runtime.TorchResults.__init__.__defaults__)
_defaults[0] = int(os.environ.get("BATCH_BYTES", str(1 << 20)))
runtime.TorchResults.__init__.__defaults__ = tuple(_defaults)

import kgen  # noqa: E402  (after the default is set: kernels make their pools when built)

PRODUCTS = [("bfloat16", "col", 14, 14400, 1152), ("bfloat16", "col", 32, 10312, 2136),
            ("float16", "row", 40, 11008, 4096), ("float32", "col", 12, 14336, 4096),
            ("bfloat16", "row", 64, 4096, 4096), ("float32", "row", 16, 8192, 2048),
            ("bfloat16", "col", 4, 4096, 4096)]


def one_call(fn, reps=200):
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    out = []
    for _ in range(reps):
        s.record()
        fn()
        e.record()
        e.synchronize()
        out.append(s.elapsed_time(e) * 1e3)
    return statistics.median(out)


def back_to_back(fn, n=300):
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    s.record()
    for _ in range(n):
        fn()
    e.record()
    e.synchronize()
    return s.elapsed_time(e) * 1e3 / n


def main():
    torch.backends.cuda.matmul.allow_tf32 = False
    tag = os.environ.get("BATCH_BYTES", str(1 << 20))
    for dt, order, M, N, K in PRODUCTS:
        d = getattr(torch, dt)
        A = torch.randn(M, K, device="cuda", dtype=d)
        B = (torch.randn(N, K, device="cuda", dtype=d).t() if order == "col"
             else torch.randn(K, N, device="cuda", dtype=d))
        ref = A.double() @ B.double()
        C = kgen.matmul(A, B)
        err = float((C.double() - ref).norm() / ref.norm())
        for _ in range(50):
            kgen.matmul(A, B)
            torch.matmul(A, B)

        def ours(a=A, b=B):
            return kgen.matmul(a, b)

        def peer(a=A, b=B):
            return torch.matmul(a, b)

        res = {"kgen": [], "torch": [], "kgen_b2b": [], "torch_b2b": []}
        for _ in range(5):
            res["kgen"].append(one_call(ours))
            res["torch"].append(one_call(peer))
            res["kgen_b2b"].append(back_to_back(ours))
            res["torch_b2b"].append(back_to_back(peer))
        m = {k: statistics.median(v) for k, v in res.items()}
        print(f"batch {tag} {dt} {order} {M}x{N}x{K} result {M * N * C.element_size() // 1024} KiB err {err:.1e}: "
              f"one call {m['kgen']:.1f} / torch {m['torch']:.1f} ({m['torch'] / m['kgen']:.3f}x), back to back "
              f"{m['kgen_b2b']:.1f} / {m['torch_b2b']:.1f} ({m['torch_b2b'] / m['kgen_b2b']:.3f}x)", flush=True)


if __name__ == "__main__":
    main()
