"""Whether the transposed 16-bit tiles (TensorMatmul.swap_ab) run faster with their wgmmas spread
over independent accumulator sets (TensorMatmul.acc_sets): with one set each k16 wgmma adds into
the registers the one before writes, so a narrow wgmma (N = the rows rounded to 8) waits for the
last; with 2 or 4 sets consecutive wgmmas are independent.

Two parts, device time on one GPU (each result first checked against float64, the output
NaN-poisoned):
- pace: one block (64 columns, BM rows) over K = 2048 and K = 32768 from L2; the difference over
  the k tiles between them is the consumer's time a 64-deep k tile, for 1, 2 and 4 sets;
- draw: products drawn at random (env SEED, ROWS "lo-hi", COUNT, DTYPE; N and K multiples of
  64), both storage orders of B, the default spec (swap_spec) with 1, 2 and 4 sets against
  cuBLAS (torch.matmul) and a device copy of the same bytes, from HBM (operands rotated past L2,
  captured in a CUDA graph).
Output: $OUT/swap_acc_sets_<DTYPE>_<SEED>_<ROWS>.json; a line a product on stdout.
`python swap_acc_sets.py --specs` compiles every spec the run needs (no GPU; KGEN_ARCH=sm_90a).
The field was measured and taken out again: this script runs at commit 3af61b2, which has it
(docs/tensorcore-record.md, "Tried: independent accumulator sets")."""
import concurrent.futures as cf
import json
import os
import sys

import kgen
from kgen.bench.calls import random_matmul_shapes
from kgen.ops.tensorcore import TensorMatmul as T

SEED = int(os.environ.get("SEED", "9971"))
ROWS = tuple(int(r) for r in os.environ.get("ROWS", "1-16").split("-"))
COUNT = int(os.environ.get("COUNT", "10"))
DTYPE = os.environ.get("DTYPE", "bfloat16")
SETS = (1, 2, 4)
PACE_ROWS = (8, 16, 32)
PACE_K = (2048, 32768)


def sets_of(spec) -> dict:
    out = {}
    for n in SETS:
        try:
            out[f"sets{n}"] = spec.replace(acc_sets=n)
        except ValueError:
            continue
    return out


def pace_cases():
    def one_block(bm, K):
        return T.swap_spec({"M": bm, "N": 64, "K": K}, DTYPE).replace(layout_b="col", split_k=1,
                                                                     split_merge="workspace")
    return [((bm, 64, K), sets_of(one_block(bm, K))) for bm in PACE_ROWS for K in PACE_K]


def draw_cases():
    return [((M, N, K), order, sets_of(T.swap_spec({"M": M, "N": N, "K": K}, DTYPE).for_layouts(
                {"M": M, "N": N, "K": K}, layout_b=order)))
            for M, N, K in random_matmul_shapes(COUNT, SEED, ROWS, 64) for order in ("col", "row")
            if T.swap_suits(M, N, K, DTYPE)]


def timed(torch, ops, ways: dict, repeats: int, warm: bool) -> dict:
    """Each way's error against float64 and its device µs per call (a CUDA graph over the
    rotated operand sets, or the first set every call with warm=True)."""
    from kgen.bench.skinny import time_graph

    ref = ops.A[0].double() @ ops.B[0].double()
    row = {}
    for n, fn in ways.items():
        for c in ops.C:
            c.fill_(float("nan"))
        fn(ops.A[0], ops.B[0], out=ops.C[0])
        torch.cuda.synchronize()
        row[n + "_err"] = float((ops.C[0].double() - ref).norm() / ref.norm())
        calls = [(lambda fn=fn, a=a, b=b, c=c: fn(a, b, out=c)) for a, b, c in zip(ops.A, ops.B, ops.C)]
        row[n + "_us"] = time_graph(torch, [calls[0]] * len(calls) if warm else calls, repeats)
    return row


def main():
    import torch

    from kgen.bench.skinny import Operands, copy_floor_us

    out_dir = os.environ.get("OUT", ".")
    pace, draw = pace_cases(), draw_cases()
    specs = {s.key: s for _, v in pace for s in v.values()}
    specs.update({s.key: s for _, _, v in draw for s in v.values()})
    with cf.ThreadPoolExecutor(16) as ex:
        list(ex.map(kgen.compile, specs.values()))
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    result = {"device": torch.cuda.get_device_name(), "dtype": DTYPE, "seed": SEED, "rows_range": ROWS,
              "pace": [], "draw": []}
    path = os.path.join(out_dir, f"swap_acc_sets_{DTYPE}_{SEED}_{ROWS[0]}-{ROWS[1]}.json")
    for (M, N, K), specs in pace:
        ops = Operands(torch, M, N, K, DTYPE, "col", l2)
        row = {"shape": [M, N, K], **timed(torch, ops, {n: kgen.build(s) for n, s in specs.items()}, 20, warm=True)}
        result["pace"].append(row)
        print("pace", M, N, K, " ".join(f"{n} {row[n + '_us']:.2f}" for n in specs), flush=True)
    for bm in PACE_ROWS:
        lo, hi = ([r for r in result["pace"] if r["shape"][0] == bm and r["shape"][2] == k][0] for k in PACE_K)
        tiles = (PACE_K[1] - PACE_K[0]) // 64
        print(f"pace {bm} rows, µs a 64-deep k tile:",
              " ".join(f"{n} {(hi[n + '_us'] - lo[n + '_us']) / tiles:.4f}" for n in sets_of(T.swap_spec(
                  {"M": bm, "N": 64, "K": 4096}, DTYPE))), flush=True)
    for (M, N, K), order, specs in draw:
        ops = Operands(torch, M, N, K, DTYPE, order, l2)
        ways = {"cublas": torch.matmul, **{n: kgen.build(s) for n, s in specs.items()}}
        row = {"shape": [M, N, K], "order": order, "spec": specs["sets1"].to_json(),
               "copy_us": copy_floor_us(torch, ops.bytes, l2, 20), **timed(torch, ops, ways, 20, warm=False)}
        result["draw"].append(row)
        del ops
        torch.cuda.empty_cache()
        print(f"{M}x{N}x{K} {order}: copy {row['copy_us']:.1f} cublas {row['cublas_us']:.1f} "
              + " ".join(f"{n} {row[n + '_us']:.1f}" for n in specs)
              + f" err {max(row[n + '_err'] for n in ways):.1e}", flush=True)
        with open(path, "w") as f:
            json.dump(result, f)
    with open(path, "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    if sys.argv[1:] == ["--specs"]:
        specs = {s.key: s for _, v in pace_cases() for s in v.values()}
        specs.update({s.key: s for _, _, v in draw_cases() for s in v.values()})
        print(len(specs), "specs", flush=True)
        with cf.ThreadPoolExecutor(2) as ex:
            list(ex.map(lambda s: kgen.compile(s, os.environ.get("KGEN_ARCH", "sm_90a")), specs.values()))
    else:
        main()
