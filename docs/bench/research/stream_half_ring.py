"""bfloat16 products of 66-200 rows that run the streaming tiles (several 64-row tiles): the
deepest ring (one block an SM) against rings half as deep (two blocks an SM) with 1-6 K slices
in a workspace, the general tiles and cuBLAS; device time from a CUDA graph, the same operands
every call (from L2) and rotated past L2 (from HBM), each result checked against float64.
Output: $OUT/tall2.json."""

import concurrent.futures as cf, json, os
import torch, kgen
from kgen.bench.skinny import Operands, time_graph
from kgen.ops.tensorcore import TensorMatmul as T, wgmma_ring_stages

torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
SH = [
    (161, 3008, 10560),
    (126, 6784, 5760),
    (146, 4672, 7936),
    (105, 6464, 7936),
    (141, 2624, 13056),
    (159, 4224, 3712),
    (97, 8192, 1216),
    (66, 14144, 2560),
    (200, 7040, 13312),
    (88, 4160, 9472),
]
cases = []
for M, N, K in SH:
    p = {"M": M, "N": N, "K": K}
    for lb in ("col", "row"):
        st = T.stream_spec(p, "bfloat16").replace(layout_b=lb)
        BM, BN, _ = st.tile
        v = {
            "default": T.default_spec(p, "bfloat16").replace(layout_b=lb),
            "stream": st,
            "general": T.general_wgmma_spec(p, "bfloat16").replace(layout_b=lb),
        }
        half = st.replace(stages=wgmma_ring_stages(BM, BN, 2), split_merge="workspace")
        tiles = -(-M // BM) * -(-N // BN)
        for s in (1, 2, 3, 4, 6):
            if tiles * s <= 264 and K >= 256 * s:
                v[f"half/{s}"] = half.replace(split_k=s)
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
json.dump({"device": torch.cuda.get_device_name(), "rows": rows}, open(os.environ["OUT"] + "/tall2.json", "w"))
