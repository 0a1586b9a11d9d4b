"""Host time of one skinny kernel call (1x256x256 float32) beside torch, and a cProfile of 3000 calls."""
import time, cProfile, pstats, io, torch, kgen
from kgen.ops.skinny import Skinny
A, B = torch.randn(1, 256, device="cuda"), torch.randn(256, 256, device="cuda")
C = torch.empty(1, 256, device="cuda")
k = kgen.build(Skinny.default_spec({"M": 1, "N": 256, "K": 256}, "float32"))
bound = k.bind(A, B, C)
print("plan:", k._plans[next(iter(k._plans))].form, [ (l[0], l[1].grid) for l in next(iter(k._plans.values())).launches])
def t(fn, calls=3000):
    for _ in range(200): fn()
    torch.cuda.synchronize(); t0 = time.perf_counter()
    for _ in range(calls): fn()
    cpu = (time.perf_counter() - t0) / calls * 1e6
    torch.cuda.synchronize(); wall = (time.perf_counter() - t0) / calls * 1e6
    return cpu, wall
for name, fn in (("k(A,B)", lambda: k(A, B)), ("k(A,B,out=C)", lambda: k(A, B, out=C)), ("bound()", bound),
                 ("kgen.matmul(A,B)", lambda: kgen.matmul(A, B)), ("torch.matmul", lambda: torch.matmul(A, B)),
                 ("torch.mm out", lambda: torch.mm(A, B, out=C)), ("new_empty", lambda: A.new_empty((1, 256)))):
    cpu, wall = t(fn)
    print(f"{name:18s} cpu {cpu:6.1f} us/call, with sync {wall:6.1f}")
pr = cProfile.Profile(); pr.enable()
for _ in range(3000): k(A, B)
pr.disable(); torch.cuda.synchronize()
s = io.StringIO(); pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(14); print(s.getvalue()[:3500])
