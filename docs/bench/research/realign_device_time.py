"""A row-major 16-bit B whose rows are not 16-byte aligned, 17-256 rows: device time of the
wgmma kernel reading B in place with its producer threads (`TensorMatmul.with_realigned_b`,
b_realign) against the same spec copying B aligned first (the repack before each product),
the spec on an aligned B of the same shape (TMA reads it in place: the reference), and cuBLAS
through torch. Each call is captured in a CUDA graph over four copies of B (more bytes than
L2 holds) and replayed; every result is checked against the float64 product first.
With SKINNY=1 the skinny family's default for the shape (the route kgen.matmul takes for 1-16
such rows) is timed beside them; with ORDER=col B is W.t() of a weight W stored N x K (its rows
K values apart). Env: SHAPES (MxNxK,...; N and K as given), SKINNY, ORDER (row). Output:
$OUT/realign_device_time.json (SKINNY=1: realign_skinny_device_time.json, ORDER=col:
realign_col_device_time.json)."""
import json
import os

import torch

import kgen
from kgen.bench.skinny import time_graph
from kgen.ops.skinny import Skinny
from kgen.ops.tensorcore import TensorMatmul

SHAPES = os.environ.get("SHAPES", "26x2246x5632,26x2246x5606,59x14694x1161,40x2831x12245,158x2795x5297,"
                                  "220x2891x1209,53x5450x1212,149x11196x2702")
COPIES = 4
SKINNY = os.environ.get("SKINNY") == "1"
ORDER = os.environ.get("ORDER", "row")


def operand_b(K, N, width):
    """B (K x N) stored row-major with rows `width` apart, or with ORDER=col as the transposed
    view of an N x K weight with rows `width` apart; random values in the first N (K) of each."""
    if ORDER == "col":
        return torch.randn(N, width, device="cuda").to(torch.bfloat16)[:, :K].t()
    return torch.randn(K, width, device="cuda").to(torch.bfloat16)[:, :N]


def main():
    torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
    rows = []
    for text in SHAPES.split(","):
        M, N, K = (int(v) for v in text.split("x"))
        problem = {"M": M, "N": N, "K": K}
        spec = TensorMatmul.default_spec(problem, "bfloat16").replace(layout_b=ORDER)
        ways = {"copy": kgen.build(spec), "realign": kgen.build(spec.with_realigned_b())}
        if SKINNY:
            ways["skinny"] = kgen.build(Skinny.default_spec(problem, "bfloat16"))
        A = torch.randn(M, K, device="cuda").to(torch.bfloat16)
        inner = K if ORDER == "col" else N   # the length of B's stored rows
        Bs = [operand_b(K, N, inner) for _ in range(COPIES)]
        # The aligned reference: the same values in rows padded to a multiple of 8 elements.
        Ba = [operand_b(K, N, -(-inner // 8) * 8) for _ in range(COPIES)]
        for dst, src in zip(Ba, Bs):
            dst.copy_(src)
        ref = A.double() @ Bs[0].double()
        row = {"shape": [M, N, K], "spec": spec.to_json(), "realign_stages": spec.with_realigned_b().stages}
        out = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
        todo = [("copy", ways["copy"], Bs), ("realign", ways["realign"], Bs), ("aligned", ways["copy"], Ba),
                ("cublas", torch.matmul, Bs)] + ([("skinny", ways["skinny"], Bs)] if SKINNY else [])
        for name, fn, operands in todo:
            C = fn(A, operands[0])
            torch.cuda.synchronize()
            row[name + "_err"] = float((C.double() - ref).norm() / ref.norm())
            calls = [lambda fn=fn, a=A, b=b, c=out: fn(a, b, out=c) for b in operands]
            row[name + "_dev"] = time_graph(torch, calls, 20)
        rows.append(row)
        print(f"{M}x{N}x{K}: device us  copy {row['copy_dev']:6.1f}  realign {row['realign_dev']:6.1f}  "
              f"aligned {row['aligned_dev']:6.1f}  cuBLAS {row['cublas_dev']:6.1f}  "
              + (f"skinny {row['skinny_dev']:6.1f}  " if SKINNY else "")
              + f"(errors {row['copy_err']:.1e} {row['realign_err']:.1e} {row['cublas_err']:.1e})", flush=True)
    name = ("realign_skinny_device_time.json" if SKINNY else
            "realign_col_device_time.json" if ORDER == "col" else "realign_device_time.json")
    with open(os.path.join(os.environ.get("OUT", "."), name), "w") as f:
        json.dump({"device": torch.cuda.get_device_name(), "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
