"""The fixed and per-k-tile cost of the streaming wgmma kernel (64-row tiles) beside cuBLAS:
M of 8 and 64 rows, G = 1, 66 and 132 column tiles of 128, T = 1-64 k tiles of 64; the
streaming spec unsplit, with 2 slices merged in a cluster, and with 256- and 64-column tiles.
Device time from a CUDA graph of 20 calls on the same operands (from L2 where they fit); each
result checked first. Output: $OUT/micro.json."""

import json
import os

import torch

import kgen
from kgen.bench.skinny import time_graph
from kgen.ops.tensorcore import TensorMatmul

torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
dt = torch.bfloat16
base = TensorMatmul.stream_spec({"M": 8, "N": 4096, "K": 4096}, "bfloat16").replace(
    layout_b="col", split_k=1, split_merge="workspace"
)
variants = {
    "s1": base,
    "c2": base.replace(split_k=2, split_merge="cluster"),
    "bn256": base.replace(tile=(64, 256, 64), warp_tile=(64, 256), stages=5),
    "bn64": base.replace(tile=(64, 64, 64), warp_tile=(64, 64), stages=13),
}
ks = {}
for n, s in variants.items():
    try:
        ks[n] = kgen.build(s)
    except Exception as e:
        print(n, "failed", str(e)[:200])
rows = []
for M in (8, 64):
    for G in (1, 66, 132):
        for T in (1, 4, 16, 64):
            N, K = 128 * G, 64 * T
            A = torch.randn(M, K, device="cuda", dtype=dt)
            B = torch.randn(N, K, device="cuda", dtype=dt).t()
            C = torch.empty(M, N, device="cuda", dtype=dt)
            row = {"M": M, "G": G, "T": T}
            ref = A.float() @ B.float()
            row["cublas"] = time_graph(torch, [lambda: torch.mm(A, B, out=C)] * 20, 15)
            for n, k in ks.items():
                if n == "c2" and T < 2:
                    continue
                C.fill_(float("nan"))
                k(A, B, out=C)
                torch.cuda.synchronize()
                err = float((C.float() - ref).norm() / ref.norm())
                assert err < 1e-2, (n, M, G, T, err)
                row[n] = time_graph(torch, [lambda k=k: k(A, B, out=C)] * 20, 15)
            rows.append(row)
            print(json.dumps({k: (round(v, 2) if isinstance(v, float) else v) for k, v in row.items()}), flush=True)
json.dump({"device": torch.cuda.get_device_name(), "rows": rows}, open(os.environ["OUT"] + "/micro.json", "w"))
