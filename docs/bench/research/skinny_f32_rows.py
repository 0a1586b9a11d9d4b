"""float32 few-row products at 4-16 rows: the SIMT skinny forms against the split-TF32
tensor-core forms, both weight orders, beside cuBLAS SGEMM (TF32 off). Device time of bound
launches over rotated weights (median of 9 batches); each kernel's result is checked against
the float64 product first. Output (H100): docs/bench/skinny_f32_rows_h100.json.
WEIGHTS=NxK,... and ROWS=... pick other weights and row counts."""
import concurrent.futures as cf
import json
import math
import os

import torch

import kgen
from kgen.bench.skinny import time_batched
from kgen.ops.skinny import Skinny, default_rows, tolerance

W = [tuple(int(v) for v in w.split("x")) for w in os.environ["WEIGHTS"].split(",")] if os.environ.get("WEIGHTS") else \
    [(4096, 4096), (11008, 4096), (4096, 11008), (5120, 5120), (10037, 1293), (12509, 2040), (3000, 7000)]
ROWS = [int(r) for r in os.environ.get("ROWS", "4,6,8,10,11,12,13,14,16").split(",")]


def specs(M):
    """(SIMT form, tensor-core form) for M rows: the default where it is that form, else the
    default's shape of the other."""
    rows = default_rows(M)
    warp_cols = 4 if rows <= 2 else max(1, min(8, 64 // rows))
    simt = Skinny(dtype="float32", rows=rows, warp_cols=warp_cols, lane_vectors=1, threads=256, vector_bytes=16,
                  loads=8, k_split=0, waves=2, merge="single_pass")
    tc = Skinny(dtype="float32", rows=rows, warp_cols=warp_cols, lane_vectors=1, threads=256, vector_bytes=16,
                loads=8, k_split=0, waves=2, merge="two_pass", tensor_cores=True, tc_tiles=2)
    return simt, tc


def main():
    out_dir = os.environ.get("OUT", ".")
    torch.backends.cuda.matmul.allow_tf32 = False
    with cf.ThreadPoolExecutor(16) as ex:
        list(ex.map(kgen.compile, [s for M in ROWS for s in specs(M)]))
    rows = []
    for N, K in W:
        copies = max(2, -(-200_000_000 // (N * K * 4)))
        for order in ("row", "col"):
            Ws = [torch.randn(K, N, device="cuda") if order == "row" else torch.randn(N, K, device="cuda").t()
                  for _ in range(copies)]
            for M in ROWS:
                xs = [torch.randn(M, K, device="cuda") for _ in range(copies)]
                Cs = [torch.empty(M, N, device="cuda") for _ in range(copies)]
                row = {"M": M, "N": N, "K": K, "order": order,
                       "default": "tc" if Skinny.default_spec({"M": M, "N": N, "K": K}, "float32").tensor_cores
                       else "simt"}
                row["cublas"] = time_batched(torch, [lambda i=i: torch.matmul(xs[i], Ws[i], out=Cs[i])
                                                     for i in range(copies)], 9, max(copies, 40))
                ref = xs[0].double() @ Ws[0].double()
                for name, spec in zip(("simt", "tc"), specs(M)):
                    k = kgen.build(spec)
                    Cs[0].fill_(float("nan"))
                    k(xs[0], Ws[0], out=Cs[0])
                    torch.cuda.synchronize()
                    err = float((Cs[0].double() - ref).norm() / ref.norm())
                    if not err <= tolerance("float32", K):
                        print("WRONG", row, name, err, flush=True)
                    bound = [k.bind(xs[i], Ws[i], Cs[i]) for i in range(copies)]
                    row[name] = time_batched(torch, bound, 9, max(copies, 40))
                rows.append(row)
                print(f"{order} {M}x{N}x{K} ({row['default']}): cuBLAS {row['cublas']:.1f} us, simt "
                      f"{row['cublas'] / row['simt']:.2f}x, tc {row['cublas'] / row['tc']:.2f}x", flush=True)
            del Ws
    json.dump({"device": torch.cuda.get_device_name(), "rows": rows}, open(f"{out_dir}/skinny_f32_rows.json", "w"),
              indent=1)
    for order in ("row", "col"):
        for M in ROWS:
            rr = [r for r in rows if r["M"] == M and r["order"] == order]
            g = {k: math.exp(sum(math.log(r["cublas"] / r[k]) for r in rr) / len(rr)) for k in ("simt", "tc")}
            print(f"{order} {M:3d} rows: x cuBLAS (device) simt {g['simt']:.3f} tc {g['tc']:.3f}")


if __name__ == "__main__":
    main()
