"""GPU property tests of the tensor-core matmul family (TensorMatmul): random specs from a
pool that covers every field value, random shapes (1, primes, non-multiples of every tile,
K = 1), both layouts, leading dimensions and pointer offsets that rule out 16-byte copies,
alpha/beta, outputs poisoned with NaN before each launch. References are float64 products
of the inputs as rounded to their type; the bounds come from the input precision and K."""
from __future__ import annotations

import concurrent.futures as cf
import ctypes
import itertools
import os
import random

import numpy as np
import pytest
from conftest import cuda_torch, strided_operand
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kgen
from kgen.ops.tensorcore import MAX_CLUSTER_MERGE, SPLIT_MERGES, TensorMatmul

pytestmark = pytest.mark.gpu

EXAMPLES = int(os.environ.get("KGEN_TC_EXAMPLES", "300"))
SIZE = st.one_of(st.sampled_from([1, 2, 3, 7, 8, 15, 16, 17, 31, 33, 63, 65, 127, 129, 131, 257, 263, 509]),
                 st.integers(1, 400))


def odd_copy_tiles() -> list[TensorMatmul]:
    """Tiles whose rows of 16-byte chunks do not divide the threads (96 columns: 12 chunks of
    float16 for 128 threads), or whose chunks leave the last threads idle (96 x 64: 256 of B's
    for 192 threads), and one warp whose chunks are 4 rows apart, which the swizzle moves: the
    general forms of the whole-tile and edge copies."""
    T = TensorMatmul
    return [T(dtype="float16", tile=(64, 96, 32), warp_tile=(32, 48), stages=3, smem_layout="pad"),
            T(dtype="bfloat16", tile=(96, 64, 32), warp_tile=(32, 32), stages=3, smem_layout="pad", split_k=2),
            T(dtype="float16", tile=(32, 32, 64), warp_tile=(32, 32), stages=2)]


def spec_pool() -> list[TensorMatmul]:
    """Specs covering every field value: each dtype's defaults, small and large blocks,
    2-6 stages, both shared layouts, both rasters, split-K, float32 output, element loads
    (repack off), min_blocks. Layouts are drawn per example on top of these."""
    T = TensorMatmul
    pool = []
    for dtype in ("float16", "bfloat16", "float32", "float64"):
        pool.append(T.mma_default_spec({"M": 4096, "N": 4096, "K": 4096}, dtype))
        pool.append(T.mma_default_spec({"M": 127, "N": 4096, "K": 4096}, dtype))  # split K
    pool += [
        T(dtype="float16", tile=(32, 32, 16), warp_tile=(16, 16), stages=2, smem_layout="pad"),
        T(dtype="float16", tile=(128, 128, 64), warp_tile=(64, 32), stages=5, raster="col", raster_group=1,
          out_dtype="float32"),
        T(dtype="float16", tile=(64, 128, 32), warp_tile=(32, 64), stages=3, split_k=3, repack=False),
        T(dtype="bfloat16", tile=(64, 64, 16), warp_tile=(32, 32), stages=6, smem_layout="pad", raster_group=3,
          min_blocks=2),
        T(dtype="bfloat16", tile=(128, 64, 32), warp_tile=(32, 32), stages=3, out_dtype="float32", split_k=4,
          repack=False),
        T(dtype="float32", tf32=True, tile=(64, 64, 16), warp_tile=(32, 32), stages=4, smem_layout="swizzle"),
        T(dtype="float32", tf32=True, tile=(32, 64, 8), warp_tile=(16, 32), stages=2, smem_layout="pad",
          raster="col", repack=False),
        T(dtype="float64", tile=(32, 32, 8), warp_tile=(16, 16), stages=2, smem_layout="swizzle", split_k=2),
        T(dtype="float64", tile=(64, 128, 16), warp_tile=(32, 64), stages=3, smem_layout="pad", repack=False),
        # the short-K rule's tiles: two and three blocks an SM (min_blocks), operands read in place
        T.short_k_spec({"M": 4096, "N": 4096, "K": 64}, "bfloat16"),
        T.short_k_spec({"M": 1000, "N": 1000, "K": 20}, "float16"),
        T.element_spec({"M": 300, "N": 200, "K": 3000}, "bfloat16", clusters=False),   # 64x64 four an SM, K split
        *odd_copy_tiles(),
    ]
    if _hopper():   # the wgmma kernel: the defaults, every block shape class, stages, split-K, both outputs
        pool += [T.default_spec({"M": 4096, "N": 4096, "K": 4096}, "bfloat16"),
                 T.default_spec({"M": 127, "N": 4096, "K": 4096}, "float16"),
                 T.default_spec({"M": 4096, "N": 64, "K": 4096}, "bfloat16"),
                 # the streaming specs of few rows: a 9-stage ring with K split, 64 x 256 tiles in a
                 # 5-stage ring, and a split persistent one
                 T.stream_spec({"M": 9, "N": 4096, "K": 8192}, "bfloat16"),
                 T.stream_spec({"M": 100, "N": 16384, "K": 4096}, "float16"),
                 T.stream_spec({"M": 3, "N": 1536, "K": 8192}, "bfloat16").replace(persistent=True,
                                                                                  split_merge="workspace"),
                 # K slices merged in a thread block cluster: 4 and 8 slices, 3 of two consumer
                 # warpgroups with a float32 output, and the three-product float32
                 T.stream_spec({"M": 9, "N": 4096, "K": 8192}, "bfloat16").replace(split_merge="cluster"),
                 T(dtype="bfloat16", tile=(64, 256, 64), warp_tile=(64, 256), stages=5, instruction="wgmma",
                   split_k=8, split_merge="cluster"),
                 T(dtype="float16", tile=(128, 128, 64), warp_tile=(64, 128), stages=4, instruction="wgmma",
                   split_k=3, split_merge="cluster", out_dtype="float32"),
                 T(dtype="float32", tf32=True, split_tf32=True, tile=(128, 128, 32), warp_tile=(64, 128), stages=4,
                   instruction="wgmma", split_k=2, split_merge="cluster"),
                 # ... and by the mma.sync kernel: float64 (2 and 5 slices) and TF32
                 T(dtype="float64", tile=(64, 64, 16), warp_tile=(32, 32), stages=3, smem_layout="pad",
                   mma_shape="m16n8k16", min_blocks=3, split_k=2, split_merge="cluster"),
                 T(dtype="float64", tile=(32, 64, 16), warp_tile=(16, 32), stages=4, smem_layout="pad",
                   mma_shape="m16n8k8", split_k=5, split_merge="cluster"),
                 T(dtype="float32", tf32=True, tile=(64, 64, 16), warp_tile=(32, 32), stages=4, smem_layout="pad",
                   split_k=3, split_merge="cluster"),
                 # ... and 16-bit element tiles (element_spec's cluster merge)
                 T.element_spec({"M": 300, "N": 200, "K": 3000}, "bfloat16"),
                 *swap_pool(),
                 *realign_pool(),
            T(dtype="bfloat16", tile=(128, 256, 64), warp_tile=(64, 256), stages=4, instruction="wgmma"),
            T(dtype="float16", tile=(128, 128, 64), warp_tile=(64, 128), stages=6, instruction="wgmma",
              out_dtype="float32", raster="col"),
            T(dtype="bfloat16", tile=(64, 64, 64), warp_tile=(64, 64), stages=2, instruction="wgmma", split_k=3),
            T(dtype="float16", tile=(64, 192, 64), warp_tile=(64, 192), stages=3, instruction="wgmma", split_k=2,
              raster_group=1),
            # The persistent schedule: whole tiles, split-K, and TF32 (with its transposing copies).
            T(dtype="bfloat16", tile=(128, 128, 64), warp_tile=(64, 128), stages=5, instruction="wgmma",
              persistent=True),
            T(dtype="float16", tile=(64, 64, 64), warp_tile=(64, 64), stages=3, instruction="wgmma", split_k=3,
              persistent=True, raster="col", out_dtype="float32"),
            T(dtype="float32", tf32=True, tile=(128, 64, 32), warp_tile=(64, 64), stages=4, instruction="wgmma",
              persistent=True),
            # Clusters of two blocks sharing B by TMA multicast: N-major and K-major B, split-K, TF32.
            T(dtype="bfloat16", tile=(128, 256, 64), warp_tile=(64, 256), stages=4, instruction="wgmma", cluster=2),
            T(dtype="float16", tile=(64, 128, 64), warp_tile=(64, 128), stages=5, instruction="wgmma", cluster=2,
              split_k=3, raster="col"),
            T(dtype="float32", tf32=True, tile=(128, 64, 32), warp_tile=(64, 64), stages=4, instruction="wgmma",
              cluster=2),
            # TF32 on wgmma: the default, and a split one (both transpose an M-major A or N-major B).
            T.default_spec({"M": 4096, "N": 4096, "K": 4096}, "float32"),
            T(dtype="float32", tf32=True, tile=(64, 128, 32), warp_tile=(64, 128), stages=5, instruction="wgmma",
              split_k=3, raster="col"),
            # float32 as three TF32 products on wgmma: the dispatch default, the widest 64-row tile
            # with split-K, and the persistent schedule (runs of PROMOTE_TILES across units).
            T.wgmma_default_spec({"M": 4096, "N": 4096, "K": 4096}, "float32", split_tf32=True),
            T(dtype="float32", tf32=True, split_tf32=True, tile=(64, 192, 32), warp_tile=(64, 192), stages=5,
              instruction="wgmma", split_k=2),
            T(dtype="float32", tf32=True, split_tf32=True, tile=(128, 64, 32), warp_tile=(64, 64), stages=3,
              instruction="wgmma", persistent=True, split_k=3),
            # sm_90's float64 m16n8k16 shape, padded and swizzled, split-K.
            T(dtype="float64", tile=(64, 64, 16), warp_tile=(32, 32), stages=4, smem_layout="pad",
              mma_shape="m16n8k16"),
            T(dtype="float64", tile=(64, 128, 32), warp_tile=(32, 32), stages=3, mma_shape="m16n8k16", split_k=3),
            # m16n8k8 in 64x32 and 32x64 warp tiles, padded and swizzled, split-K.
            T(dtype="float64", tile=(128, 64, 16), warp_tile=(64, 32), stages=3, smem_layout="pad",
              mma_shape="m16n8k8"),
            T(dtype="float64", tile=(64, 128, 16), warp_tile=(32, 64), stages=4, mma_shape="m16n8k8", split_k=2,
              raster="col"),
            T(dtype="float64", tile=(64, 64, 16), warp_tile=(32, 32), stages=3, mma_shape="m16n8k8"),
            # float64 tiles sized to a few rows (16 and 48 rows, several blocks an SM, K split),
            # the second reading its operands in place.
            T.few_rows_f64_spec({"M": 13, "N": 4096, "K": 4096}),
            T.few_rows_f64_spec({"M": 45, "N": 2000, "K": 3000}).replace(repack=False),
            # ... and to a few columns (16 columns four blocks an SM; 48 columns in 128-row
            # tiles, operands read in place).
            T.few_columns_f64_spec({"M": 3000, "N": 13, "K": 4096}),
            T.few_columns_f64_spec({"M": 2000, "N": 45, "K": 3001}, rows_tile=128).replace(repack=False),
        ]
    return pool


def swap_pool() -> list[TensorMatmul]:
    """swap_ab specs (A's rows as the wgmma N): 8 to 256 rows a tile (multiples of 8 that are not
    powers of two among them), one and two consumer warpgroups, whole K, K slices in a workspace
    and in clusters of 2-4, a float32 output."""
    T = TensorMatmul
    return [T(dtype="bfloat16", tile=(8, 64, 64), warp_tile=(8, 64), stages=8, instruction="wgmma", swap_ab=True),
            T(dtype="float16", tile=(24, 128, 64), warp_tile=(24, 64), stages=6, instruction="wgmma", swap_ab=True,
              split_k=3),
            T(dtype="bfloat16", tile=(16, 128, 64), warp_tile=(16, 64), stages=8, instruction="wgmma", swap_ab=True,
              split_k=4, split_merge="cluster"),
            T(dtype="bfloat16", tile=(200, 64, 64), warp_tile=(200, 64), stages=4, instruction="wgmma", swap_ab=True,
              split_k=2, split_merge="cluster", out_dtype="float32"),
            T(dtype="float16", tile=(256, 128, 64), warp_tile=(256, 64), stages=3, instruction="wgmma", swap_ab=True,
              raster="col"),
            # The rule's tiles of a multiple of 8 rows: 40 rows, K in 3 slices merged in a cluster.
            T(dtype="bfloat16", tile=(40, 64, 64), warp_tile=(40, 64), stages=12, instruction="wgmma", swap_ab=True,
              split_k=3, split_merge="cluster"),
            # Just past the SMs: 128 columns, two blocks an SM's ring, K in 3 slices in clusters.
            T.swap_spec({"M": 5, "N": 9319, "K": 11800}, "float16")]


def realign_pool() -> list[TensorMatmul]:
    """b_realign specs (B read by the producer threads at any alignment): 8-40 rows transposed,
    one and two boxes of B a thread, whole K, K slices in a workspace and in a cluster, the
    64-row tiles, split and persistent; B row-major, and K-major (a transposed view) in the last
    two."""
    T = TensorMatmul
    return [T(dtype="bfloat16", tile=(8, 64, 64), warp_tile=(8, 64), stages=3, instruction="wgmma", swap_ab=True,
              b_realign=True),
            T(dtype="float16", tile=(24, 128, 64), warp_tile=(24, 64), stages=4, instruction="wgmma", swap_ab=True,
              split_k=3, b_realign=True),
            T.swap_spec({"M": 38, "N": 1344, "K": 5824}, "bfloat16").with_realigned_b(),
            T(dtype="bfloat16", tile=(64, 128, 64), warp_tile=(64, 128), stages=3, instruction="wgmma", split_k=2,
              b_realign=True),
            T(dtype="float16", tile=(128, 64, 64), warp_tile=(64, 64), stages=4, instruction="wgmma", persistent=True,
              out_dtype="float32", b_realign=True),
            T(dtype="bfloat16", tile=(64, 128, 64), warp_tile=(64, 128), stages=6, instruction="wgmma", split_k=4,
              split_merge="cluster", b_realign=True),
            T(dtype="bfloat16", tile=(104, 64, 64), warp_tile=(104, 64), stages=5, instruction="wgmma", swap_ab=True,
              split_k=2, split_merge="cluster", layout_b="col", b_realign=True),
            T(dtype="float16", tile=(128, 128, 64), warp_tile=(64, 128), stages=3, instruction="wgmma", split_k=2,
              layout_b="col", b_realign=True)]


def phased_pool() -> list[TensorMatmul]:
    """b_phased specs (B's rows by row sets, A copied in their order, the transposed tiles reading
    B's box at its shift): 8-200 rows, 64 and 128 columns, K whole, in slices of a workspace and
    merged in clusters, a float32 output, the rule's tiles."""
    T = TensorMatmul
    return [T(dtype="bfloat16", tile=(8, 64, 64), warp_tile=(8, 64), stages=6, instruction="wgmma", swap_ab=True,
              b_phased=True),
            T(dtype="float16", tile=(24, 128, 64), warp_tile=(24, 64), stages=6, instruction="wgmma", swap_ab=True,
              split_k=3, b_phased=True),
            T.swap_spec({"M": 34, "N": 10212, "K": 2038}, "bfloat16").with_phased_b(),
            T.swap_spec({"M": 98, "N": 2222, "K": 10690}, "bfloat16").with_phased_b(),
            T(dtype="bfloat16", tile=(16, 128, 64), warp_tile=(16, 64), stages=8, instruction="wgmma", swap_ab=True,
              split_k=4, split_merge="cluster", b_phased=True),
            T(dtype="bfloat16", tile=(200, 64, 64), warp_tile=(200, 64), stages=4, instruction="wgmma", swap_ab=True,
              split_k=2, split_merge="cluster", out_dtype="float32", b_phased=True),
            # W.t() (B K-major): its rows of n by sets
            T(dtype="bfloat16", tile=(8, 64, 64), warp_tile=(8, 64), stages=6, instruction="wgmma", swap_ab=True,
              layout_b="col", b_phased=True),
            T(dtype="float16", tile=(24, 128, 64), warp_tile=(24, 64), stages=6, instruction="wgmma", swap_ab=True,
              split_k=3, layout_b="col", b_phased=True),
            T.swap_spec({"M": 78, "N": 2964, "K": 6268}, "bfloat16").replace(layout_b="col").with_phased_b(),
            # the sums stored from the registers (a ring too short to stage them)
            T(dtype="bfloat16", tile=(256, 128, 64), warp_tile=(256, 64), stages=2, instruction="wgmma", swap_ab=True,
              layout_b="col", b_phased=True)]


def classes_pool() -> list[TensorMatmul]:
    """b_classes specs (W.t()'s row sets a tile, A copied shifted a set): 8-24 rows, 64 and 128
    columns (one and two consumer warpgroups), K whole, in slices of a workspace and merged in
    clusters, a float32 output."""
    T = TensorMatmul
    base = dict(instruction="wgmma", swap_ab=True, layout_b="col", b_classes=True)
    return [T(dtype="bfloat16", tile=(8, 64, 64), warp_tile=(8, 64), stages=16, **base),
            T(dtype="float16", tile=(16, 64, 64), warp_tile=(16, 64), stages=16, split_k=3, split_merge="cluster",
              **base),
            T(dtype="bfloat16", tile=(16, 128, 64), warp_tile=(16, 64), stages=8, split_k=4, **base),
            T(dtype="float16", tile=(24, 128, 64), warp_tile=(24, 64), stages=6, split_k=2, split_merge="cluster",
              out_dtype="float32", **base)]


def _layouts(spec, a: str, b: str) -> tuple[str, str]:
    """The storage orders a test gives `spec`: swap_ab reads A K-major (row-major) only."""
    return ("row" if spec.swap_ab else a), b


def _hopper() -> bool:
    """Whether the GPU runs sm_90 code (the wgmma kernel's only target)."""
    try:
        from kgen.core import runtime

        return runtime.device_arch() == "sm_90"
    except Exception:   # no GPU, no driver: the tests skip anyway
        return False


POOL = spec_pool()
LAYOUTS = [(a, b) for a in ("row", "col") for b in ("row", "col")]


@pytest.fixture(scope="module", autouse=True)
def _prebuild():
    """Compile every spec in every layout up front, in parallel: nvcc dominates otherwise."""
    specs = list({s.replace(layout_a=a, layout_b=b) for s in POOL for a, b in (_layouts(s, *ab) for ab in LAYOUTS)})
    with cf.ThreadPoolExecutor(max_workers=min(16, os.cpu_count() or 2)) as ex:
        list(ex.map(kgen.compile, specs))


def _torch():
    return cuda_torch()


def _check(spec, A, B, C, C0, alpha, beta, label):
    """Norm and elementwise bounds against the float64 product of the inputs as stored."""
    torch = _torch()
    A64, B64 = A.double(), B.double()
    ref = alpha * (A64 @ B64)
    if beta != 0:
        ref = ref + beta * C0.double()
    got = C.double()
    assert torch.isfinite(got).all(), f"{label}: non-finite outputs (unwritten NaN or overflow)"
    K = A.shape[1]
    err = (got - ref).abs()
    # The norm a result of these magnitudes typically has (a sum of K products of random
    # signs grows as sqrt(K)) keeps a few outputs that cancel to near zero (M = N = 1) from
    # turning the rounding of the inputs into a large relative error.
    typical = torch.linalg.norm(abs(alpha) * (A64.abs() @ B64.abs())).item() / max(K, 1) ** 0.5
    denom = max(torch.linalg.norm(ref).item(), typical)
    rel = torch.linalg.norm(got - ref).item() / (denom if denom > 0 else 1.0)
    tol = spec.tolerance_for({"M": max(A.shape[0], 1), "N": max(B.shape[1], 1), "K": max(K, 1)})
    assert rel <= tol, f"{label}: relative error {rel:.3e} > {tol:.3e}"
    a, b, c = spec.elementwise_bound(K)
    bound = abs(alpha) * a * (A64.abs() @ B64.abs()) + b * ref.abs() + c
    worst = (err / bound).max().item() if err.numel() else 0.0
    assert worst <= 1.0, f"{label}: an element is off by {worst:.2f}x its bound"


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@given(index=st.integers(0, len(POOL) - 1), layouts=st.sampled_from(LAYOUTS), M=SIZE, N=SIZE,
       K=st.one_of(st.just(1), SIZE), pad_a=st.sampled_from([0, 0, 1, 8]), pad_b=st.sampled_from([0, 0, 3, 8]),
       off_a=st.sampled_from([0, 0, 0, 1]), off_b=st.sampled_from([0, 0, 0, 1]),
       ldc_pad=st.sampled_from([0, 0, 1, 5]), alpha=st.sampled_from([1.0, 1.0, -0.75]),
       beta=st.sampled_from([0.0, 0.0, 0.5]))
def test_tensor_matmul_property(index, layouts, M, N, K, pad_a, pad_b, off_a, off_b, ldc_pad, alpha, beta):
    _check_product(POOL[index], layouts, M, N, K, pad_a, pad_b, off_a, off_b, ldc_pad, alpha, beta)


def edge_pool() -> list[TensorMatmul]:
    """The edge-block variants (edge_copies="masked", edge_mma="inside", and both) of the
    mma.sync tiles dispatch runs and of tiles whose chunks do not divide the threads: float64
    on sm_90 (the default, its 96- and 128-row and 16- and 48-row tiles), 16-bit short K, TF32, a
    swizzled one-warp tile."""
    T = TensorMatmul
    pool = [*odd_copy_tiles(),
            T(dtype="float32", tf32=True, tile=(64, 64, 16), warp_tile=(32, 32), stages=4, smem_layout="swizzle"),
            T(dtype="float64", tile=(32, 32, 8), warp_tile=(16, 16), stages=2, smem_layout="swizzle", split_k=2),
            T.short_k_spec({"M": 1000, "N": 1000, "K": 20}, "float16")]
    if _hopper():   # float64's m16n8k16 tiles need sm_90
        pool += [T.default_spec({"M": 4096, "N": 4096, "K": 4096}, "float64"),
                 T.default_spec({"M": 127, "N": 4096, "K": 4096}, "float64"),   # K split
                 T.row_tile_f64_spec({"M": 80, "N": 4096, "K": 4096}),
                 T.row_tile_f64_spec({"M": 200, "N": 4096, "K": 4096}, 128),
                 T.default_spec({"M": 127, "N": 4096, "K": 4094}, "float64"),   # l1_copies
                 T.few_rows_f64_spec({"M": 13, "N": 4096, "K": 4094}),   # l1_copies
                 T.few_rows_f64_spec({"M": 13, "N": 4096, "K": 4096}),
                 T.few_rows_f64_spec({"M": 40, "N": 4096, "K": 4096})]
    return [s.replace(edge_copies=copies, edge_mma=mma) for s in pool
            for copies, mma in (("masked", "all"), ("clamped", "inside"), ("masked", "inside"))]


EDGE_POOL = edge_pool()
# A product's draws on top of a spec: storage orders, any M and N, K of 1 to past many k tiles,
# padded and offset operands, an output of an odd pitch, alpha and beta.
PRODUCT_DRAWS = dict(layouts=st.sampled_from(LAYOUTS), M=SIZE, N=SIZE,
                     K=st.one_of(st.just(1), SIZE, st.integers(400, 3000)), pad_a=st.sampled_from([0, 0, 1, 8]),
                     pad_b=st.sampled_from([0, 0, 3, 8]), off_a=st.sampled_from([0, 0, 0, 1]),
                     off_b=st.sampled_from([0, 0, 0, 1]), ldc_pad=st.sampled_from([0, 0, 1, 5]),
                     alpha=st.sampled_from([1.0, 1.0, -0.75]), beta=st.sampled_from([0.0, 0.0, 0.5]))


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@given(index=st.integers(0, len(EDGE_POOL) - 1), **PRODUCT_DRAWS)
def test_edge_block_variants_property(index, layouts, M, N, K, pad_a, pad_b, off_a, off_b, ldc_pad, alpha, beta):
    """edge_copies="masked" (edge blocks copy their k tiles by counts fixed for the block) and
    edge_mma="inside" (warps skip MMA row tiles past M), alone and together: M and N of any
    length, every output (NaN-poisoned) against float64."""
    _check_product(EDGE_POOL[index], layouts, M, N, K, pad_a, pad_b, off_a, off_b, ldc_pad, alpha, beta)


def element_pool() -> list[TensorMatmul]:
    """mma.sync specs reading their operands in place (repack off) whose element-load entry copies
    each element by its own cp.async (float32 as TF32, float64), with clamped and masked edge
    copies: the dispatch tiles of float64 on sm_90 (the default, K split, 96 rows, 16 and 48
    rows), TF32 in both shared layouts, a float64 split of one warp; the padded ones also with
    repack_a, spread_elements and both."""
    T = TensorMatmul
    pool = [T(dtype="float32", tf32=True, tile=(64, 64, 16), warp_tile=(32, 32), stages=4, smem_layout="swizzle"),
            T(dtype="float32", tf32=True, tile=(32, 64, 8), warp_tile=(16, 32), stages=2, smem_layout="pad",
              raster="col"),
            T(dtype="float64", tile=(32, 32, 8), warp_tile=(16, 16), stages=2, smem_layout="swizzle", split_k=2),
            T(dtype="float64", tile=(64, 128, 16), warp_tile=(32, 64), stages=3, smem_layout="pad")]
    if _hopper():
        pool += [T.default_spec({"M": 4096, "N": 4096, "K": 4096}, "float64"),
                 T.default_spec({"M": 127, "N": 4096, "K": 4096}, "float64"),
                 T.row_tile_f64_spec({"M": 80, "N": 4096, "K": 4096}),
                 T.row_tile_f64_spec({"M": 200, "N": 4096, "K": 4096}, 128),
                 T.default_spec({"M": 127, "N": 4096, "K": 4094}, "float64"),   # l1_copies
                 T.few_rows_f64_spec({"M": 13, "N": 4096, "K": 4094}),   # l1_copies
                 T.few_rows_f64_spec({"M": 13, "N": 4096, "K": 4096}),
                 T.few_rows_f64_spec({"M": 40, "N": 4096, "K": 4096})]
    plain = [s.replace(repack=False, edge_copies=copies) for s in pool for copies in ("clamped", "masked")]
    # The padded tiles also with A copied aligned first (repack_a), the element copies along rows
    # (spread_elements), and both.
    return plain + [s.replace(**fields) for s in plain if s.smem_layout == "pad"
                    for fields in (dict(repack_a=True), dict(spread_elements=True),
                                   dict(repack_a=True, spread_elements=True))]


ELEMENT_POOL = element_pool()


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@given(index=st.integers(0, len(ELEMENT_POOL) - 1), layouts=st.sampled_from(LAYOUTS), M=SIZE, N=SIZE,
       K=st.one_of(st.just(1), SIZE, st.integers(400, 3000)), pad_a=st.sampled_from([0, 1, 8]),
       pad_b=st.sampled_from([0, 1, 3]), off_a=st.sampled_from([0, 1]), off_b=st.sampled_from([1, 3]),
       ldc_pad=st.sampled_from([0, 1]), alpha=st.sampled_from([1.0, -0.75]), beta=st.sampled_from([0.0, 0.5]))
def test_element_copies_property(index, layouts, M, N, K, pad_a, pad_b, off_a, off_b, ldc_pad, alpha, beta):
    """The element-load entry with its elements copied by cp.async: B always starts an odd
    number of elements past a 16-byte boundary (so the call takes that entry), whole tiles,
    edge blocks and partial K tiles of any M, N and K, every output (NaN-poisoned) against
    float64."""
    _check_product(ELEMENT_POOL[index], layouts, M, N, K, pad_a, pad_b, off_a, off_b, ldc_pad, alpha, beta)


def fragments_ahead_pool() -> list[TensorMatmul]:
    """mma.sync specs that load the next k-step's fragments before this k-step's MMAs
    (fragments_ahead): float64 in m16n8k8 (on sm_90: the default's, 96-row and 16-row tiles at
    three and two blocks an SM, K split, edge blocks masked and MMAs past M skipped) and m8n8k4,
    TF32 and 16-bit (ldmatrix) tiles, two to four stages, repack on and off."""
    T = TensorMatmul
    pool = [T(dtype="float32", tf32=True, tile=(64, 64, 16), warp_tile=(32, 32), stages=3, smem_layout="pad"),
            T(dtype="bfloat16", tile=(64, 64, 32), warp_tile=(32, 32), stages=2, split_k=3),
            T(dtype="float16", tile=(128, 64, 32), warp_tile=(32, 32), stages=4, repack=False),
            T(dtype="float64", tile=(32, 32, 8), warp_tile=(16, 16), stages=2, smem_layout="swizzle", split_k=2)]
    if _hopper():   # float64's 16-row MMAs need sm_90
        k8 = {"mma_shape": "m16n8k8"}
        pool += [T.default_spec({"M": 4096, "N": 4096, "K": 4096}, "float64").replace(**k8),
                 T.default_spec({"M": 127, "N": 4096, "K": 4096}, "float64").replace(**k8, min_blocks=2),
                 T.default_spec({"M": 127, "N": 4096, "K": 4096}, "float64").replace(**k8, repack=False,
                                                                                   edge_mma="inside"),
                 T.row_tile_f64_spec({"M": 80, "N": 4096, "K": 4096}).replace(**k8),
                 T.few_rows_f64_spec({"M": 13, "N": 4096, "K": 4096}).replace(**k8, edge_copies="masked")]
    return [s.replace(fragments_ahead=True) for s in pool]


FRAGMENTS_AHEAD_POOL = fragments_ahead_pool()


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@given(index=st.integers(0, len(FRAGMENTS_AHEAD_POOL) - 1), **PRODUCT_DRAWS)
def test_fragments_ahead_property(index, layouts, M, N, K, pad_a, pad_b, off_a, off_b, ldc_pad, alpha, beta):
    """fragments_ahead: K of one k tile, fewer k tiles than stages and many more (the stage
    refilled at the barrier that awaits the next tile), K split, every output (NaN-poisoned)
    against float64."""
    _check_product(FRAGMENTS_AHEAD_POOL[index], layouts, M, N, K, pad_a, pad_b, off_a, off_b, ldc_pad, alpha, beta)


def _check_product(base, layouts, M, N, K, pad_a, pad_b, off_a, off_b, ldc_pad, alpha, beta):
    """`base` in the storage orders `layouts` on operands padded and offset as given: alpha and
    beta applied to a NaN-poisoned C (beta's C from fresh random values) against float64."""
    torch = _torch()
    a_layout, b_layout = _layouts(base, *layouts)
    spec = base.replace(layout_a=a_layout, layout_b=b_layout)
    k = kgen.build(spec)
    dt = getattr(torch, spec.dtype)
    odt = getattr(torch, spec.output_dtype)
    A = strided_operand(torch, M, K, spec.layout_a, pad_a, off_a, dt)
    B = strided_operand(torch, K, N, spec.layout_b, pad_b, off_b, dt)
    C0 = None
    if beta != 0:
        C0 = torch.randn(M, N, device="cuda", dtype=torch.float64).to(odt)
    # Poisoned before each launch: an element the kernel fails to write stays NaN.
    C = torch.full((M, N + ldc_pad), float("nan"), device="cuda", dtype=odt)[:, :N]
    if C0 is not None:
        C.copy_(C0)
    got = k(A, B, out=C, alpha=alpha, beta=beta)
    assert got is C
    torch.cuda.synchronize()
    label = f"{spec.to_json()} M={M} N={N} K={K} pads={pad_a},{pad_b} offsets={off_a},{off_b} ldc+{ldc_pad}"
    _check(spec, A, B, C, C0, alpha, beta, label)


@pytest.mark.parametrize("spec", POOL[:8], ids=lambda s: f"{s.dtype}-{s.tile}-split{s.split_k}")
def test_default_specs_on_benchmark_like_shapes(spec):
    """The defaults on shapes past one tile in every direction, unaligned K included."""
    torch = _torch()
    k = kgen.build(spec)
    dt = getattr(torch, spec.dtype)
    for M, N, K in ((1000, 1000, 1000), (257, 1031, 517), (127, 600, 2049), (300, 64, 1500)):
        A = torch.randn(M, K, device="cuda", dtype=torch.float64).to(dt)
        B = torch.randn(K, N, device="cuda", dtype=torch.float64).to(dt)
        C = k(A, B)  # a new output
        assert C.dtype == getattr(torch, spec.output_dtype) and tuple(C.shape) == (M, N)
        torch.cuda.synchronize()
        _check(spec, A, B, C, None, 1.0, 0.0, f"{spec.to_json()} {M}x{N}x{K}")


@pytest.mark.parametrize("index", range(len(swap_pool())))
def test_transposed_tiles_on_edge_and_model_like_shapes(index):
    """swap_ab specs: every output of C (NaN-poisoned) from rows 1 to past one tile, columns
    past the last 64, K of 1, primes and model sizes, both storage orders of B, alpha and beta."""
    if not _hopper():
        pytest.skip("the wgmma kernel needs an sm_90 GPU")
    torch = _torch()
    spec0 = swap_pool()[index]
    for (M, N, K), order in itertools.product(((1, 1, 1), (1, 64, 64), (7, 129, 65), (8, 1000, 3001),
                                               (9, 4100, 1000), (33, 777, 2049), (257, 300, 700)), ("col", "row")):
        spec = spec0.replace(layout_b=order)
        k = kgen.build(spec)
        dt, odt = getattr(torch, spec.dtype), getattr(torch, spec.output_dtype)
        A = strided_operand(torch, M, K, "row", 0, 0, dt)
        B = strided_operand(torch, K, N, order, 0, 0, dt)
        C0 = torch.randn(M, N, device="cuda", dtype=torch.float64).to(odt)
        C = C0.clone()
        k(A, B, out=C, alpha=-0.75, beta=0.5)
        torch.cuda.synchronize()
        _check(spec, A, B, C, C0, -0.75, 0.5, f"{spec.to_json()} {M}x{N}x{K}")
        fresh = torch.full((M, N), float("nan"), device="cuda", dtype=odt)
        k(A, B, out=fresh)
        torch.cuda.synchronize()
        _check(spec, A, B, fresh, None, 1.0, 0.0, f"{spec.to_json()} {M}x{N}x{K} beta=0")


# (N, pad, offset, K) of B: every phase of its rows (pitches of 1-7 modulo 8, odd pointers), K of
# 1, below one BK step and past many, N past the last box and below one.
UNALIGNED_B_CASES = ((1001, 0, 0, 1), (2245, 0, 0, 5606), (2246, 0, 1, 64), (2244, 3, 3, 1000), (1001, 2, 5, 4097),
                     (4100, 0, 2, 777), (3000, 5, 7, 130), (37, 0, 1, 300), (64, 1, 0, 63))


def _check_b_at_every_phase(spec, cases):
    """The spec's kernel on each (N, pad, offset, K) B of `cases` stored as the spec says: out=
    with alpha and beta, then a NaN-poisoned fresh output, both against float64. Returns the
    kernel (its launch plans say what was copied)."""
    torch = _torch()
    k = kgen.build(spec)
    dt, odt = getattr(torch, spec.dtype), getattr(torch, spec.output_dtype)
    M = max(1, spec.tile[0] - 3) if spec.swap_ab else 70
    for N, pad, off, K in cases:
        A = strided_operand(torch, M, K, "row", 0, 0, dt)
        B = strided_operand(torch, K, N, spec.layout_b, pad, off, dt)
        C0 = torch.randn(M, N, device="cuda", dtype=torch.float64).to(odt)
        C = C0.clone()
        k(A, B, out=C, alpha=-0.75, beta=0.5)
        torch.cuda.synchronize()
        label = f"{spec.to_json()} {M}x{N}x{K} strides={B.stride()} offset={off}"
        _check(spec, A, B, C, C0, -0.75, 0.5, label)
        fresh = torch.full((M, N), float("nan"), device="cuda", dtype=odt)
        k(A, B, out=fresh)
        torch.cuda.synchronize()
        _check(spec, A, B, fresh, None, 1.0, 0.0, label + " beta=0")
    return k


@pytest.mark.parametrize("index", range(len(realign_pool())))
def test_b_realign_reads_unaligned_row_major_b_in_place(index):
    """b_realign: B (row-major, or K-major for a transposed view) at every 16-byte phase of its
    rows (pitches of 1-7 modulo 8 elements, odd pointers), K of 1, below one BK step and past
    many, N past the last box and below one: every output written (NaN-poisoned), alpha and
    beta applied, against float64, and B never copied."""
    if not _hopper():
        pytest.skip("the wgmma kernel needs an sm_90 GPU")
    spec = realign_pool()[index]
    k = _check_b_at_every_phase(spec, UNALIGNED_B_CASES)
    assert k._plans and all(plan[1] is None for plan in k._plans.values()), "B was copied"


@pytest.mark.parametrize("index", range(len(phased_pool())))
def test_b_phased_reads_row_major_b_of_any_pitch_by_row_sets(index):
    """b_phased: a row-major B at every 16-byte phase of its rows (pitches of 0-7 modulo 8
    elements, odd pointers), K of 1 and below the eight row sets (B copied, one set), not a
    multiple of the sets, below one BK step and past many, N past the last box and below one:
    every output written (NaN-poisoned), alpha and beta applied, against float64; B never
    copied where K has a row for every set."""
    if not _hopper():
        pytest.skip("the wgmma kernel needs an sm_90 GPU")
    spec = phased_pool()[index]
    # past the eight sets' worth of cases: a pitch of 8 at an odd pointer, K of 7 and 9
    k = _check_b_at_every_phase(spec, UNALIGNED_B_CASES + ((4096, 0, 3, 2049), (999, 0, 0, 7), (515, 1, 1, 9)))
    # B is copied only where it has fewer stored rows (k, or n for W.t()) than sets.
    copied = [key for key, plan in k._plans.items() if plan[1] is not None]
    assert all(key[1 if spec.layout_b == "col" else 2] < 8 for key in copied), f"B was copied: {copied}"


@settings(max_examples=min(EXAMPLES, 150), deadline=None, suppress_health_check=list(HealthCheck))
@given(index=st.integers(0, len(phased_pool()) - 1), M=st.integers(1, 300), N=st.integers(1, 5000),
       K=st.one_of(st.integers(1, 20), st.integers(1, 9000)), pad=st.integers(0, 9), off=st.integers(0, 7))
def test_b_phased_property(index, M, N, K, pad, off):
    """b_phased on random shapes, pitches and pointer offsets of B: a NaN-poisoned output
    against float64."""
    _check_fresh(phased_pool()[index], M, N, K, pad, off)


def test_b_phased_many_random_cases():
    """b_phased on many more random cases than the property test draws (KGEN_TC_STRESS, 400 by
    default; hypothesis's shrinking made its 150 the most a run could afford), from the same
    distribution, seeded by KGEN_TC_STRESS_SEED (default 1). A failing case is run five more
    times, and the message says how many of those failed too: a case that fails every time is
    a rule of the kernel's, one that fails once a race."""
    if not _hopper():
        pytest.skip("the wgmma kernel needs an sm_90 GPU")
    rng = random.Random(int(os.environ.get("KGEN_TC_STRESS_SEED", "1")))
    pool = phased_pool()
    failures = []
    for _ in range(int(os.environ.get("KGEN_TC_STRESS", "400"))):
        case = (rng.randrange(len(pool)), rng.randint(1, 300), rng.randint(1, 5000),
                rng.randint(1, 20) if rng.random() < 0.5 else rng.randint(1, 9000),
                rng.randint(0, 9), rng.randint(0, 7))
        index, M, N, K, pad, off = case
        try:
            _check_fresh(pool[index], M, N, K, pad, off)
        except AssertionError as exc:
            again = 0
            for _ in range(5):
                try:
                    _check_fresh(pool[index], M, N, K, pad, off)
                except AssertionError:
                    again += 1
            failures.append(f"(index, M, N, K, pad, off) = {case}: failed {again} of 5 reruns too: {exc}")
    assert not failures, "\n".join(failures)


def _check_fresh(spec, M, N, K, pad, off):
    """The spec's kernel on a row-major A and a B stored as the spec says (leading dimension
    padded by `pad`, first element `off` elements into its storage): a NaN-poisoned output
    against float64."""
    if not _hopper():
        pytest.skip("the wgmma kernel needs an sm_90 GPU")
    torch = _torch()
    k = kgen.build(spec)
    dt, odt = getattr(torch, spec.dtype), getattr(torch, spec.output_dtype)
    A = strided_operand(torch, M, K, "row", 0, 0, dt)
    B = strided_operand(torch, K, N, spec.layout_b, pad, off, dt)
    C = torch.full((M, N), float("nan"), device="cuda", dtype=odt)
    k(A, B, out=C)
    torch.cuda.synchronize()
    _check(spec, A, B, C, None, 1.0, 0.0, f"{spec.to_json()} {M}x{N}x{K} strides={B.stride()} offset={off}")


@pytest.mark.parametrize("index", range(len(classes_pool())))
def test_b_classes_reads_w_t_of_any_pitch_by_row_sets_a_tile(index):
    """b_classes: W.t() at every 16-byte phase of its rows (pitches of 0-7 modulo 8 elements,
    odd pointers), K of 1, below one BK step and past many, N below the eight sets (B copied,
    one set), past the last tile of a set and below one: every output written (NaN-poisoned),
    alpha and beta applied, against float64; B copied only where it has fewer rows than sets."""
    if not _hopper():
        pytest.skip("the wgmma kernel needs an sm_90 GPU")
    spec = classes_pool()[index]
    k = _check_b_at_every_phase(spec, UNALIGNED_B_CASES + ((4096, 0, 3, 2049), (5, 0, 1, 999), (515, 1, 1, 9),
                                                          (7531, 0, 0, 2489), (1029, 6, 7, 12001)))
    copied = [key for key, plan in k._plans.items() if plan[1] is not None]
    assert all(key[1] < 8 for key in copied), f"B was copied: {copied}"


@pytest.mark.parametrize("index", range(len(classes_pool())))
def test_b_classes_keeps_other_rows_values_out_of_each_row(index):
    """The values a set's first k tile holds before each row's first are other rows' (here the
    pitch's padding and what precedes W in its first granule, all infinities or NaN): they must
    not reach the sums (zero times an infinity is NaN), so every output is finite and right."""
    if not _hopper():
        pytest.skip("the wgmma kernel needs an sm_90 GPU")
    torch = _torch()
    spec = classes_pool()[index]
    k = kgen.build(spec)
    dt, odt = getattr(torch, spec.dtype), getattr(torch, spec.output_dtype)
    for M, N, K, pad, off, fill in ((5, 3001, 2489, 7, 3, float("inf")), (spec.tile[0], 777, 1001, 3, 1, float("nan")),
                                    (1, 2000, 64 * 3 + 5, 9, 7, float("-inf"))):
        pitch = K + pad
        store = torch.full((N * pitch + off,), fill, device="cuda", dtype=dt)
        W = store[off:].view(N, pitch)[:, :K]
        W.copy_(torch.randn(N, K, device="cuda", dtype=torch.float64).to(dt))
        A = strided_operand(torch, M, K, "row", 0, 0, dt)
        C = torch.full((M, N), float("nan"), device="cuda", dtype=odt)
        k(A, W.t(), out=C)
        torch.cuda.synchronize()
        _check(spec, A, W.t(), C, None, 1.0, 0.0, f"{spec.to_json()} {M}x{N}x{K} pitch {pitch} offset {off} {fill}")


@settings(max_examples=min(EXAMPLES, 120), deadline=None, suppress_health_check=list(HealthCheck))
@given(index=st.integers(0, len(classes_pool()) - 1), M=st.integers(1, 40), N=st.integers(1, 5000),
       K=st.one_of(st.integers(1, 20), st.integers(1, 9000)), pad=st.integers(0, 9), off=st.integers(0, 7))
def test_b_classes_property(index, M, N, K, pad, off):
    """b_classes on random shapes, pitches and pointer offsets of W.t(): a NaN-poisoned output
    against float64."""
    _check_fresh(classes_pool()[index], M, N, K, pad, off)


def test_matmul_reads_unaligned_row_major_16bit_weights_in_place():
    """kgen.matmul on 16-bit few-row products whose B (row-major, or W.t() of a weight stored
    N x K) has rows that are not 16-byte aligned runs the wgmma kernel reading B in place
    (b_phased for a row-major B, b_realign for W.t()), correctly."""
    if not _hopper():
        pytest.skip("the wgmma kernel needs an sm_90 GPU")
    torch = _torch()
    from kgen.tune import dispatch

    for M, N, K, order in ((26, 2246, 5606, "row"), (63, 10926, 1349, "row"), (118, 7131, 5141, "row"),
                           (200, 3001, 1500, "row"), (17, 1025, 1024, "row"), (100, 3000, 4097, "col"),
                           (250, 2048, 1025, "col"),
                           # 67-132 tiles of 64 columns: 128 columns, K in two slices (realign_split_spec)
                           (82, 4520, 2853, "col"), (168, 5955, 8418, "row"),
                           # more than 132 column tiles: transposed tiles of 128 columns (realign_swap_spec)
                           (69, 9537, 2265, "row"), (150, 12001, 1025, "row"), (100, 9600, 1099, "col"),
                           # 17-64 rows against a small unaligned W.t() (realign_swap_suits)
                           (40, 2001, 3001, "col"), (17, 1500, 1027, "col"),
                           # 5-16 rows against a row-major B of an odd pitch (realign_row_suits)
                           (5, 1107, 1331, "row"), (9, 7001, 2049, "row"), (16, 1025, 4100, "row"),
                           # W.t() of an even pitch: its rows of n by sets (phased_swap_suits and past it)
                           (50, 12000, 4100, "col"), (78, 2964, 6268, "col"), (120, 7000, 2050, "col"),
                           # ... two blocks an SM, K in clusters (phased_fill_spec)
                           (26, 5394, 4102, "col"), (44, 1800, 3006, "col"), (60, 700 * 7, 2050, "col"),
                           (109, 5635, 2046, "col"), (6, 2525, 3095, "row"), (28, 4295, 1157, "row"),
                           # 9-16 rows against W.t() of 32 MB or more, K no multiple of 8: row sets a tile
                           # (b_classes), K whole or in cluster slices fitted to the sets' tiles
                           (12, 4864, 12595, "col"), (9, 2900, 6001, "col"), (16, 12001, 3002, "col"),
                           (14, 2077, 11751, "col")):
        A = torch.randn(M, K, device="cuda", dtype=torch.float64).to(torch.bfloat16)
        B = strided_operand(torch, K, N, order, 0, 0, torch.bfloat16)
        C = kgen.matmul(A, B)
        torch.cuda.synchronize()
        spec = TensorMatmul.default_spec({"M": M, "N": N, "K": K}, "bfloat16")
        _check(spec, A, B, C, None, 1.0, 0.0, f"kgen.matmul {M}x{N}x{K}")
        # B by row sets on the transposed tiles (b_phased: a row-major B's kernel K is the sets'
        # k), by the producer threads on the others (b_realign).
        kernels = [kern for kern in dispatch._kernels.values()
                   if getattr(kern.spec, "b_phased", False) or getattr(kern.spec, "b_realign", False)
                   or getattr(kern.spec, "b_classes", False)]
        assert any(kern._plans and any(p[3][:2] == (M, N) and p[3][2] >= K for p in kern._plans.values())
                   for kern in kernels), f"{M}x{N}x{K}: B not read in place"


def test_matmul_copies_a_to_a_128_byte_pitch_where_the_rule_asks():
    """kgen.matmul on 16-bit products of 33-100 rows against weights of 32 MB or more whose A
    rows are no multiple of 128 bytes apart (K as drawn, A a view at an offset, A a wider view
    at an aligned pitch): A copied to a 128-byte pitch where pads_a_pitch asks or A's rows are
    not 16-byte aligned, read in place otherwise; every output written (NaN-poisoned), alpha and
    beta applied, against float64."""
    if not _hopper():
        pytest.skip("the wgmma kernel needs an sm_90 GPU")
    torch = _torch()
    from kgen.tune import dispatch

    for M, N, K, order, pad, off in ((58, 4200, 4100, "col", 0, 0), (40, 4104, 4200, "row", 0, 0),
                                     (33, 8192, 2060, "col", 4, 4), (100, 4100, 4100, "col", 0, 0),
                                     (64, 3000, 5606, "col", 0, 0), (48, 4480, 4096, "col", 0, 0),
                                     (58, 4200, 4100, "col", 60, 0)):
        A = strided_operand(torch, M, K, "row", pad, off, torch.bfloat16)
        B = strided_operand(torch, K, N, order, 0, 0, torch.bfloat16)
        spec = TensorMatmul.default_spec({"M": M, "N": N, "K": K}, "bfloat16")
        label = f"kgen.matmul {M}x{N}x{K} {order} lda={A.stride(0)} offset={off}"
        C = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
        kgen.matmul(A, B, out=C)
        torch.cuda.synchronize()
        _check(spec, A, B, C, None, 1.0, 0.0, label)
        C0 = torch.randn(M, N, device="cuda", dtype=torch.float64).to(torch.bfloat16)
        C = C0.clone()
        kgen.matmul(A, B, out=C, alpha=-0.5, beta=0.25)
        torch.cuda.synchronize()
        _check(spec, A, B, C, C0, -0.5, 0.25, label + " alpha/beta")
        wgmma = [kern for kern in dispatch._kernels.values() if getattr(kern.spec, "wgmma", False)
                 and any(p[3][:3] == (M, N, K) for p in kern._plans.values())]
        assert wgmma, f"{label}: not run by the wgmma kernel"
        plans = [p for kern in wgmma for p in kern._plans.values() if p[3][:3] == (M, N, K)]
        # Copied (at a 128-byte pitch) where the rule asks or A's rows TMA cannot read; else in place.
        copied = bool(wgmma[0].spec.pads_a_pitch(M, N, K, A.stride(0)) or A.data_ptr() % 16 or A.stride(0) % 8)
        assert copied == (A.stride(0) % 64 != 0 and M >= 57 or off % 8 != 0 or A.stride(0) % 8 != 0), label
        expect = -(-K // 64) * 64 if copied else A.stride(0)
        assert all(p[3][3] == expect for p in plans), f"{label}: A read at pitch {[p[3][3] for p in plans]}"


def test_matmul_reads_unaligned_mid_size_16bit_operands_with_element_loads():
    """kgen.matmul on mid-size 16-bit products whose A or B rows are not 16-byte aligned
    (TensorMatmul.element_loads_suits) runs mma.sync reading them in place, correctly:
    NaN-poisoned out= and a fresh result, K split or whole, both orders of B, odd offsets."""
    if not _hopper():
        pytest.skip("the element-load rule replaces the wgmma kernel, which needs an sm_90 GPU")
    torch = _torch()
    from kgen.tune import dispatch

    for M, N, K, order, offset in ((2370, 186, 54, "row", 0), (373, 818, 847, "row", 1), (2485, 42, 223, "row", 0),
                                   (2211, 155, 567, "col", 0), (648, 17, 3201, "row", 3), (1293, 150, 761, "col", 1),
                                   (300, 2001, 301, "row", 0), (4079, 22, 256, "row", 0)):
        assert TensorMatmul.element_loads_suits(M, N, K, "bfloat16"), (M, N, K)
        A = strided_operand(torch, M, K, "row", 0, offset, torch.bfloat16)
        B = strided_operand(torch, K, N, order, 0, 0, torch.bfloat16)
        spec = dispatch.call_spec(A, B)
        assert spec.instruction == "mma_sync" and spec.repack is False, (M, N, K, spec.to_json())
        C = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
        kgen.matmul(A, B, out=C)
        fresh = kgen.matmul(A, B)
        torch.cuda.synchronize()
        for got, label in ((C, "out="), (fresh, "fresh")):
            _check(spec, A, B, got, None, 1.0, 0.0, f"kgen.matmul {M}x{N}x{K} {order} +{offset} {label}")


def test_matmul_adds_the_k_slices_of_16bit_element_tiles_in_a_cluster():
    """kgen.matmul on 16-bit products that element_spec splits into K slices added in a thread
    block cluster (few 64x64 tiles; unaligned rows, or at most SMALL_PRODUCT_MACS): every
    output written once and right against float64, NaN-poisoned out= of an odd pitch, a fresh
    result, alpha and beta, both orders of B, odd offsets, 2-8 slices of 96-320 k, the last one
    short, and past ELEMENT_CLUSTER_MAX_K 11-16 slices in one non-portable cluster."""
    if not _hopper():
        pytest.skip("split_merge='cluster' needs thread block clusters (sm_90)")
    torch = _torch()
    from kgen.tune import dispatch

    bf16, f16 = torch.bfloat16, torch.float16
    for M, N, K, order, offset, dt in ((27, 661, 353, "col", 0, f16), (1313, 19, 433, "col", 1, bf16),
                                       (339, 273, 199, "row", 0, bf16), (126, 25, 2431, "row", 3, f16),
                                       (47, 253, 1127, "col", 0, bf16), (5, 77, 2501, "row", 1, f16),
                                       (200, 330, 129, "col", 1, f16), (29, 41, 7833, "col", 1, bf16),
                                       (451, 55, 6229, "row", 0, f16), (132, 511, 3287, "col", 3, bf16)):
        A = strided_operand(torch, M, K, "row", 0, offset, dt)
        B = strided_operand(torch, K, N, order, 0, offset, dt)
        spec = dispatch.call_spec(A, B)
        assert (spec.instruction, spec.repack, spec.split_merge) == ("mma_sync", False, "cluster"), spec.to_json()
        assert spec.split_plan(K)[0] == spec.split_k >= 2, spec.to_json()
        _check_public_calls(spec, A, B, 0.75, -1.5, f"kgen.matmul {M}x{N}x{K} {order} +{offset} {dt} "
                                                    f"split {spec.split_k}")


def _check_public_calls(spec, A, B, alpha, beta, label):
    """kgen.matmul(A, B) three ways against float64, `spec` being what dispatch runs: into a
    NaN-poisoned out= of pitch N + 3, a fresh result, and alpha and beta on random values."""
    torch = _torch()
    (M, _), N, dt = A.shape, B.shape[1], A.dtype
    C = torch.full((M, N + 3), float("nan"), device="cuda", dtype=dt)[:, 1:N + 1]
    kgen.matmul(A, B, out=C)
    fresh = kgen.matmul(A, B)
    C0 = torch.randn(M, N, device="cuda", dtype=torch.float64).to(dt)
    D = C0.clone()
    kgen.matmul(A, B, out=D, alpha=alpha, beta=beta)
    torch.cuda.synchronize()
    for got, what in ((C, "out= of pitch N + 3"), (fresh, "fresh")):
        _check(spec, A, B, got, None, 1.0, 0.0, f"{label} {what}")
    _check(spec, A, B, D, C0, alpha, beta, f"{label} beta")


def test_matmul_runs_short_k_16bit_products_in_tiles_that_share_an_sm():
    """kgen.matmul on 16-bit products of a short K (TensorMatmul.short_k_suits) runs mma.sync
    reading the operands in place, both tiles of the rule, correctly: odd N, K and offsets,
    both orders of B, a NaN-poisoned out= of an odd pitch (the staged store), a fresh result,
    and beta."""
    torch = _torch()
    from kgen.tune import dispatch

    bf16, f16 = torch.bfloat16, torch.float16
    for M, N, K, order, offset, dt in ((1493, 1761, 35, "row", 0, bf16), (2067, 1538, 21, "col", 1, f16),
                                       (4301, 4497, 25, "row", 3, bf16), (3970, 794, 95, "col", 0, bf16),
                                       (513, 4095, 128, "row", 0, f16), (6193, 1001, 1, "row", 1, bf16),
                                       (1809, 3720, 20, "row", 0, bf16)):
        A = strided_operand(torch, M, K, "row", 0, offset, dt)
        B = strided_operand(torch, K, N, order, 0, offset, dt)
        spec = dispatch.call_spec(A, B)
        assert spec.instruction == "mma_sync" and spec.repack is False and spec.min_blocks > 1, spec.to_json()
        _check_public_calls(spec, A, B, -0.5, 2.0, f"kgen.matmul {M}x{N}x{K} {order} +{offset} {dt}")


def test_streaming_spec_with_split_k_on_model_like_shapes():
    """TensorMatmul.stream_spec on few rows against model-like weights (W.T and row-major):
    every output written (NaN-poisoned C), alpha and beta applied once, and two runs of one
    call give the same bits (the slices are summed in a fixed order)."""
    if not _hopper():
        pytest.skip("the wgmma kernel needs an sm_90 GPU")
    torch = _torch()
    for (M, N, K, order), merge in itertools.product(
            ((7, 3000, 6000, "col"), (50, 2048, 4160, "row"), (131, 1152, 9000, "col")), SPLIT_MERGES):
        spec = TensorMatmul.stream_spec({"M": M, "N": N, "K": K}, "bfloat16").replace(layout_b=order)
        spec = spec.replace(split_merge=merge, split_k=min(spec.split_k, MAX_CLUSTER_MERGE))
        assert spec.split_k > 1, spec.to_json()
        k = kgen.build(spec)
        A = torch.randn(M, K, device="cuda", dtype=torch.float64).to(torch.bfloat16)
        B = strided_operand(torch, K, N, order, 0, 0, torch.bfloat16)
        C0 = torch.randn(M, N, device="cuda", dtype=torch.float64).to(torch.bfloat16)
        C = C0.clone()
        k(A, B, out=C, alpha=-0.75, beta=0.5)
        torch.cuda.synchronize()
        _check(spec, A, B, C, C0, -0.75, 0.5, f"{spec.to_json()} {M}x{N}x{K}")
        first = k(A, B)
        again = torch.full_like(first, float("nan"))
        k(A, B, out=again)
        torch.cuda.synchronize()
        _check(spec, A, B, first, None, 1.0, 0.0, f"{spec.to_json()} {M}x{N}x{K}")
        assert torch.equal(first, again), f"{M}x{N}x{K}: two runs differ"


def test_repeat_calls_reuse_the_plan_and_follow_the_stream():
    torch = _torch()
    spec = TensorMatmul.default_spec({"M": 512, "N": 512, "K": 512}, "bfloat16")
    k = kgen.build(spec)
    k.release()   # the built kernel is shared: other tests may have called it on other shapes
    A = torch.randn(300, 200, device="cuda", dtype=torch.bfloat16)
    B = torch.randn(200, 100, device="cuda", dtype=torch.bfloat16)
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        C = torch.full((300, 100), float("nan"), device="cuda", dtype=torch.bfloat16)
        for _ in range(3):
            k(A, B, out=C)
    side.synchronize()
    assert len(k._torch_calls) == 1
    _check(spec, A, B, C, None, 1.0, 0.0, "side stream")


@pytest.mark.parametrize("M,dtype,family,weights", [(4, "bfloat16", "TensorMatmul", "col"),
                                                    (100, "bfloat16", "TensorMatmul", "col"),
                                                    (2048, "bfloat16", "TensorMatmul", "col"),
                                                    (4, "float32", "Skinny", "col"), (12, "float32", "Skinny", "col"),
                                                    (8, "bfloat16", "b_phased", "row odd pitch"),
                                                    (12, "float16", "b_classes", "col odd pitch"),
                                                    (8, "float16", "Skinny", "col odd pitch")])
def test_chained_products_wait_for_the_kernel_before_them(M, dtype, family, weights):
    """Layers back to back: each product reads the output the call before it wrote, with no
    synchronisation between them. On sm_90 the wgmma kernel may start while the kernel before
    it finishes (programmatic launches); were a load issued before its griddepcontrol.wait, it
    would read the NaN the output held before. The float32 chains run the skinny family's
    kernels between plain launches. Weights of an odd pitch take the row sets, whose A copy
    launches programmatically before the product kernel (b_phased: B stored K x N, b_classes:
    W.t()), and at 8 rows of W.t() the skinny tensor-core form and its merge kernel. Also
    replayed from a CUDA graph on new inputs."""
    torch = _torch()
    if not _hopper():
        pytest.skip("programmatic launches: sm_90 GPUs")
    K, layers, dt = (4096 if family == "b_classes" else 2048), 6, getattr(torch, dtype)
    pad = 3 if "odd pitch" in weights else 0
    Ws = [(torch.randn(K, K + pad, device="cuda") / K ** 0.5).to(dt)[:, :K] for _ in range(layers)]
    row = weights.startswith("row")
    X = torch.randn(M, K, device="cuda").to(dt)
    Ys = [torch.full((M, K), float("nan"), device="cuda", dtype=dt) for _ in range(layers)]

    def chain():
        x = X
        for W, Y in zip(Ws, Ys):
            kgen.matmul(x, W if row else W.t(), out=Y)
            x = Y
        return Ys[-1]

    def check(what):
        torch.cuda.synchronize()
        x = X
        for i, (W, Y) in enumerate(zip(Ws, Ys)):
            ref = x.double() @ (W if row else W.t()).double()
            err = float((Y.double() - ref).norm() / ref.norm())
            bound = {"bfloat16": 1e-2, "float16": 2e-3}.get(dtype, 1e-4)   # output rounding
            assert err < bound, f"{what}, {M} rows, layer {i}: relative error {err:.2e}"
            x = Y

    for _ in range(3):
        for Y in Ys:
            Y.fill_(float("nan"))
        chain()
        check("eager")
    kernel = dispatch_kernel(torch, X, Ws[0].t() if row else Ws[0])
    if family.startswith("b_"):
        assert getattr(kernel.spec, family, False), f"{M} rows: {kernel.spec.to_json()}"
    else:
        assert type(kernel.spec).__name__ == family, f"{M} rows: {kernel.spec.to_json()}"
    assert family == "Skinny" or kernel.spec.wgmma, kernel.spec.to_json()
    if family.startswith("b_"):
        # The A copy launches programmatically, asking for the most shared memory an SM has.
        from kgen.core.launch import _PREFERRED_CARVEOUT, MOST_SHARED, _libcuda
        from kgen.ops.tensorcore import PROGRAMMATIC_COPIES

        copy = next(iter(kernel._plans.values()))[0][0]
        assert copy.name in PROGRAMMATIC_COPIES and copy.programmatic, copy.name
        carveout = ctypes.c_int()
        assert _libcuda().cuFuncGetAttribute(ctypes.byref(carveout), _PREFERRED_CARVEOUT, copy._fn_arg) == 0
        assert carveout.value == MOST_SHARED, carveout.value
    # (With KGEN_PDL=0 the same chains run on plain launches.)
    graph = torch.cuda.CUDAGraph()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        chain()
    torch.cuda.current_stream().wait_stream(side)
    with torch.cuda.graph(graph):
        chain()
    for _ in range(2):
        X.copy_(torch.randn(M, K, device="cuda").to(dt))
        for Y in Ys:
            Y.fill_(float("nan"))
        graph.replay()
        check("graph replay")


def dispatch_kernel(torch, A, W):
    """The kernel kgen.matmul ran for A @ W.t() (its repeat-call shortcut's entry)."""
    from kgen.tune import dispatch

    return dispatch._fast[("matmul", A.shape, A.stride(), W.t().shape, W.t().stride(), A.dtype, False)]


def test_tf32_calls_run_the_kernel_the_storage_suits():
    """kgen.matmul(allow_tf32=True): on sm_90, wgmma where the operands are K-major or the
    product is tall enough to pay for a transposing copy, mma.sync for few rows against a
    row-major B; every result within the TF32 tolerance of the kernel that ran."""
    torch = _torch()
    from kgen.ops.tensorcore import TF32_TRANSPOSE_MIN
    from kgen.tune import dispatch

    for M, N, K, b_col in ((100, 700, 1500, False), (100, 700, 1500, True), (TF32_TRANSPOSE_MIN + 3, 333, 1031, False),
                           (2000, 1000, 700, False)):
        A = torch.randn(M, K, device="cuda")
        B = torch.randn(N, K, device="cuda").t() if b_col else torch.randn(K, N, device="cuda")
        C = kgen.matmul(A, B, allow_tf32=True)
        torch.cuda.synchronize()
        k = dispatch._fast[("matmul", A.shape, A.stride(), B.shape, B.stride(), A.dtype, True)]
        spec = k.spec
        assert spec.kernel == "tensor_matmul" and spec.tf32
        if _hopper():
            assert spec.wgmma == (b_col or M >= TF32_TRANSPOSE_MIN), spec.to_json()
        _check(spec, A, B, C, None, 1.0, 0.0, f"allow_tf32 {M}x{N}x{K} b_col={b_col} {spec.to_json()}")


def _float64_call(torch, M, N, K, b_col):
    """kgen.matmul on fresh float64 operands (B = W.t() when b_col) into a NaN-poisoned C:
    (A, B, C, the spec dispatch ran)."""
    from kgen.tune import dispatch

    A = torch.randn(M, K, device="cuda", dtype=torch.float64)
    B = (torch.randn(N, K, device="cuda", dtype=torch.float64).t() if b_col
         else torch.randn(K, N, device="cuda", dtype=torch.float64))
    C = torch.full((M, N), float("nan"), device="cuda", dtype=torch.float64)
    kgen.matmul(A, B, out=C)
    torch.cuda.synchronize()
    return A, B, C, dispatch.call_spec(A, B)


def _assert_near_float64_product(torch, A, B, C, spec):
    """Off sm_90 (the SIMT tiles, or m8n8k4): C finite and within 1e-13 of A @ B by relative norm."""
    ref = A @ B
    assert torch.isfinite(C).all() and float((C - ref).norm() / ref.norm()) <= 1e-13, spec.to_json()


def test_few_row_float64_products_run_tiles_sized_to_their_rows():
    """kgen.matmul on float64 products of 9-64 rows against N and K of 1024 or more: on sm_90,
    the m16n8k16 tiles of few_rows_f64_spec (a row tile of the rows rounded up to 16), reading a
    weight whose rows are not 16 bytes apart (W.t() of an odd K, a row-major B of an odd N) in
    place; the result within the kernel's tolerance of the float64 product on a NaN-poisoned
    output."""
    torch = _torch()
    for M, N, K, b_col in ((9, 1031, 1536, True), (13, 1536, 1030, False), (40, 1200, 1100, True),
                           (64, 1024, 2049, False), (27, 2051, 1031, True), (33, 1025, 1200, False)):
        A, B, C, spec = _float64_call(torch, M, N, K, b_col)
        if _hopper():
            assert spec.kernel == "tensor_matmul" and spec.tile[:2] == (-(-M // 16) * 16, 64), spec.to_json()
            assert spec.repack == ((K if b_col else N) % 2 == 0), spec.to_json()
            _check(spec, A, B, C, None, 1.0, 0.0, f"float64 {M}x{N}x{K} b_col={b_col} {spec.to_json()}")
        else:   # the SIMT tiles elsewhere
            _assert_near_float64_product(torch, A, B, C, spec)


@pytest.mark.parametrize("fetch", [64, 128, 256])
def test_l2_fetch_sizes_keep_the_few_row_float64_tiles_exact(fetch):
    """l2_fetch changes only what the L2 brings in around each copy: the few-row float64 tile
    (split K) with each size, in every storage order, copied whole or element by element
    (repack off, operands at odd offsets and padded), ragged M, N and K, with and without beta,
    within the tolerance of the float64 product on a NaN-poisoned output."""
    if not _hopper():
        pytest.skip("float64's m16n8k16 tiles need sm_90")
    base = TensorMatmul.few_rows_f64_spec({"M": 27, "N": 4096, "K": 4096}).replace(l2_fetch=fetch)
    assert base.split_k > 1 and base.tile[0] == 32
    for repack in (True, False):
        for layouts in LAYOUTS:
            for M, N, K, pad, off, alpha, beta in ((27, 1031, 2049, 0, 0, 1.0, 0.0), (9, 200, 77, 1, 1, 1.0, 0.0),
                                                   (32, 129, 1030, 3, 3, -0.5, 2.0)):
                _check_product(base.replace(repack=repack), layouts, M, N, K, pad, pad, off, off, 1, alpha, beta)


def test_float64_products_of_65_to_256_rows_split_k_to_fill_the_waves():
    """kgen.matmul on float64 products of 65-256 rows whose tiles are fewer than a wave or
    1.0-1.4 waves: on sm_90 the 96-row tiles at 65-96 rows, else the 64 x 64 default, with K
    split by wave_split (here 2-5 slices, K not a multiple of the split, odd
    sides, both weight orders), a weight whose rows are not 16 bytes apart (a row-major B of an
    odd N, W.t() of an odd K) read in place; the result within the kernel's tolerance of the
    float64 product on a NaN-poisoned output."""
    torch = _torch()
    from kgen.ops.tensorcore import TensorMatmul, c_tiles, f64_row_tile, wave_split

    for M, N, K, b_col in ((100, 3001, 1500, True), (130, 2049, 1031, False), (250, 1100, 2049, True),
                           (77, 4100, 1001, False), (200, 1500, 4097, False),
                           (241, 6395, 5505, False), (175, 11305, 5267, True), (196, 8767, 4099, True)):
        A, B, C, spec = _float64_call(torch, M, N, K, b_col)
        if _hopper():
            bm = f64_row_tile(M) if TensorMatmul.rows_f64_suits(M, N, K) else 64
            slots = 396 if bm == 64 else 264
            assert spec.kernel == "tensor_matmul" and spec.tile[:2] == (bm, 64), spec.to_json()
            assert spec.split_k == wave_split(c_tiles(M, N, bm, 64), slots, K, whole_waves=True) > 1, spec.to_json()
            assert spec.repack == ((K if b_col else N) % 2 == 0), spec.to_json()   # odd rows in place
            _check(spec, A, B, C, None, 1.0, 0.0, f"float64 {M}x{N}x{K} b_col={b_col} {spec.to_json()}")
        else:
            _assert_near_float64_product(torch, A, B, C, spec)


def test_float64_k_slices_merged_in_a_cluster_equal_the_workspace_merge_bit_for_bit():
    """On sm_90 kgen.matmul adds a float64 product's 2-8 K slices in a thread block cluster where
    all its clusters run at once (f64_cluster_merged, F64_CLUSTER_BLOCKS); the same spec with the
    workspace and its second kernel sums the slices in the same order, so the outputs are equal
    bit for bit (alpha and beta too, odd N, both weight orders, weights read in place by
    elements, 2-4 blocks an SM), and within tolerance of float64."""
    torch = _torch()
    if not _hopper():
        pytest.skip("the cluster merge needs sm_90")
    from kgen.ops.tensorcore import f64_cluster_merged

    clustered = 0
    for M, N, K, b_col in ((110, 1171, 1663, True), (19, 1654, 2228, False), (99, 1433, 1198, False),
                           (10, 1841, 1409, False), (31, 1783, 1904, True), (60, 1037, 1147, True),
                           (30, 2147, 1120, True)):
        A, B, C, spec = _float64_call(torch, M, N, K, b_col)
        assert spec.kernel == "tensor_matmul" and 2 <= spec.split_k <= 8, spec.to_json()
        fits = f64_cluster_merged(spec.replace(split_merge="workspace"), M, N, K).split_merge == "cluster"
        assert spec.split_merge == ("cluster" if fits else "workspace"), spec.to_json()
        clustered += fits
        _check(spec, A, B, C, None, 1.0, 0.0, f"float64 {M}x{N}x{K} b_col={b_col} {spec.to_json()}")
        C0 = torch.randn(M, N, device="cuda", dtype=torch.float64)
        got, want = C0.clone(), C0.clone()
        kgen.build(spec.replace(split_merge="cluster"))(A, B, out=got, alpha=-0.75, beta=0.5)
        kgen.build(spec.replace(split_merge="workspace"))(A, B, out=want, alpha=-0.75, beta=0.5)
        torch.cuda.synchronize()
        assert torch.isfinite(got).all() and torch.equal(got, want), f"{M}x{N}x{K} b_col={b_col}: {spec.to_json()}"
        assert torch.equal(C, kgen.matmul(A, B)), f"{M}x{N}x{K}: the sums changed between calls"
    assert clustered >= 5, f"only {clustered} of the 7 products merged in clusters"


def test_float64_products_whose_waves_fill_better_in_64_by_128_tiles_run_them():
    """kgen.matmul on float64 products of 65-256 rows, K whole, whose 64 x 128 tiles fit in
    fewer waves than the 64 x 64 ones (f64_wave_cost): on sm_90 wide_f64_spec (m16n8k8), both
    weight orders, a weight whose rows are not 16 bytes apart read in place; the result within
    the kernel's tolerance of the float64 product on a NaN-poisoned output."""
    torch = _torch()
    for M, N, K, b_col in ((186, 11244, 1609, False), (110, 14957, 1093, True), (126, 13824, 1085, True),
                           (166, 10893, 1459, False), (216, 7200, 1502, True)):
        A, B, C, spec = _float64_call(torch, M, N, K, b_col)
        if _hopper():
            assert spec.kernel == "tensor_matmul" and spec.tile == (64, 128, 16), spec.to_json()
            assert spec.mma_shape == "m16n8k8" and spec.split_k == 1, spec.to_json()
            assert spec.repack == ((K if b_col else N) % 2 == 0), spec.to_json()   # odd rows in place
            _check(spec, A, B, C, None, 1.0, 0.0, f"float64 {M}x{N}x{K} b_col={b_col} {spec.to_json()}")
        else:
            _assert_near_float64_product(torch, A, B, C, spec)


def test_float64_products_of_65_to_256_rows_under_2_28_multiply_adds_run_on_the_tensor_cores():
    """kgen.matmul on float64 products of 65-256 rows below dispatch.TENSOR_F64_MIN_MACS (N and K
    of 1024 or more): on sm_90 the m16n8k16 tiles (TensorMatmul.rows_f64_suits; the 96-row ones
    at 65-96 rows), odd sides, both weight orders, rows not 16 bytes apart read in
    place; elsewhere the SIMT tiles. The result within the kernel's tolerance of the float64
    product on a NaN-poisoned output."""
    torch = _torch()
    from kgen.tune import dispatch

    for M, N, K, b_col in ((88, 1025, 2221, True), (72, 1074, 1183, True), (142, 1545, 1130, False),
                           (190, 1166, 1126, False), (70, 1745, 1221, True), (250, 1031, 1024, False)):
        assert M * N * K < dispatch.TENSOR_F64_MIN_MACS
        A, B, C, spec = _float64_call(torch, M, N, K, b_col)
        if _hopper():
            assert spec.kernel == "tensor_matmul" and spec.mma_shape == "m16n8k16", spec.to_json()
            assert spec.repack == ((K if b_col else N) % 2 == 0), spec.to_json()
            _check(spec, A, B, C, None, 1.0, 0.0, f"float64 {M}x{N}x{K} b_col={b_col} {spec.to_json()}")
        else:
            assert spec.kernel == "matmul", spec.to_json()
            _assert_near_float64_product(torch, A, B, C, spec)


def test_float64_products_of_65_to_96_rows_run_96_row_tiles():
    """kgen.matmul on float64 products of 65-96 rows, both weight orders: on sm_90 the 96 x 64
    tiles of row_tile_f64_spec (K split where their tiles are few; a weight whose rows are not
    16 bytes apart read in place, element by element), and at 97 rows the 64 x 64 default; the
    result within the kernel's tolerance of the float64 product on a NaN-poisoned output."""
    torch = _torch()
    for M, N, K, b_col in ((65, 2100, 2000, True), (80, 2049, 2051, False), (96, 1500, 2000, True),
                           (73, 1031, 4097, True), (71, 16349, 1109, False), (97, 2051, 1999, False)):
        A, B, C, spec = _float64_call(torch, M, N, K, b_col)
        if _hopper():
            assert spec.kernel == "tensor_matmul", spec.to_json()
            assert spec.tile[:2] == ((64, 64) if M == 97 else (96, 64)), spec.to_json()
            assert spec.repack == ((K if b_col else N) % 2 == 0), spec.to_json()   # odd rows read in place
            _check(spec, A, B, C, None, 1.0, 0.0, f"float64 {M}x{N}x{K} b_col={b_col} {spec.to_json()}")
        else:
            _assert_near_float64_product(torch, A, B, C, spec)


def test_large_float32_products_run_three_tf32_products_at_float32_accuracy():
    """kgen.matmul on float32 with TF32 off: on sm_90, products dispatch's split_tf32_suits takes
    run TensorMatmul(split_tf32=True), within 16x the error of cuBLAS's own float32 SGEMM on the same
    inputs (TF32 alone is ~1000x); with allow_tf32=True the same shape runs one TF32 product."""
    torch = _torch()
    from kgen.ops.tensorcore import split_tf32_suits
    from kgen.tune import dispatch

    torch.backends.cuda.matmul.allow_tf32 = False
    # The last two copy more than SPLIT_COPIES_ONE_LAUNCH values: B's and A's copies in two launches.
    # The third and fourth are below SPLIT_TF32_MIN_MACS with K of SPLIT_TF32_DEEP_K or more.
    for M, N, K, b_col, offset in ((1024, 1100, 1030, False, 0), (1030, 1024, 1200, True, 0),
                                   (700, 611, 333, True, 1), (640, 820, 257, False, 0),
                                   (1200, 1000, 1001, False, 1), (1500, 1400, 1500, True, 1),
                                   (2100, 1300, 1300, False, 0)):
        assert split_tf32_suits(M, N, K)
        A = torch.randn(M, K + offset, device="cuda")[:, offset:]
        B = torch.randn(N, K, device="cuda").t() if b_col else torch.randn(K, N, device="cuda")
        C = torch.full((M, N), float("nan"), device="cuda")
        kgen.matmul(A, B, out=C)
        ref = A.double() @ B.double()
        cublas = torch.matmul(A, B)
        torch.cuda.synchronize()
        spec = dispatch._fast[("matmul", A.shape, A.stride(), B.shape, B.stride(), A.dtype, False)].spec
        rel = ((C.double() - ref).norm() / ref.norm()).item()
        peer = ((cublas.double() - ref).norm() / ref.norm()).item()
        label = f"{M}x{N}x{K} b_col={b_col} offset={offset} {spec.to_json()}: {rel:.2e} against cuBLAS {peer:.2e}"
        if _hopper():
            assert spec.kernel == "tensor_matmul" and spec.split_tf32, label
        if spec.kernel == "tensor_matmul":
            assert rel <= 16 * peer and rel < 2e-5, label
        _check(spec, A, B, C, None, 1.0, 0.0, label)
        tf = kgen.matmul(A, B, allow_tf32=True)
        tspec = dispatch._fast[("matmul", A.shape, A.stride(), B.shape, B.stride(), A.dtype, True)].spec
        assert tspec.kernel == "tensor_matmul" and tspec.tf32 and not tspec.split_tf32, tspec.to_json()
        _check(tspec, A, B, tf, None, 1.0, 0.0, "allow_tf32 " + label)


def test_host_arrays_and_empty_k():
    """numpy inputs (float16, float64, and bfloat16 through ml_dtypes when installed); K = 0
    gives alpha * 0 + beta * C."""
    _torch()
    rng = np.random.default_rng(5)
    for dtype in ("float16", "float64", "bfloat16"):
        if dtype == "bfloat16":
            pytest.importorskip("ml_dtypes")
        spec = TensorMatmul.default_spec({"M": 100, "N": 100, "K": 100}, dtype)
        k = kgen.build(spec)
        A, B = TensorMatmul.make_inputs({"M": 77, "N": 45, "K": 131}, dtype, rng)
        C = k(A, B)
        ref = TensorMatmul.reference_output({}, (A, B))
        rel = np.linalg.norm(C.astype(np.float64) - ref) / np.linalg.norm(ref)
        assert C.shape == (77, 45) and rel <= spec.tolerance_for({"M": 77, "N": 45, "K": 131}), (dtype, rel)
    spec = TensorMatmul.default_spec({"M": 8, "N": 8, "K": 8}, "float16")
    k = kgen.build(spec)
    A = np.zeros((5, 0), np.float16)
    B = np.zeros((0, 6), np.float16)
    out = np.full((5, 6), 2.0, np.float16)
    got = k(A, B, out=out, beta=0.5)
    assert np.array_equal(got, np.full((5, 6), 1.0, np.float16))


def test_wrong_arguments_raise_clear_errors():
    torch = _torch()
    k = kgen.build(TensorMatmul.default_spec({"M": 64, "N": 64, "K": 64}, "float16"))
    A = torch.randn(8, 8, device="cuda", dtype=torch.float16)
    with pytest.raises(kgen.ArrayError, match="dtype bfloat16"):
        k(A, A.to(torch.bfloat16))
    with pytest.raises(kgen.ArrayError, match="inner dimensions"):
        k(A, torch.randn(9, 8, device="cuda", dtype=torch.float16))
    with pytest.raises(kgen.ArrayError, match="layout_b"):
        k(A, A.t())
    with pytest.raises(kgen.ArrayError, match="beta"):
        k(A, A, beta=1.0)
