"""How many K slices (and blocks an SM) the transposed 16-bit tiles (TensorMatmul.swap_ab) want:
bfloat16 products drawn at random (env SEED, ROWS "lo-hi", COUNT; N and K multiples of 64), both
storage orders of B, against cuBLAS, the default spec and the general tiles. Variants: A's rows
in the SWAP_ROWS bucket, 64 columns a block (and 128), the deepest ring for one or two blocks an
SM, and K in 1-8 slices merged in a cluster, wherever the blocks fit two waves. ROW_TILES=1:
instead, A's rows in several tiles of 16 or 32 (rows{BM}/{blocks an SM}/{slices}), 1-4 slices
where the clusters all run at once. FINE=1 (17-64 rows): instead, the rule's spec with A's rows in
a tile of the next multiple of 8 (fine8), of 16 (fine16) or of a power of two (pow2); in the
recorded runs (before commit 4142072) the rule itself still took the power of two ("default"). FINE_TALL=1: instead, the streaming spec
and A's rows in one tile of the next multiple of 8 past 64 too (tall{BN}/{blocks an SM}/{slices}),
64 or 128 columns, 1-8 slices where the clusters all run at once. FILL=1: instead, A's rows in
one tile of the next multiple of 8 for every product (fill{BN}/{blocks an SM}/{slices}): 64 or 128
columns, one or two blocks an SM, 1-8 slices where the clusters all run at once (the capacity
for two blocks an SM too), beside the default and the general tiles.
Device time from a CUDA graph with the same operands every call (from L2, what a loop over one
layer reads) and with operands rotated past L2 (from HBM); each result checked against float64
first. SHAPES ("MxNxK,...") replaces the draw; ORDERS (default "col,row") picks the storage orders
of B. Output: $OUT/swap_fill_<SEED>_<ROWS>.json. `python swap_fill_sweep.py --specs` prints how
many specs the draw needs and compiles them (no GPU; KGEN_ARCH=sm_90)."""
import concurrent.futures as cf
import json
import os
import sys

import kgen
from kgen.bench.calls import random_matmul_shapes
from kgen.ops.tensorcore import TensorMatmul as T
from kgen.ops.tensorcore import wgmma_ring_stages

SEED = int(os.environ.get("SEED", "9001"))
ROWS = tuple(int(r) for r in os.environ.get("ROWS", "17-256").split("-"))
COUNT = int(os.environ.get("COUNT", "12"))
SMS = 132
# The rule's row tiles before rows were rounded to 8 (tree 7afc7e0): the recorded sweeps' "swap"
# variants take A's rows in the first of these that holds them.
POW2_ROWS = (8, 16, 32, 64, 96, 128, 192, 256)
ROW_TILES = os.environ.get("ROW_TILES", "0") == "1"
FINE = os.environ.get("FINE", "0") == "1"
FINE_TALL = os.environ.get("FINE_TALL", "0") == "1"
FILL = os.environ.get("FILL", "0") == "1"
# Blocks in clusters of s that an H100 runs at once (cuOccupancyMaxActiveClusters x s) with one
# and two blocks an SM (docs/bench/swap16/cluster_capacity_h100.json).
CLUSTER_CAPACITY = {1: {2: 132, 3: 117, 4: 120, 5: 110, 6: 102, 7: 105, 8: 120},
                    2: {2: 264, 3: 237, 4: 248, 5: 235, 6: 234, 7: 224, 8: 240}}


def add_slices(out, name, base, tiles, K, capacity):
    """out[name/s] = base with K in s = 1-8 slices merged in clusters, where each slice gets 256 or
    more of K and all the clusters run at once (capacity[s] blocks; None: base alone)."""
    for s in range(1, 9):
        if s > 1 and (capacity is None or K < 256 * s or tiles * s > capacity[s]):
            continue
        try:
            out[f"{name}/{s}"] = base if s == 1 else base.replace(split_k=s, split_merge="cluster")
        except ValueError:
            continue


def variants(M, N, K, order):
    p = {"M": M, "N": N, "K": K}
    out = {"default": T.default_spec(p, "bfloat16").replace(layout_b=order),
           "general": T.general_wgmma_spec(p, "bfloat16").replace(layout_b=order)}
    BM = next((b for b in POW2_ROWS if b >= M), POW2_ROWS[-1])
    if FILL:   # rows rounded to 8, 64/128 columns, one or two blocks an SM, clusters that all run at once
        bm = -(-M // 8) * 8
        for BN in (64, 128):
            tiles = -(-N // BN)
            for per_sm in (1, 2):
                base = T(dtype="bfloat16", tile=(bm, BN, 64), warp_tile=(bm, 64),
                         stages=wgmma_ring_stages(bm, BN, per_sm), instruction="wgmma", swap_ab=True, layout_b=order)
                add_slices(out, f"fill{BN}/{per_sm}", base, tiles, K, CLUSTER_CAPACITY[per_sm])
        return out
    if FINE_TALL:   # A's rows in one tile of the next multiple of 8, 64 or 128 columns, 1-8 slices
        out["stream"] = T.stream_spec(p, "bfloat16").replace(layout_b=order)
        bm = -(-M // 8) * 8
        for BN in (64, 128):
            tiles = -(-N // BN)
            per_sm = 2 if tiles > SMS else 1
            try:
                base = T(dtype="bfloat16", tile=(bm, BN, 64), warp_tile=(bm, 64), stages=wgmma_ring_stages(bm, BN, per_sm),
                         instruction="wgmma", swap_ab=True, layout_b=order)
            except ValueError:
                continue
            add_slices(out, f"tall{BN}/{per_sm}", base, tiles, K, None if per_sm > 1 else CLUSTER_CAPACITY[1])
        return out
    if FINE:   # the rule's spec with A's rows in a tile of the next multiple of 8, of 16, of a power of two
        if T.swap_suits(M, N, K, "bfloat16"):
            rule = T.swap_spec(p, "bfloat16").replace(layout_b=order)
            BN = rule.tile[1]
            per_sm = 2 if -(-N // BN) > SMS else 1
            for name, bm in (("fine8", -(-M // 8) * 8), ("fine16", next(b for b in (8, 16, 32, 48, 64) if b >= M)),
                             ("pow2", next(b for b in POW2_ROWS if b >= M))):
                out[name] = rule.replace(tile=(bm, BN, 64), warp_tile=(bm, 64), stages=wgmma_ring_stages(bm, BN, per_sm))
        return out
    if ROW_TILES:   # A's rows in several tiles of 16 or 32 (each tile reads the weight again, from L2)
        for bm in (16, 32):
            if bm >= BM:
                continue
            tiles = -(-M // bm) * -(-N // 64)
            for per_sm in (1, 2):
                base = T(dtype="bfloat16", tile=(bm, 64, 64), warp_tile=(bm, 64), stages=wgmma_ring_stages(bm, 64, per_sm),
                         instruction="wgmma", swap_ab=True, layout_b=order)
                for s in (1, 2, 3, 4):
                    if (s > 1 and (K < 256 * s or tiles * s > CLUSTER_CAPACITY[per_sm][s])) or tiles * s > 2 * SMS * per_sm:
                        continue
                    out[f"rows{bm}/{per_sm}/{s}"] = base if s == 1 else base.replace(split_k=s, split_merge="cluster")
        return out
    for BN in (64, 128):
        tiles = -(-N // BN)
        for per_sm in (1, 2):
            base = T(dtype="bfloat16", tile=(BM, BN, 64), warp_tile=(BM, 64), stages=wgmma_ring_stages(BM, BN, per_sm),
                     instruction="wgmma", swap_ab=True, layout_b=order)
            for s in range(1, 9):
                if (s > 1 and K < 256 * s) or tiles * s > 2 * SMS * per_sm:
                    continue
                try:
                    spec = base if s == 1 else base.replace(split_k=s, split_merge="cluster")
                except ValueError:
                    continue
                out[f"swap{BN}/{per_sm}/{s}"] = spec
    return out


def cases():
    shapes = ([tuple(int(v) for v in x.split("x")) for x in os.environ["SHAPES"].split(",")] if os.environ.get("SHAPES")
              else random_matmul_shapes(COUNT, SEED, ROWS, 64))
    orders = os.environ.get("ORDERS", "col,row").split(",")
    return [((M, N, K), order, variants(M, N, K, order)) for M, N, K in shapes for order in orders]


def time_ways(torch, ops, ways: dict, repeats: int) -> dict:
    """Each way's relative error against float64 (outputs NaN-poisoned first) and its device time
    from a CUDA graph, operands rotated past L2 ("_cold") and the same every call ("_warm")."""
    from kgen.bench.skinny import time_graph

    ref = ops.A[0].double() @ ops.B[0].double()
    row = {}
    for n, fn in ways.items():
        for c in ops.C:
            c.fill_(float("nan"))
        C = fn(ops.A[0], ops.B[0])
        torch.cuda.synchronize()
        row[n + "_err"] = float((C.double() - ref).norm() / ref.norm())
        calls = [(lambda fn=fn, a=a, b=b, c=c: fn(a, b, out=c)) for a, b, c in zip(ops.A, ops.B, ops.C)]
        row[n + "_cold"] = time_graph(torch, calls, repeats)
        row[n + "_warm"] = time_graph(torch, [calls[0]] * len(calls), repeats)
    return row


def sweep(torch, todo: list, repeats: int, dtype: str = "bfloat16"):
    """Compile every spec of `todo` (((M, N, K), order of B, {name: spec}) items), then for each
    product yield its row (time_ways of cuBLAS and every spec on `dtype` operands) and the ways' names."""
    from kgen.bench.skinny import Operands

    torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
    with cf.ThreadPoolExecutor(16) as ex:
        list(ex.map(kgen.compile, {s.key: s for _, _, v in todo for s in v.values()}.values()))
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    for (M, N, K), order, v in todo:
        ops = Operands(torch, M, N, K, dtype, order, l2)
        row = {"shape": [M, N, K], "order": order, "specs": {n: s.to_json() for n, s in v.items()}}
        ways = {"cublas": torch.matmul, **{n: kgen.build(s) for n, s in v.items()}}
        row.update(time_ways(torch, ops, ways, repeats))
        del ops
        torch.cuda.empty_cache()
        yield row, list(ways)


def main():
    import torch

    rows = []
    suffix = ("_rowtiles" if ROW_TILES else "_fine" if FINE else "_tall" if FINE_TALL else
              "_fill" if FILL else "")
    for row, ways in sweep(torch, cases(), 10):
        rows.append(row)
        (M, N, K), order = row["shape"], row["order"]
        best = min((n for n in ways if n != "cublas"), key=lambda n: row[n + "_warm"])
        print(f"{M}x{N}x{K} {order}: cublas {row['cublas_warm']:.1f}/{row['cublas_cold']:.1f} default "
              f"{row['default_warm']:.1f}/{row['default_cold']:.1f} best {best} {row[best + '_warm']:.1f}/"
              f"{row[best + '_cold']:.1f} err {max(row[n + '_err'] for n in ways):.1e}", flush=True)
        # After each product: a cut-off run keeps its rows.
        with open(os.path.join(os.environ.get("OUT", "."), f"swap_fill_{SEED}_{ROWS[0]}-{ROWS[1]}{suffix}.json"), "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "seed": SEED, "rows_range": ROWS, "rows": rows}, f)


def env_range(name: str, default: str) -> tuple[int, int]:
    """A range given as LO-HI in the environment variable `name`."""
    lo, hi = os.environ.get(name, default).split("-")
    return int(lo), int(hi)


def build_specs(todo: list, arch: str) -> None:
    """Compile every spec of `todo` (((M, N, K), order, {name: spec}) items) for `arch`, no GPU
    needed (a script's `--specs`)."""
    specs = {s.key: s for _, _, v in todo for s in v.values()}
    print(len(specs), "specs", flush=True)
    with cf.ThreadPoolExecutor(2) as ex:
        list(ex.map(lambda s: kgen.compile(s, arch), specs.values()))


if __name__ == "__main__":
    if sys.argv[1:] == ["--specs"]:
        build_specs(cases(), os.environ.get("KGEN_ARCH", "sm_90"))
    else:
        main()
