"""Five bfloat16 products of 161-200 rows (W.t()): the default against the transposed tiles
with A's rows rounded to 8, 64 and 128 columns, 1-4 K slices in clusters; device time from
HBM (operands rotated), each result checked against float64. Output $OUT/tall_swap_fine.json."""
import json, os, torch, kgen
from kgen.ops.tensorcore import TensorMatmul as T, wgmma_ring_stages
from kgen.bench.skinny import Operands, time_graph
import concurrent.futures as cf
torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
SH = [(195, 3840, 15936), (176, 2368, 5184), (188, 7040, 3648), (200, 7040, 13312), (161, 3008, 10560)]
def variants(M, N, K):
    p = {"M": M, "N": N, "K": K}
    out = {"default": T.default_spec(p, "bfloat16").replace(layout_b="col")}
    BM = -(-M // 8) * 8
    for BN in (64, 128):
        tiles = -(-N // BN)
        for s in (1, 2, 3, 4):
            if tiles * s > 132 or (s > 1 and K < 256 * s):
                continue
            try:
                sp = T(dtype="bfloat16", tile=(BM, BN, 64), warp_tile=(BM, 64), stages=wgmma_ring_stages(BM, BN, 1),
                       instruction="wgmma", swap_ab=True, layout_b="col")
                out[f"swap{BM}x{BN}/{s}"] = sp if s == 1 else sp.replace(split_k=s, split_merge="cluster")
            except ValueError as e:
                print("skip", BM, BN, s, e)
    return out
todo = [(sh, variants(*sh)) for sh in SH]
with cf.ThreadPoolExecutor(16) as ex:
    list(ex.map(kgen.compile, {s.key: s for _, v in todo for s in v.values()}.values()))
l2 = torch.cuda.get_device_properties(0).L2_cache_size
res = []
for (M, N, K), v in todo:
    ops = Operands(torch, M, N, K, "bfloat16", "col", l2)
    ref = ops.A[0].double() @ ops.B[0].double()
    row = {"shape": [M, N, K], "specs": {n: s.to_json() for n, s in v.items()}}
    for n, fn in {"cublas": torch.matmul, **{n: kgen.build(s) for n, s in v.items()}}.items():
        C = fn(ops.A[0], ops.B[0]); torch.cuda.synchronize()
        row[n + "_err"] = float((C.double() - ref).norm() / ref.norm())
        calls = [(lambda fn=fn, a=a, b=b, c=c: fn(a, b, out=c)) for a, b, c in zip(ops.A, ops.B, ops.C)]
        row[n + "_cold"] = time_graph(torch, calls, 10)
    res.append(row)
    print(M, N, K, " ".join(f"{n}:{row[n + '_cold']:.1f}" for n in ["cublas", *v]), "maxerr %.1e" % max(row[n + "_err"] for n in v), flush=True)
    del ops; torch.cuda.empty_cache()
json.dump({"device": torch.cuda.get_device_name(), "rows": res}, open(os.path.join(os.environ.get("OUT", "."), "tall_swap_fine.json"), "w"))
