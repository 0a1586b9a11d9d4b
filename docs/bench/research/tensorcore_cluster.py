"""wgmma clusters of two blocks (B shared by TMA multicast) against single blocks, the benchmark's method."""
import json, os, torch, kgen, concurrent.futures as cf
from kgen.bench.tensorcore import default_for, time_ms, tflops, _cublas_flags
shapes = [(4096, 4096, 4096), (8192, 8192, 8192), (2048, 8192, 4096), (4097, 4097, 4097), (3000, 5000, 700),
          (127, 4096, 4096), (1000, 1000, 1000)]
rows, specs = [], []
for dt in ("bfloat16", "float32"):
    for sh in shapes:
        d = default_for(sh, dt)
        if d.wgmma:
            specs += [d, d.replace(cluster=2)]
with cf.ThreadPoolExecutor(16) as ex: list(ex.map(kgen.compile, specs))
for dt in ("bfloat16", "float32"):
    _cublas_flags(torch, dt)
    for sh in shapes:
        d = default_for(sh, dt)
        if not d.wgmma:
            continue
        M, N, K = sh
        tdt = getattr(torch, dt)
        A = torch.randn(M, K, device="cuda").to(tdt); B = torch.randn(K, N, device="cuda").to(tdt); C = torch.empty(M, N, device="cuda", dtype=tdt)
        ref = A[:64].double() @ B.double()
        r = {"dtype": dt, "shape": list(sh), "spec": d.to_json(), "cublas": tflops(sh, time_ms(torch, lambda: torch.matmul(A, B, out=C)))}
        for name, s in (("single", d), ("cluster2", d.replace(cluster=2))):
            k = kgen.build(s); C.fill_(float("nan")); k(A, B, out=C); torch.cuda.synchronize()
            err = float((C[:64].double() - ref).norm() / ref.norm())
            assert err <= s.tolerance_for(dict(zip("MNK", sh))), (name, sh, err)
            r[name] = tflops(sh, time_ms(torch, lambda: k(A, B, out=C)))
        rows.append(r)
        print(f"{dt:8s} {'x'.join(map(str, sh)):>15s} {d.tile}: cuBLAS {r['cublas']:6.1f} single {r['single']:6.1f} ({r['single']/r['cublas']:.2f}x) cluster {r['cluster2']:6.1f} ({r['cluster2']/r['cublas']:.2f}x)", flush=True)
json.dump(rows, open(os.environ.get("OUT", ".") + "/cluster.json", "w"), indent=1)
