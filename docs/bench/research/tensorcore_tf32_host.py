"""Host time of the TF32 user path, and the 384x1024x8192 split pathology."""
import statistics, time, cProfile, pstats, io, torch, kgen
from kgen.ops.tensorcore import TensorMatmul as T
torch.backends.cuda.matmul.allow_tf32 = True
e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
def dev(f, reps=15):
    f(); torch.cuda.synchronize(); ts = []
    for _ in range(reps):
        e0.record(); f(); e1.record(); e1.synchronize(); ts.append(e0.elapsed_time(e1))
    return statistics.median(ts) * 1e3
def host(f, n=300):
    f(); torch.cuda.synchronize(); t0 = time.perf_counter()
    for _ in range(n): f()
    t1 = time.perf_counter(); torch.cuda.synchronize()
    return (t1 - t0) / n * 1e6
for M, N, K in ((1000, 1000, 1000), (1923, 51, 438), (33, 43, 21), (6198, 127, 257)):
    A = torch.randn(M, K, device="cuda"); B = torch.randn(K, N, device="cuda"); C = torch.empty(M, N, device="cuda")
    f = lambda: kgen.matmul(A, B, allow_tf32=True)
    f(); torch.cuda.synchronize()
    from kgen.tune import dispatch
    k = dispatch._fast[("matmul", A.shape, A.stride(), B.shape, B.stride(), A.dtype, True)]
    print(f"{M}x{N}x{K} {k.spec.instruction} {k.spec.tile}: host/call kgen.matmul {host(f):.1f} us, k(out=C) {host(lambda: k(A, B, out=C)):.1f}, "
          f"torch {host(lambda: torch.matmul(A, B)):.1f}; device one call kgen.matmul {dev(f):.1f} k {dev(lambda: k(A, B, out=C)):.1f} torch {dev(lambda: torch.matmul(A, B)):.1f}", flush=True)
    pr = cProfile.Profile(); pr.enable()
    for _ in range(200): f()
    pr.disable(); torch.cuda.synchronize()
    s = io.StringIO(); pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(8); print(s.getvalue()[-1800:], flush=True)
# 384 x 1024 x 8192 with K-major B: the default splits 6 ways.
M, N, K = 384, 1024, 8192
A = torch.randn(M, K, device="cuda"); Bw = torch.randn(N, K, device="cuda"); B = Bw.t(); C = torch.empty(M, N, device="cuda")
p = {"M": M, "N": N, "K": K}
d = T.default_spec(p, "float32").replace(layout_b="col")
print("cuBLAS", dev(lambda: torch.matmul(A, B, out=C)))
for s in [d] + [d.replace(split_k=k) for k in (1, 2, 3, 4, 5, 8)] + [d.replace(tile=(64, 256, 32), warp_tile=(64, 256), stages=5)]:
    k = kgen.build(s); print(s.tile, s.split_k, s.stages, f"{dev(lambda: k(A, B, out=C)):.1f} us", flush=True)
for M in (256, 384, 512):
    A = torch.randn(M, K, device="cuda"); C = torch.empty(M, N, device="cuda"); p = {"M": M, "N": N, "K": K}
    for lb, Bx in (("row", Bw.t().contiguous()), ("col", B)):
        s = T.default_spec(p, "float32").replace(layout_b=lb); k = kgen.build(s)
        print(M, lb, s.tile, s.split_k, f"{dev(lambda: k(A, Bx, out=C)):.1f} us", "cuBLAS", f"{dev(lambda: torch.matmul(A, Bx, out=C)):.1f}", flush=True)
