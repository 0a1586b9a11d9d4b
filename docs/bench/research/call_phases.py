"""Where one repeat call of kgen.matmul(A, B) spends its host time: from the call's start to its
first launch, inside kgen.core.launch.Launch (packing and cuLaunchKernel), and after the last
launch (the next result made by TorchResults.restock, the return), medians of 400 calls with a
synchronize every 50, on five few-row products; then single accessors of a torch tensor, the
repeat key and torch's stream handle. Launch.__call__ is wrapped with perf_counter_ns, which adds
about 0.2 µs a launch. Run from the repository root with an empty tuning database."""
import statistics
import time

import torch

import kgen
from kgen.core import launch, runtime

pc = time.perf_counter_ns
marks: list = []
bare = launch.Launch.__call__


def timed(self, stream, *args):
    t0 = pc()
    bare(self, stream, *args)
    marks.append((t0, pc()))


launch.Launch.__call__ = timed
PRODUCTS = [("bfloat16", "col", 64, 4096, 4096), ("bfloat16", "row", 125, 3712, 3456),
            ("float32", "col", 1, 4096, 4096), ("float32", "col", 8, 14336, 4096), ("bfloat16", "col", 4, 4096, 4096)]


def us(xs):
    return statistics.median(xs) / 1e3


for dt, order, M, N, K in PRODUCTS:
    d = getattr(torch, dt)
    A = torch.randn(M, K, device="cuda", dtype=d)
    B = torch.randn(N, K, device="cuda", dtype=d).t() if order == "col" else torch.randn(K, N, device="cuda", dtype=d)
    for _ in range(50):
        kgen.matmul(A, B)
    torch.cuda.synchronize()
    pre, inside, post, total = [], [], [], []
    for i in range(400):
        marks.clear()
        t0 = pc()
        kgen.matmul(A, B)
        t1 = pc()
        pre.append(marks[0][0] - t0)
        inside.append(sum(b - a for a, b in marks))
        post.append(t1 - marks[-1][1])
        total.append(t1 - t0)
        if i % 50 == 0:
            torch.cuda.synchronize()
    torch.cuda.synchronize()
    print(f"{dt} {order} {M}x{N}x{K}: launches {len(marks)} before-first-launch {us(pre):.2f} us, in Launch "
          f"{us(inside):.2f}, after {us(post):.2f}, total {us(total):.2f}", flush=True)

A = torch.randn(64, 4096, device="cuda", dtype=torch.bfloat16)
B = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16).t()


def per_call(fn, n=2000):
    t0 = pc()
    for _ in range(n):
        fn()
    return (pc() - t0) / n / 1e3


print("A.shape/stride/dtype/get_device/data_ptr: " + " ".join(
    f"{per_call(f):.3f}" for f in (lambda: A.shape, A.stride, lambda: A.dtype, A.get_device, A.data_ptr)))


def key():
    return (A.shape, A.stride(), B.shape, B.stride(), A.dtype, B.dtype, A.get_device(), B.get_device(),
            A.data_ptr() & 15, B.data_ptr() & 15, False)


print(f"repeat key {per_call(key):.3f}  hash(key) {per_call(lambda: hash(key())):.3f}")
print(f"torch_stream {per_call(lambda: runtime.torch_stream(0)):.3f}")
