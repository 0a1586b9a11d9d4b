"""float32 products of 64-511 rows against large N and K: kgen.matmul as dispatch routes them
(the skinny tensor-core forms up to 96 rows, the tiled SIMT kernels beyond), against the
split-TF32 wgmma kernel (TensorMatmul split_tf32) with its default tile and K split 1, 2, 4 or
8 ways, beside cuBLAS SGEMM (TF32 off). One call between CUDA events with host time included
(median of REPEATS) and back to back; each result checked against the float64 product.
SHAPES=MxNxK,... named shapes plus COUNT drawn ones (seed SEED): M log-uniform in [64, 511],
N and K in [1024, 16384]. Output: $OUT/split_tf32_rows.json."""
import concurrent.futures as cf
import json
import math
import os
import random

import torch

import kgen
from kgen.bench.skinny import time_batched, time_single
from kgen.ops.tensorcore import TensorMatmul

SPLITS = (1, 2, 4, 8)


def shapes():
    out = [tuple(int(v) for v in s.split("x")) for s in os.environ.get("SHAPES", "").split(",") if s]
    rng = random.Random(int(os.environ.get("SEED", "1")))
    for _ in range(int(os.environ.get("COUNT", "0"))):
        M = int(math.exp(rng.uniform(math.log(64), math.log(511.99))))
        N, K = (int(math.exp(rng.uniform(math.log(1024), math.log(16384)))) for _ in range(2))
        out.append((M, N, K))
    return out


def variants(M, N, K):
    base = TensorMatmul.wgmma_default_spec({"M": M, "N": N, "K": K}, "float32", split_tf32=True)
    return {f"split_k{s}": base.replace(split_k=s) for s in SPLITS}


def main():
    out_dir = os.environ.get("OUT", ".")
    repeats = int(os.environ.get("REPEATS", "15"))
    torch.backends.cuda.matmul.allow_tf32 = False
    todo = shapes()
    with cf.ThreadPoolExecutor(16) as ex:
        list(ex.map(kgen.compile, {s.key: s for m in todo for s in variants(*m).values()}.values()))
    rows = []
    for M, N, K in todo:
        copies = max(1, min(4, 400_000_000 // (4 * (M * K + K * N + M * N))))
        As = [torch.randn(M, K, device="cuda") for _ in range(copies)]
        Bs = [torch.randn(K, N, device="cuda") for _ in range(copies)]
        ref = As[0].double() @ Bs[0].double()
        row = {"M": M, "N": N, "K": K}
        ways = {"dispatch": kgen.matmul, "cublas": torch.matmul}
        ways.update({name: kgen.build(spec) for name, spec in variants(M, N, K).items()})
        for name, fn in ways.items():
            C = fn(As[0], Bs[0])
            torch.cuda.synchronize()
            row[name + "_err"] = float((C.double() - ref).norm() / ref.norm())
            calls = [lambda i=i, f=fn: f(As[i], Bs[i]) for i in range(copies)]
            row[name] = time_single(torch, calls, repeats)
            row[name + "_pipe"] = time_batched(torch, calls, 5, max(copies, 8))
        rows.append(row)
        best = min(SPLITS, key=lambda s: row[f"split_k{s}"])
        print(f"{M}x{N}x{K}: cuBLAS {row['cublas']:.0f} us | dispatch {row['cublas'] / row['dispatch']:.2f}x | "
              + " ".join(f"k{s} {row['cublas'] / row[f'split_k{s}']:.2f}x" for s in SPLITS)
              + f" | best k{best} | err {row[f'split_k{best}_err']:.1e}", flush=True)
        del As, Bs, ref
        torch.cuda.empty_cache()
    json.dump({"device": torch.cuda.get_device_name(), "rows": rows}, open(f"{out_dir}/split_tf32_rows.json", "w"),
              indent=1)


if __name__ == "__main__":
    main()
