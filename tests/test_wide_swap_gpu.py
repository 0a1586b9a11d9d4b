"""GPU property tests of the wide transposed tiles (swap_ab with 128-256 columns, one block an
SM, wave_tail on them, or K split in clusters: the 128-column tiles of swap_spec's
SWAP_128_MIN_GAIN): random shapes just short of, at and past one and two waves of the SMs,
several row tiles where the rows pass BM, both orders of B, leading dimensions and pointer
offsets that rule out 16-byte copies, alpha/beta, outputs poisoned with NaN before each launch,
against float64 products (the bounds of test_tensorcore_gpu); and kgen.matmul on products the
default gives them, and on B layouts that keep the general tiles (or the 64-column ones)."""
from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_tensorcore_rows192_gpu import check_matmul_call, prebuild
from test_wave_tail_gpu import check_ragged, ragged_strategies

from kgen.ops.tensorcore import TensorMatmul as T
from kgen.ops.tensorcore import wgmma_ring_stages

pytestmark = pytest.mark.gpu

EXAMPLES = int(os.environ.get("KGEN_TC_EXAMPLES", "300")) // 4 + 1


def _swap(dtype, BM, BN, **kw):
    return T(dtype=dtype, tile=(BM, BN, 64), warp_tile=(BM, 64), stages=wgmma_ring_stages(BM, BN),
             instruction="wgmma", swap_ab=True, **kw)


POOL = [
    _swap("bfloat16", 72, 128, wave_tail=5),
    _swap("float16", 104, 192, wave_tail=4, out_dtype="float32"),
    _swap("bfloat16", 128, 256, wave_tail=2),
    _swap("bfloat16", 200, 128, wave_tail=3),
    _swap("float16", 192, 192),
    _swap("bfloat16", 88, 256),
    # The 128-column tiles of 65-256 rows against one wave of 64-column ones, K in clusters
    # (swap_spec: SWAP_128_MIN_GAIN, SWAP_128_MIN_K).
    _swap("bfloat16", 224, 128, split_k=3, split_merge="cluster"),
    _swap("float16", 152, 128, split_k=4, split_merge="cluster", out_dtype="float32"),
    _swap("bfloat16", 256, 128, split_k=5, split_merge="cluster"),
    _swap("float16", 72, 128, split_k=2, split_merge="cluster"),
    # Two row tiles of half the rows, 192 columns (two_row_tiles_spec: SWAP_TWO_ROW_TILES).
    _swap("bfloat16", 128, 192),
    _swap("float16", 104, 192, out_dtype="float32"),
]


@pytest.fixture(scope="module", autouse=True)
def _prebuild():
    prebuild(POOL, lambda spec: [spec.tail_spec()] if spec.wave_tail > 1 else [])


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@given(index=st.integers(0, len(POOL) - 1),
       **ragged_strategies([1, 65, 71, 72, 73, 127, 128, 129, 151, 152, 153, 199, 200, 201, 223, 224, 225, 256, 257],
                           60))
def test_wide_transposed_tiles_match_float64(index, layouts, M, tiles, short, K, pad_a, pad_b, off_a, off_b,
                                             alpha, beta):
    check_ragged(POOL[index], layouts, M, tiles, short, K, pad_a, pad_b, off_a, off_b, alpha, beta)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("M,N,K,order,offset,wide", [
    (72, 34496, 1280, "col", 0, True), (138, 36289, 1088, "col", 1, True), (196, 44544, 4416, "row", 0, True),
    (75, 39360, 1152, "row", 1, True), (101, 28672, 1600, "col", 0, False),
    (150, 50944, 2050, "col", 0, False), (120, 30001, 2000, "row", 0, False),
    # 65-128 rows the streaming tiles took before (SWAP_OVER_STREAM_ROWS).
    (99, 8832, 3008, "col", 1, True), (84, 14616, 6400, "row", 0, True)])
def test_kgen_matmul_runs_the_wide_transposed_tiles_where_dispatch_picks_them(dtype, M, N, K, order, offset, wide):
    """kgen.matmul as users call it on products the default gives the wide transposed tiles (odd
    N, B as W.t() or row-major, A at an odd element offset), on one it keeps on the general
    tiles, and on two whose B's rows are not 16-byte aligned (wide=False: the tiles the tree
    chose before): the spec dispatch ran, and the result against float64 on a NaN-poisoned
    output, twice (the repeat path too)."""
    check_matmul_call(dtype, M, N, K, order, offset, lambda spec: isinstance(spec, T) and (
        spec.swap_ab and not spec.b_realign and not spec.b_phased) == wide)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("M,N,K,order,offset,wide", [
    (218, 4440, 3544, "col", 0, True), (140, 4352, 3455, "row", 0, True), (256, 2608, 8472, "col", 1, True),
    (112, 4296, 3176, "row", 1, True), (97, 6000, 3500, "row", 1, False), (212, 4416, 1920, "col", 0, False),
    (147, 3753, 3208, "row", 1, False), (249, 2168, 1816, "col", 0, False), (48, 5784, 2928, "row", 0, False)])
def test_kgen_matmul_runs_the_128_column_tiles_where_dispatch_picks_them(dtype, M, N, K, order, offset, wide):
    """kgen.matmul as users call it on products the default gives the 128-column transposed tiles
    (B as W.t() or row-major, A at an odd element offset, K odd), and on five it keeps on 64
    columns (as many blocks either way, a short K, a row-major B whose rows are not 16-byte
    aligned, 48 rows): the spec dispatch ran, and the result against float64 on a NaN-poisoned
    output, twice (the repeat path too)."""
    check_matmul_call(dtype, M, N, K, order, offset, lambda spec: isinstance(spec, T) and spec.swap_ab and (
        spec.tile[1] == 128) == wide)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("M,N,K,order,offset,two_rows", [
    (246, 8576, 5952, "col", 0, True), (203, 9856, 1089, "row", 1, True), (238, 8513, 4288, "col", 1, True),
    (250, 13000, 4000, "col", 0, False), (238, 8513, 4288, "row", 1, False)])
def test_kgen_matmul_runs_two_row_tiles_where_dispatch_picks_them(dtype, M, N, K, order, offset, two_rows):
    """kgen.matmul as users call it on products the default gives two row tiles of half the rows
    and 192 columns (B as W.t() or row-major, A at an odd element offset, K or N odd), on one past
    one wave of them (N of 13000) and on a row-major B whose rows are not 16-byte aligned (N of
    8513: the tiles the tree chose before): the spec dispatch ran, and the
    result against float64 on a NaN-poisoned output, twice (the repeat path too)."""
    check_matmul_call(dtype, M, N, K, order, offset, lambda spec: isinstance(spec, T) and (
        spec.swap_ab and spec.tile[1] == 192 and 2 * spec.tile[0] >= M > spec.tile[0]) == two_rows)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("M,N,K,order,offset,merge", [
    (170, 5440, 12608, "col", 1, "workspace"), (150, 6144, 16384, "row", 1, "cluster"),
    (107, 6209, 16384, "col", 0, "cluster"), (200, 6208, 5312, "col", 0, None)])
def test_kgen_matmul_runs_the_long_k_tiles_where_dispatch_picks_them(dtype, M, N, K, order, offset, merge):
    """kgen.matmul as users call it on products SWAP_LONG_K gives 128-column transposed tiles with
    K in slices (merged in a workspace past the clusters that run at once, else in clusters; A at
    an odd element offset, N odd), and on one of a shorter K it keeps on 64 columns with K whole:
    the spec dispatch ran, and the result against float64 on a NaN-poisoned output, twice."""
    check_matmul_call(dtype, M, N, K, order, offset, lambda spec: isinstance(spec, T) and spec.swap_ab and (
        (spec.tile[1], spec.split_k > 1, spec.split_merge if spec.split_k > 1 else None)
        == ((128, True, merge) if merge else (64, False, None))))
