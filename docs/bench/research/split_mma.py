"""float32 products (TF32 off) as three TF32 products on mma.sync, split in registers
(TensorMatmul split_tf32 with instruction mma_sync), beside what kgen.matmul runs for them and
cuBLAS SGEMM: device time of a CUDA graph over operands and outputs rotated past L2, every
result first checked against float64 on a NaN-poisoned output.

  SHAPES=float32:MxNxK:row|col,... python docs/bench/research/split_mma.py          # on a GPU
  SHAPES=... python docs/bench/research/split_mma.py --compile-only                  # host: fill the cache

VARIANTS below: tiles, warp tiles, blocks an SM and stages; each with K split by wave_split
over its tiles where they are fewer than a wave, B in the product's storage order (col =
W.t()), operands read in place (repack off: one launch). Output: $OUT/split_mma_<TAG>.json."""
import concurrent.futures
import json
import math
import os
import sys

import kgen
from kgen.ops.tensorcore import TensorMatmul, c_tiles, wave_split

TAG = os.environ.get("TAG", "run")
VARIANTS = {
    "t128w64x32": dict(tile=(128, 128, 32), warp_tile=(64, 32), min_blocks=1, stages=3),
    "t128x64": dict(tile=(128, 64, 32), warp_tile=(32, 32), min_blocks=2, stages=3),
    "t128x64s4": dict(tile=(128, 64, 32), warp_tile=(32, 32), min_blocks=2, stages=4),
    "t64": dict(tile=(64, 64, 32), warp_tile=(32, 32), min_blocks=3, stages=3),
}


def parse(s: str):
    dtype, mnk, layout = s.split(":")
    M, N, K = (int(v) for v in mnk.split("x"))
    return dtype, M, N, K, layout


SHAPES = [parse(s) for s in os.environ.get("SHAPES", "").split(",") if s]


def variant_specs(M: int, N: int, K: int, layout: str, sms: int = 132) -> dict:
    out = {}
    for name, fields in VARIANTS.items():
        spec = TensorMatmul(dtype="float32", tf32=True, split_tf32=True, smem_layout="pad", repack=False,
                            layout_b=layout, **fields)
        tiles = c_tiles(M, N, spec.tile[0], spec.tile[1])
        out[name] = spec.replace(split_k=wave_split(tiles, sms * spec.min_blocks, K))
    return out


def compile_only() -> None:
    todo = {s for _, M, N, K, layout in SHAPES for s in variant_specs(M, N, K, layout).values()}
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        list(pool.map(kgen.compile, todo))
    print("variants compiled:", len(todo))


def main() -> None:
    import torch

    from kgen.bench.skinny import Operands, checked_graph_time
    from kgen.tune import dispatch

    torch.backends.cuda.matmul.allow_tf32 = False
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    variants = {name: {f: list(v) if isinstance(v, tuple) else v for f, v in fields.items()}
                for name, fields in VARIANTS.items()}
    out = {"device": torch.cuda.get_device_name(), "tag": TAG, "variants": variants, "rows": []}
    for dtype, M, N, K, layout in SHAPES:
        ops = Operands(torch, M, N, K, dtype, layout, l2)
        ref = ops.A[0].double() @ ops.B[0].double()
        row = {"shape": [M, N, K], "layout": layout, "spec": dispatch.call_spec(ops.A[0], ops.B[0]).to_json()}
        ways = [("kgen", lambda a, b, c: kgen.matmul(a, b, out=c)), ("cublas", lambda a, b, c: torch.mm(a, b, out=c))]
        for name, spec in variant_specs(M, N, K, layout).items():
            k = kgen.build(spec)
            ways.append((name, lambda a, b, c, k=k: k(a, b, out=c)))
            row[name + "_split_k"] = spec.split_k
        for name, fn in ways:
            err, us, _ = checked_graph_time(torch, fn, ops.A, ops.B, ops.C, ref, 15)
            row[name + "_us"], row[name + "_err"] = us, err
        out["rows"].append(row)
        best = min(VARIANTS, key=lambda n: row[n + "_us"])
        print(f"{M}x{N}x{K} {layout}: kgen {row['kgen_us']:.1f} (err {row['kgen_err']:.1e}) cuBLAS "
              f"{row['cublas_us']:.1f}; " + " ".join(f"{n} {row[n + '_us']:.1f}" for n in VARIANTS)
              + f"; best {best} {row['kgen_us'] / row[best + '_us']:.2f}x kgen, err {row[best + '_err']:.1e}",
              flush=True)
        del ops
        torch.cuda.empty_cache()
        with open(os.path.join(os.environ.get("OUT", "."), f"split_mma_{TAG}.json"), "w") as f:
            json.dump(out, f, indent=1)
    for name in VARIANTS:
        r = [row["kgen_us"] / row[name + "_us"] for row in out["rows"]]
        if r:
            print(f"{name}: {math.exp(sum(map(math.log, r)) / len(r)):.3f}x kgen.matmul's spec over {len(r)} "
                  f"({min(r):.2f}-{max(r):.2f}x); largest error {max(row[name + '_err'] for row in out['rows']):.1e}")


if __name__ == "__main__":
    compile_only() if "--compile-only" in sys.argv else main()
