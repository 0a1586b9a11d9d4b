"""Small float32 products on the tiled family with operands whose rows are not 16-byte aligned:
the shipped spec (repack: one copy launch per unaligned operand, then the vector kernel)
against the same tiles with repack off (element loads, one launch), one call between CUDA
events (host time included) of each built kernel, beside torch.matmul (cuBLAS, TF32 off).
Shapes: M, N, K log-uniform 16-4096 (a third with odd N, a third odd K), at most 2^LOG2_MACS
(default 28) multiply-adds, that kgen.matmul runs on the tiled family and that need a repack. Each result
is checked against float64 (output poisoned).

    python matmul_small_repack.py SEED COUNT [LOG2_MACS [LOG2_MIN_MACS]]     # output: $OUT/small_repack_SEED.json"""

import concurrent.futures as cf
import json
import os
import random
import sys

import kgen
import torch
from kgen.bench.calls import _time_pair
from kgen.bench.results import geomean, poisoned_error
from kgen.ops.matmul import Matmul
from kgen.tune.dispatch import select, shape_family

OUT = os.environ.get("OUT", ".")


def draw(seed, count, most, least=0):
    rng = random.Random(seed)
    out = []
    while len(out) < count:
        M, N, K = (int(round(2 ** rng.uniform(4, 12))) for _ in range(3))
        if rng.random() < 1 / 3:
            N |= 1
        if rng.random() < 1 / 3:
            K |= 1
        if not least < M * N * K <= most or (N % 4 == 0 and K % 4 == 0):
            continue
        if shape_family(M, N, K, "float32") is not Matmul:
            continue
        out.append((M, N, K))
    return out


def main():
    seed, n = int(sys.argv[1]), int(sys.argv[2])
    shapes = draw(seed, n, 2 ** (int(sys.argv[3]) if len(sys.argv) > 3 else 28),
                  2 ** int(sys.argv[4]) if len(sys.argv) > 4 else 0)
    torch.backends.cuda.matmul.allow_tf32 = False
    specs = {s: select(Matmul, {"M": s[0], "N": s[1], "K": s[2]}).spec for s in shapes}
    every = {v for sp in specs.values() for v in (sp, sp.replace(repack=False))}
    with cf.ThreadPoolExecutor(16) as ex:
        list(ex.map(kgen.compile, every))
    rows, bad = [], 0
    for M, N, K in shapes:
        A, B, C = torch.randn(M, K, device="cuda"), torch.randn(K, N, device="cuda"), torch.empty(M, N, device="cuda")
        ref = A.double() @ B.double()
        row = {"shape": [M, N, K], "macs": M * N * K, "spec": specs[(M, N, K)].to_json()}
        cb = None
        for name, spec in (("repack", specs[(M, N, K)]), ("element", specs[(M, N, K)].replace(repack=False))):
            k = kgen.build(spec)
            err = poisoned_error(lambda k=k: k(A, B, out=C), C, ref)
            if not err < 1e-5:
                bad += 1
                print("WRONG", name, M, N, K, err, flush=True)
            t = _time_pair(lambda k=k: k(A, B, out=C), lambda: torch.matmul(A, B, out=C), 60.0)
            cb = t["peer_single"] if cb is None else min(cb, t["peer_single"])
            row[name], row[name + "_pipe"] = t["kgen_single"], t["kgen_pipe"]
        row["cublas"] = cb
        rows.append(row)
        print(f"{M}x{N}x{K} {M * N * K:.2g} MACs: cuBLAS {cb * 1e3:.1f}us repack {cb / row['repack']:.2f} "
              f"element {cb / row['element']:.2f} (element/repack speed {row['repack'] / row['element']:.2f})",
              flush=True)
    for v in ("repack", "element"):
        xs = [r["cublas"] / r[v] for r in rows]
        print(f"{v:8s} geomean {geomean(xs):.3f}x cuBLAS, lowest {min(xs):.2f}x")
    print("wrong results:", bad)
    json.dump({"device": torch.cuda.get_device_name(), "seed": seed, "rows": rows},
              open(f"{OUT}/small_repack_{seed}.json", "w"), indent=1)


if __name__ == "__main__":
    main()
