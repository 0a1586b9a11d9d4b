"""float64 on sm_90: m16n8k8 with 64x32 / 32x64 warp tiles against the m16n8k16 default and cuBLAS DGEMM (device time)."""
import statistics, torch, kgen, concurrent.futures as cf, time, json, os
from kgen.ops.tensorcore import TensorMatmul as T
e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
def t(f, flops, reps=10):
    f(); torch.cuda.synchronize(); ts = []
    for _ in range(reps):
        e0.record(); f(); e1.record(); e1.synchronize(); ts.append(e0.elapsed_time(e1))
    return flops / (statistics.median(ts) * 1e-3) / 1e12
V = {}
for BM, BN in ((128, 64), (64, 128), (128, 128)):
    for w in ((64, 32), (32, 64)):
        for BK in (16,):
            for st in (3, 4, 5):
                try:
                    s = T(dtype="float64", tile=(BM, BN, BK), warp_tile=w, stages=st, smem_layout="pad", mma_shape="m16n8k8")
                except ValueError:
                    continue
                if s.prune_reason({"M": 4096, "N": 4096, "K": 4096}, {"compute_capability": 90, "max_shared_per_block_optin": 232448, "max_threads_per_block": 1024, "max_registers_per_block": 65536, "max_shared_per_multiprocessor": 233472}):
                    continue
                V[f"k8 {BM}x{BN}x{BK} w{w[0]}x{w[1]} s{st}"] = s
V["k8 128x64x16 w64x32 s3 mb2"] = T(dtype="float64", tile=(128, 64, 16), warp_tile=(64, 32), stages=3, smem_layout="pad", mma_shape="m16n8k8", min_blocks=2)
V["k8 64x128x16 w32x64 s3 mb2"] = T(dtype="float64", tile=(64, 128, 16), warp_tile=(32, 64), stages=3, smem_layout="pad", mma_shape="m16n8k8", min_blocks=2)
V["k8 64x64x16 w32x32 s4 mb3"] = T(dtype="float64", tile=(64, 64, 16), warp_tile=(32, 32), stages=4, smem_layout="pad", mma_shape="m16n8k8", min_blocks=3)
V["k8 128x64x16 w64x32 s3 swz"] = T(dtype="float64", tile=(128, 64, 16), warp_tile=(64, 32), stages=3, mma_shape="m16n8k8")
shapes = [(4096, 4096, 4096), (8192, 8192, 8192), (2000, 3000, 1000)]
irregular = [(4097, 4097, 4097), (3000, 5000, 700), (127, 4096, 4096), (4096, 64, 4096), (1000, 1000, 1000)]
t0 = time.time()
allspecs = list(V.values()) + [T.default_spec(dict(zip("MNK", s)), "float64") for s in shapes + irregular]
with cf.ThreadPoolExecutor(16) as ex: list(ex.map(kgen.compile, allspecs))
print("compiled", len(allspecs), round(time.time() - t0), "s", flush=True)
rows = []; bad = 0
def measure(M, N, K, names):
    global bad
    A = torch.randn(M, K, device="cuda", dtype=torch.float64); B = torch.randn(K, N, device="cuda", dtype=torch.float64)
    C = torch.empty(M, N, device="cuda", dtype=torch.float64); fl = 2 * M * N * K
    ref = A[:128] @ B
    row = {"shape": [M, N, K], "cublas": t(lambda: torch.matmul(A, B, out=C), fl)}
    for name in names:
        s = V[name] if name in V else T.default_spec({"M": M, "N": N, "K": K}, "float64")
        k = kgen.build(s); C.fill_(float("nan")); k(A, B, out=C); torch.cuda.synchronize()
        err = float((C[:128] - ref).norm() / ref.norm())
        row[name] = t(lambda: k(A, B, out=C), fl); row[name + " err"] = err
        if not err < 1e-12: print("WRONG", name, err, flush=True); bad += 1
    return row
for M, N, K in shapes:
    row = measure(M, N, K, ["default"] + list(V))
    top = sorted(((row[n], n) for n in V), reverse=True)[:6]
    print(f"{M}x{N}x{K}: cuBLAS {row['cublas']:.1f} default {row['default']:.1f} ({row['default']/row['cublas']:.2f}x) | "
          + " ".join(f"{n[3:]}={v:.1f}({v/row['cublas']:.2f})" for v, n in top), flush=True)
    rows.append(row)
best = sorted(V, key=lambda n: -sum(r[n] / r["cublas"] for r in rows))[:3]
print("best three:", best, flush=True)
for M, N, K in irregular:
    row = measure(M, N, K, ["default"] + best)
    print(f"{M}x{N}x{K}: cuBLAS {row['cublas']:.1f} default {row['default']:.1f} ({row['default']/row['cublas']:.2f}x) | "
          + " ".join(f"{n[3:]}={row[n]:.1f}({row[n]/row['cublas']:.2f})" for n in best), flush=True)
    rows.append(row)
json.dump(rows, open(os.environ.get("OUT", ".") + "/f64k8.json", "w"), indent=1)
print("wrong:", bad)
