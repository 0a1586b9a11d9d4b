"""16-bit few-row products x @ W with W row-major (K x N): the tensor-core axpy form's variants
vs the SIMT axpy form, the wgmma TensorMatmul default and cuBLAS; device time per call of bound
launches over rotated weights (> L2).

SET=sweep (default): 1-64 rows on seven weights, 15 variants of the form.
SET=aligned: 3-16 rows on seven weights that the wgmma kernel reads in place, the default and
two variants. The split the axpy form's warps share (`lv1 kw4` ...) is `axpy_k_warps`."""
import json, math, os, sys, time
import concurrent.futures as cf
from kgen.bench.skinny import copy_bandwidth, time_batched
from kgen.ops.skinny import Skinny
from kgen.ops.tensorcore import TensorMatmul

DT = os.environ.get("DT", "bfloat16")
SET = os.environ.get("SET", "sweep")
if SET == "aligned":
    Ms = [int(x) for x in os.environ.get("MS", "3,4,6,8,12,16").split(",")]
    SH = [(4096, 4096), (14336, 4096), (4096, 11008), (5120, 5120), (11008, 4096), (12032, 13568), (8192, 2048)]
else:
    Ms = [int(x) for x in os.environ.get("MS", "1,2,3,4,8,12,16,24,32,48,64").split(",")]
    SH = [(4096, 4096), (14336, 4096), (4096, 11008), (5120, 5120), (6418, 9814), (1613, 14334), (3001, 5000)]   # (N, K)

def variants(M, N, K):
    p = {"M": M, "N": N, "K": K}
    base = Skinny.default_spec(p, DT)
    out = {"simt": base.replace(tensor_cores=False, k_warps=1, axpy_k_warps=1, lane_vectors=1),
           "wgmma": TensorMatmul.default_spec(p, DT).for_layouts(p, layout_a="row", layout_b="row")}
    tc = base.replace(tensor_cores=True, warp_cols=1)
    if SET == "aligned":
        out["tc axpy"] = tc
        for name, kw in (("lv2 kw8", dict(lane_vectors=2, axpy_k_warps=8)), ("lv1 kw2", dict(axpy_k_warps=2))):
            try: out[name] = tc.replace(**kw)
            except ValueError: pass
        return out
    for lv in (1, 2):
        for kw in (1, 2, 4, 8):
            try: out[f"lv{lv} kw{kw}"] = tc.replace(lane_vectors=lv, axpy_k_warps=kw, merge="two_pass")
            except ValueError: pass
    for name, kw in (("lv2 kw4 single", dict(lane_vectors=2, axpy_k_warps=4, merge="single_pass")),
                     ("lv2 kw4 t128", dict(lane_vectors=2, axpy_k_warps=4, threads=128, merge="two_pass")),
                     ("lv2 kw4 w1", dict(lane_vectors=2, axpy_k_warps=4, waves=1, merge="two_pass")),
                     ("lv2 kw8 loads16", dict(lane_vectors=2, axpy_k_warps=8, loads=16, merge="two_pass")),
                     ("lv1 kw8 loads16", dict(lane_vectors=1, axpy_k_warps=8, loads=16, merge="two_pass"))):
        try: out[name] = tc.replace(**kw)
        except ValueError: pass
    return out

def main():
    import torch, kgen
    OUT = os.environ.get("OUT", ".")
    tdt = getattr(torch, DT)
    todo = {}
    for M in Ms:
        for N, K in SH:
            for s in variants(M, N, K).values(): todo[s.key] = s
    t0 = time.time()
    with cf.ThreadPoolExecutor(16) as ex: list(ex.map(lambda s: kgen.compile(s), todo.values()))
    print(f"compiled {len(todo)} in {time.time()-t0:.0f}s", flush=True)
    def per_call(fs, reps=7, n=24):
        return time_batched(torch, fs, reps, n)
    bw = copy_bandwidth(torch, 5) / 1e12
    print(f"copy bandwidth {bw:.2f} TB/s", flush=True)
    torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
    torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False
    rows = []
    for N, K in SH:
        copies = max(2, -(-200_000_000 // (N * K * 2)))
        Ws = [torch.randn(K, N, device="cuda", dtype=tdt) for _ in range(copies)]
        for M in Ms:
            xs = torch.randn(M, K, device="cuda", dtype=tdt)
            Cs = [torch.empty(M, N, device="cuda", dtype=tdt) for _ in range(copies)]
            bound = (N * K + M * K + M * N) * 2 / (bw * 1e12) * 1e6
            row = {"M": M, "N": N, "K": K, "bound_us": bound}
            row["cublas"] = per_call([lambda i=i: torch.matmul(xs, Ws[i], out=Cs[i]) for i in range(copies)])
            ref = xs.double() @ Ws[0].double()
            V = variants(M, N, K)
            for name, s in V.items():
                k = kgen.build(s)
                Cs[0].fill_(float("nan")); k(xs, Ws[0], out=Cs[0]); torch.cuda.synchronize()
                err = float((Cs[0].double() - ref).norm() / ref.norm())
                if not err < 1e-2: print("WRONG", M, N, K, name, err, flush=True)
                if hasattr(k, "bind"):
                    row[name] = per_call([k.bind(xs, Ws[i], Cs[i]) for i in range(copies)])
                else:
                    row[name] = per_call([lambda i=i, k=k: k(xs, Ws[i], out=Cs[i]) for i in range(copies)])
            top = sorted((row[n], n) for n in V if n not in ("simt", "wgmma"))[:3]
            print(f"{M}x{N}x{K} bound {bound:.1f} cuBLAS {row['cublas']:.1f} ({bound/row['cublas']:.0%}) simt {row['simt']:.1f} "
                  f"wgmma {row['wgmma']:.1f} | " + " ".join(f"{n}={v:.1f}({bound/v:.0%})" for v, n in top), flush=True)
            rows.append(row)
        del Ws
    names = [n for n in rows[0] if n not in ("M", "N", "K", "bound_us", "cublas")]
    for M in Ms:
        rs = [r for r in rows if r["M"] == M]
        g = lambda n: math.exp(sum(math.log(r["cublas"] / r[n]) for r in rs if n in r) / max(1, sum(n in r for r in rs)))
        print(f"M={M}: x cuBLAS " + " ".join(f"[{n}] {g(n):.2f}" for n in names))
    json.dump({"bw": bw, "dtype": DT, "rows": rows}, open(f"{OUT}/{'al16' if SET == 'aligned' else 'ax16'}_{DT}.json", "w"), indent=1)

if __name__ == "__main__":
    main()
