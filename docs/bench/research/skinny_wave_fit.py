"""Skinny K splits fitted to the last wave (wave_fitted_splits) against the split that asks for
exactly `waves` waves; default specs, bound launches over rotated large operands (> L2),
float32 and bfloat16, both storage orders of the large operand. Device time per call."""
import json, math, os, time
import concurrent.futures as cf
from kgen.bench.skinny import copy_bandwidth, time_batched
import kgen
import kgen.ops.skinny as sk
from kgen.ops.skinny import Skinny

ROWS = [1, 3, 8, 12, 16]
SH = [(4096, 4096), (14336, 4096), (4096, 11008), (5120, 5120), (6418, 9814), (3001, 5000), (11008, 4096)]   # (N, K)
fitted = sk.wave_fitted_splits
def asked(K, unit, tiles, slots, want, most):
    return sk._slabs(K, want, unit)

def main():
    import torch
    OUT = os.environ.get("OUT", ".")
    todo = {}
    for dt in ("float32", "bfloat16"):
        for M in ROWS:
            for N, K in SH:
                s = Skinny.default_spec({"M": M, "N": N, "K": K}, dt); todo[s.key] = s
    with cf.ThreadPoolExecutor(16) as ex: list(ex.map(kgen.compile, todo.values()))
    def per_call(fs, reps=7, n=24):
        return time_batched(torch, fs, reps, n)
    bw = copy_bandwidth(torch, 5) / 1e12
    print(f"copy bandwidth {bw:.2f} TB/s", flush=True)
    rows = []
    for dt in ("float32", "bfloat16"):
        tdt = getattr(torch, dt); item = 4 if dt == "float32" else 2
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
        for N, K in SH:
            copies = max(2, -(-200_000_000 // (N * K * item)))
            for order in ("row", "col"):
                Ws = [torch.randn(K, N, device="cuda", dtype=tdt) if order == "row" else torch.randn(N, K, device="cuda", dtype=tdt).t()
                      for _ in range(copies)]
                for M in ROWS:
                    s = Skinny.default_spec({"M": M, "N": N, "K": K}, dt)
                    k = kgen.build(s)
                    xs = torch.randn(M, K, device="cuda", dtype=tdt)
                    Cs = [torch.empty(M, N, device="cuda", dtype=tdt) for _ in range(copies)]
                    bound = (N * K + M * K + M * N) * item / (bw * 1e12) * 1e6
                    row = {"dtype": dt, "order": order, "M": M, "N": N, "K": K, "bound_us": bound}
                    row["cublas"] = per_call([lambda i=i: torch.matmul(xs, Ws[i], out=Cs[i]) for i in range(copies)])
                    ref = xs[:, :].double() @ Ws[0].double()
                    for name, fn in (("asked", asked), ("fitted", fitted)):
                        sk.wave_fitted_splits = fn
                        k._plans.clear()
                        Cs[0].fill_(float("nan")); k(xs, Ws[0], out=Cs[0]); torch.cuda.synchronize()
                        err = float((Cs[0].double() - ref).norm() / ref.norm())
                        if not err < 1e-2: print("WRONG", row, name, err, flush=True)
                        bl = [k.bind(xs, Ws[i], Cs[i]) for i in range(copies)]
                        row[name] = per_call(bl)
                        row[name + "_grid"] = [list(l[1].grid) for l in bl[0].plan.launches if l[0] == "main"]
                        row[name + "_splits"] = bl[0].plan.splits
                    sk.wave_fitted_splits = fitted
                    rows.append(row)
                    print(f"{dt:8s} {order} {M}x{N}x{K} bound {bound:.1f} cuBLAS {row['cublas']:.1f} asked {row['asked']:.1f} "
                          f"(s{row['asked_splits']}) fitted {row['fitted']:.1f} (s{row['fitted_splits']}) "
                          f"{row['asked']/row['fitted']:.2f}x", flush=True)
                del Ws
    for dt in ("float32", "bfloat16"):
        rs = [r for r in rows if r["dtype"] == dt]
        ch = [r for r in rs if r["asked_splits"] != r["fitted_splits"]]
        g = lambda rr, f: math.exp(sum(math.log(f(r)) for r in rr) / max(1, len(rr)))
        print(f"{dt}: fitted/asked speed geomean all {g(rs, lambda r: r['asked']/r['fitted']):.3f} "
              f"changed ({len(ch)}) {g(ch, lambda r: r['asked']/r['fitted']):.3f} min {min((r['asked']/r['fitted'] for r in ch), default=1):.2f}; "
              f"x cuBLAS asked {g(rs, lambda r: r['cublas']/r['asked']):.2f} fitted {g(rs, lambda r: r['cublas']/r['fitted']):.2f}")
    json.dump({"bw": bw, "rows": rows}, open(f"{OUT}/wave.json", "w"), indent=1)

if __name__ == "__main__":
    main()
