"""Device time of kgen.matmul's default on 16-bit products whose output rows are not all 16-byte
aligned (N or the pitch no multiple of 8), beside the same products with N rounded up to a
multiple of 8 and beside cuBLAS (torch.mm), from operands rotated past L2 (CUDA graph replays).
Shapes: SEED's general draw (kgen.bench.calls.random_matmul_shapes, as `kgen bench calls
matmul --random` draws them) and SHORT products of a short K (M, N log-uniform 512-8192, K
16-256, N odd half the time). Each result is first checked against float64, the output
NaN-poisoned. Run it once per tree (PYTHONPATH at a `git archive` of the other) in one command
to compare two trees on one machine. argv[1]: a label. Env: SEED (9301), COUNT (16), SHORT
(10), DTYPE (bfloat16), LAYOUT (row: B row-major; col: W.t()). Output $OUT/odd_output_<label>.json."""
import json
import os
import random
import sys

import torch

import kgen
from kgen.bench.calls import random_matmul_shapes
from kgen.bench.skinny import Operands, time_graph

label = sys.argv[1]
SEED = int(os.environ.get("SEED", "9301"))
DTYPE = os.environ.get("DTYPE", "bfloat16")
LAYOUT = os.environ.get("LAYOUT", "row")
shapes = random_matmul_shapes(int(os.environ.get("COUNT", "16")), SEED)
rng = random.Random(SEED + 1)
for _ in range(int(os.environ.get("SHORT", "10"))):
    M, N = (int(2 ** rng.uniform(9, 13)) for _ in range(2))
    K = int(2 ** rng.uniform(4, 8))
    shapes.append((M, N | 1 if rng.random() < 0.5 else N, K))
torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False
l2 = torch.cuda.get_device_properties(0).L2_cache_size
rows = []
for M, N, K in shapes:
    row = {"shape": [M, N, K]}
    for name, n in (("drawn", N), ("n8", -(-N // 8) * 8)):
        if name == "n8" and n == N:
            continue
        ops = Operands(torch, M, n, K, DTYPE, LAYOUT, l2)
        ref = ops.A[0].double() @ ops.B[0].double()
        ops.C[0].fill_(float("nan"))
        kgen.matmul(ops.A[0], ops.B[0], out=ops.C[0])
        torch.cuda.synchronize()
        row[name + "_err"] = float((ops.C[0].double() - ref).norm() / ref.norm().clamp_min(1e-300))
        calls = [(lambda a=a, b=b, c=c: kgen.matmul(a, b, out=c)) for a, b, c in zip(ops.A, ops.B, ops.C)]
        peer = [(lambda a=a, b=b, c=c: torch.mm(a, b, out=c)) for a, b, c in zip(ops.A, ops.B, ops.C)]
        row[name + "_us"] = time_graph(torch, calls, 15)
        row[name + "_cublas_us"] = time_graph(torch, peer, 15)
        del ops
        torch.cuda.empty_cache()
    rows.append(row)
    print(label, json.dumps(row), flush=True)
with open(os.path.join(os.environ.get("OUT", "."), f"odd_output_{label}.json"), "w") as f:
    json.dump({"device": torch.cuda.get_device_name(), "dtype": DTYPE, "layout": LAYOUT, "seed": SEED,
               "rows": rows}, f)
