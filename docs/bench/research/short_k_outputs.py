"""Where a 16-bit product of a short K and a large output spends its time: device time (a CUDA graph
over operands rotated past L2) of the mma.sync default with element loads, with copies (repack),
and the wgmma default, on the shape as drawn and with K, N or both rounded up to a multiple of 8
(aligned rows), beside cuBLAS (torch.matmul) and a fill of the output's bytes (the write floor).
Each kernel's result is first checked against float64 with the output NaN-poisoned.
env SHAPES "MxNxK,..." (default: products that ran 0.41-0.68x cuBLAS on every route), DTYPE.
Output: $OUT/short_k_outputs.json and a line a shape."""
import json
import math
import os

import kgen
from kgen.ops.tensorcore import TensorMatmul as T

DTYPE = os.environ.get("DTYPE", "bfloat16")
SHAPES = [tuple(int(v) for v in s.split("x")) for s in
          os.environ.get("SHAPES", "7013x891x59,1010x4187x46,238x5789x36,4252x901x61").split(",")]


def variants(M, N, K):
    out = {}
    for name, (m, n, k) in (("asdrawn", (M, N, K)), ("k8", (M, N, -(-K // 8) * 8)), ("n8", (M, -(-N // 8) * 8, K)),
                            ("both8", (M, -(-N // 8) * 8, -(-K // 8) * 8))):
        p = {"M": m, "N": n, "K": k}
        mma = T.mma_default_spec(p, DTYPE)
        out[name] = ((m, n, k), {"el": mma.replace(repack=False), "cp": mma.replace(repack=True),
                                 "wgmma": T.wgmma_default_spec(p, DTYPE)})
    return out


def main():
    import concurrent.futures as cf

    import torch

    from kgen.bench.skinny import time_graph

    todo = {s: variants(*s) for s in SHAPES}
    specs = {sp.key: sp for v in todo.values() for _, d in v.values() for sp in d.values()}
    with cf.ThreadPoolExecutor(16) as ex:
        list(ex.map(kgen.compile, specs.values()))
    tdt = getattr(torch, DTYPE)
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    rows = []
    for shape, v in todo.items():
        for name, ((m, n, k), d) in v.items():
            per_set = (m * k + k * n + m * n) * 2
            sets = max(2, min(16, math.ceil(3 * l2 / per_set)))
            A = [torch.randn(m, k, device="cuda").to(tdt) for _ in range(sets)]
            B = [torch.randn(k, n, device="cuda").to(tdt) for _ in range(sets)]
            C = [torch.full((m, n), float("nan"), device="cuda", dtype=tdt) for _ in range(sets)]
            ref = A[0].double() @ B[0].double()
            row = {"shape": list(shape), "variant": name, "run": [m, n, k]}
            ways = {"cublas": lambda a, b, out: torch.matmul(a, b, out=out), **{w: kgen.build(s) for w, s in d.items()}}
            for w, fn in ways.items():
                C[0].fill_(float("nan"))
                fn(A[0], B[0], out=C[0])
                torch.cuda.synchronize()
                row[w + "_err"] = float((C[0].double() - ref).norm() / ref.norm())
                row[w + "_us"] = time_graph(torch, [(lambda fn=fn, a=a, b=b, c=c: fn(a, b, out=c))
                                                    for a, b, c in zip(A, B, C)], 20)
            row["fill_us"] = time_graph(torch, [(lambda c=c: c.fill_(1.0)) for c in C], 20)
            rows.append(row)
            print(f"{shape} {name} {m}x{n}x{k}: fill {row['fill_us']:.1f} " +
                  " ".join(f"{w} {row[w + '_us']:.1f}" for w in ways) +
                  f" err {max(row[w + '_err'] for w in ways):.1e}", flush=True)
            del A, B, C
            torch.cuda.empty_cache()
    with open(os.path.join(os.environ.get("OUT", "."), "short_k_outputs.json"), "w") as f:
        json.dump({"device": torch.cuda.get_device_name(), "dtype": DTYPE, "rows": rows}, f)


if __name__ == "__main__":
    main()
