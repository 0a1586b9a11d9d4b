"""Where the TF32 wgmma kernel's transposing copy of a row-major B stops paying: wgmma (copy
included) vs mma.sync default vs cuBLAS TF32, device time of one call, row-major A and B."""
import statistics, torch, kgen, json, os
from kgen.ops.tensorcore import TensorMatmul as T
torch.backends.cuda.matmul.allow_tf32 = True
e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
def t(f, reps=15):
    f(); torch.cuda.synchronize(); ts = []
    for _ in range(reps):
        e0.record(); f(); e1.record(); e1.synchronize(); ts.append(e0.elapsed_time(e1))
    return statistics.median(ts) * 1e3
rows = []
for N, K in ((4096, 4096), (11008, 4096), (1024, 8192)):
    for M in (64, 127, 256, 384, 512, 768, 1024, 2048):
        p = {"M": M, "N": N, "K": K}
        A = torch.randn(M, K, device="cuda"); B = torch.randn(K, N, device="cuda"); C = torch.empty(M, N, device="cuda")
        kw = kgen.build(T.default_spec(p, "float32")); km = kgen.build(T.mma_default_spec(p, "float32"))
        r = {"M": M, "N": N, "K": K, "cublas_us": t(lambda: torch.matmul(A, B, out=C)),
             "wgmma_us": t(lambda: kw(A, B, out=C)), "mma_us": t(lambda: km(A, B, out=C))}
        Bt = torch.empty(N, K, device="cuda")
        r["copy_us"] = t(lambda: Bt.copy_(B.t()))
        rows.append(r)
        print(f"{M:5d}x{N}x{K}: cuBLAS {r['cublas_us']:7.1f}  wgmma+copy {r['wgmma_us']:7.1f} ({r['cublas_us']/r['wgmma_us']:.2f}x)  "
              f"mma {r['mma_us']:7.1f} ({r['cublas_us']/r['mma_us']:.2f}x)  torch transpose copy {r['copy_us']:6.1f}", flush=True)
json.dump(rows, open(os.environ.get("OUT", ".") + "/tf32x.json", "w"), indent=1)
