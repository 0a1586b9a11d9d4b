"""Wider transposed tiles (TensorMatmul.swap_ab) for 16-bit products of 17-256 rows: does a block
of 128-256 columns, with K split in clusters to fill the SMs, beat the rule's 64 columns?

A block of the transposed tiles reads its BN columns of B once and all of A's BM rows for every
k: with BN = 64 and BM = 128 it takes in twice as many bytes of A (from L2) as of B. Wider
blocks take in fewer bytes of A per byte of B; K slices merged in clusters keep the SMs full.

Variants per product (bfloat16, both storage orders of B): the default, and A's rows in one tile
(the next multiple of 8) against BN of 64, 128, 192 or 256 columns, one block an SM, K in 1 to 8
slices merged in clusters: for each BN, one slice (where the tiles fit a wave), the most slices
whose clusters all run at once, and half that. Shapes drawn at random (env SEED, ROWS "lo-hi",
COUNT; N and K multiples of MULTIPLE, default 64). Device time from a CUDA graph, operands rotated
past L2 ("_cold") and the same every call ("_warm"); each result checked against float64 first.
Output: $OUT/swap_wide_<SEED>_<ROWS>.json. `python swap_wide_sweep.py --specs` compiles the
draw's specs without a GPU (KGEN_ARCH=sm_90a)."""
import concurrent.futures as cf
import json
import os
import sys

from swap_fill_sweep import CLUSTER_CAPACITY, SMS, sweep  # this folder: run from it or with it on the path

import kgen
from kgen.bench.calls import random_matmul_shapes
from kgen.ops.tensorcore import TensorMatmul as T
from kgen.ops.tensorcore import wgmma_ring_stages

SEED = int(os.environ.get("SEED", "7401"))
ROWS = tuple(int(r) for r in os.environ.get("ROWS", "17-256").split("-"))
COUNT = int(os.environ.get("COUNT", "8"))
MULTIPLE = int(os.environ.get("MULTIPLE", "64"))
WIDTHS = tuple(int(w) for w in os.environ.get("WIDTHS", "64,128,192,256").split(","))


def slices_for(tiles: int, K: int) -> list[int]:
    fit = [s for s in range(2, 9) if K >= 256 * s and tiles * s <= CLUSTER_CAPACITY[1][s]]
    out = [1] if tiles <= SMS else []
    if fit:
        most = max(fit)
        out += sorted({most, max((s for s in fit if s <= most // 2), default=most)})
    return out


def variants(M, N, K, order):
    p = {"M": M, "N": N, "K": K}
    out = {"default": T.default_spec(p, "bfloat16").replace(layout_b=order)}
    bm = -(-M // 8) * 8
    for BN in WIDTHS:
        tiles = -(-N // BN)
        try:
            base = T(dtype="bfloat16", tile=(bm, BN, 64), warp_tile=(bm, 64), stages=wgmma_ring_stages(bm, BN, 1),
                     instruction="wgmma", swap_ab=True, layout_b=order)
        except ValueError:
            continue
        for s in slices_for(tiles, K):
            try:
                out[f"w{BN}/{s}"] = base if s == 1 else base.replace(split_k=s, split_merge="cluster")
            except ValueError:
                continue
    return out


def cases():
    return [((M, N, K), order, variants(M, N, K, order))
            for M, N, K in random_matmul_shapes(COUNT, SEED, ROWS, MULTIPLE) for order in ("col", "row")]


def compiles(spec) -> bool:
    try:
        res = kgen.compile(spec, os.environ.get("KGEN_ARCH", "sm_90a")).resources
    except Exception:   # noqa: BLE001 - a variant ptxas refuses (registers) is left out
        return False
    return all(r["spill_stores"] == 0 for r in res.values())


def compiled_only(todo):
    """`todo` ((shape, order, {name: spec}) items) without the specs that do not compile
    without spills, compiled in parallel."""
    with cf.ThreadPoolExecutor(16) as ex:
        specs = {s.key: s for _, _, v in todo for s in v.values()}
        ok = dict(zip(specs, ex.map(compiles, specs.values())))
    return [(shape, order, {n: s for n, s in v.items() if ok[s.key]}) for shape, order, v in todo]


def main():
    import torch

    todo = compiled_only(cases())
    rows = []
    for row, ways in sweep(torch, todo, 10):
        rows.append(row)
        (M, N, K), order = row["shape"], row["order"]
        best = min((n for n in ways if n not in ("cublas", "default")), key=lambda n: row[n + "_cold"])
        print(f"{M}x{N}x{K} {order}: cublas {row['cublas_warm']:.1f}/{row['cublas_cold']:.1f} default "
              f"{row['default_warm']:.1f}/{row['default_cold']:.1f} best {best} {row[best + '_warm']:.1f}/"
              f"{row[best + '_cold']:.1f}  " + " ".join(f"{n} {row[n + '_cold']:.1f}" for n in ways
                                                         if n not in ("cublas", "default"))
              + f"  err {max(row[n + '_err'] for n in ways):.1e}", flush=True)
        with open(os.path.join(os.environ.get("OUT", "."), f"swap_wide_{SEED}_{ROWS[0]}-{ROWS[1]}.json"), "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "seed": SEED, "rows_range": ROWS, "rows": rows}, f)


if __name__ == "__main__":
    if sys.argv[1:] == ["--specs"]:
        todo = cases()
        specs = {s.key: s for _, _, v in todo for s in v.values()}
        print(len(specs), "specs", flush=True)
        for (M, N, K), order, v in todo:
            print(M, N, K, order, list(v))
    else:
        main()
