"""float32 products below 2^30 flops: which family is fastest where the tiled SIMT kernels
trail cuBLAS. For each shape, device time (the call captured in a CUDA graph and replayed,
host time excluded) and one call between events (host time included) of: kgen.matmul as
dispatch routes it; the skinny family's default spec for the small side (split-TF32
mma.sync forms past 12 rows) and its SIMT form; the split-TF32 wgmma kernel (TensorMatmul
split_tf32, operand copies included); cuBLAS SGEMM (TF32 off). Every result is checked
against the float64 product. SHAPES=MxNxK,... plus the products under 2^30 flops among COUNT
shapes drawn by `kgen bench calls`' generator (seed SEED). Output: $OUT/small_families.json."""
import concurrent.futures as cf
import json
import os

import torch

import kgen
from kgen.bench.calls import random_matmul_shapes
from kgen.bench.skinny import build_ways, format_ways, measure_ways
from kgen.ops.skinny import Skinny
from kgen.ops.tensorcore import TensorMatmul


def shapes():
    out = [tuple(int(v) for v in s.split("x")) for s in os.environ.get("SHAPES", "").split(",") if s]
    drawn = random_matmul_shapes(int(os.environ.get("COUNT", "0")), int(os.environ.get("SEED", "1")))
    return out + [s for s in drawn if 2.0 * s[0] * s[1] * s[2] < 2 ** 30 and s not in out]


def variants(M, N, K):
    p = {"M": M, "N": N, "K": K}
    out = {}
    if min(M, N) <= 256:
        sk = Skinny.default_spec(p, "float32")
        out["skinny"] = sk
        if sk.tensor_cores and min(M, N) <= 64:
            out["skinny_simt"] = Skinny.default_spec(p, "float32").replace(tensor_cores=False, merge="single_pass")
    tc = TensorMatmul.wgmma_default_spec(p, "float32", split_tf32=True)
    out["split_tf32"] = tc
    tiles = -(-M // tc.tile[0]) * -(-N // tc.tile[1])
    ways = max(1, min(8, 264 // tiles, K // 128))
    if ways > 1:
        out[f"split_tf32_k{ways}"] = tc.replace(split_k=ways)
    return out


def main():
    torch.backends.cuda.matmul.allow_tf32 = False
    todo = shapes()
    specs = {}
    for m in todo:
        for s in variants(*m).values():
            specs[s.key] = s
    with cf.ThreadPoolExecutor(16) as ex:
        list(ex.map(kgen.compile, specs.values()))
    rows = []
    for M, N, K in todo:
        A = torch.randn(M, K, device="cuda")
        B = torch.randn(K, N, device="cuda")
        ref = A.double() @ B.double()
        row = {"shape": [M, N, K]}
        ways = {"dispatch": kgen.matmul, "cublas": torch.matmul}
        ways.update(build_ways(kgen.build, variants(M, N, K), row))
        measure_ways(torch, ways, A, B, ref, row, 40)
        rows.append(row)
        cells = format_ways(row, ways)
        print(f"{M}x{N}x{K}: (device/one-call us) {cells}", flush=True)
    with open(os.path.join(os.environ.get("OUT", "."), "small_families.json"), "w") as f:
        json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
