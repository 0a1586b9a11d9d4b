"""Device time of kgen.matmul on 16-bit products whose operands' rows start on 4-byte but not
16-byte boundaries (K, or N for a row-major B, even and no multiple of 8), beside cuBLAS, from
operands rotated past L2 (CUDA graph replays, kgen.bench.skinny.time_graph). Run once per tree
(cwd at a `git archive` of it) in one command to compare the element-pair copies against
element loads through registers. Each result is first checked against float64 on a
NaN-poisoned output. argv[1]: a label. Env: SEED (131001), SHORT (short-K products: M, N
log-uniform 512-8192, K 16-126), MID (mid-size products: M, N 256-4096, K 256-8192), ELEMENT
(products of at most 2^28.5 multiply-adds, the range of the element tiles: M, N 64-2048, K
256-8192), ODD (of each set, this many more with K odd: controls the change leaves alone), DTYPE
(bfloat16). B alternates between W.t() and row-major. Output $OUT/pairs_<label>.json.
`--list` (no GPU): the draw and the spec dispatch gives each product on an H100 stand-in."""
import json
import os
import random
import sys

label = sys.argv[1]
SEED = int(os.environ.get("SEED", "131001"))
DTYPE = os.environ.get("DTYPE", "bfloat16")
rng = random.Random(SEED)


def even_unaligned(k: int) -> int:
    k += k % 2
    return k + 2 if k % 8 == 0 else k


products = []
for name, count, (lo, hi), (klo, khi) in (("short", int(os.environ.get("SHORT", "8")), (9, 13), (4, 7)),
                                          ("mid", int(os.environ.get("MID", "8")), (8, 12), (8, 13)),
                                          ("element", int(os.environ.get("ELEMENT", "0")), (6, 11), (8, 13))):
    for i in range(count + (int(os.environ.get("ODD", "1")) if count else 0)):
        while True:
            M, N = (int(2 ** rng.uniform(lo, hi)) for _ in range(2))
            K = int(2 ** rng.uniform(klo, khi))
            K = even_unaligned(K) if i < count else K | 1
            if name != "element" or M * N * K <= 2 ** 28.5:
                break
        if rng.random() < 0.5:
            N |= 1
        products.append((name if i < count else name + "_odd_k", M, N, K, "col" if i % 2 else "row"))
if label == "--list":
    from kgen.tune import ahead

    device = ahead.stand_in_device("sm_90", "NVIDIA H100 80GB HBM3", 132)
    for name, M, N, K, layout in products:
        spec = ahead.specs_for([ahead.Product(M, N, K, DTYPE, layout == "col")], device, db=False)[0]
        print(name, f"{M}x{N}x{K}", layout, spec.to_json())
    sys.exit(0)

import torch  # noqa: E402

import kgen  # noqa: E402
from kgen.bench.skinny import Operands, time_graph  # noqa: E402
from kgen.tune.dispatch import call_spec  # noqa: E402

torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False
l2 = torch.cuda.get_device_properties(0).L2_cache_size
rows = []
for name, M, N, K, layout in products:
    ops = Operands(torch, M, N, K, DTYPE, layout, l2)
    ref = ops.A[0].double() @ ops.B[0].double()
    ops.C[0].fill_(float("nan"))
    kgen.matmul(ops.A[0], ops.B[0], out=ops.C[0])
    torch.cuda.synchronize()
    err = float((ops.C[0].double() - ref).norm() / ref.norm().clamp_min(1e-300))
    calls = [(lambda a=a, b=b, c=c: kgen.matmul(a, b, out=c)) for a, b, c in zip(ops.A, ops.B, ops.C)]
    peer = [(lambda a=a, b=b, c=c: torch.mm(a, b, out=c)) for a, b, c in zip(ops.A, ops.B, ops.C)]
    row = {"set": name, "shape": [M, N, K], "layout": layout, "err": err,
           "spec": json.loads(call_spec(ops.A[0], ops.B[0]).to_json()),
           "kgen_us": time_graph(torch, calls, 15), "cublas_us": time_graph(torch, peer, 15)}
    rows.append(row)
    print(label, name, f"{M}x{N}x{K}", layout, f"kgen {row['kgen_us']:.1f} cublas {row['cublas_us']:.1f} err {err:.1e}",
          flush=True)
    del ops
    torch.cuda.empty_cache()
with open(os.path.join(os.environ.get("OUT", "."), f"pairs_{label}.json"), "w") as f:
    json.dump({"device": torch.cuda.get_device_name(), "dtype": DTYPE, "seed": SEED, "rows": rows}, f)
