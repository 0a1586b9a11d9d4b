"""Blocks per SM that ptxas must fit (the __launch_bounds__ minimum) 1, 2, 3 and 4 on every
entry point of the default skinny spec, float32 and bfloat16, 1-16 rows, four weights, both
storage orders; bound launches over rotated weights (> L2), device time beside cuBLAS.
A record: it ran (H100) on the tree where every entry point was rendered with 1 (before
Skinny.dot_min_blocks / axpy_min_blocks), so its "mb1" is that tree's kernel. Its output is
docs/bench/skinny_launch_bounds_h100.json."""
import json, math, os, re, sys
import concurrent.futures as cf
import torch, kgen
from kgen.bench.skinny import copy_bandwidth, time_batched
from kgen.core import render as rendering, runtime
from kgen.core.kernel import _compile_spec, default_arch
from kgen.ops.skinny import Skinny

W = [(4096, 4096), (14336, 4096), (5120, 5120), (4096, 11008)]
ROWS = {"float32": [1, 2, 4, 8, 12, 16], "bfloat16": [1, 2, 3, 4, 8, 16]}
SH = None
DTS = sys.argv[1].split(",") if len(sys.argv) > 1 else ["float32", "bfloat16"]
MBS = (1, 2, 3, 4)
LAYOUTS = ('row', 'col')

def variant(spec, mb):
    src = rendering.render(spec)
    if mb != 1:
        src = src.replace("__launch_bounds__(THREADS, 1)", f"__launch_bounds__(THREADS, {mb})")
    comp = _compile_spec(spec, src, default_arch())
    return spec, src, comp

def main():
    OUT = os.environ.get("OUT", ".")
    runtime.driver()
    jobs = {}
    for dt in DTS:
        for M in ROWS[dt]:
          for N, K in W:
            s = Skinny.default_spec({"M": M, "N": N, "K": K}, dt)
            for mb in MBS:
                jobs[(s.key, mb)] = (s, mb)
    with cf.ThreadPoolExecutor(16) as ex:
        built = dict(zip(jobs, ex.map(lambda a: variant(*a), jobs.values())))
    kern = {key: s.kernel_class(s, src, comp) for key, (s, src, comp) in built.items()}
    for key, (s, src, comp) in built.items():
        r = {n[12:]: (v["registers"], v["spill_stores"]) for n, v in comp.resources.items() if n.endswith(("v4", "v8"))}
        print(key[1], s.dtype, s.rows, r, flush=True)
    def per_call(fs, reps=9, n=24):
        return time_batched(torch, fs, reps, n)
    bw = copy_bandwidth(torch, 5) / 1e12
    print(f"copy bandwidth {bw:.3f} TB/s", flush=True)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
    rows = []
    for dt in DTS:
        tdt = getattr(torch, dt); item = 4 if dt == "float32" else 2
        for (N, K), order in [(w, o) for w in W for o in LAYOUTS]:
          copies = max(2, -(-200_000_000 // (N * K * item)))
          Ws = [torch.randn(K, N, device="cuda", dtype=tdt) if order == "row" else torch.randn(N, K, device="cuda", dtype=tdt).t()
                for _ in range(copies)]
          for M in ROWS[dt]:
            s = Skinny.default_spec({"M": M, "N": N, "K": K}, dt)
            xs = torch.randn(M, K, device="cuda", dtype=tdt)
            Cs = [torch.empty(M, N, device="cuda", dtype=tdt) for _ in range(copies)]
            bound = (N * K + M * K + M * N) * item / (bw * 1e12) * 1e6
            row = {"dtype": dt, "order": order, "M": M, "N": N, "K": K, "bound_us": bound}
            row["cublas"] = per_call([lambda i=i: torch.matmul(xs, Ws[i], out=Cs[i]) for i in range(copies)])
            ref = xs.double() @ Ws[0].double()
            for mb in MBS:
                k = kern[(s.key, mb)]
                Cs[0].fill_(float("nan")); k(xs, Ws[0], out=Cs[0]); torch.cuda.synchronize()
                err = float((Cs[0].double() - ref).norm() / ref.norm())
                if not err < 1e-2: print("WRONG", row, mb, err, flush=True)
                bl = [k.bind(xs, Ws[i], Cs[i]) for i in range(copies)]
                row[f"mb{mb}"] = per_call(bl)
                row[f"mb{mb}_grid"] = [list(l[1].grid) for l in bl[0].plan.launches if l[0] == "main"]
                row[f"mb{mb}_err"] = err
                row["form"] = bl[0].plan.form
            rows.append(row)
            print(f"{dt:8s} {order} {row['form']:8s} {M}x{N}x{K} bound {bound:.1f} cuBLAS {row['cublas']:.1f} " +
                  " ".join(f"mb{mb} {row[f'mb{mb}']:.1f} ({bound/row[f'mb{mb}']*100:.0f}%, {row[f'mb{mb}_grid']})" for mb in MBS),
                  flush=True)
          del Ws
    g = lambda rr, f: math.exp(sum(math.log(f(r)) for r in rr) / max(1, len(rr)))
    for dt in DTS:
      for form in sorted({r["form"] for r in rows}):
        rs = [r for r in rows if r["dtype"] == dt and r["form"] == form]
        if not rs: continue
        print(dt, form, len(rs), " ".join(f"mb{mb}: {g(rs, lambda r: r['bound_us']/r[f'mb{mb}'])*100:.0f}% of bound, "
                           f"{g(rs, lambda r: r['cublas']/r[f'mb{mb}']):.2f}x cuBLAS;" for mb in MBS))
    json.dump({"bw": bw, "rows": rows}, open(f"{OUT}/occ2.json", "w"), indent=1)

main()
