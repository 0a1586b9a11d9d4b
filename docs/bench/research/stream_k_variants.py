"""Stream-K on the transposed tiles (swap_ab, stream_k=True): the k steps of all C tiles shared
out evenly among one block an SM, pieces of a tile added by the block that ends it. For each
product (16-bit, B as W.t() or row-major), device time of
- default: the spec dispatch picks with an empty database;
- sk<BN>: the rows in one tile (BM = the rows rounded to 8) of BN columns, stream-K;
- sk2r<BN>: two row tiles of half the rows, stream-K (more than 128 rows);
- default_sk: the default with stream-K, where it is a transposed tile B reads by TMA as it is;
- PLAIN=1: plain<...>, each sk tile without stream-K (one block a tile, K whole); STREAM_K=0
  leaves the stream-K ways out;
- RULE=1: instead, the default against the tree before SWAP_OVER_STREAM_ROWS (where they differ:
  the draw keeps only such products); RULE=SWAP_LONG_K the same for that rule;
- GENERAL=1: g<BM>x<BN>c<cluster>, the general tiles of 128 x 256 and 128 x 192, alone and in
  clusters of two that share B's tile (cluster=2);
- SPLIT=1: split<BN>x<s>, the rows in one tile of BN columns (each of BNS) with K in s slices
  merged in clusters, for every s of 2-8 whose clusters all run at once (CLUSTER_WAVE_BLOCKS),
  else in a workspace where the tiles times s stay within the SMs (STREAM_K=0 PLAIN=0: these
  and the default alone);
and cuBLAS through torch, every result checked against float64 first on a NaN-poisoned output
(swap_fill_sweep.time_ways: CUDA graphs, operands rotated past L2 "_cold" and the same every
call "_warm").
Products: SHAPES (MxNxK,...) or COUNT drawn with SEED: rows ROWS, N in N_RANGE, K in K_RANGE,
log-uniform, N and K rounded up to a multiple of MULTIPLE (1), with GENERAL_DEFAULT=1 only those
whose default is the general wgmma tiles in two row tiles or more; ORDERS (col, row); DTYPE (bfloat16).
Output: $OUT/stream_k_<SEED>.json and a line a product. `--specs` builds every spec without a GPU."""
import json
import math
import os
import random
import sys

from swap_fill_sweep import build_specs, env_range   # this folder: run from it or with it on the path

import kgen.ops.tensorcore as tc
from kgen.ops.tensorcore import TensorMatmul as T
from kgen.ops.tensorcore import wgmma_ring_stages

SEED = int(os.environ.get("SEED", "23001"))
COUNT = int(os.environ.get("COUNT", "8"))
ROWS = env_range("ROWS", "65-256")
N_RANGE = env_range("N_RANGE", "4096-16384")
K_RANGE = env_range("K_RANGE", "1024-16384")
ORDERS = os.environ.get("ORDERS", "col").split(",")
DTYPE = os.environ.get("DTYPE", "bfloat16")
MULTIPLE = int(os.environ.get("MULTIPLE", "1"))   # N and K rounded up to a multiple of this
GENERAL = os.environ.get("GENERAL", "0") == "1"
PLAIN = os.environ.get("PLAIN", "0") == "1"
RULE_NAME = os.environ.get("RULE", "0")
RULE = RULE_NAME != "0"
STREAM_K = os.environ.get("STREAM_K", "1") == "1"   # 0: no stream-K ways (PLAIN=1: the plain tiles alone)
SPLIT = os.environ.get("SPLIT", "0") == "1"
GENERAL_DEFAULT = os.environ.get("GENERAL_DEFAULT", "0") == "1"   # draws: the general tiles in 2+ row tiles
BNS = tuple(int(v) for v in os.environ.get("BNS", "64,128,192,256").split(","))


def log_uniform(rng, lo, hi):
    return int(round(math.exp(rng.uniform(math.log(lo), math.log(hi)))))


def shapes():
    if os.environ.get("SHAPES"):
        return [tuple(int(v) for v in s.split("x")) for s in os.environ["SHAPES"].split(",")]
    rng, m, out = random.Random(SEED), MULTIPLE, []
    while len(out) < COUNT:
        M, N, K = rng.randint(*ROWS), -(-log_uniform(rng, *N_RANGE) // m) * m, -(-log_uniform(rng, *K_RANGE) // m) * m
        if GENERAL_DEFAULT:
            d = T.default_spec({"M": M, "N": N, "K": K}, DTYPE)
            if d.swap_ab or not d.wgmma or -(-M // d.tile[0]) < 2:
                continue
        if RULE and len(set(rule_ways(M, N, K, "col").values())) < 2:
            continue
        out.append((M, N, K))
    return out


# RULE=1 (or RULE=SWAP_OVER_STREAM_ROWS): that rule; RULE=SWAP_LONG_K: that one. What turns each off.
RULES_OFF = {"SWAP_OVER_STREAM_ROWS": (0, -1), "SWAP_LONG_K": 1 << 62}


def rule_ways(M, N, K, order):
    """RULE: the default and the default with the rule RULE names off (the tree before it)."""
    p = {"M": M, "N": N, "K": K}
    name = "SWAP_OVER_STREAM_ROWS" if RULE_NAME == "1" else RULE_NAME
    kept = getattr(tc, name)
    setattr(tc, name, RULES_OFF[name])
    try:
        before = T.default_spec(p, DTYPE).replace(layout_b=order)
    finally:
        setattr(tc, name, kept)
    return {"default": T.default_spec(p, DTYPE).replace(layout_b=order), "before": before}


def _sk(BM, BN, order):
    return T(dtype=DTYPE, tile=(BM, BN, 64), warp_tile=(BM, 64), stages=wgmma_ring_stages(BM, BN),
             instruction="wgmma", swap_ab=True, layout_b=order, stream_k=True)


def variants(M, N, K, order):
    if RULE:
        return rule_ways(M, N, K, order)
    default = T.default_spec({"M": M, "N": N, "K": K}, DTYPE).replace(layout_b=order)
    specs = {"default": default}
    half = (M + 1) // 2
    rows = (("sk", -(-M // 8) * 8),) + ((("sk2r", -(-half // 8) * 8),) if M > 128 else ())
    for name, BM in rows:
        for BN in BNS:
            try:
                specs[f"{name}{BN}"] = _sk(BM, BN, order)
            except ValueError:   # the sums past the registers, or the ring past shared memory
                pass
    if PLAIN:   # the same tiles without stream-K (one block a tile, K whole)
        for name in [n for n in specs if n.startswith("sk")]:
            plain = specs[name].replace(stream_k=False)
            if plain not in specs.values():
                specs["plain" + name[2:]] = plain
    if PLAIN and not STREAM_K:   # the plain tiles alone
        specs = {n: v for n, v in specs.items() if not n.startswith("sk")}
    if not STREAM_K and not PLAIN:
        specs = {"default": default}
    if SPLIT:
        specs.update(split_ways(M, N, K, order))
    if GENERAL:
        for BM, BN in ((128, 256), (128, 192)):
            for cluster in (1, 2):
                specs[f"g{BM}x{BN}c{cluster}"] = T(dtype=DTYPE, tile=(BM, BN, 64), warp_tile=(64, BN),
                                                   stages=wgmma_ring_stages(BM, BN), instruction="wgmma",
                                                   layout_b=order, cluster=cluster)
    if STREAM_K and default.swap_ab and not (default.b_realign or default.b_phased):
        try:
            sk = default.replace(stream_k=True, wave_tail=1, split_k=1, split_merge="workspace", l2_prefetch=0)
            if sk not in specs.values():
                specs["default_sk"] = sk
        except ValueError:
            pass
    return specs


def split_ways(M, N, K, order):
    """SPLIT=1: one row tile of each of BNS columns, K in 2-8 slices: merged in clusters where
    they all run at once, else in a workspace within one wave."""
    out = {}
    BM = -(-M // 8) * 8
    for BN in BNS:
        tiles = -(-N // BN)
        for s in range(2, 9):
            if -(-K // 64) < 2 * s:
                break
            merge = "cluster" if tiles * s <= tc.CLUSTER_WAVE_BLOCKS.get(s, 0) else "workspace"
            if merge == "workspace" and tiles * s > tc._SMS:
                continue
            try:
                out[f"split{BN}x{s}"] = _sk(BM, BN, order).replace(stream_k=False, split_k=s, split_merge=merge)
            except ValueError:   # the sums past the registers, or a cluster merge past the ring
                try:
                    out[f"split{BN}x{s}"] = _sk(BM, BN, order).replace(stream_k=False, split_k=s)
                except ValueError:
                    pass
    return out


def cases():
    return [((M, N, K), order, variants(M, N, K, order)) for M, N, K in shapes() for order in ORDERS]


def main():
    import torch
    from swap_fill_sweep import sweep

    rows = []
    for row, ways in sweep(torch, cases(), 10, DTYPE):
        rows.append(row)
        (M, N, K), order = row["shape"], row["order"]
        mine = [n for n in ways if n not in ("cublas", "default")]   # every way but the two references
        best = min(mine, key=lambda n: row[n + "_cold"]) if mine else "default"
        worst_err = max(row[n + "_err"] for n in ways)
        print(f"{M}x{N}x{K} {order}: cublas {row['cublas_cold']:.1f} default {row['default_cold']:.1f} "
              f"({row['specs']['default']}) best {best} {row[best + '_cold']:.1f} "
              + " ".join(f"{n} {row[n + '_cold']:.1f}" for n in mine) + f" err {worst_err:.1e}", flush=True)
        with open(os.path.join(os.environ.get("OUT", "."), f"stream_k_{SEED}.json"), "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "seed": SEED, "dtype": DTYPE, "rows": rows}, f)


if __name__ == "__main__":
    if sys.argv[1:] == ["--specs"]:
        build_specs(cases(), "sm_90a")
    else:
        main()
