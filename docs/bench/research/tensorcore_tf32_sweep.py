"""TF32: wgmma kernel (new default) vs mma.sync default vs cuBLAS TF32, device time of one kernel call."""
import statistics, torch, kgen, concurrent.futures as cf, time, json, os, sys
from kgen.ops.tensorcore import TensorMatmul as T
torch.backends.cuda.matmul.allow_tf32 = True
e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
def t(f, flops, reps=10):
    f(); torch.cuda.synchronize(); ts = []
    for _ in range(reps):
        e0.record(); f(); e1.record(); e1.synchronize(); ts.append(e0.elapsed_time(e1))
    return flops / (statistics.median(ts) * 1e-3) / 1e12
def wg(BM, BN, st, split=1, **kw):
    return T(dtype="float32", tf32=True, tile=(BM, BN, 32), warp_tile=(64, BN), stages=st, instruction="wgmma", split_k=split, **kw)
V = {}
for BM, BN in ((128, 256), (128, 128), (128, 192), (64, 256)):
    for st in (3, 4, 5, 6):
        try:
            V[f"wg {BM}x{BN} s{st}"] = wg(BM, BN, st)
        except ValueError:
            pass
V["wg 128x256 s4 g16"] = wg(128, 256, 4, raster_group=16)
V["wg 128x256 s4 col"] = wg(128, 256, 4, raster="col")
shapes = [(4096, 4096, 4096), (8192, 8192, 8192), (4097, 4097, 4097), (3000, 5000, 700), (127, 4096, 4096),
          (4096, 64, 4096), (1000, 1000, 1000)]
layouts = [("row", "row"), ("row", "col")]
allspecs = [s.replace(layout_a=a, layout_b=b) for s in V.values() for a, b in layouts]
allspecs += [T.default_spec(dict(zip("MNK", s)), "float32").replace(layout_a=a, layout_b=b) for s in shapes for a, b in layouts]
allspecs += [T.mma_default_spec(dict(zip("MNK", s)), "float32") for s in shapes]
t0 = time.time()
with cf.ThreadPoolExecutor(16) as ex: list(ex.map(kgen.compile, allspecs))
print("compiled", len(allspecs), round(time.time() - t0), "s", flush=True)
rows = []; bad = 0
for M, N, K in shapes:
    p = {"M": M, "N": N, "K": K}; fl = 2 * M * N * K
    A = torch.randn(M, K, device="cuda"); Bw = torch.randn(N, K, device="cuda")
    C = torch.empty(M, N, device="cuda")
    for la, lb in layouts:
        B = Bw.t() if lb == "col" else Bw.t().contiguous()
        ref = (A[:256].double() @ B.double())
        row = {"shape": [M, N, K], "layouts": [la, lb], "cublas": t(lambda: torch.matmul(A, B, out=C), fl)}
        def run(name, s):
            global bad
            k = kgen.build(s); C.fill_(float("nan")); k(A, B, out=C); torch.cuda.synchronize()
            err = float((C[:256].double() - ref).norm() / ref.norm())
            tol = s.tolerance_for(p)
            row[name] = t(lambda: k(A, B, out=C), fl); row[name + " err"] = err
            if not err <= tol: print("WRONG", name, s.to_json(), err, tol, flush=True); bad += 1
        run("default", T.default_spec(p, "float32").replace(layout_a=la, layout_b=lb))
        if lb == "row":
            run("mma_default", T.mma_default_spec(p, "float32"))
        if (M, N, K) in shapes[:2]:
            for name, s in V.items():
                run(name, s.replace(layout_a=la, layout_b=lb))
        names = [n for n in row if n not in ("shape", "layouts", "cublas") and not n.endswith("err")]
        top = sorted(((row[n], n) for n in names if n not in ("default", "mma_default")), reverse=True)[:5]
        print(f"{M}x{N}x{K} {la}/{lb}: cuBLAS {row['cublas']:.1f} default {row['default']:.1f} ({row['default']/row['cublas']:.2f}x)"
              + (f" mma {row['mma_default']:.1f} ({row['mma_default']/row['cublas']:.2f}x)" if "mma_default" in row else "")
              + (" | " + " ".join(f"{n[3:]}={v:.1f}({v/row['cublas']:.2f})" for v, n in top) if top else ""), flush=True)
        rows.append(row)
json.dump(rows, open(os.environ.get("OUT", ".") + "/tf32.json", "w"), indent=1)
print("wrong:", bad)
