"""kgen.matmul's device time (a CUDA graph over operands and outputs rotated past L2, replayed)
beside cuBLAS on products the mma.sync kernel runs, to compare two trees (run this once under
each, TAG naming the output). Every result is first checked against float64 on a NaN-poisoned
output. The shapes: SHAPES (dtype:MxNxK:layout, layout row or col = W.t()), or SEED and COUNT,
drawn per class in CLASSES (f64any: kgen.bench.calls' draw in float64; f64rows: float64, 65-256
rows against N and K of 1024-16384; f64few: float64, 9-64 rows; bf16: kgen.bench.calls' draw in
bfloat16), half of each class against W.t(). VARIANTS ("name:field=value,field=value;...", a
tuple as 128/64/16, a bool as True or False): the spec kgen.matmul runs (dispatch.call_spec),
where it is a float64 sm_90 tile (m16n8k16 or m16n8k8), built again with those fields replaced and timed beside it
(kgen.build, the same call), in the order given, the spec itself first and again last
(spec_end_us). bk and resplit name no spec field: precompile.variant_spec says what they do.
Output: $OUT/mma_whole_tiles_<TAG>.json."""
import json
import math
import os
import random

import torch

import kgen
from kgen.tune import dispatch
from kgen.bench.calls import random_matmul_shapes
from kgen.bench.skinny import Operands, checked_graph_time
from precompile import field_value, variant_applies, variant_spec   # this folder's host precompile script

SEED = int(os.environ.get("SEED", "0"))
COUNT = int(os.environ.get("COUNT", "6"))
TAG = os.environ.get("TAG", "run")
CLASSES = os.environ.get("CLASSES", "f64any,f64rows,f64few,bf16").split(",")


def drawn(seed: int, count: int):
    shapes = []
    for j, cls in enumerate(CLASSES):
        rows = {"f64rows": (65, 256), "f64few": (9, 64)}.get(cls)
        dtype = "bfloat16" if cls == "bf16" else "float64"
        for i, (M, N, K) in enumerate(random_matmul_shapes(count, seed * 10 + j, rows=rows)):
            layout = "col" if (i + random.Random(seed + j).randrange(2)) % 2 else "row"
            shapes.append((dtype, M, N, K, layout))
    return shapes


def parse(s: str):
    dtype, mnk, layout = s.split(":")
    M, N, K = (int(v) for v in mnk.split("x"))
    return dtype, M, N, K, layout


VARIANTS = [(v.split(":")[0], {f.split("=")[0]: field_value(f.split("=")[1]) for f in v.split(":")[1].split(",")})
            for v in os.environ.get("VARIANTS", "").split(";") if v]
SHAPES = [parse(s) for s in os.environ["SHAPES"].split(",")] if os.environ.get("SHAPES") else drawn(SEED, COUNT)


def main():
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    out = {"device": torch.cuda.get_device_name(), "tag": TAG, "rows": []}
    for dtype, M, N, K, layout in SHAPES:
        ops = Operands(torch, M, N, K, dtype, layout, l2)
        ref = ops.A[0].double() @ ops.B[0].double()
        row = {"dtype": dtype, "shape": [M, N, K], "layout": layout}
        for name, fn in (("kgen", kgen.matmul), ("cublas", lambda a, b, out: torch.mm(a, b, out=out))):
            err, us, _ = checked_graph_time(torch, lambda a, b, c, fn=fn: fn(a, b, out=c), ops.A, ops.B, ops.C, ref, 15)
            row[f"{name}_us"], row[f"{name}_err"] = us, err
        spec = dispatch.call_spec(ops.A[0], ops.B[0])
        row["spec"] = spec.to_json()
        if any(fields and variant_applies(spec, fields) for _, fields in VARIANTS):
            # The spec is timed again after the variants: long float64 runs can lower the clocks,
            # and spec_end_us against spec_us shows how much the later variants may have lost so.
            for name, fields in [("spec", {})] + VARIANTS + [("spec_end", {})]:
                if not variant_applies(spec, fields):
                    continue
                variant = variant_spec(spec, fields, M, N, K)
                if variant is None:
                    continue   # the fields do not apply to this spec
                k = kgen.build(variant)
                err, us, _ = checked_graph_time(torch, lambda a, b, c, k=k: k(a, b, out=c),
                                                ops.A, ops.B, ops.C, ref, 15)
                row[f"{name}_us"], row[f"{name}_err"] = us, err
                print(f"   {name} {us:.1f} err {err:.1e}", flush=True)
        out["rows"].append(row)
        print(f"{TAG} {dtype} {M}x{N}x{K} {layout}: kgen {row['kgen_us']:.1f} cuBLAS {row['cublas_us']:.1f} "
              f"({row['cublas_us'] / row['kgen_us']:.3f}x) err {row['kgen_err']:.1e}", flush=True)
        del ops
        torch.cuda.empty_cache()
        # Written after every product, so that a run cut short by its time limit keeps those done.
        with open(os.path.join(os.environ.get("OUT", "."), f"mma_whole_tiles_{TAG}.json"), "w") as f:
            json.dump(out, f, indent=1)
    for name, _ in VARIANTS:   # speed of each variant against the spec as dispatched
        ratios = [r["spec_us"] / r[f"{name}_us"] for r in out["rows"] if f"{name}_us" in r]
        if ratios:
            mean = math.exp(sum(map(math.log, ratios)) / len(ratios))
            print(f"{TAG} {name}: {mean:.3f}x the spec over {len(ratios)} products "
                  f"({min(ratios):.3f}-{max(ratios):.3f}x)")
    drift = [r["spec_us"] / r["spec_end_us"] for r in out["rows"] if "spec_end_us" in r]
    if drift:
        print(f"{TAG} the spec timed last against first: {min(drift):.3f}-{max(drift):.3f}x")


if __name__ == "__main__":
    main()
