"""float64 products of few rows against a large weight: the spec kgen.matmul runs beside the
skinny family's SIMT forms and FP64 tensor-core tiles sized to the rows, cuBLAS through torch and a
read-only launch of the weight's bytes.

For each product drawn at random (env SEED, COUNT, or the list SHAPES; M from ROWS, N and K from N_RANGE / K_RANGE;
weights of MIN_MB or more; B = W.t() (ORDER=col) or row-major (ORDER=row)), device time from a CUDA
graph over operands rotated past L2, ROUNDS rounds in turn (best kept); every result first checked
against a float64 product on a NaN-poisoned output. `candidates` names the variants: MODE=rule,
the spec before TensorMatmul.few_rows_f64_suits (REPACK=1 adds its tiles copying unaligned rows
first); MODE=wave, splits by wave_split and 32-row tiles; MODE=wave_rule, the dispatched spec's
split before wave_split; MODE=inplace, the dispatched spec copying the weight first and reading
it in place (ODD=1 draws weights whose rows are not 16 bytes apart); MODE=rows96, row tiles of
80 and 96 (rows96_candidates); MODE=tiles, row tiles of 32-128 rows each split for its own waves
(tile_candidates). With PRECOMPILE=1 the
script only compiles them (the same draw) into the disk cache, so that a GPU run finds them
there.
Output: $OUT/f64_few_rows_<SEED>_<ORDER>.json."""
import concurrent.futures as cf
import json
import math
import os
import random

from kgen.ops.skinny import Skinny, default_loads, default_warp_cols
from kgen.ops.tensorcore import TensorMatmul

SEED = int(os.environ.get("SEED", "94101"))
COUNT = int(os.environ.get("COUNT", "5"))
ROWS = tuple(int(v) for v in os.environ.get("ROWS", "9-64").split("-"))
ORDER = os.environ.get("ORDER", "col")
MIN_MB = float(os.environ.get("MIN_MB", "16"))
MAX_MB = float(os.environ.get("MAX_MB", "400"))
N_RANGE = tuple(int(v) for v in os.environ.get("N_RANGE", "1024-16384").split("-"))
K_RANGE = tuple(int(v) for v in os.environ.get("K_RANGE", "1024-16384").split("-"))
ROUNDS = int(os.environ.get("ROUNDS", "2"))
ONLY = [v for v in os.environ.get("ONLY", "").split(",") if v]
SMS = 132
ITEM = 8


def draw(rng):
    M = int(math.exp(rng.uniform(math.log(ROWS[0]), math.log(ROWS[1] + 1))))
    N, K = (int(math.exp(rng.uniform(math.log(lo), math.log(hi)))) for lo, hi in (N_RANGE, K_RANGE))
    return min(max(M, ROWS[0]), ROWS[1]), N, K


def shapes():
    if os.environ.get("SHAPES"):   # given products (MxNxK,...) instead of a draw
        return [tuple(int(v) for v in t.split("x")) for t in os.environ["SHAPES"].split(",")]
    rng = random.Random(SEED)
    out, tries = [], 0
    while len(out) < COUNT and tries < 200 * COUNT:
        tries += 1
        M, N, K = draw(rng)
        if os.environ.get("ODD"):   # the weight's rows not 16 bytes apart
            N, K = (N, K | 1) if ORDER == "col" else (N | 1, K)
        if MIN_MB * 1e6 <= N * K * ITEM <= MAX_MB * 1e6:
            out.append((M, N, K))
    return out


def tc_tile(M, N, K, BM, BN, WM, WN, waves=1):
    """An FP64 tensor-core spec (m16n8k16) of BM x BN blocks, as many resident a SM as shared
    memory and 255 registers a thread allow (up to 8), K split to fill `waves` of them."""
    base = TensorMatmul(dtype="float64", tile=(BM, BN, 16), warp_tile=(WM, WN), stages=4, smem_layout="pad",
                        layout_a="row", layout_b=ORDER, mma_shape="m16n8k16", min_blocks=1)
    threads = (BM // WM) * (BN // WN) * 32
    per_sm = max(1, min(8, (227 * 1024) // base.shared_bytes, 65536 // (threads * 128)))
    tiles = -(-M // BM) * -(-N // BN)
    split = max(1, min(16, round(waves * SMS * per_sm / tiles), K // 256))
    return base.replace(min_blocks=per_sm, split_k=split)


def before_rule(M, N, K):
    """The spec kgen.matmul ran before TensorMatmul.few_rows_f64_suits (host_dispatched with it off)."""
    from kgen.tune import dispatch
    saved = TensorMatmul.__dict__["few_rows_f64_suits"]
    TensorMatmul.few_rows_f64_suits = classmethod(lambda cls, M, N, K: False)
    dispatch.forget()   # dispatch remembers its choices by problem
    try:
        return host_dispatched(M, N, K)
    finally:
        TensorMatmul.few_rows_f64_suits = saved
        dispatch.forget()


def candidates(M, N, K):
    p = {"M": M, "N": N, "K": K}
    if os.environ.get("MODE") == "wave":
        return wave_candidates(M, N, K)
    if os.environ.get("MODE") == "inplace":   # the dispatched spec reading an unaligned weight in place
        return {"inplace": host_dispatched(M, N, K).replace(repack=False),
                "copy": host_dispatched(M, N, K).replace(repack=True)}
    if os.environ.get("MODE") == "rows96":   # row tiles of 96 and 80 beside the 64 x 64 default
        return rows96_candidates(M, N, K)
    if os.environ.get("MODE") == "tiles":   # row tiles of 32-128 rows, each with its own K split
        return tile_candidates(M, N, K)
    if os.environ.get("MODE") == "wave_rule":   # the dispatched spec against its split before wave_split
        return {"before": before_wave(M, N, K)}
    if os.environ.get("MODE") == "rule":
        # The rule's tiles beside what ran before it; where the weight's rows are not 16 bytes
        # apart, those tiles reading it in place (repack off) and copying it first.
        out = {"before": before_rule(M, N, K)}
        if (K if ORDER == "col" else N) % 2 and os.environ.get("REPACK"):
            out["fit_repack"] = TensorMatmul.few_rows_f64_spec(p).replace(layout_a="row", layout_b=ORDER)
        return out
    out = {}
    if M <= 64:   # the SIMT forms' rows in one tile, 16 or 8 rows a tile
        simt = Skinny.simt_default_spec(p, "float64")
        out["simt"] = simt
        for rows in (16, 8):
            if M > rows:
                out[f"simt{rows}"] = simt.replace(rows=rows, warp_cols=default_warp_cols(rows, "float64", K),
                                                  loads=default_loads(rows))
    bm = min(64, -(-M // 16) * 16)
    out[f"tc{bm}x64"] = tc_tile(M, N, K, bm, 64, 16, 32)
    out[f"tc{bm}x128"] = tc_tile(M, N, K, bm, 128, 16, 64)
    if bm % 32 == 0:
        out[f"tc{bm}x64w32"] = tc_tile(M, N, K, bm, 64, 32, 32)
    if M > 64:
        out["tc32x64"] = tc_tile(M, N, K, 32, 64, 16, 32)
    if ONLY:
        out = {k: v for k, v in out.items() if k in ONLY}
    return out


def wave_split(tiles, slots, K, cost):
    """The K split whose blocks best fill whole waves of `slots` resident blocks: the least
    waves a unit of K (ceil(tiles * s / slots) / s) plus `cost` a slice (the workspace and its
    sum), K slices of at least 256."""
    top = max(1, min(16, K // 256))
    return min(range(1, top + 1), key=lambda s: (-(-tiles * s // slots) / s + cost * s, s))


def wave_candidates(M, N, K):
    """The dispatched spec's tiles with K split by wave_split (costs 0.02 and 0.05), and the
    same splits of 32 x 64 tiles (more than 64 rows) or of the rows' tiles 32 columns wide."""
    p = {"M": M, "N": N, "K": K}
    base = host_dispatched(M, N, K)
    out = {}
    shapes_ = [("d", base.replace(split_k=1))]
    if M > 64:
        shapes_.append(("t32", tc_tile(M, N, K, 32, 64, 16, 32).replace(split_k=1)))
    else:   # the rows' tiles 32 columns wide: more resident blocks an SM
        bm = min(64, -(-M // 16) * 16)
        shapes_.append(("n32", tc_tile(M, N, K, bm, 32, 16, 32).replace(split_k=1)))
    for name, spec in shapes_:
        tiles = -(-M // spec.tile[0]) * -(-N // spec.tile[1])
        for cost in (0.02, 0.05):
            s = wave_split(tiles, SMS * spec.min_blocks, K, cost)
            out[f"{name}_w{int(cost * 100)}"] = spec.replace(split_k=s)
    del p
    return out


def rows96_candidates(M, N, K):
    """The dispatched spec's fields (repack, layouts) in 96 x 64 tiles of 32 x 32 warps two an SM
    (t96) and in 80 x 64 or 96 x 64 tiles of 16 x 32 warps one an SM (t80, t96w16), K split by
    wave_split over those blocks."""
    from kgen.ops.tensorcore import wave_split
    base = host_dispatched(M, N, K)
    out = {}
    if base.kernel != "tensor_matmul":   # the SIMT tiles below TENSOR_F64_MIN_MACS
        return out
    for name, BM, warp, per_sm in (("t96", 96, (32, 32), 2), ("t80", 80, (16, 32), 1), ("t96w16", 96, (16, 32), 1)):
        if name == "t80" and M > 80:
            continue
        tiles = -(-M // BM) * -(-N // 64)
        out[name] = base.replace(tile=(BM, 64, 16), warp_tile=warp, min_blocks=per_sm,
                                 split_k=wave_split(tiles, SMS * per_sm, K))
    return out


TILE_SHAPES = {   # name: (BM, warp tile, stages)
    "t32": (32, (16, 32), 4), "t48": (48, (16, 32), 4), "t48w": (48, (48, 32), 3),
    "t64w16": (64, (16, 32), 4), "t96": (96, (32, 32), 4), "t128": (128, (32, 32), 3)}


def tile_split(tiles, slots, K):
    """wave_split without its whole-wave limit: the split whose blocks best fill whole waves,
    from any number of tiles (at most 16 slices of at least 256 of K)."""
    from kgen.ops.tensorcore import WAVE_SPLIT_COST
    top = max(1, min(16, K // 256))
    return min(range(1, top + 1), key=lambda s: (-(-tiles * s // slots) / s + WAVE_SPLIT_COST * s, s))


def tile_candidates(M, N, K):
    """The dispatched spec's fields (layouts, repack) in row tiles of 32-128 rows and 64 columns
    (TILE_SHAPES), as many resident an SM as shared memory and the registers allow (up to 8), K
    split by wave_split over those blocks; and the dispatched spec split by tile_split where
    its tiles fill a wave or more ("dw")."""
    from kgen.ops.tensorcore import c_tiles, wave_split as ws
    base = host_dispatched(M, N, K)
    if base.kernel != "tensor_matmul":
        return {}
    out = {}
    tiles = c_tiles(M, N, base.tile[0], base.tile[1])
    s = tile_split(tiles, SMS * base.min_blocks, K)
    if s != base.split_k:
        out["dw"] = base.replace(split_k=s)
    for name, (BM, warp, stages) in TILE_SHAPES.items():
        spec = base.replace(tile=(BM, 64, 16), warp_tile=warp, stages=stages, min_blocks=1, split_k=1,
                            edge_copies="clamped", smem_layout="pad")
        threads = (BM // warp[0]) * (64 // warp[1]) * 32
        regs = 168 if warp == (32, 32) else 128
        shared = max(spec.replace(layout_a=a, layout_b=b).shared_bytes for a in ("row", "col") for b in ("row", "col"))
        per_sm = max(1, min(8, (227 * 1024) // shared, 65536 // (threads * regs)))
        t = c_tiles(M, N, BM, 64)
        spec = spec.replace(min_blocks=per_sm, split_k=ws(t, SMS * per_sm, K))
        if spec != base:
            out[name] = spec
    return out


def before_wave(M, N, K):
    """The dispatched spec with the K split it had before wave_split: the few-row tiles' slots /
    tiles rounded, the 64 x 64 default's ceil(264 / tiles) under 132 tiles (K of 512 or more)."""
    spec = host_dispatched(M, N, K)
    if spec.kernel != "tensor_matmul" or spec.dtype != "float64":
        return spec
    tiles = -(-M // spec.tile[0]) * -(-N // spec.tile[1])
    if spec.warp_tile == (16, 32):
        split = max(1, min(16, round(SMS * spec.min_blocks / tiles), K // 256))
    else:
        split = max(1, min(16, -(-264 // tiles), K // 256)) if tiles < 132 and K >= 512 else 1
    return spec.replace(split_k=split)


def host_dispatched(M, N, K):
    """The spec kgen.matmul runs on an H100 for this product, found on the host: numpy views of
    the operands' shapes and strides (never read) and a stand-in device."""
    import numpy as np

    from kgen.tune import ahead, dispatch
    dev = ahead.stand_in_device("sm_90", "NVIDIA H100 80GB HBM3", SMS)
    one = np.zeros(1)
    A = np.lib.stride_tricks.as_strided(one, (M, K), (K * ITEM, ITEM))
    B = np.lib.stride_tricks.as_strided(one, (K, N), (ITEM, K * ITEM) if ORDER == "col" else (N * ITEM, ITEM))
    return dispatch.call_spec(A, B, device=dev, db=False)


def precompile():
    from kgen.core import kernel as km
    specs = {}
    for M, N, K in shapes():
        s = host_dispatched(M, N, K)
        specs[s.key] = s
        for s in candidates(M, N, K).values():
            specs[s.key] = s
    with cf.ThreadPoolExecutor(max_workers=os.cpu_count()) as pool:
        for s, res in zip(specs.values(), pool.map(lambda s: km.compile(s, "sm_90a"), specs.values())):
            spills = {k: v["spill_stores"] for k, v in res.resources.items() if v.get("spill_stores")}
            print(type(s).__name__, s.key[:10], "spills" if spills else "", spills or "", flush=True)
    print(f"{len(specs)} specs compiled")


def main():
    import cupy
    import torch

    import kgen
    from kgen.bench.skinny import Operands, copy_bandwidth
    from kgen.ops.skinny import tolerance
    from kgen.tune import dispatch
    sys_dir = os.path.dirname(os.path.abspath(__file__))
    import sys
    sys.path.insert(0, sys_dir)
    from decode_variants import READER, check_and_time, read_floor

    props = torch.cuda.get_device_properties(0)
    l2 = props.L2_cache_size
    bw = copy_bandwidth(torch, 20)
    reader = cupy.RawKernel(READER, "read_sum")
    part = torch.empty(8 * SMS, device="cuda")
    print(f"{torch.cuda.get_device_name()}: copy bandwidth {bw / 1e12:.3f} TB/s; float64 {ORDER}", flush=True)
    rows = []
    for M, N, K in shapes():
        ops = Operands(torch, M, N, K, "float64", ORDER, l2)
        spec = dispatch.call_spec(ops.A[0], ops.B[0])
        ways = {"default": kgen.build(spec)}
        for n, s in candidates(M, N, K).items():
            if s != spec:
                ways[n] = kgen.build(s)
        ref = ops.A[0] @ ops.B[0]
        bound = (M * K + K * N + M * N) * ITEM / bw * 1e6
        row = {"shape": [M, N, K], "order": ORDER, "spec": spec.to_json(), "bound_us": bound, "us": {}, "err": {},
               "specs": {n: k.spec.to_json() for n, k in ways.items()}}
        check_and_time(torch, ops, ways, ref, tolerance("float64", K), row, ROUNDS, 10, (M, N, K))
        row["floor_us"] = read_floor(torch, ops, ORDER, ITEM, reader, part, SMS, 10)
        best = {n: min(v) for n, v in row["us"].items()}
        row["best"] = best
        c = best["cuBLAS"]
        print(f"{M}x{N}x{K} ({N * K * ITEM / 1e6:.0f} MB) {type(spec).__name__}: bound {bound:.1f} floor "
              f"{row['floor_us']:.1f} cuBLAS {c:.1f} ({bound / c:.0%}) | "
              + " ".join(f"{n} {t:.1f} x{c / t:.2f}" for n, t in best.items() if n != "cuBLAS"), flush=True)
        rows.append(row)
        del ops
        torch.cuda.empty_cache()
    names = sorted({n for r in rows for n in r["best"]})
    for n in names:
        rs = [r for r in rows if n in r["best"]]
        g = math.exp(sum(math.log(r["best"]["cuBLAS"] / r["best"][n]) for r in rs) / len(rs))
        print(f"{n}: x{g:.3f} cuBLAS (geometric mean of {len(rs)})", flush=True)
    with open(os.path.join(os.environ.get("OUT", "."), f"f64_few_rows_{SEED}_{ORDER}.json"), "w") as f:
        json.dump({"device": torch.cuda.get_device_name(), "copy_bw": bw, "rows": rows}, f)


if __name__ == "__main__":
    if os.environ.get("PRECOMPILE"):
        precompile()
    else:
        main()
