"""The two-pass merge (a second kernel adds the K slabs' partials) against the single pass (the
tile's last block adds them) as users call a product: float32 products drawn at random (env
SEED, COUNT, ROWS "lo-hi" (7-16), ORDERS col,row), where kgen.matmul runs the skinny family with
the two-pass merge; the same spec with merge="single_pass" beside it. For each: one call
between CUDA events (host time included) and calls back to back (kgen.bench.calls._time_pair,
against torch.matmul with TF32 off), and device time from a CUDA graph over operands rotated
past L2; every result first checked against float64 (output NaN-poisoned).
Output: $OUT/skinny_merge_calls_<SEED>.json."""
import json
import math
import os

import torch

import kgen
from kgen.bench.calls import _time_pair, random_matmul_shapes
from kgen.bench.skinny import Operands, checked_graph_time
from kgen.ops.skinny import Skinny, tolerance
from kgen.tune import dispatch

SEED = int(os.environ.get("SEED", "9971"))
COUNT = int(os.environ.get("COUNT", "10"))
ROWS = tuple(int(v) for v in os.environ.get("ROWS", "7-16").split("-"))
ORDERS = os.environ.get("ORDERS", "col,row").split(",")
torch.backends.cuda.matmul.allow_tf32 = False


def main():
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    rows = []
    for M, N, K in random_matmul_shapes(COUNT, SEED, rows=ROWS):
        for order in ORDERS:
            A = torch.randn(M, K, device="cuda")
            B = torch.randn(N, K, device="cuda").t() if order == "col" else torch.randn(K, N, device="cuda")
            kgen.matmul(A, B)
            route = dispatch._fast[("matmul", A.shape, A.stride(), B.shape, B.stride(), A.dtype, False)]
            spec = route.spec
            if not isinstance(spec, Skinny) or spec.merge != "two_pass":
                continue
            ways = {"two_pass": route, "single_pass": kgen.build(spec.replace(merge="single_pass"))}
            ops = Operands(torch, M, N, K, "float32", order, l2)
            ref = ops.A[0].double() @ ops.B[0].double()
            row = {"shape": [M, N, K], "order": order, "spec": spec.to_json()}
            for name, k in ways.items():
                def fn(a, b, c, k=k):
                    return k(a, b, out=c)
                err, dev, _ = checked_graph_time(torch, fn, ops.A, ops.B, ops.C, ref, 15)
                assert math.isfinite(err) and err <= tolerance("float32", K), (M, N, K, order, name, err)
                t = _time_pair(lambda k=k, A=A, B=B: k(A, B), lambda A=A, B=B: torch.matmul(A, B))
                row[name] = {"device_us": dev, "single_us": t["kgen_single"] * 1e3, "pipe_us": t["kgen_pipe"] * 1e3,
                             "cublas_single_us": t["peer_single"] * 1e3, "cublas_pipe_us": t["peer_pipe"] * 1e3,
                             "err": err, "splits": k.bind(ops.A[0], ops.B[0], ops.C[0]).plan.splits}
            tp, sp = row["two_pass"], row["single_pass"]
            print(f"{M}x{N}x{K} {order} ({tp['splits']} slabs): device {tp['device_us']:.1f} / {sp['device_us']:.1f}, "
                  f"one call {tp['single_us']:.1f} / {sp['single_us']:.1f} (cuBLAS {tp['cublas_single_us']:.1f}), "
                  f"back to back {tp['pipe_us']:.1f} / {sp['pipe_us']:.1f} (cuBLAS {tp['cublas_pipe_us']:.1f}) "
                  f"| single pass x{tp['single_us'] / sp['single_us']:.2f} one call", flush=True)
            rows.append(row)
            del ops
            torch.cuda.empty_cache()
    with open(os.path.join(os.environ.get("OUT", "."), f"skinny_merge_calls_{SEED}.json"), "w") as f:
        json.dump({"device": torch.cuda.get_device_name(), "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
