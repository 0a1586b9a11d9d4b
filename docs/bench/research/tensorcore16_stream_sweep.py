"""float16/bfloat16 products of few rows (1-256) on TensorMatmul's wgmma kernel run as a streaming
kernel: 64-row tiles (and 128-row ones above 64 rows), TMA rings as deep as shared memory
holds, K split and the persistent schedule so that every SM streams the weight. Device time
(every call over rotated operands, more bytes than L2 holds, captured in one CUDA graph and
replayed; with WARM=1 the same operands every call, as a loop over one layer reads them, a
weight under the L2's size then coming from L2), beside cuBLAS through torch and the route
kgen.matmul takes; each variant's result checked against the float64 product. Shapes: COUNT
drawn by `kgen bench calls`' generator (seed SEED, rows ROWS, N and K multiples of MULTIPLE).
Env: DTYPE (bfloat16), COUNT (8), SEED (1), ROWS (17-256), MULTIPLE (64), ORDERS (col,row),
TILES_N (64,128,256), SPLITS (1,2,3,4,6,8,12), PERSISTENT (0,1), MAX_WEIGHT_MB (no bound: only
products whose B is smaller), PROMOTIONS (128: the TMA descriptors' L2 promotion in bytes;
several are each timed), WARM (0), N_RANGE (lo-hi: only such N), FILL_SPLITS (1,2,4,8: the fill
set's slices), COMPILE_ONLY (0; 1 compiles every variant of the draw and stops, which needs no
GPU), SET, the variants
timed beside cuBLAS and kgen.matmul:
  sweep   row tiles x TILES_N x SPLITS x PERSISTENT, each with the deepest ring (default);
  rule    the shipped default alone;
  merge   the default, the one-wave split of STREAM_SPLITS in a workspace, and 2, 4 and 8
          slices merged in clusters;
  small   the default beside stream_spec, and for at most 64 rows its 2, 4 and 8 slices in
          clusters, also with 64-column tiles;
  fill    at most 64 rows: 64-row tiles of every wgmma N with 1, 2, 4 and 8 slices in clusters;
  tall    past one row tile: the general tiles and streaming tiles of 64 and 128 rows, alone
          and in pairs of row tiles sharing B's tile by TMA multicast (cluster=2);
  stages  the streaming spec with rings of 2, 3, 4, 6 stages and its own;
  swap    A's rows as the wgmma N (swap_ab, BM the next of 8, 16, 32, 64, 96, 128, 192, 256), 64 and 128
          columns, 1-8 slices (2, 4, 8 in clusters, 3 and 6 in a workspace); SWAP_HALF=1 adds each
          with a ring half as deep (two blocks an SM).
Output: $OUT/tensorcore16_stream_sweep.json."""
import concurrent.futures as cf
import functools
import json
import math
import os

from kgen.bench.calls import random_matmul_shapes
from kgen.bench.skinny import time_graph
from kgen.core import tma
from kgen.core.spec import SpecError
from kgen.ops.tensorcore import MAX_SHARED_BYTES, STREAM_SPLITS, TensorMatmul, wgmma_deepest_stages
from kgen.tune import dispatch

DTYPE = os.environ.get("DTYPE", "bfloat16")
TILES_N = [int(v) for v in os.environ.get("TILES_N", "64,128,256").split(",")]
SPLITS = [int(v) for v in os.environ.get("SPLITS", "1,2,3,4,6,8,12").split(",")]
ORDERS = os.environ.get("ORDERS", "col,row").split(",")
PERSISTENT = [v == "1" for v in os.environ.get("PERSISTENT", "0,1").split(",")]
PROMOTIONS = [int(v) for v in os.environ.get("PROMOTIONS", "128").split(",")]
FILL_SPLITS = [int(v) for v in os.environ.get("FILL_SPLITS", "1,2,4,8").split(",")]
WARM = os.environ.get("WARM", "0") == "1"
SWAP_ROWS = (8, 16, 32, 64, 96, 128, 192, 256)
SWAP_HALF = os.environ.get("SWAP_HALF", "0") == "1"


def shapes():
    lo, hi = (int(v) for v in os.environ.get("ROWS", "17-256").split("-"))
    count, seed, multiple = (int(os.environ.get(k, d)) for k, d in (("COUNT", "8"), ("SEED", "1"), ("MULTIPLE", "64")))
    most = float(os.environ.get("MAX_WEIGHT_MB", "inf"))
    if "N_RANGE" in os.environ:   # only products whose N lies in N_RANGE (lo-hi): the first `count` of a longer draw
        n_lo, n_hi = (int(v) for v in os.environ["N_RANGE"].split("-"))
        draw = random_matmul_shapes(count * 40, seed, (lo, hi), multiple)
        return [(M, N, K) for M, N, K in draw if n_lo <= N <= n_hi and N * K * 2 < most * 2 ** 20][:count]
    if most == math.inf:
        return random_matmul_shapes(count, seed, (lo, hi), multiple)
    # Only weights (N x K) below MAX_WEIGHT_MB: the first `count` such of a longer draw.
    draw = random_matmul_shapes(count * 20, seed, (lo, hi), multiple)
    return [(M, N, K) for M, N, K in draw if N * K * 2 < most * 2 ** 20][:count]


def ring(spec, BM, BN):
    """spec with BM x BN tiles and the deepest ring that fits, K unsplit, one block a unit."""
    return spec.replace(tile=(BM, BN, spec.tile[2]), warp_tile=(64, BN), stages=wgmma_deepest_stages(BM, BN),
                        split_k=1, split_merge="workspace", persistent=False)


def variants(M, N, K, order):
    base = TensorMatmul.wgmma_default_spec({"M": M, "N": N, "K": K}, DTYPE).replace(
        layout_b="col" if order == "col" else "row")
    out = {"default": base}
    if os.environ.get("SET", "sweep") == "rule":   # the shipped default alone (stream_spec where it suits)
        return out
    if os.environ.get("SET") == "fill":   # one row tile: every wgmma N with 1, 2, 4, 8 slices in clusters
        for BN in (64, 128, 192, 256):
            tile = ring(base, 64, BN)
            for split in FILL_SPLITS:
                if split == 1 or K >= 256 * split:
                    out[f"{BN}/c{split}"] = tile if split == 1 else tile.replace(split_k=split, split_merge="cluster")
        return out
    if os.environ.get("SET") == "tall":   # past one row tile: streaming tiles of 64 and 128 rows, the general tiles
        out["general"] = TensorMatmul.general_wgmma_spec({"M": M, "N": N, "K": K}, DTYPE).replace(
            layout_b=base.layout_b)
        for BM in (64, 128):
            for BN in (128, 256):
                tiles = -(-M // BM) * -(-N // BN)
                split = max(s for s in STREAM_SPLITS if s == 1 or (K >= 256 * s and tiles * s <= 132))
                out[f"{BM}x{BN}/{split}"] = ring(base, BM, BN).replace(split_k=split)
                # pairs of row tiles sharing B's tile by TMA multicast (cluster=2)
                pairs = -(-M // (2 * BM)) * 2 * -(-N // BN)
                split = max(s for s in STREAM_SPLITS if s == 1 or (K >= 256 * s and pairs * s <= 132))
                out[f"{BM}x{BN}/{split}m"] = ring(base, BM, BN).replace(split_k=split, cluster=2)
        return out
    if os.environ.get("SET") == "stages":   # the streaming spec with shallower rings
        stream = TensorMatmul.stream_spec({"M": M, "N": N, "K": K}, DTYPE).replace(layout_b=base.layout_b)
        for stages in (2, 3, 4, 6, stream.stages):
            try:
                out[f"stream/s{stages}"] = stream.replace(stages=stages)
            except ValueError:   # too shallow for the cluster merge's sums
                pass
        return out
    if os.environ.get("SET") == "small":   # the streaming spec on any weight, beside the default
        stream = TensorMatmul.stream_spec({"M": M, "N": N, "K": K}, DTYPE).replace(layout_b=base.layout_b)
        out["stream"] = stream
        if M <= 64:
            narrow = ring(stream, 64, 64)
            out["stream64"] = narrow
            for split in (2, 4, 8):
                if K >= 256 * split:
                    out[f"stream/c{split}"] = stream.replace(split_k=split, split_merge="cluster")
                    out[f"stream64/c{split}"] = narrow.replace(split_k=split, split_merge="cluster")
        return out
    if os.environ.get("SET") == "swap" and order in ("col", "row"):   # A's rows as the wgmma N: no padding rows
        BM = next(b for b in SWAP_ROWS if b >= M)
        for BN in (64, 128):
            tile = base.replace(tile=(BM, BN, base.tile[2]), warp_tile=(BM, 64), swap_ab=True, split_k=1,
                                split_merge="workspace", persistent=False, cluster=1,
                                stages=wgmma_deepest_stages(BM, BN))
            rings = {"": tile}
            if SWAP_HALF:   # a ring half as deep: two blocks an SM
                half = (MAX_SHARED_BYTES // 2 - 2048) // (tile.shared_bytes // tile.stages)
                if half >= 2:
                    rings["h"] = tile.replace(stages=min(half, tile.stages))
            for ring_name, ring_spec in rings.items():
                for split in (1, 2, 3, 4, 6, 8):
                    if split > 1 and K < 256 * split:
                        continue
                    merge = "cluster" if split in (2, 4, 8) else "workspace"
                    try:
                        out[f"s{BN}{ring_name}/{split}{merge[0]}"] = ring_spec.replace(
                            split_k=split, split_merge=merge if split > 1 else "workspace")
                    except SpecError:   # a ring too shallow to keep the cluster's sums
                        pass
        return out
    if os.environ.get("SET") == "merge":   # the one-wave split in a workspace, and 2, 4, 8 in clusters
        tiles = -(-M // 64) * -(-N // base.tile[1])
        wave = max(s for s in STREAM_SPLITS if s == 1 or (K >= 256 * s and tiles * s <= 132))
        if wave > 1:
            out[f"workspace/{wave}"] = base.replace(split_k=wave, split_merge="workspace")
        for split in (2, 4, 8):
            if K >= 256 * split:
                out[f"cluster/{split}"] = base.replace(split_k=split, split_merge="cluster")
        return out
    for BM in (64, 128) if M > 64 else (64,):
        for BN in TILES_N:
            tile = ring(base, BM, BN)
            for split in SPLITS:
                if split > 1 and K < 256 * split:
                    continue
                for persistent in PERSISTENT:
                    name = f"{BM}x{BN}s{tile.stages}/{split}{'p' if persistent else ''}"
                    out[name] = tile.replace(split_k=split, persistent=persistent)
    return out


def max_active_clusters(kernel, M, N, K, entry="kgen_tc_wgmma"):
    """cuOccupancyMaxActiveClusters of the launch of the kernel's `entry` for an M x N x K
    product (clusters that run at once)."""
    import ctypes

    from kgen.core.launch import _libcuda

    class Config(ctypes.Structure):
        _fields_ = [("grid", ctypes.c_uint * 3), ("block", ctypes.c_uint * 3), ("shared", ctypes.c_uint),
                    ("stream", ctypes.c_void_p), ("attrs", ctypes.c_void_p), ("nattrs", ctypes.c_uint)]

    grid, block, shared = kernel.spec.launch_geometry(M, N, K)
    fn = kernel.handle(entry, shared)
    cfg = Config((ctypes.c_uint * 3)(*grid), (ctypes.c_uint * 3)(*block), shared, None, None, 0)
    count = ctypes.c_int(0)
    rc = _libcuda().cuOccupancyMaxActiveClusters(ctypes.byref(count), ctypes.c_void_p(fn), ctypes.byref(cfg))
    return count.value if rc == 0 else -rc


def main():
    import kgen
    draw = shapes()
    todo = [(s, o) for s in draw for o in ORDERS]
    specs = {}
    for (M, N, K), o in todo:
        for s in variants(M, N, K, o).values():
            specs[s.key] = s
    print(f"{len(todo)} cases, {len(specs)} specs", flush=True)
    with cf.ThreadPoolExecutor(int(os.environ.get("WORKERS", "16"))) as ex:
        list(ex.map(kgen.compile, specs.values()))
    if os.environ.get("COMPILE_ONLY", "0") == "1":
        return
    import torch

    from kgen.bench.skinny import Operands
    torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
    torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    src, dst = (torch.empty(1 << 28, dtype=torch.float32, device="cuda") for _ in range(2))
    bw = 2 * src.numel() * 4 / (time_graph(torch, [functools.partial(dst.copy_, src)], 20) * 1e-6)
    del src, dst
    rows = []
    for (M, N, K), order in todo:
        ops = Operands(torch, M, N, K, DTYPE, order, l2)
        ref = ops.A[0].double() @ ops.B[0].double()
        row = {"shape": [M, N, K], "order": order, "dtype": DTYPE, "bound_us": ops.bytes / bw * 1e6,
               "dev": {}, "err": {}, "errors": {}}
        built = {name: kgen.build(s) for name, s in variants(M, N, K, order).items()}
        row["specs"] = {name: k.spec.to_json() for name, k in built.items()}
        row["clusters"] = {name: max_active_clusters(k, M, N, K) for name, k in built.items()
                           if getattr(k.spec, "split_merge", "") == "cluster"}
        ways = {"cublas": torch.matmul}
        for promotion in PROMOTIONS:
            at = "" if len(PROMOTIONS) == 1 else f"@{promotion}"
            ways[f"dispatch{at}"] = (promotion, kgen.matmul)
            ways.update({f"{name}{at}": (promotion, k) for name, k in built.items()})
        for name, way in ways.items():
            fn = way
            if isinstance(way, tuple):   # a kgen way: its TMA descriptors encoded afresh at this promotion
                tma.l2_promotion_bytes, fn = way
                for k in list(built.values()) + list(dispatch._kernels.values()):
                    if hasattr(k, "release"):
                        k.release()
            try:
                C = fn(ops.A[0], ops.B[0])
                torch.cuda.synchronize()
                row["err"][name] = float((C.double() - ref).norm() / ref.norm())
                calls = [(lambda fn=fn, a=a, b=b, c=c: fn(a, b, out=c)) for a, b, c in zip(ops.A, ops.B, ops.C)]
                if WARM:   # one operand set, called as often: what L2 keeps of it stays
                    calls = [calls[0]] * len(calls)
                row["dev"][name] = time_graph(torch, calls, 15)
            except Exception as exc:  # noqa: BLE001 - a variant that cannot run is reported beside the others
                row["errors"][name] = str(exc)[:200]
        rows.append(row)
        dev = row["dev"]
        best = min((v, k) for k, v in dev.items() if k != "cublas" and not k.startswith("dispatch"))
        print(f"{M}x{N}x{K} {order}: bound {row['bound_us']:.1f} cublas {dev.get('cublas', math.nan):.1f} "
              f"dispatch {min(v for k, v in dev.items() if k.startswith('dispatch')):.1f} "
              f"best {best[1]} {best[0]:.1f} us; max err {max(row['err'].values()):.1e}; "
              f"{len(row['errors'])} failed", flush=True)
        del ops, ref
        torch.cuda.empty_cache()
    with open(os.path.join(os.environ.get("OUT", "."), "tensorcore16_stream_sweep.json"), "w") as f:
        json.dump({"device": torch.cuda.get_device_name(), "bandwidth": bw, "warm": WARM, "rows": rows}, f)


if __name__ == "__main__":
    main()
