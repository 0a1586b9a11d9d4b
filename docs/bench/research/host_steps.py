"""Where the time of one kgen.matmul call on few-row bfloat16 products goes: the public call,
the call with out=, the built kernel's call, its bare launch (kgen.core.launch.Launch with the
arguments packed), torch.matmul and torch.mm(out=), and new_empty. Each: host µs a call over
2000 calls in a row, one call between CUDA events (host time included), back-to-back calls
between two events, and for the calls with out= the device time from a CUDA graph of 20. For
the tensor-core kernel's default with its K slices merged in clusters, also the same spec with
a workspace and unsplit. Each kernel's result checked against float64 first.
Env SHAPES ("MxNxK,..." in place of the list below) and ORDER ("col": B = W.t(), the default;
"row": B row-major). Run from the repository root with an empty tuning database (KGEN_TUNE_DB);
output: $OUT/lat.json."""

import json
import os

import torch

import kgen
from kgen.bench.skinny import host_us as bench_host_us
from kgen.bench.skinny import time_graph
from kgen.core import runtime
from kgen.core.timing import time_calls
from kgen.tune import dispatch

torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
SH = [
    (7, 4608, 2112),
    (4, 3776, 3200),
    (12, 10176, 1472),
    (59, 3776, 3200),
    (19, 5568, 1216),
    (10, 2624, 9792),
    (2, 3136, 5568),
]
if os.environ.get("SHAPES"):
    SH = [tuple(int(d) for d in s.split("x")) for s in os.environ["SHAPES"].split(",")]
ROW_MAJOR = os.environ.get("ORDER", "col") == "row"
dt = torch.bfloat16
cases = []
for M, N, K in SH:
    A = torch.randn(M, K, device="cuda", dtype=dt)
    B = torch.randn(K, N, device="cuda", dtype=dt) if ROW_MAJOR else torch.randn(N, K, device="cuda", dtype=dt).t()
    cases.append((M, N, K, A, B))


def warm(c):
    M, N, K, A, B = c
    kgen.matmul(A, B)


for c in cases:
    warm(c)
torch.cuda.synchronize()
torch.cuda.synchronize()
variants = []
for M, N, K, A, B in cases:
    k = dispatch._fast[("matmul", A.shape, A.stride(), B.shape, B.stride(), A.dtype, False)]
    vs = [("dispatch", k)]
    sp = getattr(k, "spec", None)
    if sp is not None and getattr(sp, "split_merge", None) == "cluster":
        vs.append(("workspace", sp.replace(split_merge="workspace")))
        vs.append(("unsplit", sp.replace(split_merge="workspace", split_k=1)))
    variants.append(vs)


def build(v):
    return kgen.build(v) if not hasattr(v, "__call__") else v


built = [[(nv[0], build(nv[1])) for nv in vs] for vs in variants]
torch.cuda.synchronize()


def host_us(fn, n=2000):
    return bench_host_us(torch, fn, n)


def graph_us(fn, n=20):
    return time_graph(torch, [fn] * n, 15)


res = []
for (M, N, K, A, B), bl in zip(cases, built):
    out = torch.empty(M, N, device="cuda", dtype=dt)
    ref = A.double() @ B.double()
    row = {"shape": [M, N, K]}
    fns = {
        "torch.matmul": lambda: torch.matmul(A, B),
        "torch.mm out=": lambda: torch.mm(A, B, out=out),
        "kgen.matmul": lambda: kgen.matmul(A, B),
        "kgen.matmul out=": lambda: kgen.matmul(A, B, out=out),
        "new_empty": lambda: A.new_empty((M, N)),
        "raw stream": lambda: runtime.torch_stream(0),
    }
    for name, k in bl:
        sp = getattr(k, "spec", None)
        row[name + " spec"] = sp.to_json() if sp is not None else type(k).__name__
        fns[f"{name} k(A,B,out=)"] = lambda k=k: k(A, B, out=out)
        if type(k).__name__ == "TensorMatmulKernel":
            k(A, B, out=out)
            plan = k._plan(M, N, K, K, N if ROW_MAJOR else K, N, True, True, True)
            if len(plan) == 8 and plan[7] is not None and plan[5] is None:
                main, args, maps = plan[2], plan[3], plan[7]
                pa, pb = maps.encoded(A.data_ptr(), B.data_ptr())
                fns[f"{name} Launch"] = lambda main=main, pa=pa, pb=pb, args=args: main(
                    runtime.torch_stream(0), pa, pb, out.data_ptr(), *args, 1.0, 0.0
                )
        lf = fns.get(f"{name} Launch")
        if lf is not None:
            out.fill_(float("nan"))
            lf()
            torch.cuda.synchronize()
            row[name + " launch err"] = float((out.double() - ref).norm() / ref.norm())
        out.fill_(float("nan"))
        k(A, B, out=out)
        torch.cuda.synchronize()
        row[name + " err"] = float((out.double() - ref).norm() / ref.norm())
    for name, fn in fns.items():
        r = {"host_us": host_us(fn)}
        if name not in ("new_empty", "raw stream"):
            r["single_us"] = time_calls(fn, warmup=5, repeats=300).median_ms * 1e3
            r["pipe_us"] = time_calls(fn, warmup=5, repeats=10, inner=100).median_ms * 1e3
            if "out=" in name or "Launch" in name:
                try:
                    r["graph_us"] = graph_us(fn)
                except Exception as e:
                    r["graph_err"] = str(e)[:200]
        row[name] = r
    res.append(row)
    print(json.dumps(row), flush=True)
json.dump(
    {"device": torch.cuda.get_device_name(), "rows": res},
    open(os.environ.get("OUT", "/tmp") + "/lat.json", "w"),
    indent=1,
)
