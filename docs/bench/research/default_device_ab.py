"""Device time of kgen.matmul's default on few-row bfloat16 products against W.t() (the decode
shapes and seed 9100's 1-16 and 17-256 row draws), from L2 and from HBM, beside cuBLAS. Run it
once per tree (PYTHONPATH at a `git archive` of the other) in one command, alternating, to
compare two trees on one machine. argv[1]: a label. Output $OUT/ab_<label>.json."""
import json, os, sys
import torch, kgen
from kgen.bench.calls import random_matmul_shapes
from kgen.bench.skinny import Operands, time_graph
torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
label = sys.argv[1]
shapes = [(1, 4096, 4096), (4, 4096, 4096), (8, 5120, 5120), (16, 4096, 11008), (1, 14336, 4096)]
shapes += random_matmul_shapes(10, 9100, (1, 16), 64) + random_matmul_shapes(10, 9100, (17, 256), 64)
l2 = torch.cuda.get_device_properties(0).L2_cache_size
rows = []
for M, N, K in shapes:
    ops = Operands(torch, M, N, K, "bfloat16", "col", l2)
    ref = ops.A[0].double() @ ops.B[0].double()
    C = kgen.matmul(ops.A[0], ops.B[0])
    torch.cuda.synchronize()
    err = float((C.double() - ref).norm() / ref.norm())
    calls = [(lambda a=a, b=b, c=c: kgen.matmul(a, b, out=c)) for a, b, c in zip(ops.A, ops.B, ops.C)]
    tc = [(lambda a=a, b=b, c=c: torch.mm(a, b, out=c)) for a, b, c in zip(ops.A, ops.B, ops.C)]
    row = {"shape": [M, N, K], "err": err, "cold": time_graph(torch, calls, 15), "warm": time_graph(torch, [calls[0]] * len(calls), 15),
           "cublas_cold": time_graph(torch, tc, 15), "cublas_warm": time_graph(torch, [tc[0]] * len(tc), 15)}
    rows.append(row)
    print(label, json.dumps(row), flush=True)
    del ops
    torch.cuda.empty_cache()
json.dump({"device": torch.cuda.get_device_name(), "rows": rows}, open(os.path.join(os.environ.get("OUT", "."), f"ab_{label}.json"), "w"))
