"""Which route a small or mid-size float16/bfloat16 product wants as users call it, where its
sides are as drawn (most K and N no multiple of 8, so the rows of A and B are not 16-byte
aligned and the wgmma kernel, which reads by TMA, copies them aligned first):
  public   kgen.matmul(A, B) as the tree has it;
  wgmma    TensorMatmul.wgmma_default_spec (the copies included, repack on);
  mma_el   TensorMatmul.mma_default_spec with element loads (repack off: one launch reading
           the rows in place, K split as the spec has it: a workspace and a second launch);
  mma_el1  the same with K whole (one launch);
  mma_cp   mma_default_spec with repack on (copies, then 16-byte cp.async loads);
  element  TensorMatmul.element_spec (what the element-load rule runs: 64x64 blocks four an SM, or
           the short-K tiles).
Shapes: random_matmul_shapes(400, SEED) (kgen bench calls' general draw) with M*N*K from
2^MIN_LOG2 to 2^MAX_LOG2 multiply-adds that dispatch sends to TensorMatmul, the first COUNT;
DTYPE (bfloat16). Per route: the relative error against float64 (output NaN-poisoned first),
one call between CUDA events (median of 40, host time included) and back-to-back calls
(median over batches of 20), and with DEVICE=1 the device time (`_dev`: 20 calls into one
output captured in a CUDA graph, replayed; operands resident in L2), beside torch.matmul
(cuBLAS) timed the same way, in one process.
Output: $OUT/small16_routes_<DTYPE>_<SEED>.json and a line a product."""
import json
import os

import kgen
from kgen.bench.calls import random_matmul_shapes
from kgen.ops.tensorcore import TensorMatmul as T

SEED = int(os.environ.get("SEED", "9981"))
COUNT = int(os.environ.get("COUNT", "30"))
DTYPE = os.environ.get("DTYPE", "bfloat16")
MIN_LOG2 = float(os.environ.get("MIN_LOG2", "20"))
MAX_LOG2 = float(os.environ.get("MAX_LOG2", "29"))


def shapes():
    from kgen.tune.dispatch import matmul_family

    out = []
    for M, N, K in random_matmul_shapes(400, SEED):
        macs = M * N * K
        if 2 ** MIN_LOG2 <= macs <= 2 ** MAX_LOG2 and matmul_family(M, N, K, DTYPE) is T:
            out.append((M, N, K))
    return out[:COUNT]


def routes(M, N, K) -> dict:
    p = {"M": M, "N": N, "K": K}
    mma = T.mma_default_spec(p, DTYPE)
    out = {"wgmma": T.wgmma_default_spec(p, DTYPE), "mma_el": mma.replace(repack=False),
           "mma_cp": mma.replace(repack=True), "element": T.element_spec(p, DTYPE)}
    if mma.split_k > 1:
        out["mma_el1"] = mma.replace(repack=False, split_k=1)
    return out


def main():
    import concurrent.futures as cf

    import torch

    from kgen.bench.skinny import time_batched, time_graph, time_single

    todo = [(s, routes(*s)) for s in shapes()]
    specs = {sp.key: sp for _, r in todo for sp in r.values()}
    print(len(todo), "products,", len(specs), "specs", flush=True)
    with cf.ThreadPoolExecutor(16) as ex:
        list(ex.map(kgen.compile, specs.values()))
    tdt = getattr(torch, DTYPE)
    result = {"device": torch.cuda.get_device_name(), "dtype": DTYPE, "seed": SEED, "rows": []}
    path = os.path.join(os.environ.get("OUT", "."), f"small16_routes_{DTYPE}_{SEED}.json")
    for (M, N, K), specs_of in todo:
        g = torch.Generator(device="cuda")
        g.manual_seed(M * 7919 + N * 131 + K)
        A = torch.randn(M, K, device="cuda", generator=g).to(tdt)
        B = torch.randn(K, N, device="cuda", generator=g).to(tdt)
        ref = A.double() @ B.double()
        ways = {"cublas": lambda a, b: torch.matmul(a, b), "public": kgen.matmul,
                **{n: kgen.build(s) for n, s in specs_of.items()}}
        row = {"shape": [M, N, K], "specs": {n: s.to_json() for n, s in specs_of.items()}}
        for n, fn in ways.items():
            C = torch.full((M, N), float("nan"), device="cuda", dtype=tdt)
            if n == "cublas":
                torch.matmul(A, B, out=C)
            else:
                fn(A, B, out=C)
            torch.cuda.synchronize()
            row[n + "_err"] = float((C.double() - ref).norm() / ref.norm())
            row[n + "_one"] = time_single(torch, [lambda fn=fn, A=A, B=B: fn(A, B)], 40)
            row[n + "_pipe"] = time_batched(torch, [lambda fn=fn, A=A, B=B: fn(A, B)], 15, 20)
            if os.environ.get("DEVICE") == "1":
                call = ((lambda A=A, B=B, C=C: torch.matmul(A, B, out=C)) if n == "cublas"
                        else (lambda fn=fn, A=A, B=B, C=C: fn(A, B, out=C)))
                row[n + "_dev"] = time_graph(torch, [call] * 20, 15)
        result["rows"].append(row)
        names = list(ways)
        print(f"{M}x{N}x{K} ({M * N * K / 2 ** 20:.0f}M): " + "  ".join(
            f"{n} {row[n + '_one']:.1f}/{row[n + '_pipe']:.1f}" + (f"/{row[n + '_dev']:.1f}" if n + "_dev" in row
                                                                    else "") for n in names)
            + f"  err {max(row[n + '_err'] for n in names):.1e}", flush=True)
        with open(path, "w") as f:
            json.dump(result, f)


if __name__ == "__main__":
    main()
