"""Wave quantisation of the general wgmma tiles on products of one row tile (16-bit, 65-192
rows against wide weights): the default against
- hyb<BM>x<BN>: the tiles that fill whole waves of the 132 SMs (n0 = F x BN columns) as one
  launch, and the last tiles (past the whole waves) as a second launch of the same tiles with K
  split in clusters (the most slices, up to 8, whose clusters all run at once; left out where
  that is 1);
- bal<BM>x<BN>: the whole product with K split s ways through the workspace, s the split whose
  blocks fill their last wave best (ceil(T s / 132) / s least);
for the tiles 192x128 (5 stages), 192x192 (4) and 128x256 (4, at most 128 rows).
Products: SHAPES or a draw (SEED, COUNT, ROWS, N_RANGE, K_RANGE as in wide_general_variants.py).
SET=heldout: instead, the default against the tree before wave_tail (where the two differ);
SET=heldout_swap: against the tree before the wide transposed tiles (WIDE_SWAP_ROWS);
SET=heldout_swap128: against the tree before the 128-column ones of SWAP_128_MIN_GAIN;
SET=heldout_rows2: against the tree before two row tiles of half the rows (SWAP_TWO_ROW_TILES);
SET=swap128_long: products the 64-column transposed tiles take that the 128-column ones would
cover with three quarters of the blocks or more in slices of 4000 k or more, the two against
each other (drawn as changed_shapes draws).
SET=swap, swap2, swapwide: the default against the transposed tiles (A's rows as the wgmma N) of
64-256 columns, one or two blocks an SM, alone and with the last wave's tiles in a second launch;
swaprows: against those tiles over two row tiles of half the rows (and the tree before).
SET=multiwave: products whose default keeps at most 75% of the SMs busy, against the transposed
tiles of 64 and 128 columns with K split in clusters over one or more waves; swap128: the
products the transposed tiles take, against those of 128 columns with K in the most slices whose
clusters all run at once (and one fewer).
Device time from CUDA graphs, operands rotated past L2 and the same every call; every result
checked against float64 first (swap_fill_sweep.time_ways). Output: $OUT/tail_wave_<SEED>.json."""
import concurrent.futures as cf
import json
import math
import os
import random
import sys

import torch
from swap_fill_sweep import time_ways  # this folder: the scripts run from it or with it on the path
from wide_general_variants import COUNT, K_RANGE, N_RANGE, ORDERS, ROWS, SEED, SET, shapes

import kgen
import kgen.ops.tensorcore as tc
from kgen.bench.skinny import Operands
from kgen.ops.tensorcore import (CLUSTER_WAVE_BLOCKS, PHASED_CLUSTER_BLOCKS, wave_tail_slices, wave_tail_waves,
                                 wgmma_ring_stages)
from kgen.ops.tensorcore import TensorMatmul as T

SMS = 132
if os.environ.get("ROW_TILES"):   # the rule on tiles of up to ROW_TILES row tiles, 65-256 rows
    tc.WAVE_TAIL_ROW_TILES = ((256, int(os.environ["ROW_TILES"])),)
    tc.WAVE_TAIL_ROWS = (65, 256)
TILES = ((192, 128, 5), (192, 192, 4), (128, 256, 4))


def balanced_slices(tiles, K):
    return min((s for s in range(1, 9) if K // s >= 256 or s == 1), key=lambda s: (-(-tiles * s // SMS) / s, s))


def cluster_waves(tiles, k, K):
    """Waves of one-block-an-SM tiles with K split k ways in clusters, over k (the time of one
    whole-K wave); 9 where a slice would be under 256 deep."""
    if k == 1:
        return -(-tiles // SMS)
    if K // k < 256:
        return 9
    return -(-tiles // (CLUSTER_WAVE_BLOCKS[k] // k)) / k


def fill(spec, M, N, K):
    """The share of the SMs the spec's blocks keep busy over its waves (one block an SM)."""
    grid = spec.launch_geometry(M, N, K)[0]
    blocks = grid[0] * grid[1] * grid[2]
    at_once = CLUSTER_WAVE_BLOCKS[spec.split_k] if spec.split_merge == "cluster" else SMS
    return blocks / (-(-blocks // at_once) * SMS)


def underfilled_shapes():
    """COUNT products (SEED, ROWS, N_RANGE, K_RANGE): SET=multiwave, those whose default runs the
    transposed tiles on at most 75% of the SMs over its waves, of at least 2e9 multiply-adds;
    SET=swap128, those the transposed tiles take (swap_suits), of at least 5e8."""
    rng, out = random.Random(SEED), []
    while len(out) < COUNT:
        M = rng.randint(*ROWS)
        N = int(math.exp(rng.uniform(*map(math.log, N_RANGE)))) // 8 * 8   # rows TMA can read
        K = int(math.exp(rng.uniform(*map(math.log, K_RANGE)))) // 8 * 8
        d = T.default_spec({"M": M, "N": N, "K": K}, "bfloat16")
        if SET == "swap128" and T.swap_suits(M, N, K, "bfloat16") and M * N * K >= 5e8:
            out.append((M, N, K))
        elif SET == "multiwave" and d.swap_ab and d.wave_tail == 1 and M * N * K >= 2e9 and fill(d, M, N, K) <= 0.75:
            out.append((M, N, K))
    return out


def hybrid(k_dp, k_tail, n0):
    def fn(a, b, out=None):
        if out is None:
            out = a.new_empty((a.shape[0], b.shape[1]))
        k_dp(a, b[:, :n0], out=out[:, :n0])
        k_tail(a, b[:, n0:], out=out[:, n0:])
        return out
    return fn


def plan(M, N, K, order):
    """{name: spec or (dp spec, tail spec, n0)} for one product."""
    specs = {"default": T.default_spec({"M": M, "N": N, "K": K}, "bfloat16").replace(layout_b=order)}
    if SET in ("heldout", "heldout_swap", "heldout_swap128", "heldout_rows2"):   # the default against the tree before a rule
        name = {"heldout": "WAVE_TAIL_ROWS", "heldout_swap": "WIDE_SWAP_ROWS",
                "heldout_swap128": "SWAP_128_MIN_GAIN", "heldout_rows2": "SWAP_TWO_ROW_TILES"}[SET]
        kept = getattr(tc, name)
        setattr(tc, name, math.inf if SET == "heldout_swap128" else (0, -1))
        try:
            before = T.default_spec({"M": M, "N": N, "K": K}, "bfloat16").replace(layout_b=order)
        finally:
            setattr(tc, name, kept)
        return {**specs, "before": before} if before != specs["default"] else specs
    if SET in ("swap", "swap2", "swapwide"):   # A's rows as the wgmma N (rows rounded to 8), a tail launch
        BM = -(-M // 8) * 8
        sizes = {"swap": ((64, 1), (64, 2), (128, 2)), "swap2": ((64, 2),),
                 # 128-256 columns a block, one block an SM (192 and 256 only where 512 and 640 threads
                 # hold the sums: ptxas caps them at 128 and 96 registers)
                 "swapwide": ((128, 1),) + (((192, 1),) if BM <= 192 else ()) + (((256, 1),) if BM <= 96 else ())}[SET]
        for BN, blocks in sizes:
            base = T(dtype="bfloat16", tile=(BM, BN, 64), warp_tile=(BM, 64), stages=wgmma_ring_stages(BM, BN, blocks),
                     instruction="wgmma", swap_ab=True, layout_b=order)
            name = f"swap{BN}x{blocks}"
            specs[name] = base
            wave = SMS * blocks
            tiles = -(-N // BN)
            full, rest = tiles // wave * wave, tiles % wave
            capacity = CLUSTER_WAVE_BLOCKS if blocks == 1 else PHASED_CLUSTER_BLOCKS
            slices = [k for k in range(2, 9) if rest * k <= capacity[k] and K // k >= 256]
            if full and rest and slices:
                try:
                    tail = base.replace(split_k=max(slices), split_merge="cluster")
                except ValueError:
                    continue
                specs[name + "_tail"] = (base, tail, full * BN)
        return specs
    if SET == "swaprows":   # 129-256 rows: the transposed tiles over two row tiles of half the rows
        half = -(-M // 2)
        BM = -(-half // 8) * 8
        for BN in (128, 192, 256):
            try:
                base = T(dtype="bfloat16", tile=(BM, BN, 64), warp_tile=(BM, 64), stages=wgmma_ring_stages(BM, BN),
                         instruction="wgmma", swap_ab=True, layout_b=order)
                specs[f"rows2x{BN}"] = base
                tail = wave_tail_waves(M, N, K, BM, BN)[1]
                if tail > 1:
                    specs[f"rows2x{BN}_tail"] = base.replace(wave_tail=tail)
            except ValueError:
                continue
        kept = tc.WIDE_SWAP_ROWS
        tc.WIDE_SWAP_ROWS = (0, -1)
        try:
            specs["before"] = T.default_spec({"M": M, "N": N, "K": K}, "bfloat16").replace(layout_b=order)
        finally:
            tc.WIDE_SWAP_ROWS = kept
        return specs
    if SET == "multiwave":   # the transposed tiles with K split in clusters over more than one wave
        BM = -(-M // 8) * 8
        for BN in (64, 128):
            tiles = -(-N // BN)
            for k in sorted(range(1, 9), key=lambda k: (cluster_waves(tiles, k, K), k))[:3]:
                if cluster_waves(tiles, k, K) >= 9:
                    continue
                try:
                    specs[f"sw{BN}s{k}"] = T(dtype="bfloat16", tile=(BM, BN, 64), warp_tile=(BM, 64),
                                             stages=wgmma_ring_stages(BM, BN), instruction="wgmma", swap_ab=True,
                                             layout_b=order, split_k=k, split_merge="cluster" if k > 1 else "workspace")
                except ValueError:
                    continue
        return specs
    if SET == "swap128":   # the transposed tiles of 128 columns, K in the most slices whose clusters run at once
        BM = -(-M // 8) * 8
        tiles = -(-N // 128)
        most = tc._most_slices(tc.SWAP_SPLITS, K, tiles, CLUSTER_WAVE_BLOCKS)
        for k in dict.fromkeys((most, max(1, most - 1))):
            spec = T(dtype="bfloat16", tile=(BM, 128, 64), warp_tile=(BM, 64), stages=wgmma_ring_stages(BM, 128),
                     instruction="wgmma", swap_ab=True, layout_b=order, split_k=k,
                     split_merge="cluster" if k > 1 else "workspace")
            if spec != specs["default"]:
                specs[f"b128s{k}"] = spec
        return specs
    if SET == "swap128_long":   # 128 columns with three quarters of the 64-column blocks or more, slices of 4000 k
        d = specs["default"]
        narrow, wide = -(-N // 64), -(-N // 128)
        s64 = tc._most_slices(tc.SWAP_SPLITS, K, narrow, CLUSTER_WAVE_BLOCKS)
        s128 = tc._most_slices(tc.SWAP_SPLITS, K, wide, CLUSTER_WAVE_BLOCKS)
        if d.swap_ab and d.tile[1] == 64 and M > 64 and narrow <= SMS and K >= 3072 and \
                wide * s128 >= 0.75 * narrow * s64 and K // s128 >= 4000:
            specs["long128"] = d.replace(tile=(d.tile[0], 128, 64), stages=wgmma_ring_stages(d.tile[0], 128),
                                         split_k=s128, split_merge="cluster" if s128 > 1 else "workspace")
        return specs
    if SET == "persist":   # the default's tiles on the persistent schedule, alone and before a tail launch
        d = specs["default"]
        specs["persist"] = d.replace(wave_tail=1, persistent=True)
        if d.wave_tail > 1:
            specs["persist_tail"] = (specs["persist"], d.tail_spec(), -(-N // d.tile[1]) // SMS * SMS * d.tile[1])
        return specs
    for BM, BN, stages in TILES:
        if M > BM:
            continue
        base = T(dtype="bfloat16", tile=(BM, BN, 64), warp_tile=(64, BN), stages=stages, instruction="wgmma",
                 layout_b=order)
        tiles = -(-N // BN)
        full, tail = tiles // SMS * SMS, tiles % SMS
        name = f"{BM}x{BN}"
        specs["t" + name] = base
        if full and tail:
            s = wave_tail_slices(1, tiles, K)   # one row tile: the tiles past `full`
            if s > 1:
                specs["hyb" + name] = (base, base.replace(split_k=s, split_merge="cluster"), full * BN)
        s = balanced_slices(tiles, K)
        if s > 1:
            specs["bal" + name] = base.replace(split_k=s)
    return specs


def changed_shapes():
    """SET=heldout: COUNT products drawn as wide_general_variants.shapes draws them (SEED, ROWS,
    N_RANGE, K_RANGE; N and K multiples of 64) whose default differs from the tree before
    wave_tail, in B's first storage order."""
    rng, out = random.Random(SEED), []
    while len(out) < COUNT:
        M = int(math.exp(rng.uniform(math.log(ROWS[0]), math.log(ROWS[1] + 1))))
        N = -(-int(math.exp(rng.uniform(*map(math.log, N_RANGE)))) // 64) * 64
        K = -(-int(math.exp(rng.uniform(*map(math.log, K_RANGE)))) // 64) * 64
        if ROWS[0] <= M <= ROWS[1] and len(plan(M, N, K, ORDERS[0])) > 1:
            out.append((M, N, K))
    return out


def ways(specs):
    return {n: hybrid(kgen.build(v[0]), kgen.build(v[1]), v[2]) if isinstance(v, tuple) else kgen.build(v)
            for n, v in specs.items()}


def main():
    torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    rows = []
    drawn = shapes()
    if not os.environ.get("SHAPES") and (SET.startswith("heldout") or SET == "swap128_long"):
        drawn = changed_shapes()
    elif not os.environ.get("SHAPES") and SET in ("multiwave", "swap128"):
        drawn = underfilled_shapes()
    todo = [((M, N, K), order, plan(M, N, K, order)) for M, N, K in drawn for order in ORDERS]
    every = {}
    for _, _, specs in todo:
        for v in specs.values():
            for s in (v[:2] if isinstance(v, tuple) else (v,)):
                every[s.key] = s
    print(len(todo), "products,", len(every), "specs", flush=True)
    with cf.ThreadPoolExecutor(16) as ex:
        list(ex.map(kgen.compile, every.values()))
    for (M, N, K), order, specs in todo:
        ops = Operands(torch, M, N, K, "bfloat16", order, l2)
        w = {"cublas": torch.matmul, **ways(specs)}
        row = {"shape": [M, N, K], "order": order}
        row.update(time_ways(torch, ops, w, 15))
        del ops
        torch.cuda.empty_cache()
        rows.append(row)
        err = max(row[n + "_err"] for n in w if n != "cublas")
        print(f"{M}x{N}x{K} {order}: " + "  ".join(f"{n} {row[n + '_cold']:.1f}" for n in w) + f"  err {err:.1e}",
              flush=True)
        assert err < 1e-2, f"{M}x{N}x{K} {order}: relative error {err:.1e}"
        with open(os.path.join(os.environ.get("OUT", "."), f"tail_wave_{SEED}.json"), "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "rows": rows}, f)

    def geo(values):
        return math.exp(sum(math.log(v) for v in values) / len(values))

    colds = [{k[:-5]: v for k, v in r.items() if k.endswith("_cold")} for r in rows]
    for name, pick in (("default", lambda c: c["default"]), ("before", lambda c: c.get("before", c["default"])),
                       ("best", lambda c: min(v for k, v in c.items() if k != "cublas"))):
        print(f"{name}: x{geo([c['cublas'] / pick(c) for c in colds]):.3f} cuBLAS from HBM (geometric mean of "
              f"{len(rows)}; lowest x{min(c['cublas'] / pick(c) for c in colds):.3f})")
    if any("before" in c for c in colds):
        print(f"default over before: x{geo([c['before'] / c['default'] for c in colds if 'before' in c]):.3f} "
              f"({sum('before' in c for c in colds)} products that differ)")


if __name__ == "__main__":
    if sys.argv[1:] == ["--shapes"]:   # the draw, as kgen bench calls --shapes takes it
        drawn = (changed_shapes() if SET.startswith("heldout") or SET == "swap128_long"
                 else underfilled_shapes() if SET in ("multiwave", "swap128") else shapes())
        print(",".join(f"{M}x{N}x{K}" for M, N, K in drawn))
    else:
        main()
