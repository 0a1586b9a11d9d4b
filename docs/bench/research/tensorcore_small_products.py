"""Small products as a user calls them: the dispatch spec (wgmma + copies) against mma.sync
with element loads (repack=False, one launch), host time included (one call between events)."""
import json, os, statistics, torch, kgen
from kgen.bench.tensorcore import default_for, _cublas_flags
from kgen.ops.tensorcore import TensorMatmul as T
e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
def one(f, reps=40):
    for _ in range(3): f()
    torch.cuda.synchronize(); ts = []
    for _ in range(reps):
        e0.record(); f(); e1.record(); e1.synchronize(); ts.append(e0.elapsed_time(e1) * 1e3)
    return statistics.median(ts)
shapes = [(33, 43, 21), (100, 100, 100), (255, 257, 129), (513, 513, 513), (777, 555, 333), (1000, 999, 1001),
          (1923, 51, 438), (6198, 127, 257), (1818, 255, 472), (2000, 1000, 700), (1024, 1024, 1024), (2047, 2049, 1023)]
rows = []
for dt in ("float32", "bfloat16"):
    _cublas_flags(torch, dt)
    tdt = getattr(torch, dt)
    for sh in shapes:
        M, N, K = sh; p = dict(zip("MNK", sh))
        A = torch.randn(M, K, device="cuda").to(tdt); B = torch.randn(K, N, device="cuda").to(tdt)
        cur = default_for(sh, dt); alt = T.mma_default_spec(p, dt).replace(repack=False)
        kc, ka = kgen.build(cur), kgen.build(alt)
        ref = A.double() @ B.double()
        for k, s in ((kc, cur), (ka, alt)):
            err = float((k(A, B).double() - ref).norm() / ref.norm()); assert err <= s.tolerance_for(p), (sh, s.to_json(), err)
        r = {"dtype": dt, "shape": list(sh), "torch_us": one(lambda: torch.matmul(A, B)),
             "current_us": one(lambda: kc(A, B)), "mma_elem_us": one(lambda: ka(A, B)), "current": cur.to_json()}
        rows.append(r)
        print(f"{dt:8s} {'x'.join(map(str, sh)):>15s} cuBLAS {r['torch_us']:7.1f} current({'wg' if cur.wgmma else 'mma'}) {r['current_us']:7.1f} mma+elem {r['mma_elem_us']:7.1f}", flush=True)
json.dump(rows, open(os.environ.get("OUT", ".") + "/small.json", "w"), indent=1)
