"""bfloat16 products of 65-256 rows against narrow weights (24-66 tiles of 64 columns), both
storage orders of B: the default (A's rows as the wgmma N where it applies) against
TensorMatmul.stream_spec and general_wgmma_spec and cuBLAS, device time from a CUDA graph with
the same operands every call (from L2) and with operands rotated past L2 (from HBM), each
result checked against float64. Output: $OUT/narrow.json."""

import concurrent.futures as cf, functools, json, os
import torch, kgen
from kgen.bench.skinny import Operands, time_graph
from kgen.ops.tensorcore import TensorMatmul as T

torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
SH = [
    (128, 4096, 4096),
    (256, 4096, 4096),
    (96, 4096, 4096),
    (100, 3072, 4096),
    (200, 2048, 8192),
    (80, 4096, 11008),
    (150, 3584, 3584),
    (70, 2560, 2560),
    (240, 1536, 6144),
    (180, 4224, 1536),
]
cases = []
for M, N, K in SH:
    p = {"M": M, "N": N, "K": K}
    for lb in ("col", "row"):
        v = {
            "default": T.default_spec(p, "bfloat16").replace(layout_b=lb),
            "stream": T.stream_spec(p, "bfloat16").replace(layout_b=lb),
            "general": T.general_wgmma_spec(p, "bfloat16").replace(layout_b=lb),
        }
        cases.append(((M, N, K), lb, v))
with cf.ThreadPoolExecutor(16) as ex:
    list(ex.map(kgen.compile, {s.key: s for _, _, v in cases for s in v.values()}.values()))
l2 = torch.cuda.get_device_properties(0).L2_cache_size
rows = []
for (M, N, K), lb, v in cases:
    ops = Operands(torch, M, N, K, "bfloat16", lb, l2)
    ref = ops.A[0].double() @ ops.B[0].double()
    row = {"shape": [M, N, K], "order": lb, "specs": {n: s.to_json() for n, s in v.items()}}
    ways = {"cublas": torch.matmul, **{n: kgen.build(s) for n, s in v.items()}}
    for n, fn in ways.items():
        C = fn(ops.A[0], ops.B[0])
        torch.cuda.synchronize()
        row[n + "_err"] = float((C.double() - ref).norm() / ref.norm())
        calls = [(lambda fn=fn, a=a, b=b, c=c: fn(a, b, out=c)) for a, b, c in zip(ops.A, ops.B, ops.C)]
        row[n + "_cold"] = time_graph(torch, calls, 15)
        row[n + "_warm"] = time_graph(torch, [calls[0]] * len(calls), 15)
    rows.append(row)
    print(
        f"{M}x{N}x{K} {lb}: "
        + "  ".join(f"{n} {row[n + '_warm']:.1f}/{row[n + '_cold']:.1f}" for n in ways)
        + f"  err {max(row[n + '_err'] for n in ways):.1e}",
        flush=True,
    )
    del ops
    torch.cuda.empty_cache()
json.dump({"device": torch.cuda.get_device_name(), "rows": rows}, open(os.environ["OUT"] + "/narrow.json", "w"))
