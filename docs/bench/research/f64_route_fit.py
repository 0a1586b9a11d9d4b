"""float64 products under dispatch.TENSOR_F64_MIN_MACS (2^28 multiply-adds): the SIMT tiles they
run, or the FP64 tensor cores' default (TensorMatmul.default_spec: sm_90's m16n8k16, three blocks
an SM, K split by wave_split)? That bound was measured with the m8n8k4 kernel. Device time of
each route (a CUDA graph over operands and outputs rotated past L2, replayed; each result first
checked against float64 on a NaN-poisoned output) beside cuBLAS DGEMM.
Shapes: M, N, K log-uniform from 32 to 4096, kept where 2^LO <= M*N*K < 2^28 (LO = 21), drawn
with SEED, COUNT of them; B row-major (ORDER=col: W.t()). PRECOMPILE=1 compiles both routes'
specs on the host (sm_90a) and stops. Output: $OUT/f64_route_fit_<SEED>.json and a line a product."""
import concurrent.futures as cf
import json
import math
import os
import random

SEED = int(os.environ.get("SEED", "98301"))
COUNT = int(os.environ.get("COUNT", "16"))
LO = int(os.environ.get("LO", "21"))
ORDER = os.environ.get("ORDER", "row")
ITEM = 8


def shapes():
    rng = random.Random(SEED)
    out = []
    while len(out) < COUNT:
        M, N, K = (int(2 ** rng.uniform(5, 12)) for _ in range(3))
        if 2 ** LO <= M * N * K < 2 ** 28:
            out.append((M, N, K))
    return out


def routes(M, N, K):
    """{'simt': the spec kgen.matmul runs on an H100 (found on the host), 'tensor': the tensor-core
    default with the same B order}."""
    import numpy as np

    from kgen.ops.tensorcore import TensorMatmul
    from kgen.tune import ahead, dispatch
    dev = ahead.stand_in_device("sm_90", "NVIDIA H100 80GB HBM3", 132)
    one = np.zeros(1)
    A = np.lib.stride_tricks.as_strided(one, (M, K), (K * ITEM, ITEM))
    B = np.lib.stride_tricks.as_strided(one, (K, N), (ITEM, K * ITEM) if ORDER == "col" else (N * ITEM, ITEM))
    simt = dispatch.call_spec(A, B, device=dev, db=False)
    tensor = TensorMatmul.default_spec({"M": M, "N": N, "K": K}, "float64").replace(layout_b=ORDER)
    return {"simt": simt, "tensor": tensor}


def precompile():
    from kgen.core import kernel as km
    specs = {s.key: s for M, N, K in shapes() for s in routes(M, N, K).values()}
    with cf.ThreadPoolExecutor(max_workers=os.cpu_count()) as pool:
        list(pool.map(lambda s: km.compile(s, "sm_90a"), specs.values()))
    print(f"{len(specs)} specs compiled")


def main():
    import torch

    import kgen
    from kgen.bench.skinny import Operands, checked_graph_time

    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    result = {"device": torch.cuda.get_device_name(), "seed": SEED, "order": ORDER, "rows": []}
    for M, N, K in shapes():
        ops = Operands(torch, M, N, K, "float64", ORDER, l2)
        ref = ops.A[0].double() @ ops.B[0].double()
        ways = {"cublas": lambda a, b, out: torch.mm(a, b, out=out),
                **{n: kgen.build(s) for n, s in routes(M, N, K).items()}}
        row = {"shape": [M, N, K], "macs": M * N * K}
        for n, fn in ways.items():
            row[n + "_err"], row[n + "_us"], _ = checked_graph_time(
                torch, lambda a, b, c, fn=fn: fn(a, b, out=c), ops.A, ops.B, ops.C, ref, 15)
        result["rows"].append(row)
        print(f"{M}x{N}x{K} (2^{math.log2(M * N * K):.1f}): cuBLAS {row['cublas_us']:.1f} simt {row['simt_us']:.1f} "
              f"tensor {row['tensor_us']:.1f} -> tensor/simt {row['simt_us'] / row['tensor_us']:.2f}x "
              f"err {max(row['simt_err'], row['tensor_err']):.1e}", flush=True)
        del ops
        torch.cuda.empty_cache()
    with open(os.path.join(os.environ.get("OUT", "."), f"f64_route_fit_{SEED}.json"), "w") as f:
        json.dump(result, f, indent=1)


if __name__ == "__main__":
    if os.environ.get("PRECOMPILE"):
        precompile()
    else:
        main()
