"""What A's row pitch costs the wgmma kernel: 16-bit products against W.t() (B = W.t(), W stored
N x K) with K no multiple of 64, each run four ways: A and W stored at pitch K, A a view of rows
padded to the next multiple of 64 elements (128 bytes), W so padded, and both. kgen.matmul and
cuBLAS (torch.matmul) on the same operands; device time from a CUDA graph over operands rotated
past L2, every result checked against float64 first (outputs NaN-poisoned). Env: SHAPES
("MxNxK,..."). Output: $OUT/a_pitch.json."""
import json
import math
import os

import torch

import kgen
from kgen.bench.skinny import checked_graph_time

SHAPES = os.environ.get("SHAPES", "58x12904x7000,58x9000x7000,40x12904x7000,24x12904x7000,9x12904x7000,"
                                  "2x12904x7000,58x9000x4680")


def main():
    torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    rows = []
    for M, N, K in (tuple(int(v) for v in s.split("x")) for s in SHAPES.split(",")):
        Kp = -(-K // 64) * 64
        sets = max(2, min(24, math.ceil(3 * l2 / ((M * K + K * N + M * N) * 2))))
        row = {"shape": [M, N, K]}
        for pa, pb in ((K, K), (Kp, K), (K, Kp), (Kp, Kp)):
            A = [torch.randn(M, pa, device="cuda").bfloat16()[:, :K] for _ in range(sets)]
            B = [torch.randn(N, pb, device="cuda").bfloat16()[:, :K].t() for _ in range(sets)]
            C = [torch.empty(M, N, device="cuda", dtype=torch.bfloat16) for _ in range(sets)]
            ref = A[0].double() @ B[0].double()
            err, t, _ = checked_graph_time(torch, lambda a, b, c: kgen.matmul(a, b, out=c), A, B, C, ref, 15)
            _, tc, _ = checked_graph_time(torch, lambda a, b, c: torch.matmul(a, b, out=c), A, B, C, ref, 15)
            row[f"A{pa}/B{pb}"] = {"kgen_us": t, "cublas_us": tc, "err": err}
            A = B = C = None
            torch.cuda.empty_cache()
        rows.append(row)
        print(f"{M}x{N}x{K}: " + " | ".join(f"{k}: {v['kgen_us']:.1f} (cuBLAS {v['cublas_us']:.1f}, err {v['err']:.0e})"
                                            for k, v in row.items() if k != "shape"), flush=True)
    with open(os.path.join(os.environ.get("OUT", "."), "a_pitch.json"), "w") as f:
        json.dump({"device": torch.cuda.get_device_name(), "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
