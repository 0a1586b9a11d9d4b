"""float64 products of 65-256 rows below dispatch's TENSOR_F64_MIN_MACS (2^28 multiply-adds),
which kgen.matmul runs on the tiled SIMT kernel: that call beside the tensor-core spec the same
operands would get were TensorMatmul their family (dispatch.resolve_spec with call_overrides),
and cuBLAS DGEMM through torch. Shapes: kgen.bench.calls' few-row draw (rows 65-256, N and K
1024-16384) with SEED, keeping COUNT products under 2^28; both storage orders of the weight.
Device time from CUDA graphs over operands rotated past L2; every result first checked against
float64 on a NaN-poisoned output. PRECOMPILE=1 compiles both specs of every product on the host
(a stand-in H100). Output: $OUT/f64_small_family_<SEED>.json."""
import json
import math
import os

import numpy as np

import kgen
from kgen.bench.calls import random_matmul_shapes
from kgen.ops.tensorcore import TensorMatmul
from kgen.tune import ahead, dispatch

SEED = int(os.environ.get("SEED", "97201"))
COUNT = int(os.environ.get("COUNT", "8"))


def shapes():
    drawn = random_matmul_shapes(400, SEED, rows=(65, 256))
    return [s for s in drawn if s[0] * s[1] * s[2] < dispatch.TENSOR_F64_MIN_MACS][:COUNT]


def tensor_spec(A, B, M, N, K, **where):
    over = dispatch.call_overrides(A, B, TensorMatmul, "float64", **where)
    return dispatch.resolve_spec(TensorMatmul, {"M": M, "N": N, "K": K}, "float64", over,
                                 **{k: v for k, v in where.items() if k == "device"}, db=False)


def precompile():
    dev = ahead.stand_in_device("sm_90", "NVIDIA H100 80GB HBM3", 132)
    one = np.zeros(1)
    prods, specs = [], []
    for M, N, K in shapes():
        for order in ("row", "col"):
            prods.append(ahead.Product(M, N, K, "float64", order == "col"))
            A = np.lib.stride_tricks.as_strided(one, (M, K), (K * 8, 8))
            B = np.lib.stride_tricks.as_strided(one, (K, N), (8, K * 8) if order == "col" else (N * 8, 8))
            specs.append(tensor_spec(A, B, M, N, K, stand_in=True, device=dev))
    print(ahead.compile_ahead(prods, device=dev, workers=2, db=False).compiled)
    for s in specs:
        kgen.compile(s, arch="sm_90")
    print(len(specs), "tensor specs")


def main():
    import torch

    from kgen.bench.skinny import Operands, checked_graph_time
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    rows = []
    for M, N, K in shapes():
        for order in ("row", "col"):
            ops = Operands(torch, M, N, K, "float64", order, l2)
            ref = ops.A[0].double() @ ops.B[0].double()
            tc = kgen.build(tensor_spec(ops.A[0], ops.B[0], M, N, K))
            row = {"shape": [M, N, K], "order": order, "dispatched": dispatch.call_spec(ops.A[0], ops.B[0]).to_json(),
                   "tensor": tc.spec.to_json()}
            for name, fn in (("kgen", lambda a, b, c: kgen.matmul(a, b, out=c)),
                             ("tensor", lambda a, b, c: tc(a, b, out=c)),
                             ("cublas", lambda a, b, c: torch.mm(a, b, out=c))):
                err, us, _ = checked_graph_time(torch, fn, ops.A, ops.B, ops.C, ref, 15)
                row[f"{name}_us"], row[f"{name}_err"] = us, err
            rows.append(row)
            print(f"{M}x{N}x{K} {order}: SIMT {row['kgen_us']:.1f} tensor {row['tensor_us']:.1f} cuBLAS "
                  f"{row['cublas_us']:.1f} | SIMT x{row['cublas_us'] / row['kgen_us']:.3f} tensor "
                  f"x{row['cublas_us'] / row['tensor_us']:.3f} | errors {row['kgen_err']:.1e} {row['tensor_err']:.1e}",
                  flush=True)
            del ops
    for name in ("kgen", "tensor"):
        g = math.exp(sum(math.log(r["cublas_us"] / r[f"{name}_us"]) for r in rows) / len(rows))
        print(f"{SEED} {name}: x{g:.3f} cuBLAS over {len(rows)}")
    with open(os.path.join(os.environ.get("OUT", "."), f"f64_small_family_{SEED}.json"), "w") as f:
        json.dump({"device": torch.cuda.get_device_name(), "rows": rows}, f, indent=1)


if __name__ == "__main__":
    if os.environ.get("PRECOMPILE"):
        precompile()
    else:
        main()
