"""Device time of kgen.matmul (a CUDA graph over operands rotated past L2, median of 25) for
env CASES ("dtype:MxNxK:order ...", order col = B as W.t(), row = B stored K x N), each
checked against float64 on a NaN-poisoned output first; one JSON line a case, tagged with
argv[1]. To compare trees, run it once per tree (PYTHONPATH and KGEN_CACHE_DIR apart),
alternating, in one command:
    for t in base new base new; do PYTHONPATH=...$t KGEN_CACHE_DIR=/tmp/kc_$t python graph_ab.py $t; done"""
import json
import os
import sys

import torch

import kgen
from kgen.bench.skinny import Operands, time_graph
from kgen.tune.dispatch import call_spec
torch.backends.cuda.matmul.allow_tf32 = False
tag = sys.argv[1]
l2 = torch.cuda.get_device_properties(0).L2_cache_size
for case in os.environ["CASES"].split():
    dt, shp, order = case.split(":")
    M, N, K = map(int, shp.split("x"))
    ops = Operands(torch, M, N, K, dt, order, l2)
    ref = ops.A[0].double() @ ops.B[0].double()
    ops.C[0].fill_(float("nan"))
    kgen.matmul(ops.A[0], ops.B[0], out=ops.C[0])
    err = float((ops.C[0].double() - ref).norm() / ref.norm())
    kg = [(lambda a=a, b=b, c=c: kgen.matmul(a, b, out=c)) for a, b, c in zip(ops.A, ops.B, ops.C)]
    us = time_graph(torch, kg, 25)
    sp = call_spec(ops.A[0], ops.B[0])
    print(json.dumps({"tree": tag, "case": case, "us": round(us, 2), "err": err,
                      "spec": type(sp).__name__ + " " + str(getattr(sp, "merge", ""))}), flush=True)
    del ops
    torch.cuda.empty_cache()
