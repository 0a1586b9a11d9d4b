"""16-bit tensor-core skinny forms at 3-16 rows: the two-pass merge (a second launch) against
the single-pass ticket merge, both weight orders, five weights; device time of bound launches
and one call with host time (the latter noisy on a shared host: the docs quote device time).
Output (H100): docs/bench/skinny16_merge_h100.json. WEIGHTS=NxK,... and ROWS=... pick other
weights and row counts (the second run: docs/bench/skinny16_merge_small_h100.json)."""
import dataclasses, json, math, os, statistics, sys
import concurrent.futures as cf
import torch, kgen
from kgen.ops.skinny import Skinny
from kgen.bench.skinny import time_batched, time_single

W = [tuple(int(v) for v in w.split("x")) for w in os.environ["WEIGHTS"].split(",")] if os.environ.get("WEIGHTS") else \
    [(4096, 4096), (14336, 4096), (5120, 5120), (4096, 11008), (3584, 8192)]
ROWS = [int(r) for r in os.environ.get("ROWS", "3,4,6,8,12,16").split(",")]
def main():
    OUT = os.environ.get("OUT", ".")
    dt = sys.argv[1] if len(sys.argv) > 1 else "bfloat16"
    specs = {}
    for M in ROWS:
        for N, K in W:
            s = Skinny.default_spec({"M": M, "N": N, "K": K}, dt)
            for m in ("two_pass", "single_pass"):
                v = dataclasses.replace(s, merge=m); specs[v.key] = v
    with cf.ThreadPoolExecutor(16) as ex: list(ex.map(kgen.compile, specs.values()))
    torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
    tdt = getattr(torch, dt); rows = []
    for (N, K) in W:
        copies = max(2, -(-200_000_000 // (N * K * 2)))
        for order in ("row", "col"):
            Ws = [torch.randn(K, N, device="cuda", dtype=tdt) if order == "row" else torch.randn(N, K, device="cuda", dtype=tdt).t()
                  for _ in range(copies)]
            for M in ROWS:
                xs = [torch.randn(M, K, device="cuda", dtype=tdt) for _ in range(copies)]
                Cs = [torch.empty(M, N, device="cuda", dtype=tdt) for _ in range(copies)]
                s = Skinny.default_spec({"M": M, "N": N, "K": K}, dt)
                row = {"M": M, "N": N, "K": K, "order": order}
                row["cublas_single"] = time_single(torch, [lambda i=i: torch.matmul(xs[i], Ws[i]) for i in range(copies)], 21)
                for m in ("two_pass", "single_pass"):
                    k = kgen.build(dataclasses.replace(s, merge=m))
                    ref = xs[0].double() @ Ws[0].double()
                    Cs[0].fill_(float("nan")); k(xs[0], Ws[0], out=Cs[0]); torch.cuda.synchronize()
                    err = float((Cs[0].double() - ref).norm() / ref.norm())
                    if not err < 2e-2: print("WRONG", row, m, err, flush=True)
                    bl = [k.bind(xs[i], Ws[i], Cs[i]) for i in range(copies)]
                    row[m + "_device"] = time_batched(torch, bl, 9, max(copies, 40))
                    row[m + "_single"] = time_single(torch, [lambda i=i: k(xs[i], Ws[i]) for i in range(copies)], 21)
                    row["form"] = bl[0].plan.form
                rows.append(row)
                print(f"{order} {row['form']:8s} {M}x{N}x{K}: device 2p {row['two_pass_device']:.1f} 1p {row['single_pass_device']:.1f} "
                      f"({row['two_pass_device']/row['single_pass_device']:.2f}x); one call 2p {row['two_pass_single']:.1f} "
                      f"1p {row['single_pass_single']:.1f} cuBLAS {row['cublas_single']:.1f}", flush=True)
            del Ws
    g = lambda f, rr: math.exp(sum(math.log(f(r)) for r in rr) / len(rr))
    for form in sorted({r["form"] for r in rows}):
        rr = [r for r in rows if r["form"] == form]
        print(form, len(rr), "single-pass speed over two-pass: device", round(g(lambda r: r["two_pass_device"] / r["single_pass_device"], rr), 3),
              "one call", round(g(lambda r: r["two_pass_single"] / r["single_pass_single"], rr), 3),
              "x cuBLAS one call: 2p", round(g(lambda r: r["cublas_single"] / r["two_pass_single"], rr), 3),
              "1p", round(g(lambda r: r["cublas_single"] / r["single_pass_single"], rr), 3))
    json.dump(rows, open(f"{OUT}/merge_{dt}{os.environ.get('TAG', '')}.json", "w"), indent=1)
main()
