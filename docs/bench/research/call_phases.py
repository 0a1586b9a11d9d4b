"""Where one repeat call of kgen.matmul(A, B) spends its host time: from the call's start to its
first launch, inside kgen.core.launch.Launch (packing and cuLaunchKernel), and after the last
launch (the next result made by TorchResults.restock, the return), medians of 400 calls with a
synchronize every 50, on five few-row products; then single accessors of a torch tensor, the
repeat key and torch's stream handle. Launch.__call__ is wrapped with perf_counter_ns, which adds
about 0.2 µs a launch. Run from the repository root with an empty tuning database; env PRODUCTS
("dtype:order:MxNxK,...", order col = B as W.t(), row = B stored K x N) replaces the five, and
each product's launches (entry, grid) are listed."""
import os
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
    marks.append((t0, pc(), self.name, self.grid))


launch.Launch.__call__ = timed
PRODUCTS = [("bfloat16", "col", 64, 4096, 4096), ("bfloat16", "row", 125, 3712, 3456),
            ("float32", "col", 1, 4096, 4096), ("float32", "col", 8, 14336, 4096), ("bfloat16", "col", 4, 4096, 4096)]
if os.environ.get("PRODUCTS"):
    PRODUCTS = [(d, o, *map(int, s.split("x")))
                for d, o, s in (p.split(":") for p in os.environ["PRODUCTS"].split(","))]


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
        inside.append(sum(m[1] - m[0] for m in marks))
        post.append(t1 - marks[-1][1])
        total.append(t1 - t0)
        if i % 50 == 0:
            torch.cuda.synchronize()
    torch.cuda.synchronize()
    print(f"{dt} {order} {M}x{N}x{K}: launches {len(marks)} before-first-launch {us(pre):.2f} us, in Launch "
          f"{us(inside):.2f}, after {us(post):.2f}, total {us(total):.2f}; "
          + ", ".join(f"{m[2]} {m[3]}" for m in marks), flush=True)
    one, ev = [], [torch.cuda.Event(enable_timing=True) for _ in range(2)]
    for _ in range(200):
        ev[0].record()
        kgen.matmul(A, B)
        ev[1].record()
        ev[1].synchronize()
        one.append(ev[0].elapsed_time(ev[1]) * 1e3)
    ev[0].record()
    for _ in range(200):
        kgen.matmul(A, B)
    ev[1].record()
    ev[1].synchronize()
    print(f"    one call between events {statistics.median(one):.1f} us, back to back "
          f"{ev[0].elapsed_time(ev[1]) * 1e3 / 200:.1f} us a call", flush=True)

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
