"""CPU checks of the tensor-core matmul family (TensorMatmul): spec validation with errors
that name the field, canonical out_dtype, default specs for any shape, the search space,
split plans and tolerances, the rendered entry points, and nvcc/ptxas builds of a
representative set for sm_90 and sm_80 with no register spills."""
from __future__ import annotations

import collections
import concurrent.futures as cf
import math
import re
import shutil
import struct

import pytest
from test_swap128_cpu import _most_slices as most

import kgen
import kgen.ops.tensorcore as tc
from kgen.bench import tensorcore as bench_tc
from kgen.core.compiler import CompileError
from kgen.core.spec import SpecError
from kgen.ops.tensorcore import ITEMSIZE, TensorMatmul, wgmma_ring_stages

LIMITS = {"max_threads_per_block": 1024, "max_shared_per_block_optin": 227 * 1024, "multiprocessors": 132}
DTYPES = ("float16", "bfloat16", "float32", "float64")
SHAPES = [(1, 1, 1), (7, 13, 1), (127, 4096, 4096), (4096, 64, 4096), (1000, 1000, 1000), (3000, 5000, 700),
          (4097, 4097, 4097), (8192, 8192, 8192), (64, 64, 100000)]


def _general_or_wide_swap(general, M, N, K, dtype):
    """What the default gives where the general tiles are `general`: those, or where
    wide_swap_suits the product, the cheapest of them and wide_swap_specs by wide_swap_cost, two
    row tiles in its place where two_row_tiles_spec takes it (test_wide_swap_cpu checks where)."""
    if not TensorMatmul.wide_swap_suits(M, N, K, dtype) or general.split_k > 1:
        return general
    p = {"M": M, "N": N, "K": K}
    pick = min([general, *TensorMatmul.wide_swap_specs(p, dtype)], key=lambda o: o.wide_swap_cost(p))
    return pick.two_row_tiles_spec(p) or pick


def _streaming_default(M, N, K, dtype):
    """What the default gives a product the streaming tiles suit: at 65-128 rows against weights
    past one wave of 64-column transposed tiles whose 128-column ones make one wave, those, the
    rows in one tile, K whole (SWAP_OVER_STREAM_ROWS); else stream_spec."""
    if 65 <= M <= 128 and K >= 512 and -(-N // 64) > 132 and -(-N // 128) <= 132:
        BM = -(-M // 8) * 8
        return TensorMatmul(dtype=dtype, tile=(BM, 128, 128 // ITEMSIZE[dtype]), warp_tile=(BM, 64),
                            stages=wgmma_ring_stages(BM, 128), instruction="wgmma", swap_ab=True)
    return TensorMatmul.stream_spec({"M": M, "N": N, "K": K}, dtype)


@pytest.mark.parametrize("fields, field", [
    (dict(dtype="float32"), "tf32"),                                   # float32 must say tf32
    (dict(dtype="bfloat16", tf32=True), "tf32"),
    (dict(dtype="int8"), "dtype"),
    (dict(out_dtype="float64"), "out_dtype"),
    (dict(dtype="float64", out_dtype="float32"), "out_dtype"),
    (dict(tile=(128, 128, 24)), "BK"),                                 # not a multiple of the MMA's K
    (dict(dtype="float64", tile=(64, 64, 6), warp_tile=(32, 32)), "BK"),
    (dict(tile=(120, 128, 32)), "BM"),
    (dict(warp_tile=(48, 64)), "WM"),
    (dict(tile=(128, 128, 32), warp_tile=(128, 64)), "warp_tile"),    # 256 accumulator registers
    (dict(tile=(256, 256, 32), warp_tile=(32, 32)), "warp_tile"),      # 64 warps
    (dict(stages=1), "stages"),
    (dict(stages=7), "stages"),
    (dict(smem_layout="xor"), "smem_layout"),
    (dict(tile=(128, 96, 32), warp_tile=(32, 32), layout_b="row"), "smem_layout"),  # 12-chunk rows
    (dict(raster="diagonal"), "raster"),
    (dict(raster_group=0), "raster_group"),
    (dict(split_k=0), "split_k"),
    (dict(layout_a="transposed"), "layout_a"),
    (dict(min_blocks=9), "min_blocks"),
    (dict(tile=(256, 256, 128), warp_tile=(64, 64), stages=6), "tile"),  # shared memory past 227 KiB
    (dict(tile=("128", 128, 32)), "tile"),
])

def test_invalid_fields_name_the_field(fields, field):
    with pytest.raises(SpecError, match=field):
        TensorMatmul(**fields)


def test_out_dtype_is_canonical_and_json_round_trips():
    a = TensorMatmul(dtype="bfloat16", out_dtype="bfloat16")
    assert a.out_dtype == "" and a == TensorMatmul(dtype="bfloat16") and a.key == TensorMatmul(dtype="bfloat16").key
    b = TensorMatmul(dtype="float16", out_dtype="float32", layout_a="col", split_k=3)
    assert kgen.spec_from_json(b.to_json()) == b and b.output_dtype == "float32"
    assert TensorMatmul(dtype="float32", tf32=True).output_dtype == "float32"
    assert "TensorMatmul" in dir(kgen) and kgen.TensorMatmul is TensorMatmul


@pytest.mark.parametrize("dtype", DTYPES)
def test_default_spec_is_sound_for_any_shape(dtype):
    for M, N, K in SHAPES:
        p = {"M": M, "N": N, "K": K}
        s = TensorMatmul.default_spec(p, dtype)
        assert s.dtype == dtype and s.tf32 == (dtype == "float32")
        assert s.prune_reason(p, LIMITS) is None, (p, s.to_json())
        splits, chunk = s.split_plan(K)
        assert (splits - 1) * chunk < K <= splits * chunk
    # Few C tiles with a long K are split (the mma.sync default; the wgmma one splits only
    # below 32 tiles); a full GPU of tiles is not.
    assert TensorMatmul.mma_default_spec({"M": 127, "N": 4096, "K": 4096}, dtype).split_k > 1
    assert TensorMatmul.default_spec({"M": 8192, "N": 8192, "K": 8192}, dtype).split_k == 1
    with pytest.raises(ValueError, match="positive integer"):
        TensorMatmul.default_spec({"M": 0, "N": 1, "K": 1}, dtype)


def test_default_spec_rejects_unknown_dtypes():
    with pytest.raises(ValueError, match="dtype='int32'"):
        TensorMatmul.default_spec({"M": 8, "N": 8, "K": 8}, "int32")


@pytest.mark.parametrize("dtype", DTYPES)
def test_search_space_is_valid_unique_and_splits_only_skinny_problems(dtype):
    square = {"M": 4096, "N": 4096, "K": 4096}
    space = TensorMatmul.search_space(square, dtype)
    kept = [s for s in space if s.prune_reason(square, LIMITS) is None]
    assert len(kept) >= 100 and len({s.key for s in space}) == len(space)
    assert {s.smem_layout for s in kept} == {"swizzle", "pad"} and {s.raster for s in kept} == {"row", "col"}
    assert not any(s.split_k > 1 for s in space)
    skinny = {"M": 127, "N": 4096, "K": 4096}
    assert any(s.split_k > 1 and s.prune_reason(skinny, LIMITS) is None
               for s in TensorMatmul.search_space(skinny, dtype))


@pytest.mark.parametrize("dtype", DTYPES)
def test_search_space_holds_the_default_after_the_mma_sync_default(dtype):
    """The tuner starts from the default and must beat it: on random problems (few rows among
    them) the space's first spec is mma_default_spec (dispatch's fallback off sm_90) and
    default_spec is in the space."""
    rng = __import__("random").Random(11)
    for _ in range(12):
        p = {"M": int(2 ** rng.uniform(0, 13)), "N": int(2 ** rng.uniform(10, 14)), "K": int(2 ** rng.uniform(8, 14))}
        space = TensorMatmul.search_space(p, dtype)
        assert space[0] == TensorMatmul.mma_default_spec(p, dtype)
        assert TensorMatmul.default_spec(p, dtype) in space, p


def test_split_plan_and_launch_geometry():
    s = TensorMatmul(dtype="float16", tile=(128, 128, 32), split_k=4)
    assert s.split_plan(4096) == (4, 1024)
    for K in (1, 31, 32, 33, 1000, 4097):
        for ways in (2, 3, 7, 64):
            n, c = s.split_plan(K, ways)
            assert n >= 1 and (n - 1) * c < K <= n * c and (n == 1 or c % 32 == 0)
    grid, block, shared = s.launch_geometry(1000, 3000, 4096)
    assert grid == (8 * 24, 1, 4) and block == (128, 1, 1) and shared == s.shared_bytes
    # 3 stages of a 128x32 A tile and a 32x128 B tile, 2 bytes each, swizzled (no padding).
    assert TensorMatmul(dtype="float16").shared_bytes == 3 * (128 * 32 + 32 * 128) * 2
    # Padded rows: one 16-byte chunk per row for 16-bit types.
    assert TensorMatmul(dtype="float16", smem_layout="pad").shared_bytes == 3 * (128 * 40 + 32 * 136) * 2


def test_tolerance_follows_precision_and_k():
    f16 = TensorMatmul(dtype="float16")
    bf16 = TensorMatmul(dtype="bfloat16")
    bf16_f32 = TensorMatmul(dtype="bfloat16", out_dtype="float32")
    tf32 = TensorMatmul(dtype="float32", tf32=True)
    f64 = TensorMatmul(dtype="float64", tile=(64, 64, 16), warp_tile=(32, 32))
    p = {"M": 100, "N": 100, "K": 4096}
    assert f64.tolerance_for(p) < 1e-12 < bf16_f32.tolerance_for(p) < f16.tolerance_for(p) < bf16.tolerance_for(p)
    assert tf32.tolerance_for(p) > 2.0 ** -10  # TF32 rounds the inputs to 10 mantissa bits
    assert f16.tolerance_for({"M": 1, "N": 1, "K": 1 << 20}) > f16.tolerance_for(p)
    a, b, c = bf16.elementwise_bound(4096)
    assert a == pytest.approx(2 * (4096 + 64) * 2 * 2.0 ** -24) and b == 2 * 2.0 ** -8 and 0 < c < 1e-39
    # A float16 result below the normal range is rounded to a multiple of 2^-24.
    assert f16.elementwise_bound(1)[2] == 2.0 ** -24
    assert math.isfinite(tf32.elementwise_bound(1)[0])


def test_rendered_source_names_its_entry_points_and_instruction():
    f16 = kgen.render(TensorMatmul(dtype="float16", split_k=2))
    for name in ("kgen_tc_matmul(", "kgen_tc_splitk_reduce(", "kgen_tc_repack(",
                 "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32", "ldmatrix.sync.aligned.m8n8.x4.trans"):
        assert name in f16
    bf16 = kgen.render(TensorMatmul(dtype="bfloat16", layout_a="col", layout_b="col", repack=False))
    assert "f32.bf16.bf16.f32" in bf16 and "kgen_tc_matmul_elem(" in bf16 and "kgen_tc_matmul_elem(" not in f16
    assert "kgen_tc_repack(" not in bf16 and "kgen_tc_splitk_reduce(" not in bf16
    assert "cvt.rna.tf32.f32" in kgen.render(TensorMatmul(dtype="float32", tf32=True, smem_layout="pad"))
    assert "m8n8k4.row.col.f64" in kgen.render(TensorMatmul(dtype="float64", tile=(64, 64, 16), warp_tile=(32, 32)))
    assert kgen.render(TensorMatmul()) == kgen.render(TensorMatmul())


def test_header_says_how_float32_is_computed():
    """The header names the arithmetic: TF32 alone, or the split's three TF32 products, which
    keep float32-level accuracy (saying "computed as TF32" there would misstate it)."""
    def header(spec):
        return next(line for line in kgen.render(spec).splitlines() if line.startswith("// Inputs"))
    split_mma = TensorMatmul.split_mma_spec({"M": 3000, "N": 2000, "K": 40})
    split_wgmma = TensorMatmul.split_default_spec({"M": 4096, "N": 4096, "K": 4096})
    assert split_mma.instruction == "mma_sync" and split_wgmma.instruction == "wgmma"
    for spec in (split_mma, split_wgmma):
        assert "three TF32 products (float32-level accuracy)" in header(spec)
        assert "computed as TF32" not in header(spec)
    square = {"M": 4096, "N": 4096, "K": 4096}
    for plain in (TensorMatmul.default_spec(square, "float32"), TensorMatmul.mma_default_spec(square, "float32")):
        assert "computed as TF32" in header(plain) and "three TF32" not in header(plain)
    assert "TF32" not in header(TensorMatmul(dtype="float16"))


def representative() -> list[TensorMatmul]:
    """What kgen launches by default must not spill: each dtype's default specs (every
    shape of the benchmark), the largest default in column layouts, and the float64 few-row
    tiles and row tiles of 96 and 128 rows."""
    T = TensorMatmul
    specs = {}
    for dtype in DTYPES:
        for shape in bench_tc.SHAPES:
            problem = dict(zip("MNK", shape))
            for s in (T.default_spec(problem, dtype), T.mma_default_spec(problem, dtype)):
                specs[s.key] = s
        s = T.mma_default_spec({"M": 4096, "N": 4096, "K": 4096}, dtype).replace(layout_a="col", layout_b="col")
        specs[s.key] = s
        specs.update((s.key, s) for s in short_k_specs(dtype) + short_k_specs(dtype, clusters=True))
    # float64 tiles sized to a few rows (16, 32, 48 and 64), both storage orders of the weight,
    # copied first or read in place.
    for M in (9, 20, 40, 64):
        few = T.few_rows_f64_spec({"M": M, "N": 4096, "K": 4096})
        for lb, repack in (("row", True), ("col", False)):
            s = few.replace(layout_b=lb, repack=repack)
            specs[s.key] = s
    # The float64 row tiles of 96 and 128 rows (65-256 rows), both storage orders of the weight,
    # copied first or read in place.
    for bm in (96, 128):
        for lb in ("row", "col"):
            for repack in (True, False):
                s = T.row_tile_f64_spec({"M": 200, "N": 4096, "K": 4096}, bm).replace(layout_b=lb, repack=repack)
                specs[s.key] = s
    return list(specs.values())


def test_element_spec_takes_64x64_blocks_four_an_sm_and_splits_k_where_they_are_few():
    """16-bit products on mma.sync with element loads: the short-K tiles where short_k_suits,
    else 64x64 blocks of four 32x32 warp tiles, two stages, four blocks an SM, K split where the
    tiles are few (fewer than ELEMENT_SPLIT_TILES from K = ELEMENT_SPLIT_MIN_K, fewer than
    ELEMENT_CLUSTER_SHORT_K_TILES from ELEMENT_CLUSTER_MIN_K) into 2-8 slices of at least 64 k,
    as many as the k steps make, up to ~ELEMENT_CLUSTER_BLOCKS blocks, added in a cluster (one
    launch); past ELEMENT_CLUSTER_MAX_K the workspace split's 2-16 slices of at least 128 k, in
    one cluster of up to 16 blocks; within what prune_reason allows."""
    from kgen.ops.tensorcore import (ELEMENT_CLUSTER_BLOCKS, ELEMENT_CLUSTER_MAX_K, ELEMENT_CLUSTER_MIN_K,
                                     ELEMENT_CLUSTER_SHORT_K_TILES, ELEMENT_SPLIT_MIN_K, ELEMENT_SPLIT_STAGES,
                                     ELEMENT_SPLIT_TILES)

    rng = __import__("random").Random(11)
    splits = set()
    for _ in range(400):
        M, N, K = (int(2 ** rng.uniform(0, 13)) for _ in range(3))
        p = {"M": M, "N": N, "K": K}
        dtype = rng.choice(("float16", "bfloat16"))
        s = TensorMatmul.element_spec(p, dtype)
        assert s.instruction == "mma_sync" and s.repack is False
        if TensorMatmul.short_k_suits(M, N, K, dtype):
            assert s == TensorMatmul.short_k_spec(p, dtype)
            continue
        stages = ELEMENT_SPLIT_STAGES if s.split_k > 1 and K >= ELEMENT_SPLIT_MIN_K else 2
        assert (s.tile, s.warp_tile, s.stages, s.min_blocks) == ((64, 64, 32), (32, 32), stages, 4)
        tiles = -(-M // 64) * -(-N // 64)
        few = ELEMENT_SPLIT_TILES if K >= ELEMENT_SPLIT_MIN_K else ELEMENT_CLUSTER_SHORT_K_TILES
        if tiles >= few or K < ELEMENT_CLUSTER_MIN_K:
            assert s.split_k == 1, (M, N, K)
        elif K > ELEMENT_CLUSTER_MAX_K:   # the workspace's split: up to 16 slices of at least 128 k, in a cluster
            slices, chunk = s.split_plan(K)
            assert s.split_merge == "cluster" and 2 <= s.split_k <= 16 and slices == s.split_k, (M, N, K)
            assert K // s.split_k >= 128 and (s.split_k - 1) * tiles < 264, (M, N, K)
            workspace = TensorMatmul.element_spec(p, dtype, clusters=False)
            assert workspace.split_merge == "workspace" and workspace.split_plan(K) == (slices, chunk), (M, N, K)
        elif s.split_k > 1:
            slices, chunk = s.split_plan(K)
            assert s.split_merge == "cluster" and 2 <= s.split_k <= 8 and slices == s.split_k, (M, N, K)
            assert chunk >= 64 and (s.split_k - 1) * tiles < ELEMENT_CLUSTER_BLOCKS, (M, N, K)
        else:   # one slice only where more would leave slices under 64 k or add a whole wave
            assert K < 2 * 64 + 32 or tiles * 2 > ELEMENT_CLUSTER_BLOCKS, (M, N, K)
        splits.add(s.split_k)
        assert not s.prune_reason(p, LIMITS), (M, N, K)
    assert {1, 2, 8, 16} <= splits and len(splits) > 4


@pytest.mark.nvcc
def test_element_split_stages_deepen_the_ring_of_split_long_k_products_only(monkeypatch):
    """ELEMENT_SPLIT_STAGES sets the ring of element_spec's split products of K from
    ELEMENT_SPLIT_MIN_K, through either merge; K whole or shorter keeps two stages. Set to 4 (what
    docs/bench/el_depth_to_measure/ times), each such spec is valid on sm_90, keeps four blocks'
    shared memory on an SM, and compiles without spills."""
    monkeypatch.setattr(tc, "ELEMENT_SPLIT_STAGES", 4)
    deep = {}
    for M, N, K in ((542, 62, 5890), (1690, 58, 972), (7151, 54, 615), (297, 111, 300), (4000, 3000, 900)):
        for clusters in (True, False):
            s = TensorMatmul.element_spec({"M": M, "N": N, "K": K}, "bfloat16", clusters=clusters)
            split = s.split_k > 1 and K >= tc.ELEMENT_SPLIT_MIN_K
            assert s.stages == (4 if split else 2), (M, N, K, clusters, s.split_k)
            assert s.split_merge == ("cluster" if clusters and s.split_k > 1 else "workspace")
            assert not s.prune_reason({"M": M, "N": N, "K": K}, LIMITS), (M, N, K)
            if split:
                assert 4 * (s.shared_bytes + 1024) <= tc.SM_SHARED_BYTES, s.shared_bytes
                deep[s.replace(split_k=2).key] = s
    assert len({s.split_merge for s in deep.values()}) == 2
    for s in deep.values():
        res = kgen.compile(s, "sm_90")
        assert not any(r["spill_stores"] or r["spill_loads"] for r in res.resources.values()), res.resources


def test_more_than_eight_k_slices_in_a_cluster_are_kept_to_sm_90():
    """A 16-bit element product past ELEMENT_CLUSTER_MAX_K merges its 9-16 slices in one
    non-portable cluster on sm_90 only; a later GPU (which may allow only the portable 8) gets
    the workspace split of the same tiles, sm_80 no cluster at all, and a portable cluster
    stays on sm_100."""
    import numpy as np

    from kgen.tune import ahead, dispatch
    from kgen.tune.device import DeviceInfo, arch_limits

    hopper = ahead.stand_in_device("sm_90", "NVIDIA H100 80GB HBM3", 132)
    later = DeviceInfo("a later GPU", "sm_100", {**arch_limits("sm_90"), "compute_capability": 100})
    ampere = ahead.stand_in_device("sm_80", "NVIDIA A100-SXM4-80GB", 108)
    for M, N, K, layout in ((29, 41, 7833, "col"), (451, 55, 6229, "row"), (47, 253, 1127, "col")):
        A = np.empty((M, K), np.float16)
        B = np.empty((N, K), np.float16).T if layout == "col" else np.empty((K, N), np.float16)
        on_hopper = dispatch.call_spec(A, B, device=hopper, db=False)
        assert on_hopper.split_merge == "cluster" and not on_hopper.wgmma, (M, N, K)
        workspace = on_hopper.summed_in_workspace({"M": M, "N": N, "K": K})
        assert workspace.split_merge == "workspace" and workspace.tile == on_hopper.tile
        assert dispatch.call_spec(A, B, device=ampere, db=False).split_merge == "workspace", (M, N, K)
        on_later = dispatch.call_spec(A, B, device=later, db=False)
        if on_hopper.split_k > 8:
            assert on_later.split_merge == "workspace", (M, N, K)
            if layout == "col":
                assert on_later == workspace, (M, N, K)
        else:
            assert on_later == on_hopper, (M, N, K)


def test_element_spec_slices_are_added_through_a_workspace_on_a_gpu_without_clusters():
    """dispatch gives a GPU below sm_90 (no thread block clusters) element_spec's workspace
    split where an sm_90 one adds the slices in a cluster: the same tiles, read in place."""
    import numpy as np

    from kgen.tune import ahead, dispatch

    hopper = ahead.stand_in_device("sm_90", "NVIDIA H100 80GB HBM3", 132)
    ampere = ahead.stand_in_device("sm_80", "NVIDIA A100-SXM4-80GB", 108)
    for M, N, K, ampere_split in ((27, 661, 353, 1), (47, 253, 1127, 8)):
        A = np.empty((M, K), np.float16)
        B = np.empty((N, K), np.float16).T
        on_hopper = dispatch.call_spec(A, B, device=hopper, db=False)
        on_ampere = dispatch.call_spec(A, B, device=ampere, db=False)
        assert on_hopper.split_merge == "cluster" and on_hopper.split_k > 1 and not on_hopper.wgmma, (M, N, K)
        assert on_ampere == on_hopper.summed_in_workspace({"M": M, "N": N, "K": K}), (M, N, K)
        assert (on_ampere.split_merge, on_ampere.split_k, on_ampere.repack) == ("workspace", ampere_split, False)
        assert on_ampere.tile == on_hopper.tile and on_ampere.layout_b == "col"
        assert not on_ampere.prune_reason({"M": M, "N": N, "K": K}, {"compute_capability": 80})


def short_k_specs(dtype: str, clusters: bool = False) -> list[TensorMatmul]:
    """element_spec's three tiles (the short-K rule's two and three blocks an SM, 64x64 blocks
    four an SM; registers capped by min_blocks) in three storage orders, the last with K split
    (clusters: the slices added in a cluster, which needs sm_90)."""
    if dtype not in ("float16", "bfloat16"):
        return []
    return [TensorMatmul.element_spec(problem, dtype, clusters=clusters).replace(layout_a=la, layout_b=lb)
            for problem in ({"M": 4096, "N": 4096, "K": 64}, {"M": 1000, "N": 1000, "K": 20},
                            {"M": 400, "N": 300, "K": 2000})
            for la, lb in (("row", "row"), ("row", "col"), ("col", "col"))]


def test_wave_split_fills_whole_waves_of_resident_blocks():
    """wave_split leaves a wave or more of tiles whole (with whole_waves: at most three slices
    of at least 1024), never cuts K below 256 or past 16 slices, and never takes more waves a
    unit of K than K whole does; on the products it was fitted on it gives the splits that won
    there (52x8660x2204's 136 tiles of 264 slots: not 2, whose 272 blocks spill one block past
    the wave)."""
    from kgen.ops.tensorcore import wave_split

    def waves_per_k(tiles, slots, s):
        return math.ceil(tiles * s / slots) / s

    assert wave_split(448, 396, 2356) == wave_split(396, 396, 9000) == 1
    # whole_waves: past a wave too, at most three slices of at least 1024 of K, fewest waves a unit of K.
    assert wave_split(400, 396, 5505, whole_waves=True) == 3      # 1.01 waves: 4/3 of a wave a unit of K
    assert wave_split(531, 396, 5267, whole_waves=True) == 2      # 1.34 waves: 3/2 against 5/3
    assert wave_split(651, 396, 9027, whole_waves=True) == 3      # 1.64 waves: 5/3 against 2
    assert wave_split(448, 396, 2356, whole_waves=True) == 2      # slices of 785 are too short for 3
    assert wave_split(588, 396, 1348, whole_waves=True) == 1      # slices of 674: K stays whole
    assert wave_split(792, 396, 9000, whole_waves=True) == 1      # two whole waves: nothing to gain
    assert wave_split(190, 264, 4301, whole_waves=True) == wave_split(190, 264, 4301)   # under a wave: as before
    assert wave_split(136, 264, 2204) in (3, 4, 5, 6, 7, 8)
    assert wave_split(190, 264, 4301) == 4
    assert wave_split(42, 264, 9664) == 6
    assert wave_split(30, 1056, 5345) >= 12
    assert wave_split(30, 1056, 700) == 2
    rng = __import__("random").Random(7)
    for _ in range(500):
        slots = rng.choice((264, 396, 528, 1056))
        tiles, K = rng.randint(1, 2 * slots), rng.randint(1, 40000)
        s = wave_split(tiles, slots, K)
        assert 1 <= s <= max(1, min(16, K // 256))
        if tiles >= slots:
            assert s == 1
        else:
            assert waves_per_k(tiles, slots, s) <= waves_per_k(tiles, slots, 1)


def test_f64_sm_split_picks_the_splits_that_won_on_busy_sms():
    """f64_sm_split (the 64 x 64 float64 default's K split from F64_BUSY_TILES_PER_SM tiles an SM
    up) gives the splits that ran fastest on an H100: K whole where two blocks an SM already
    fill it and the workspace would cost more than the last wave saves, a few slices of a long K;
    from a whole wave up at most F64_WAVE_MAX_SPLIT slices of F64_WAVE_MIN_SLICE; never a slice
    under 256; and the default uses it exactly from that many tiles an SM, at up to 256 rows."""
    from kgen.ops.tensorcore import (F64_BUSY_TILES_PER_SM, F64_WAVE_MAX_SPLIT, F64_WAVE_MIN_SLICE, c_tiles,
                                     f64_sm_split, wave_split)

    def split(M, N, K):
        return f64_sm_split(M, N, K, c_tiles(M, N, 64, 64))

    # Fastest of splits 1-8 timed (docs/bench/f64_split_model/); the rule before split them 3, 8, 3, 3, 11 and 5.
    assert split(119, 8057, 1097) == 1 and split(255, 4007, 1125) == 1 and split(180, 5277, 1055) == 1
    assert split(248, 5393, 6941) == 3 and split(220, 3390, 6763) == 3 and split(155, 6043, 11362) == 5
    assert split(222, 4340, 10311) == 7      # a long K: slices pay for the workspace
    assert split(241, 13693, 14843) <= F64_WAVE_MAX_SPLIT   # 856 tiles: a whole wave and more
    rng = __import__("random").Random(105)
    for _ in range(300):
        M, N, K = rng.randint(97, 256), rng.randint(1024, 16384), rng.randint(1, 20000)
        tiles = c_tiles(M, N, 64, 64)
        s = f64_sm_split(M, N, K, tiles)
        assert s == 1 or K // s >= (F64_WAVE_MIN_SLICE if tiles >= 396 else 256), (M, N, K, s)
        assert s <= (F64_WAVE_MAX_SPLIT if tiles >= 396 else 16)
        spec = TensorMatmul.default_spec({"M": M, "N": N, "K": max(K, 1)}, "float64")
        if spec.tile[:2] == (64, 64):
            busy = tiles >= F64_BUSY_TILES_PER_SM * 132
            assert spec.split_k == (f64_sm_split(M, N, max(K, 1), tiles) if busy
                                    else wave_split(tiles, 396, max(K, 1), whole_waves=True)), (M, N, K)


@pytest.mark.nvcc
@pytest.mark.parametrize("arch", ["sm_90", "sm_80"])
def test_representative_specs_compile_without_spills(arch):
    # sm_80 (the mma.sync path's first arch): the largest mma.sync default of each dtype.
    specs = representative() if arch == "sm_90" else [
        TensorMatmul.mma_default_spec({"M": 8192, "N": 8192, "K": 8192}, d) for d in DTYPES] + short_k_specs("bfloat16")
    with cf.ThreadPoolExecutor(max_workers=2) as ex:
        results = list(ex.map(lambda s: kgen.compile(s, arch), specs))
    spills = []
    for spec, res in zip(specs, results):
        main = "kgen_tc_wgmma" if spec.wgmma else "kgen_tc_matmul"
        assert main in res.resources
        assert ("kgen_tc_repack" in res.resources) == spec.repack != ("kgen_tc_matmul_elem" in res.resources)
        for entry, r in res.resources.items():
            if r["spill_stores"] or r["spill_loads"]:
                spills.append(f"{entry} of {spec.to_json()}: {r['spill_stores']} B spill stores, "
                              f"{r['spill_loads']} B spill loads")
        assert res.resources[main]["dynamic_shared_bytes"] == spec.shared_bytes
    assert not spills, f"ptxas spills ({arch}):\n" + "\n".join(spills)


@pytest.mark.nvcc
def test_pre_ampere_arch_is_refused_with_the_reason():
    with pytest.raises(CompileError, match="sm_80 or newer"):
        kgen.compile(TensorMatmul(dtype="float16"), "sm_75")


# ---- the Hopper kernel (instruction="wgmma") ----
def _wg(**kw) -> TensorMatmul:
    fields = dict(dtype="bfloat16", tile=(128, 256, 64), warp_tile=(64, 256), stages=4, instruction="wgmma")
    fields.update(kw)
    return TensorMatmul(**fields)


@pytest.mark.parametrize("fields, field", [
    (dict(instruction="tcgen05"), "instruction"),
    (dict(dtype="float64", tile=(128, 128, 64), warp_tile=(64, 128)), "instruction"),   # 16-bit and TF32 only
    (dict(dtype="float32", tf32=True), "BK"),                            # TF32: 32 k make 128 bytes
    (dict(tile=(256, 128, 64), warp_tile=(64, 128)), "BM"),
    (dict(tile=(128, 96, 64), warp_tile=(64, 96)), "BN"),
    (dict(tile=(128, 256, 32)), "BK"),
    (dict(warp_tile=(64, 64)), "warp_tile"),
    (dict(smem_layout="pad"), "smem_layout"),
    (dict(repack=False), "repack"),
    (dict(stages=5), "tile"),                                            # 5 x 48 KiB of stages
    (dict(instruction="mma_sync", tile=(128, 256, 32), warp_tile=(64, 64), persistent=True), "persistent"),
    (dict(cluster=4), "cluster"),
    (dict(instruction="mma_sync", tile=(128, 256, 32), warp_tile=(64, 64), cluster=2), "cluster"),
    (dict(persistent=True, cluster=2), "cluster"),
    (dict(split_k=2, split_merge="atomic"), "split_merge"),
    (dict(split_merge="cluster"), "split_merge"),                                    # split_k 1
    (dict(split_k=12, split_merge="cluster"), "split_merge"),                        # past a portable cluster
    (dict(split_k=2, split_merge="cluster", persistent=True), "split_merge"),
    (dict(split_k=2, split_merge="cluster", cluster=2), "split_merge"),
    (dict(instruction="mma_sync", tile=(128, 256, 32), warp_tile=(64, 64), split_k=2, split_merge="cluster"),
     "split_merge"),
    (dict(stages=2, split_k=2, split_merge="cluster"), "stages"),                   # 128 KB of sums, 96 KB of ring
])
def test_wgmma_fields_are_checked(fields, field):
    with pytest.raises(SpecError, match=field):
        _wg(**fields)


def test_wgmma_geometry_and_arch():
    s = _wg()
    # Two consumer warpgroups and a producer; stages of 128 + 256 rows of 128 bytes, barriers,
    # and the 1024 bytes that align the base.
    assert s.threads == 384 and s.consumers == 2 and s.accumulator_registers == 128
    assert s.shared_bytes == 4 * 384 * 128 + 16 * 4 + 1024
    assert s.launch_geometry(1000, 3000, 4096) == ((8 * 12, 1, 1), (384, 1, 1), s.shared_bytes)
    assert s.target_arch("sm_90") == "sm_90a" and TensorMatmul().target_arch("sm_80") == "sm_80"
    with pytest.raises(ValueError, match="sm_90"):
        s.target_arch("sm_100")
    assert kgen.spec_from_json(s.to_json()) == s and s.key != s.replace(instruction="mma_sync", tile=(128, 256, 64),
                                                                          warp_tile=(64, 64)).key
    # Persistent: one block an SM (of the GPU's count) walks tiles x K slices.
    p = s.replace(persistent=True)
    assert p.launch_geometry(1000, 3000, 4096) == ((96, 1, 1), (384, 1, 1), s.shared_bytes)
    assert p.launch_geometry(4096, 4096, 4096, sms=132)[0] == (132, 1, 1)
    assert p.launch_geometry(4096, 4096, 4096, sms=114)[0] == (114, 1, 1)
    split = p.replace(tile=(64, 64, 64), warp_tile=(64, 64), split_k=3)
    assert split.launch_geometry(100, 100, 4096)[0] == (2 * 2 * 3, 1, 1)
    assert p.key != s.key and kgen.spec_from_json(p.to_json()) == p


def test_wgmma_cluster_merge_runs_the_k_slices_of_a_tile_as_one_cluster():
    s = _wg(tile=(64, 128, 64), warp_tile=(64, 128), stages=9, split_k=4, split_merge="cluster")
    # Whole clusters along z: a short K leaves some slices empty, and still launches 4.
    assert s.split_plan(4096) == (4, 1024) and s.split_plan(100) == (2, 64)
    assert s.launch_geometry(30, 1000, 100)[0] == (8, 1, 4)
    assert s.replace(split_merge="workspace").launch_geometry(30, 1000, 100)[0] == (8, 1, 2)
    src = kgen.render(s)
    assert "__cluster_dims__(1, 1, SPLIT)" in src and "#define SPLIT 4" in src
    assert "ld.shared::cluster.v4.f32" in src and "cluster_merge_step(" in src
    assert "kgen_tc_splitk_reduce" not in src and "multicast" not in src
    workspace = kgen.render(s.replace(split_merge="workspace"))
    assert "kgen_tc_splitk_reduce" in workspace and "__cluster_dims__" not in workspace
    assert kgen.spec_from_json(s.to_json()) == s and s.key != s.replace(split_merge="workspace").key
    # The float32 sums lie over the stage ring: a ring too small for them is refused above.
    assert _wg(stages=3, split_k=2, split_merge="cluster").shared_bytes == _wg(stages=3).shared_bytes


def test_mma_sync_cluster_merge_adds_float64_k_slices_in_the_launch(monkeypatch):
    s = TensorMatmul(dtype="float64", tile=(64, 64, 16), warp_tile=(32, 32), stages=3, smem_layout="pad",
                     mma_shape="m16n8k16", min_blocks=3, split_k=3, split_merge="cluster", layout_b="col")
    assert s.launch_geometry(206, 1000, 100)[0] == (4 * 16, 1, 3)
    src = kgen.render(s)
    assert "__cluster_dims__(1, 1, SPLIT) __launch_bounds__(THREADS, 3)" in src and "#define SPLIT 3" in src
    assert "ld.shared::cluster.v2.f64" in src and "kgen_tc_splitk_reduce(const" not in src
    workspace = kgen.render(s.replace(split_merge="workspace"))
    assert "kgen_tc_wgmma" not in src and "kgen_tc_splitk_reduce(const" in workspace
    # float32 sums (TF32) load float pairs.
    t = TensorMatmul(dtype="float32", tf32=True, tile=(64, 64, 16), warp_tile=(32, 32), stages=4, smem_layout="pad",
                     split_k=2, split_merge="cluster")
    assert "ld.shared::cluster.v2.f32" in kgen.render(t)
    # Clusters are sm_90's: an older target is refused, and dispatch there falls back (prune_reason).
    assert s.target_arch("sm_90") == t.target_arch("sm_90") == "sm_90"
    with pytest.raises(ValueError, match="clusters"):
        t.target_arch("sm_80")
    assert "clusters" in t.prune_reason({"M": 206, "N": 1000, "K": 4096}, {"compute_capability": 80})
    # The sums lie over the stages: 128 x 128 doubles do not fit two stages of 128 x 128 x 16.
    with pytest.raises(SpecError, match="split_merge"):
        TensorMatmul(dtype="float64", tile=(128, 128, 16), warp_tile=(64, 64), stages=2, smem_layout="pad",
                     mma_shape="m16n8k8", split_k=2, split_merge="cluster")
    # The float64 defaults whose K is split 2-8 ways merge in a cluster where all their clusters
    # run at once (F64_CLUSTER_BLOCKS); more blocks, a split of 1 or of more than 8: a workspace.
    monkeypatch.setattr(tc, "F64_CLUSTER_BLOCKS", {3: {2: 344, 6: 371}})
    for problem, split, merge in (({"M": 197, "N": 2734, "K": 1741}, 2, "cluster"),    # 172 tiles x 2
                                  ({"M": 206, "N": 7074, "K": 4104}, 2, "workspace"),  # 444 tiles x 2
                                  ({"M": 30, "N": 3943, "K": 1983}, 6, "workspace"),   # 62 tiles x 6
                                  ({"M": 19, "N": 11390, "K": 4677}, 11, "workspace")):
        d = TensorMatmul.default_spec(problem, "float64")
        assert (d.split_k, d.split_merge) == (split, merge), d.to_json()
    monkeypatch.setattr(tc, "F64_CLUSTER_BLOCKS", {3: {2: 344, 6: 372}})
    assert TensorMatmul.default_spec({"M": 30, "N": 3943, "K": 1983}, "float64").split_merge == "cluster"
    monkeypatch.setattr(tc, "F64_CLUSTER_MERGE", False)
    assert TensorMatmul.default_spec({"M": 197, "N": 2734, "K": 1741}, "float64").split_merge == "workspace"


def test_mma_sync_cluster_merge_compiles_without_spills_for_sm_90():
    for layout_b, repack in (("col", True), ("row", True), ("col", False)):
        spec = TensorMatmul.default_spec({"M": 197, "N": 2734, "K": 1741}, "float64").replace(
            layout_b=layout_b, repack=repack, split_merge="cluster")
        res = kgen.compile(spec, "sm_90").resources
        assert "kgen_tc_splitk_reduce" not in res
        for name, r in res.items():
            assert r["spill_stores"] == 0 and r["registers"] <= 168, (name, r, spec.to_json())


def test_mma_sync_cluster_merge_takes_up_to_16_slices_and_compiles_without_spills():
    """The mma.sync kernel's cluster merge takes 2-16 K slices (a non-portable cluster, which the
    launch opts in to); the wgmma kernel's stays at 2-8. The 16-slice element tiles past
    ELEMENT_CLUSTER_MAX_K render and compile for sm_90 in both B orders with no spills."""
    from kgen.ops.tensorcore import MAX_CLUSTER_MERGE, MAX_CLUSTER_MERGE_MMA

    assert (MAX_CLUSTER_MERGE, MAX_CLUSTER_MERGE_MMA) == (8, 16)
    base = TensorMatmul(dtype="bfloat16", tile=(64, 64, 32), warp_tile=(32, 32), stages=2, min_blocks=4,
                        repack=False, split_merge="cluster", split_k=2)
    assert base.replace(split_k=16).split_k == 16
    with pytest.raises(SpecError, match="split_k is 2 to 16 with instruction='mma_sync'"):
        base.replace(split_k=17)
    with pytest.raises(SpecError, match="split_k is 2 to 8 with instruction='wgmma'"):
        _wg(tile=(64, 128, 64), warp_tile=(64, 128), stages=9, split_k=9, split_merge="cluster")
    spec = TensorMatmul.element_spec({"M": 29, "N": 41, "K": 7833}, "bfloat16")
    assert (spec.split_k, spec.split_merge) == (16, "cluster") and spec.split_plan(7833)[0] == 16
    for layout_b in ("row", "col"):
        s = spec.replace(layout_b=layout_b)
        src = kgen.render(s)
        assert "#define SPLIT 16" in src and "__cluster_dims__(1, 1, SPLIT)" in src
        assert "kgen_tc_splitk_reduce(const" not in src
        for name, r in kgen.compile(s, "sm_90").resources.items():
            assert r["spill_stores"] == 0 and r["registers"] <= 128, (name, r, s.to_json())


def test_wgmma_source_follows_the_layouts():
    rr = kgen.render(_wg())
    assert "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16" in rr and "kgen_tc_wgmma(" in rr
    assert "cp.async.bulk.tensor.2d" in rr and "kgen_tc_matmul(" not in rr and "ldmatrix.sync" not in rr
    assert "p, 1, 1, 0, 1;" in rr                                  # A K-major, B N-major (row-major B)
    assert "u0 = blockIdx.x, du = gridDim.x" not in rr
    assert "u0 = blockIdx.x, du = gridDim.x" in kgen.render(_wg(persistent=True))
    cc = kgen.render(_wg(dtype="float16", layout_a="col", layout_b="col", tile=(64, 128, 64), warp_tile=(64, 128)))
    assert "m64n128k16.f32.f16.f16" in cc and "p, 1, 1, 1, 0;" in cc


def test_wgmma_clusters_pair_tile_rows_and_multicast_half_of_b():
    from kgen.ops.tensorcore import _TensorMaps

    s = _wg(cluster=2)
    # Pairs of tile rows: an odd count of 128-row tiles is rounded up to whole pairs.
    assert s.launch_geometry(1000, 3000, 4096)[0] == (8 * 12, 1, 1)
    assert s.launch_geometry(900, 3000, 4096)[0] == (8 * 12, 1, 1)        # 8 tile rows of 128 (7.03 rounded up)
    assert s.launch_geometry(129, 256, 64)[0] == (2, 1, 1)
    assert s.replace(split_k=3).launch_geometry(300, 256, 4096)[0] == (4, 1, 3)
    src = kgen.render(s)
    assert "__cluster_dims__(CLUSTER, 1, 1)" in src and ".multicast::cluster" in src and "mapa.shared::cluster" in src
    assert "barrier.cluster.arrive" in src and "4 * CONSUMERS * CLUSTER" in src
    plain = kgen.render(_wg())
    assert "__cluster_dims__" not in plain and "multicast" not in plain
    # Each block loads half of B's box: BN/2 rows of a K-major B, BK/2 k rows of an N-major one.
    assert _TensorMaps(s, 1000, 3000, 4096, 4096, 3000).b[3] == (64, 32)
    assert _TensorMaps(s.replace(layout_b="col"), 1000, 3000, 4096, 4096, 4096).b[3] == (64, 128)
    assert _TensorMaps(_wg(), 1000, 3000, 4096, 4096, 3000).b[3] == (64, 64)
    assert kgen.spec_from_json(s.to_json()) == s and s.key != _wg().key


@pytest.mark.parametrize("layout_a, layout_b", [("row", "row"), ("row", "col"), ("col", "row"), ("col", "col")])
def test_wgmma_tf32_reads_both_operands_k_major(layout_a, layout_b):
    """TF32 wgmma has no transpose flags: an M-major A or N-major B is copied K-major first
    (kgen_tc_transpose), and the kernel then names both tiles K-major."""
    s = _wg(dtype="float32", tf32=True, tile=(128, 128, 32), warp_tile=(64, 128), layout_a=layout_a,
            layout_b=layout_b)
    assert s.transposes("A") == (layout_a == "col") and s.transposes("B") == (layout_b == "row")
    assert s.kernel_k_major("A") and s.kernel_k_major("B")
    src = kgen.render(s)
    assert "wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32" in src and "p, 1, 1;" in src
    assert ("kgen_tc_transpose(" in src) == (layout_a == "col" or layout_b == "row")
    # The 16-bit kernels read either order in place.
    assert not _wg(layout_a="col").transposes("A") and not _wg().transposes("B")
    # wgmma truncates TF32 inputs: twice the error bound of mma.sync's rounded fragments.
    mma = TensorMatmul(dtype="float32", tf32=True)
    assert s.input_roundoff == 2 * mma.input_roundoff == 2 ** -10
    assert s.tolerance_for({"M": 9, "N": 9, "K": 100}) > mma.tolerance_for({"M": 9, "N": 9, "K": 100})


def test_tf32_storage_that_needs_a_transposing_copy_of_a_large_operand_keeps_mma_sync():
    from kgen.ops.tensorcore import TF32_TRANSPOSE_MIN

    for M, N in ((1, 4096), (127, 4096), (TF32_TRANSPOSE_MIN - 1, 9000), (TF32_TRANSPOSE_MIN, 4096), (4096, 64)):
        p = {"M": M, "N": N, "K": 8192}   # past SMALL_PRODUCT_MACS: the wgmma default
        spec = TensorMatmul.default_spec(p, "float32")
        # Row-major B (N-major): wgmma only where the product has the rows to pay for the copy.
        rr = spec.for_layouts(p, layout_a="row", layout_b="row")
        assert rr.wgmma == (M >= TF32_TRANSPOSE_MIN), (M, N, rr.to_json())
        assert (rr.layout_a, rr.layout_b) == ("row", "row")
        if not rr.wgmma:
            assert rr == TensorMatmul.mma_default_spec(p, "float32")
        # K-major operands need no copy: the wgmma spec stands, with the layouts replaced.
        assert spec.for_layouts(p, layout_a="row", layout_b="col") == spec.replace(layout_b="col")
        # A column-major A is copied instead: the columns of B decide.
        cc = spec.for_layouts(p, layout_a="col", layout_b="col")
        assert cc.wgmma == (N >= TF32_TRANSPOSE_MIN) and cc.layout_a == "col"
    # 16-bit kernels read either order in place: nothing changes but the layouts ...
    p = {"M": 300, "N": 4096, "K": 4096}
    bf = TensorMatmul.default_spec(p, "bfloat16")
    assert bf.for_layouts(p, layout_a="col", layout_b="row") == bf.replace(layout_a="col")
    # ... except that A's rows as the wgmma N read A K-major: a column-major A takes the
    # streaming tiles (or the general ones) instead.
    for p in ({"M": 3, "N": 4096, "K": 4096}, {"M": 3, "N": 1024, "K": 1024}):
        few = TensorMatmul.default_spec(p, "bfloat16")
        assert few.swap_ab and few.for_layouts(p, layout_b="col") == few.replace(layout_b="col")
        col = few.for_layouts(p, layout_a="col", layout_b="row")
        rule = (TensorMatmul.stream_spec(p, "bfloat16") if TensorMatmul.stream_suits(3, p["N"], p["K"], "bfloat16")
                else TensorMatmul.general_wgmma_spec(p, "bfloat16"))
        assert not col.swap_ab and col == rule.replace(layout_a="col")


def test_dispatch_applies_the_call_layouts_through_the_family(monkeypatch):
    from kgen.tune import dispatch

    seen = []
    built = []

    class Probe(TensorMatmul):
        def for_layouts(self, problem, **layouts):
            seen.append((problem, layouts))
            return super().for_layouts(problem, **layouts)

    p = {"M": 100, "N": 4096, "K": 4096}
    probe = Probe(**{f: getattr(TensorMatmul.default_spec(p, "float32"), f)
                     for f in ("dtype", "tf32", "tile", "warp_tile", "stages", "instruction")})
    monkeypatch.setattr(dispatch, "select",
                        lambda cls, problem, dtype: dispatch.Choice(probe, "rule", problem, 0.0, 0.0))
    monkeypatch.setattr("kgen.core.kernel.build", lambda spec: built.append(spec) or spec)
    dispatch.forget()
    dispatch._kernel(TensorMatmul, p, "float32", False, {"layout_a": "row", "layout_b": "row"})
    dispatch.forget()
    assert seen == [(p, {"layout_a": "row", "layout_b": "row"})]
    assert [s.to_json() for s in built] == [TensorMatmul.mma_default_spec(p, "float32").to_json()]


@pytest.mark.nvcc
def test_wgmma_specs_compile_for_sm90a_without_spills():
    specs = [_wg(), _wg(layout_a="col", layout_b="col", out_dtype="float32", split_k=3),
             _wg(dtype="float16", tile=(64, 192, 64), warp_tile=(64, 192), stages=6, layout_a="col"),
             _wg(tile=(128, 128, 64), warp_tile=(64, 128), stages=6, layout_b="col", raster="col"),
             _wg(dtype="float32", tf32=True, tile=(128, 256, 32)),
             _wg(dtype="float32", tf32=True, tile=(64, 128, 32), warp_tile=(64, 128), stages=6, layout_a="col",
                 layout_b="col", split_k=2),
             _wg(persistent=True), _wg(dtype="float16", tile=(64, 128, 64), warp_tile=(64, 128), stages=5,
                                       persistent=True, split_k=3, layout_a="col"),
             _wg(cluster=2), _wg(dtype="float32", tf32=True, tile=(128, 192, 32), warp_tile=(64, 192), cluster=2,
                                 layout_b="col", split_k=2),
             # the streaming specs of few rows: the deepest rings of 64 x 128 and 64 x 256 tiles
             TensorMatmul.stream_spec({"M": 9, "N": 4096, "K": 8192}, "bfloat16").replace(layout_b="col"),
             TensorMatmul.stream_spec({"M": 200, "N": 16384, "K": 2048}, "float16"),
             # K slices merged in clusters: 8 of 64 x 128 tiles, 3 of two consumer warpgroups
             _wg(tile=(128, 128, 64), warp_tile=(64, 128), stages=4, split_k=3, split_merge="cluster",
                 layout_b="col"),
             # B read by the producer threads (b_realign): transposed tiles of 8 and 256 rows, two
             # boxes a thread, a cluster merge; 64-row tiles with an M-major A, persistent
             TensorMatmul.swap_spec({"M": 5, "N": 4096, "K": 4096}, "bfloat16").with_realigned_b(),
             TensorMatmul.swap_spec({"M": 250, "N": 3000, "K": 4096}, "float16").with_realigned_b(),
             TensorMatmul.swap_spec({"M": 38, "N": 1344, "K": 5824}, "bfloat16").with_realigned_b(),
             _wg(tile=(64, 128, 64), warp_tile=(64, 128), stages=4, layout_a="col", b_realign=True),
             _wg(tile=(128, 64, 64), warp_tile=(64, 64), stages=4, persistent=True, split_k=2, b_realign=True),
             TensorMatmul.swap_spec({"M": 100, "N": 3000, "K": 4097}, "bfloat16").replace(
                 layout_b="col").with_realigned_b(),
             _wg(tile=(128, 128, 64), warp_tile=(64, 128), stages=3, layout_b="col", split_k=2, b_realign=True),
             # transposed tiles of 128 columns in place of 64 x 256 ones (realign_swap_spec)
             TensorMatmul.default_spec({"M": 69, "N": 9537, "K": 9265}, "bfloat16").realign_swap_spec(
                 {"M": 69, "N": 9537, "K": 9265}),
             TensorMatmul.default_spec({"M": 250, "N": 12001, "K": 2049}, "float16").replace(
                 layout_b="col").realign_swap_spec({"M": 250, "N": 12001, "K": 2049}),
             # B by row sets (b_phased): transposed tiles of 8, 40 and 168 rows, 64 and 128 columns,
             # K whole and merged in clusters
             TensorMatmul.swap_spec({"M": 5, "N": 4096, "K": 4096}, "bfloat16").with_phased_b(),
             TensorMatmul.swap_spec({"M": 34, "N": 10212, "K": 2038}, "bfloat16").with_phased_b(),
             TensorMatmul.swap_spec({"M": 168, "N": 5955, "K": 8418}, "float16").with_phased_b(),
             TensorMatmul.swap_spec({"M": 150, "N": 12001, "K": 1025}, "bfloat16").with_phased_b(),
             TensorMatmul(dtype="float16", tile=(24, 128, 64), warp_tile=(24, 64), stages=6, instruction="wgmma",
                          swap_ab=True, split_k=3, b_phased=True),
             # row sets two blocks an SM with K in clusters (phased_fill_spec), W.t() and row-major
             TensorMatmul.default_spec({"M": 60, "N": 5000, "K": 8006}, "bfloat16").for_layouts(
                 {"M": 60, "N": 5000, "K": 8006}, layout_a="row", layout_b="col", b_phased=True),
             TensorMatmul.default_spec({"M": 109, "N": 5635, "K": 4044}, "bfloat16").for_layouts(
                 {"M": 109, "N": 5635, "K": 4044}, layout_a="row", layout_b="col", b_phased=True),
             TensorMatmul.default_spec({"M": 6, "N": 2525, "K": 6095}, "bfloat16").for_layouts(
                 {"M": 6, "N": 2525, "K": 6095}, layout_a="row", layout_b="row", b_phased=True)]
    with cf.ThreadPoolExecutor(max_workers=2) as ex:
        results = list(ex.map(lambda s: kgen.compile(s, "sm_90"), specs))
    for spec, res in zip(specs, results):
        assert res.arch == "sm_90a"
        r = res.resources["kgen_tc_wgmma"]
        assert not (r["spill_stores"] or r["spill_loads"]), f"{spec.to_json()} spills: {r}"
        assert r["dynamic_shared_bytes"] == spec.shared_bytes
        assert ("kgen_tc_splitk_reduce" in res.resources) == (spec.split_k > 1 and spec.split_merge == "workspace")
        assert ("kgen_tc_transpose" in res.resources) == (spec.transposes("A") or spec.transposes("B"))
        # ptxas must not serialize the wgmmas (warning C7515: accumulators written in between;
        # C7520: b_phased's operand registers rewritten while a wgmma may read them).
        assert "C7515" not in res.log and "C7520" not in res.log, spec.to_json()
        assert ("kgen_tc_phase_a" in res.resources) == spec.b_phased


def test_dispatch_runs_the_wgmma_default_on_sm90_only():
    from kgen.tune.device import arch_limits
    from kgen.tune.dispatch import _default

    p = {"M": 3000, "N": 5000, "K": 700}
    on_h100 = _default(TensorMatmul, p, "bfloat16", arch_limits("sm_90"))
    on_a100 = _default(TensorMatmul, p, "bfloat16", arch_limits("sm_80"))
    assert on_h100 == TensorMatmul.default_spec(p, "bfloat16") and on_h100.wgmma
    assert on_a100 == TensorMatmul.mma_default_spec(p, "bfloat16") and not on_a100.wgmma
    assert "sm_90" in on_h100.prune_reason(p, arch_limits("sm_89"))
    # TF32 runs the wgmma kernel on sm_90 too, mma.sync elsewhere.
    tf32_h100 = _default(TensorMatmul, p, "float32", arch_limits("sm_90"))
    tf32_a100 = _default(TensorMatmul, p, "float32", arch_limits("sm_80"))
    assert tf32_h100.wgmma and tf32_h100.tile[2] == 32 and tf32_h100.tf32
    assert tf32_a100 == TensorMatmul.mma_default_spec(p, "float32") and not tf32_a100.wgmma
    # float64 keeps the mma.sync kernel everywhere: sm_90's m16n8k16 shape there, m8n8k4 elsewhere.
    f64_h100 = _default(TensorMatmul, p, "float64", arch_limits("sm_90"))
    f64_a100 = _default(TensorMatmul, p, "float64", arch_limits("sm_80"))
    assert not f64_h100.wgmma and f64_h100.mma_shape == "m16n8k16"
    assert f64_a100 == TensorMatmul.mma_default_spec(p, "float64") and f64_a100.mma_shape == ""


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
def test_wgmma_default_minimises_waves_times_streamed_rows(dtype):
    from kgen.ops.tensorcore import _SMS, _WGMMA_TILES, TALL_ROWS

    from kgen.ops.tensorcore import SMALL_PRODUCT_MACS

    rng = __import__("random").Random(5)
    for _ in range(300):
        M, N, K = (int(2 ** rng.uniform(0, 14)) for _ in range(3))
        s = TensorMatmul.default_spec({"M": M, "N": N, "K": K}, dtype)
        if dtype != "float32" and TensorMatmul.swap_suits(M, N, K, dtype):
            assert s == TensorMatmul.swap_spec({"M": M, "N": N, "K": K}, dtype)   # A's rows as the wgmma N
            continue
        if M * N * K <= SMALL_PRODUCT_MACS:
            # Small products: one launch of the mma.sync kernel with element loads (a short K's
            # in tiles that share an SM).
            want = (TensorMatmul.element_spec({"M": M, "N": N, "K": K}, dtype) if dtype != "float32"
                    else TensorMatmul.mma_default_spec({"M": M, "N": N, "K": K}, dtype).replace(repack=False))
            assert s == want
            continue
        BM, BN, BK = s.tile
        assert s.wgmma and BK * ITEMSIZE[dtype] == 128 and s.shared_bytes <= LIMITS["max_shared_per_block_optin"]
        if TensorMatmul.stream_suits(M, N, K, dtype):
            # 65-128 rows against weights past one wave of 64-column transposed tiles: one such
            # tile of 128 columns (SWAP_OVER_STREAM_ROWS); else the streaming tiles.
            over = (65 <= M <= 128 and K >= 512 and -(-N // 64) > _SMS and -(-N // 128) <= _SMS)
            want = TensorMatmul.stream_spec({"M": M, "N": N, "K": K}, dtype)
            assert s == (want if not over else s.replace(tile=(-(-M // 8) * 8, 128, BK))) and s.swap_ab == over
            continue

        def cost(t, M=M, N=N):
            return -(-(-(-M // t[0]) * -(-N // t[1])) // _SMS) * (t[0] + t[1])
        if BM == 192:   # A's rows in one tile (TALL_ROWS; its own test below)
            assert dtype != "float32" and TALL_ROWS[0] <= M <= TALL_ROWS[1], (M, N, K, s.tile)
            continue
        assert cost((BM, BN)) == min(cost(t) for t in _WGMMA_TILES), (M, N, K, s.tile)
        tiles = -(-M // BM) * -(-N // BN)
        assert (s.split_k > 1) == (tiles < 32 and K >= 2048)
    # Large products keep the 128x256 block; few-row ones get narrow blocks and no split.
    BK = 128 // ITEMSIZE[dtype]
    assert TensorMatmul.default_spec({"M": 8192, "N": 8192, "K": 8192}, dtype).tile == (128, 256, BK)
    few = TensorMatmul.default_spec({"M": 17, "N": 4096, "K": 512}, dtype)
    assert few.tile == (64, 64, BK) and few.split_k == 1 and not few.swap_ab   # K below 1024: not transposed


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_129_to_192_rows_on_the_general_tiles_take_one_row_tile_of_192(dtype):
    from kgen.ops.tensorcore import (_SMS, CLUSTER_WAVE_BLOCKS, SMALL_PRODUCT_MACS, TALL_BLOCK_COST, TALL_ROWS,
                                     WAVE_TAIL_COST)

    def before(M, N, K):   # the cost model's tile alone
        return TensorMatmul.general_wgmma_spec({"M": M, "N": N, "K": K}, dtype, tall=False)

    def waves(t, M, N, K):   # (waves of blocks, wave_tail): one launch, or the last tiles split
        rows, cols = -(-M // t[0]), -(-N // t[1])
        plain = (-(-(rows * cols) // _SMS), 1)
        first = rows * cols // _SMS * _SMS // rows   # columns of tiles in whole waves
        rest = rows * (cols - first)
        slices = [s for s in range(2, 9) if rest * s <= CLUSTER_WAVE_BLOCKS[s] and K // s >= 256]
        measured = (65 <= M <= 192 and rows == 1) or (193 <= M <= 256 and rows <= 2)
        if not measured or not 0 < first < cols or not slices:
            return plain
        return min(plain, (rows * first / _SMS + 1 / max(slices) + WAVE_TAIL_COST, max(slices)))

    rng = __import__("random").Random(20433)
    seen, tails = set(), 0
    for _ in range(400):
        M = rng.randint(100, 220)
        N, K = rng.randint(4096, 70000), rng.randint(512, 16384)
        s, old = TensorMatmul.general_wgmma_spec({"M": M, "N": N, "K": K}, dtype), before(M, N, K)
        if not TALL_ROWS[0] <= M <= TALL_ROWS[1] or old.tile[:2] not in TALL_BLOCK_COST:
            want = old.tile
        else:
            BM, BN = min((old.tile[:2], (192, 128), (192, 192)),
                         key=lambda t, M=M, N=N, K=K: waves(t, M, N, K)[0] * TALL_BLOCK_COST[t])
            want = (BM, BN, 64)
        assert s.tile == want and s.warp_tile == (64, want[1]), (M, N, K, s.tile, old.tile)
        assert s.wave_tail == (waves(want, M, N, K)[1] if s.split_k == 1 else 1), (M, N, K, s.wave_tail)
        tails += s.wave_tail > 1
        assert s.threads == 128 * (want[0] // 64 + 1) and s.shared_bytes <= LIMITS["max_shared_per_block_optin"]
        seen.add(want[:2])
        # The transposed and streaming tiles keep theirs (the rule is the general tiles').
        d = TensorMatmul.default_spec({"M": M, "N": N, "K": K}, dtype)
        if TensorMatmul.swap_suits(M, N, K, dtype):
            assert d == TensorMatmul.swap_spec({"M": M, "N": N, "K": K}, dtype)
        elif TensorMatmul.stream_suits(M, N, K, dtype):
            assert d == _streaming_default(M, N, K, dtype)
        elif M * N * K > SMALL_PRODUCT_MACS:
            assert d == _general_or_wide_swap(s, M, N, K, dtype)
    assert {(192, 192), (192, 128), (128, 256), (64, 256)} <= seen and tails >= 20
    # A fused MLP layer against a prefill chunk of 169 tokens (Llama-3-8B's gate and up, 2 x 14336):
    # 224 blocks of 192 x 128 (2 waves) against 150 of 192 x 192 (2 waves, each block slower).
    assert TensorMatmul.general_wgmma_spec({"M": 169, "N": 28672, "K": 4096}, dtype).tile == (192, 128, 64)
    # 115 blocks of 192 x 192 (1 wave) against 258 of 64 x 256 (2 waves).
    assert TensorMatmul.general_wgmma_spec({"M": 150, "N": 22016, "K": 4096}, dtype).tile == (192, 192, 64)
    # float32 and 193+ rows keep the cost model's tiles.
    assert TensorMatmul.general_wgmma_spec({"M": 169, "N": 28672, "K": 4096}, "float32").tile[0] != 192
    assert TensorMatmul.default_spec({"M": 200, "N": 28672, "K": 4096}, dtype).tile[0] != 192


def test_192_row_tiles_are_validated_and_compile_without_spills():
    with pytest.raises(ValueError, match=r"tile\[1\] \(BN\)"):
        TensorMatmul(dtype="bfloat16", tile=(192, 256, 64), warp_tile=(64, 256), stages=3, instruction="wgmma")
    with pytest.raises(ValueError, match=r"tile\[0\] \(BM\)"):
        TensorMatmul(dtype="bfloat16", tile=(256, 128, 64), warp_tile=(64, 128), stages=3, instruction="wgmma")
    # They do not read B in place (b_realign, measured on the others): asked for it, they give
    # way to the cost model's tiles and what those take for such a B (here the transposed tiles).
    tall = TensorMatmul(dtype="bfloat16", tile=(192, 128, 64), warp_tile=(64, 128), stages=5, instruction="wgmma")
    assert tall.with_realigned_b() == tall
    with pytest.raises(ValueError, match="b_realign"):
        tall.replace(b_realign=True)
    p = {"M": 150, "N": 12001, "K": 333}
    spec = TensorMatmul.default_spec(p, "bfloat16")
    got = spec.for_layouts(p, layout_b="col", b_realign=True)
    assert spec.tile[0] == 192 and got.b_realign and got.swap_ab
    assert got == TensorMatmul.general_wgmma_spec(p, "bfloat16", tall=False).for_layouts(p, layout_b="col",
                                                                                         b_realign=True)
    if not shutil.which("nvcc"):
        pytest.skip("nvcc not found")
    for BN, stages in ((128, 5), (192, 4)):
        spec = TensorMatmul(dtype="bfloat16", tile=(192, BN, 64), warp_tile=(64, BN), stages=stages,
                            instruction="wgmma")
        assert spec.threads == 512
        info = kgen.compile(spec, arch="sm_90")
        entry = info.resources["kgen_tc_wgmma"]
        assert entry["spill_stores"] == 0 and entry["registers"] <= 128, entry


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_few_16_bit_rows_stream_with_deep_rings_and_a_k_split_filling_one_wave(dtype):
    from kgen.ops.tensorcore import (_SMS, CLUSTER_WAVE_BLOCKS, SMALL_PRODUCT_MACS, STREAM_CLUSTER_SPLITS,
                                     STREAM_MAX_ROWS, STREAM_MIN_BYTES, STREAM_MIN_SIDE, STREAM_MIN_SLICE_K,
                                     STREAM_SPLITS)

    rng = __import__("random").Random(11)
    for _ in range(300):
        M = int(2 ** rng.uniform(0, 8.5))
        N, K = (int(2 ** rng.uniform(10, 14.2)) for _ in range(2))
        s = TensorMatmul.default_spec({"M": M, "N": N, "K": K}, dtype)
        if TensorMatmul.swap_suits(M, N, K, dtype):
            # Up to 64 rows run transposed tiles; the streaming rule below serves them where A
            # is column-major (for_layouts).
            assert s == TensorMatmul.swap_spec({"M": M, "N": N, "K": K}, dtype)
            if M * N * K <= SMALL_PRODUCT_MACS:
                continue
            s = s.for_layouts({"M": M, "N": N, "K": K}, layout_a="col").replace(layout_a="row")
        if M * N * K <= SMALL_PRODUCT_MACS:   # small products keep one element-load launch
            assert not s.wgmma and not TensorMatmul.stream_suits(M, N, K, dtype)
            continue
        general = TensorMatmul.general_wgmma_spec({"M": M, "N": N, "K": K}, dtype)
        grid = general.launch_geometry(M, N, K)[0]
        rows = -(-M // 64)
        stream_tiles = rows * -(-N // (256 if rows * -(-N // 256) >= _SMS // 2 else 128))
        # A weight of 16 MB or more streams; a smaller one where the general tiles (before a
        # K split) are fewer than half the SMs; neither where the stream's tiles pass one wave.
        if M > STREAM_MAX_ROWS or N < STREAM_MIN_SIDE or K < STREAM_MIN_SIDE or stream_tiles > _SMS or (
                N * K * 2 < STREAM_MIN_BYTES and grid[0] >= _SMS // 2):
            assert not TensorMatmul.stream_suits(M, N, K, dtype)
            assert s == _general_or_wide_swap(general, M, N, K, dtype)
            continue
        if s.swap_ab:   # 65-128 rows against a wide weight: one transposed tile (SWAP_OVER_STREAM_ROWS)
            assert s == _streaming_default(M, N, K, dtype) != TensorMatmul.stream_spec({"M": M, "N": N, "K": K}, dtype)
            continue
        BM, BN, BK = s.tile
        assert s.wgmma and BM == 64 and s.warp_tile == (64, BN) and BK * ITEMSIZE[dtype] == 128
        rows = -(-M // 64)
        assert BN == (256 if rows * -(-N // 256) >= _SMS // 2 else 128)
        # The deepest ring that fits: one stage more would not.
        assert s.shared_bytes <= LIMITS["max_shared_per_block_optin"]
        assert s.stages == 16 or s.replace(stages=2).shared_bytes + (s.stages - 1) * (
            (64 + BN) * 128 + 16) > LIMITS["max_shared_per_block_optin"]
        # The split: the most slices of at least STREAM_MIN_SLICE_K that keep one wave of blocks;
        # one row tile merges them in clusters of 2, 4 or 8 that all run at once, more rows
        # in the workspace.
        tiles = rows * -(-N // BN)
        if rows == 1:
            ok = [x for x in STREAM_CLUSTER_SPLITS
                  if x == 1 or (K >= STREAM_MIN_SLICE_K * x and tiles * x <= CLUSTER_WAVE_BLOCKS[x])]
            assert s.split_merge == ("cluster" if max(ok) > 1 else "workspace")
            assert s.launch_geometry(M, N, K)[0] == (tiles, 1, s.split_k)
        else:
            ok = [x for x in STREAM_SPLITS if x == 1 or (K >= STREAM_MIN_SLICE_K * x and tiles * x <= _SMS)]
            assert s.split_merge == "workspace"
        assert s.split_k == max(ok)
        assert s.split_k == 1 or s.split_plan(K)[0] * tiles <= _SMS
    # Not for float32 (TF32) nor for many rows.
    assert not TensorMatmul.stream_suits(16, 4096, 4096, "float32")
    assert not TensorMatmul.stream_suits(STREAM_MAX_ROWS + 1, 4096, 4096, dtype)
    # Below 16 MB of B, the general tiles where they are half the SMs or more (105 tiles of
    # 64 x 64); 17 tiles split in 4 still stream.
    assert not TensorMatmul.stream_suits(39, 6720, 1088, dtype) and TensorMatmul.stream_suits(39, 8192, 1024, dtype)
    assert TensorMatmul.stream_suits(16, 2048, 4095, dtype) and TensorMatmul.stream_suits(19, 1088, 6400, dtype)
    # A narrow weight splits its K (12 tiles of 64 x 128, clusters of 8); a wide one streams
    # unsplit; two row tiles of a narrow one split in a workspace (24 tiles, 4 slices).
    narrow = TensorMatmul.stream_spec({"M": 4, "N": 1536, "K": 8192}, dtype)
    assert narrow.split_k == 8 and narrow.split_merge == "cluster"
    tall = TensorMatmul.stream_spec({"M": 100, "N": 1536, "K": 8192}, dtype)
    assert tall.split_k == 4 and tall.split_merge == "workspace"
    wide = TensorMatmul.stream_spec({"M": 4, "N": 16384, "K": 4096}, dtype)
    assert wide.tile[1] == 128 and wide.split_k == 1 and wide.stages == 9
    # 200 rows against 128 tiles of 64 columns run transposed; against 256, the stream or the
    # general tiles.
    assert TensorMatmul.default_spec({"M": 200, "N": 8192, "K": 4096}, dtype).tile[:2] == (200, 64)
    # Four row tiles of 64 x 256 past 132 tiles would run two waves: the general tiles instead.
    assert TensorMatmul.general_wgmma_spec({"M": 200, "N": 16384, "K": 4096}, dtype).tile[:2] == (128, 256)
    assert not TensorMatmul.stream_suits(200, 16384, 4096, dtype)


# ---- sm_90's float64 m16n8k16 shape ----
def test_float64_m16n8k16_fields_geometry_and_arch():
    s = TensorMatmul(dtype="float64", tile=(64, 64, 16), warp_tile=(32, 32), stages=4, smem_layout="pad",
                     mma_shape="m16n8k16")
    assert s.mma_mnk == (16, 8, 16) and s.accumulator_registers == 2 * 4 * 4 * 2
    with pytest.raises(SpecError, match="mma_shape"):
        TensorMatmul(dtype="float16", mma_shape="m16n8k16")
    with pytest.raises(SpecError, match="mma_shape"):
        s.replace(mma_shape="m16n8k4")
    with pytest.raises(SpecError, match="BK"):
        s.replace(tile=(64, 64, 8))                       # BK below the instruction's 16
    assert s.target_arch("sm_90") == "sm_90" and s.target_arch("sm_100") == "sm_100"
    with pytest.raises(ValueError, match="sm_90"):
        s.target_arch("sm_80")
    from kgen.tune.device import arch_limits
    assert "sm_90" in s.prune_reason({"M": 512, "N": 512, "K": 512}, arch_limits("sm_80"))
    src = kgen.render(s)
    assert "mma.sync.aligned.m16n8k16.row.col.f64.f64.f64.f64" in src and "m8n8k4" not in src


@pytest.mark.nvcc
def test_float64_m16n8k16_compiles_for_sm90_without_spills():
    specs = [TensorMatmul(dtype="float64", tile=(64, 64, 16), warp_tile=(32, 32), stages=4, smem_layout="pad",
                          mma_shape="m16n8k16"),
             TensorMatmul(dtype="float64", tile=(64, 128, 32), warp_tile=(32, 32), stages=3, mma_shape="m16n8k16",
                          layout_a="col", split_k=2)]
    # A 32x64 warp tile needs ~256 registers (128 of accumulators): refused before nvcc sees it.
    big = specs[1].replace(warp_tile=(32, 64))
    assert "spills" in big.prune_reason({"M": 512, "N": 512, "K": 512}, LIMITS)
    for spec in specs:
        r = kgen.compile(spec, "sm_90").resources["kgen_tc_matmul"]
        assert not (r["spill_stores"] or r["spill_loads"]), (spec.to_json(), r)


def test_float64_m16n8k8_fields_and_source():
    s = TensorMatmul(dtype="float64", tile=(128, 64, 16), warp_tile=(64, 32), stages=3, smem_layout="pad",
                     mma_shape="m16n8k8")
    # 4 x 4 tiles of 16 x 8 doubles: 128 accumulator registers, the most validate allows.
    assert s.mma_mnk == (16, 8, 8) and s.accumulator_registers == 128
    with pytest.raises(SpecError, match="BK"):
        s.replace(tile=(128, 64, 4))
    with pytest.raises(SpecError, match="mma_shape"):
        TensorMatmul(dtype="float32", tf32=True, mma_shape="m16n8k8")
    assert "sm_90" in s.prune_reason({"M": 512, "N": 512, "K": 512}, __import__("kgen.tune.device").tune.device
                                     .arch_limits("sm_80"))
    src = kgen.render(s)
    # 4 doubles of A, 2 of B a thread; the operand list follows the fragment sizes.
    assert "mma.sync.aligned.m16n8k8.row.col.f64.f64.f64.f64" in src and "{ %4, %5, %6, %7}, " in src
    assert "{ %8, %9}, { %0, %1, %2, %3}" in src and "typedef double frag_a_t[4];" in src
    k16 = kgen.render(s.replace(mma_shape="m16n8k16", warp_tile=(32, 32)))
    assert "{ %12, %13, %14, %15}, { %0, %1, %2, %3}" in k16 and "typedef double frag_b_t[4];" in k16
    # Its smaller fragments leave room for 64x32 warp tiles at one or two 128-thread blocks an SM,
    # not at three.
    assert s.prune_reason({"M": 4096, "N": 4096, "K": 4096}, LIMITS) is None
    assert "spills" in s.replace(min_blocks=3).prune_reason({"M": 4096, "N": 4096, "K": 4096}, LIMITS)


@pytest.mark.nvcc
def test_float64_m16n8k8_large_warp_tiles_compile_for_sm90_without_spills():
    specs = [TensorMatmul(dtype="float64", tile=(128, 64, 16), warp_tile=(64, 32), stages=3, smem_layout="pad",
                          mma_shape="m16n8k8"),
             TensorMatmul(dtype="float64", tile=(64, 128, 16), warp_tile=(32, 64), stages=4, mma_shape="m16n8k8",
                          layout_b="col", split_k=2, min_blocks=2)]
    # BK = 32 or an M-major A spill next to 128 accumulator registers: refused before nvcc sees them.
    for big in (specs[0].replace(tile=(128, 64, 32)), specs[0].replace(layout_a="col")):
        assert "spills" in big.prune_reason({"M": 512, "N": 512, "K": 512}, LIMITS)
    with cf.ThreadPoolExecutor(max_workers=2) as ex:
        results = list(ex.map(lambda s: kgen.compile(s, "sm_90").resources["kgen_tc_matmul"], specs))
    for spec, r in zip(specs, results):
        assert not (r["spill_stores"] or r["spill_loads"]), (spec.to_json(), r)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_few_16_bit_rows_run_transposed_tiles_of_one_wave(dtype):
    """swap_spec on random few-row shapes: the rows rounded up to a multiple of 8, 64
    columns a block (128 past twice the SMs' tiles, or at 65-256 rows where SWAP_128_MIN_GAIN
    and SWAP_128_MIN_K or SWAP_LONG_K say), the deepest ring one block an SM holds
    (half of it for two blocks where the tiles pass the SMs), and the most K slices in
    clusters that all run at once; just past the SMs, where 128 columns two blocks an SM take
    K in SWAP_WIDE_MIN_SLICES or more such slices, those; each spec valid and within shared
    memory."""
    from kgen.ops.tensorcore import (_SMS, CLUSTER_WAVE_BLOCKS, PHASED_CLUSTER_BLOCKS, SM_SHARED_BYTES,
                                     STREAM_MIN_SIDE, STREAM_MIN_SLICE_K, SWAP_MAX_ROWS, SWAP_SPLITS,
                                     SWAP_128_MIN_GAIN, SWAP_128_MIN_K, SWAP_LONG_K, SWAP_WIDE_MIN_SLICES,
                                     SWAP_WIDE_ROWS, _wgmma_stage_bytes)

    rng = __import__("random").Random(17)
    for _ in range(600):
        M = int(2 ** rng.uniform(0, 8.5))
        N, K = (int(2 ** rng.uniform(9.5, 15)) for _ in range(2))
        suits = TensorMatmul.swap_suits(M, N, K, dtype)
        # Up to 64 rows against any weight; up to 256 against one wave of 64-column tiles.
        wide = M <= SWAP_WIDE_ROWS == 64 or -(-N // 64) <= _SMS
        assert suits == (M <= SWAP_MAX_ROWS == 256 and wide and N >= STREAM_MIN_SIDE and K >= STREAM_MIN_SIDE)
        if not suits:
            continue
        s = TensorMatmul.default_spec({"M": M, "N": N, "K": K}, dtype)
        BM, BN, BK = s.tile
        assert s.swap_ab and s.wgmma and s.layout_a == "row" and s.warp_tile == (BM, 64)
        assert BM % 8 == 0 and M <= BM < M + 8 and BK * ITEMSIZE[dtype] == 128
        wide_slices = max(x for x in SWAP_SPLITS
                          if x == 1 or (K >= STREAM_MIN_SLICE_K * x and -(-N // 128) * x <= PHASED_CLUSTER_BLOCKS[x]))
        band = _SMS < -(-N // 64) <= 2 * _SMS and wide_slices >= SWAP_WIDE_MIN_SLICES
        # 65-256 rows: 128 columns where their blocks are at least a quarter more, K of 3072 or more.
        gain = BM > SWAP_WIDE_ROWS and -(-N // 64) <= _SMS and K >= SWAP_128_MIN_K == 3072 and \
            -(-N // 128) * most(-(-N // 128), K) >= SWAP_128_MIN_GAIN * -(-N // 64) * most(-(-N // 64), K)
        # 65-256 rows whose 64-column tiles keep K whole in one wave, K of SWAP_LONG_K or more:
        # 128 columns with K in the most slices whose blocks fit the SMs (SWAP_LONG_K).
        fill = max(x for x in SWAP_SPLITS if x == 1 or (K >= STREAM_MIN_SLICE_K * x and -(-N // 128) * x <= _SMS))
        long_k = (BM > SWAP_WIDE_ROWS and -(-N // 64) <= _SMS and not gain and K >= SWAP_LONG_K == 12288
                  and most(-(-N // 64), K) == 1 and fill > 1)
        assert BN == (64 if -(-N // 64) <= 2 * _SMS and not band and not gain and not long_k else 128)
        tiles = -(-N // BN)
        blocks = 2 if tiles > _SMS or band else 1
        stage = _wgmma_stage_bytes(BM, BN)
        # The deepest ring with which `blocks` blocks fit one SM: one stage more would not.
        assert blocks * (s.shared_bytes + 1024) <= SM_SHARED_BYTES
        assert s.stages == 16 or blocks * (s.shared_bytes + stage + 1024) > SM_SHARED_BYTES or \
            s.shared_bytes + stage > LIMITS["max_shared_per_block_optin"]
        ok = [x for x in SWAP_SPLITS
              if x == 1 or (blocks == 1 and K >= STREAM_MIN_SLICE_K * x and tiles * x <= CLUSTER_WAVE_BLOCKS[x])]
        assert s.split_k == (wide_slices if band else fill if long_k else max(ok))
        # SWAP_LONG_K's slices past what clusters run at once merge in a workspace.
        past = long_k and tiles * s.split_k > CLUSTER_WAVE_BLOCKS[s.split_k]
        assert s.split_merge == ("cluster" if s.split_k > 1 and not past else "workspace")
        assert s.launch_geometry(M, N, K)[0] == (tiles, 1, s.split_k)
        assert s.threads == 128 * (BN // 64 + 1) and s.accumulator_registers == BM // 2
    # 1 x 4096 x 4096 (a decode step's product): 8 rows, 64 tiles of 64 columns, 2 slices.
    one = TensorMatmul.default_spec({"M": 1, "N": 4096, "K": 4096}, dtype)
    assert one.tile[:2] == (8, 64) and one.split_k == 2 and one.split_merge == "cluster"
    # 195 rows against 3840 columns: 60 tiles of 200 rows, K in 2 slices (3 would be 180
    # blocks, past the 117 that clusters of 3 run at once); 17 tiles of 1088 columns take 6.
    tall = TensorMatmul.default_spec({"M": 195, "N": 3840, "K": 15936}, dtype)
    assert tall.tile[:2] == (200, 64) and tall.split_k == 2 and tall.split_merge == "cluster"
    assert TensorMatmul.default_spec({"M": 158, "N": 1088, "K": 2816}, dtype).split_k == 6
    # Past 256 rows the transposed tiles stop, and past 64 rows against more than 132 tiles of
    # 64 columns: 65-128 rows take one tile of 128 there (SWAP_OVER_STREAM_ROWS), more the
    # streaming tiles.
    assert not TensorMatmul.default_spec({"M": 257, "N": 4096, "K": 4096}, dtype).swap_ab
    assert TensorMatmul.default_spec({"M": 65, "N": 8448, "K": 4096}, dtype).swap_ab
    assert TensorMatmul.default_spec({"M": 65, "N": 8512, "K": 4096}, dtype).tile[:2] == (72, 128)
    assert not TensorMatmul.default_spec({"M": 129, "N": 8512, "K": 4096}, dtype).swap_ab
    assert TensorMatmul.default_spec({"M": 64, "N": 8512, "K": 4096}, dtype).swap_ab
    # Just past the SMs: 146 tiles of 64 -> 73 of 128, two blocks an SM, K in 3 slices (219
    # blocks, within the 237 that clusters of 3 run at once two an SM); 169 tiles of 64 would
    # take only 2 slices of 128 columns and keep 64 columns with K whole.
    near = TensorMatmul.default_spec({"M": 5, "N": 9319, "K": 11800}, dtype)
    assert near.tile[:2] == (8, 128) and near.split_k == 3 and near.split_merge == "cluster"
    deeper = near.shared_bytes + _wgmma_stage_bytes(8, 128)
    assert 2 * (near.shared_bytes + 1024) <= SM_SHARED_BYTES < 2 * (deeper + 1024)
    kept = TensorMatmul.default_spec({"M": 4, "N": 10773, "K": 7272}, dtype)
    assert kept.tile[:2] == (8, 64) and kept.split_k == 1
    # 16384 columns: 256 tiles of 64, two blocks an SM, K whole.
    wide = TensorMatmul.default_spec({"M": 30, "N": 16384, "K": 4096}, dtype)
    assert wide.tile[:2] == (32, 64) and wide.split_k == 1 and 2 * (wide.shared_bytes + 1024) <= SM_SHARED_BYTES


@pytest.mark.parametrize("fields, field", [
    (dict(swap_ab=True, instruction="mma_sync", tile=(16, 64, 64), warp_tile=(16, 64)), "swap_ab"),
    (dict(swap_ab=True, dtype="float32", tf32=True, tile=(16, 64, 32), warp_tile=(16, 64)), "swap_ab"),
    (dict(swap_ab=True, tile=(12, 64, 64), warp_tile=(12, 64)), "tile[0] (BM)"),
    (dict(swap_ab=True, tile=(264, 64, 64), warp_tile=(264, 64)), "tile[0]"),
    (dict(swap_ab=True, tile=(16, 64, 64), warp_tile=(16, 64), layout_a="col"), "swap_ab"),
    (dict(swap_ab=True, tile=(16, 64, 64), warp_tile=(16, 64), persistent=True), "swap_ab"),
    (dict(swap_ab=True, tile=(16, 64, 64), warp_tile=(16, 64), cluster=2), "swap_ab"),
    (dict(swap_ab=True, tile=(16, 96, 64), warp_tile=(16, 64)), "tile[1] (BN)"),
    (dict(swap_ab=True, tile=(16, 64, 64), warp_tile=(64, 64)), "warp_tile"),
])
def test_swap_ab_field_rules_name_the_field(fields, field):
    kw = dict(dtype="bfloat16", instruction="wgmma", stages=4)
    kw.update(fields)
    with pytest.raises(SpecError) as err:
        TensorMatmul(**kw)
    assert field in str(err.value)


def test_swap_ab_renders_the_transposed_instruction_and_compiles_without_spills():
    from kgen.core.render import render

    spec = TensorMatmul(dtype="bfloat16", tile=(24, 128, 64), warp_tile=(24, 64), stages=8, instruction="wgmma",
                        swap_ab=True, layout_b="row", split_k=4, split_merge="cluster")
    src = render(spec)
    # B's tile (N-major here) is the instruction's A, transposed; A's 24 rows are its N.
    assert "wgmma.mma_async.sync.aligned.m64n24k16.f32.bf16.bf16" in src and "p, 1, 1, 1, 0;" in src
    # Its sums go to shared memory one value at a time (a register pair holds two rows of C),
    # at fixed offsets from the thread's place.
    assert "mine[(8 * j + e) * PART_STRIDE + 8 * h] =" in src and "st.shared.v2.f32" not in src
    own = render(spec.replace(split_k=3, split_merge="workspace"))
    # The workspace split stages them too, and the block stores them as rows.
    assert "mine[(8 * j + e) * PART_STRIDE + 8 * h] =" in own and "tile_store_step(base" in own
    assert "store_single(out, m, n, ldo, split_stride, z, flags, alpha, beta, ntiles" not in own
    # A ring too small for the sums keeps each thread's own stores.
    small = spec.replace(tile=(256, 128, 64), warp_tile=(256, 64), stages=2, split_k=1, split_merge="workspace")
    assert not small.staged_epilogue
    assert "store_single(out, m, n, ldo, split_stride, z, flags, alpha, beta, ntiles" in render(small)
    assert "#define WG_N 24" in src and "#define CONSUMERS 2" in src
    plain = render(spec.replace(swap_ab=False, tile=(64, 128, 64), warp_tile=(64, 128)))
    # Untransposed, no thread stores its registers' values one at a time (the staged store may,
    # from shared memory, where C's rows allow no pairs).
    assert "m64n128k16" in plain and "store_single(out, m, n, ldo, split_stride, z, flags, alpha, beta, ntiles" \
        not in plain
    if shutil.which("nvcc"):
        res = kgen.compile(spec, "sm_90").resources["kgen_tc_wgmma"]
        assert res["spill_stores"] == 0 and res["spill_loads"] == 0


def test_b_realign_is_validated_and_fits_the_shared_memory_it_replaces():
    """b_realign: 16-bit wgmma with BN of 64 or 128 only, B in either order (a clear error
    otherwise); with_realigned_b shortens the ring by the staging's bytes (never more shared
    memory than before) and leaves specs it does not apply to as they are; for_layouts takes
    it as a request."""
    assert _wg(tile=(128, 64, 64), warp_tile=(64, 64), layout_b="col", b_realign=True).b_realign
    with pytest.raises(SpecError, match="b_realign"):
        _wg(dtype="float32", tf32=True, tile=(128, 64, 32), warp_tile=(64, 64), b_realign=True)
    with pytest.raises(SpecError, match="b_realign"):
        _wg(b_realign=True)                                          # BN = 256
    with pytest.raises(SpecError, match="b_realign"):
        TensorMatmul(b_realign=True)                                 # mma.sync
    for problem in ({"M": 26, "N": 2246, "K": 5606}, {"M": 63, "N": 10926, "K": 1349},
                    {"M": 200, "N": 3001, "K": 1500}, {"M": 3, "N": 4096, "K": 4096}):
        spec = TensorMatmul.default_spec(problem, "bfloat16")
        realigned = spec.with_realigned_b()
        assert realigned.b_realign and realigned.shared_bytes <= spec.shared_bytes, (problem, spec.to_json())
        assert realigned.replace(b_realign=False, stages=spec.stages) == spec
        assert spec.for_layouts(problem, layout_a="row", layout_b="row", b_realign=True) == realigned
        # Asked for row sets: on the transposed tiles B by row sets (b_phased, two blocks an SM
        # where phased_fill_spec asks), elsewhere b_realign.
        want = spec.with_phased_b().phased_fill_spec(problem) if spec.swap_ab else realigned
        assert spec.for_layouts(problem, layout_a="row", layout_b="row", b_phased=True) == want
    wide = _wg()
    assert wide.with_realigned_b() is wide and wide.replace(layout_b="col").with_realigned_b().b_realign is False
    assert TensorMatmul.default_spec({"M": 100, "N": 3000, "K": 4097}, "bfloat16").replace(
        layout_b="col").with_realigned_b().b_realign
    src = kgen.render(TensorMatmul.swap_spec({"M": 26, "N": 2246, "K": 5606}, "bfloat16").with_realigned_b())
    assert "const bits_t* __restrict__ b_ptr" in src and "cp.async.cg.shared.global" in src
    assert "fence.proxy.async.shared::cta" in src and "map_b" not in src
    # Both barriers of every stage are initialised, each on its own line (not inside a comment).
    inits = [line.strip() for line in src.splitlines() if "mbar_init(bars" in line]
    assert [line.split(";")[0] for line in inits] == ["mbar_init(bars + 8 * s, 1 + 4)",
                                                       "mbar_init(bars + 8 * (STAGES + s), 4 * CONSUMERS)"]


@pytest.mark.parametrize("fields", [
    {},                                               # the general tiles
    {"swap": True},                                   # A's rows as the wgmma N, K split in clusters
    {"swap": True, "b_realign": True},                # B read in place by the producer threads
    {"swap": True, "l2_prefetch": True},              # B's first k tiles asked of L2 ahead of the wait
    {"cluster": 2},                                   # pairs of blocks sharing B
])
def test_wgmma_kernel_waits_for_the_kernel_before_it_before_touching_memory(fields):
    """Launched programmatically, the wgmma kernel may start while the kernel before it runs:
    griddepcontrol.wait must come before its first TMA load, pointer read or store."""
    if fields.get("swap"):
        spec = TensorMatmul.swap_spec({"M": 26, "N": 2245, "K": 5606}, "bfloat16")
        if fields.get("b_realign"):
            spec = spec.with_realigned_b()
            assert spec.b_realign
        if fields.get("l2_prefetch"):
            spec = spec.with_l2_prefetch()
            assert spec.l2_prefetch
    elif fields.get("cluster"):
        spec = TensorMatmul(dtype="bfloat16", tile=(128, 256, 64), warp_tile=(64, 256), stages=4,
                            instruction="wgmma", cluster=2)
    else:
        spec = TensorMatmul.default_spec({"M": 4096, "N": 4096, "K": 4096}, "bfloat16")
    src = kgen.render(spec)
    body = src[src.index("kgen_tc_wgmma("):]
    wait = body.index("griddepcontrol.wait;")
    # The next kernel may launch once this block's loads are all issued: after the last one.
    trigger = body.index("griddepcontrol.launch_dependents;")
    assert wait < trigger and body.count("griddepcontrol.launch_dependents;") == 1
    loads = [m.start() for m in re.finditer(r"\b(?:tma_load\w*|cp_async16_shared)\(", body)]
    assert wait < loads[0] and any(wait < at < trigger for at in loads)
    assert not any(trigger < at < body.index("return;", trigger) for at in loads)   # the producer's last
    # Loads (TMA, cp.async), stores of C (tile stores, the cluster merge, element copies) and
    # any explicit global access, by the names the kernel calls them.
    calls = re.findall(r"\b(\w*(?:tma_load|cp_async|store|merge|copy_elements)\w*)\(", body)
    calls += [a for a in ("st.global", "ld.global") if a in body]
    assert any("tma_load" in c for c in calls) and any("store" in c or "merge" in c for c in calls), calls
    for access in set(calls):
        assert wait < body.index(access), f"{access} before the wait in {spec.to_json()}"
    assert body.count("griddepcontrol.wait;") == 1
    # Only the L2 prefetch (no value returned, no shared memory) comes before the wait, and only
    # where the host says the launch overlaps the kernel before.
    prefetches = [m.start() for m in re.finditer(r"\btma_prefetch\(", body)]
    assert bool(prefetches) == bool(spec.l2_prefetch)
    if prefetches:
        assert all(at < wait for at in prefetches)
        guard = body.rindex("if (", 0, prefetches[0])
        assert "flags & OVERLAPPED" in body[guard:prefetches[0]]


@pytest.mark.parametrize("layout_b", ["row", "col"])
def test_row_set_copies_wait_for_the_kernel_before_them_first(layout_b):
    """The row sets' A copies launch programmatically (PROGRAMMATIC_COPIES), so each may start
    while the kernel before it runs: its first statement is copy_await_inputs, which waits before
    it lets the product kernel launch, and no other copy entry waits (those launch plainly)."""
    from kgen.ops.tensorcore import PROGRAMMATIC_COPIES

    base = TensorMatmul.swap_spec({"M": 8, "N": 3001, "K": 2051}, "bfloat16")
    spec = base.replace(layout_b=layout_b, b_phased=layout_b == "row", b_classes=layout_b == "col")
    src = kgen.render(spec)
    entry = "kgen_tc_phase_a" if layout_b == "row" else "kgen_tc_class_a"
    assert entry in PROGRAMMATIC_COPIES
    helper = src[src.index("void copy_await_inputs()"):]
    helper = helper[:helper.index("\n}\n")]
    assert helper.index("griddepcontrol.wait;") < helper.index("griddepcontrol.launch_dependents;")
    body = src[src.index(entry + "("):]
    body = body[body.index("{") + 1:]
    assert body.split(";")[0].strip() == "copy_await_inputs()", body[:200]
    waiting = {m.group(1) for m in re.finditer(r"\b(kgen_tc_\w+)\([^)]*\)\s*\{\s*copy_await_inputs\(\)", src)}
    assert waiting == {entry}


def test_programmatic_launches_where_the_grid_fills_the_sms_or_slices_are_short():
    from kgen.ops.tensorcore import PROGRAMMATIC_MAX_SLICE_K

    T = TensorMatmul
    cases = {
        (1, 1280, 13760): True,     # 20 column tiles in 5 slices of 2752
        (9, 14080, 3392): True,     # 220 column tiles: two blocks an SM, the SMs full
        (2048, 2048, 2048): True,   # the general tiles, several waves
        (6, 2816, 16256): False,    # 88 blocks walking 8128 of K each
        (11, 5504, 5248): False,    # 86 blocks, K whole
    }
    for (M, N, K), want in cases.items():
        spec = T.default_spec({"M": M, "N": N, "K": K}, "bfloat16")
        grid, _, _ = spec.launch_geometry(M, N, K)
        blocks, slice_k = grid[0] * grid[1] * grid[2], spec.split_plan(K)[1]
        assert spec.launches_programmatically(M, N, K) == want, (M, N, K, blocks, slice_k)
        assert want == (blocks >= 132 or slice_k <= PROGRAMMATIC_MAX_SLICE_K)
    # Only the wgmma kernel waits for the kernels before it.
    mma = T.mma_default_spec({"M": 4096, "N": 4096, "K": 4096}, "bfloat16")
    assert not mma.wgmma and not mma.launches_programmatically(4096, 4096, 4096)


def _planning_kernel(monkeypatch, spec):
    """A TensorMatmulKernel of `spec` that makes launch plans without a GPU: launches recorded
    (name, grid, format, programmatic), every workspace at one address."""
    from kgen.ops import tensorcore as tc

    class Recorded:
        def __init__(self, fn, name, grid, block, shared, fmt, programmatic=False):
            self.name, self.grid, self.fmt, self.programmatic = name, grid, fmt, programmatic

    monkeypatch.setattr(tc, "Launch", Recorded)
    kernel = object.__new__(tc.TensorMatmulKernel)
    kernel.spec, kernel._plans, kernel._item, kernel._acc_item, kernel._sms = spec, {}, 2, 4, 132
    kernel._fmt, kernel._fmt_reduce = "PPP" + "q" * 8 + "iff", "P"
    kernel.carveouts = {}   # entry -> the shared memory carveout its handle was asked for

    def handle(name, shared=0, carveout=None):
        kernel.carveouts[name] = carveout
        return 0

    kernel.handle = handle
    kernel._buffer = lambda name, nbytes: 1 << 30
    return kernel


def _copy_launches_early(kernel, launch) -> bool:
    """The copy `launch` is programmatic (where KGEN_PDL allows) and asked for the most shared
    memory; a copy that is neither returns False; one of the two, an assertion error."""
    from kgen.core.launch import MOST_SHARED, programmatic_launches

    early = kernel.carveouts[launch.name] == MOST_SHARED
    assert launch.programmatic == (early and programmatic_launches()), (launch.name, kernel.carveouts)
    assert early or kernel.carveouts[launch.name] is None
    return early


def test_b_realign_plans_pass_b_by_pointer_and_never_copy_it(monkeypatch):
    spec = TensorMatmul.swap_spec({"M": 26, "N": 2245, "K": 5606}, "bfloat16").with_realigned_b()
    kernel = _planning_kernel(monkeypatch, spec)
    plan = kernel._plan(26, 2245, 5606, 5606, 2245, 2245, False, False, True)
    assert plan[1] is None and plan[0][0].name == "kgen_tc_repack"     # A (K unaligned) copied, B not
    assert not _copy_launches_early(kernel, plan[0][0])   # a plain launch: it does not wait itself
    assert plan[2].name == "kgen_tc_wgmma" and plan[2].fmt == "128sPP" + "q" * 8 + "iff"
    assert plan[7].b is None
    # The wgmma kernel waits for the kernels before it itself: launched programmatically, the
    # copy that feeds it plainly.
    assert plan[2].programmatic and not plan[0][0].programmatic
    monkeypatch.setenv("KGEN_PDL", "0")
    kernel._plans.clear()
    assert not kernel._plan(26, 2245, 5606, 5606, 2245, 2245, False, False, True)[2].programmatic
    monkeypatch.delenv("KGEN_PDL")
    kernel._plans.clear()
    aligned = kernel._plan(26, 2245, 5608, 5608, 2245, 2245, True, False, True)
    assert aligned[0] is None and aligned[1] is None


def test_row_sets_run_two_blocks_an_sm_with_k_in_clusters_where_tiles_are_few():
    """b_phased: where the transposed tiles (at most PHASED_FILL_MAX_ROWS rows, by B's storage
    order) are at most one an SM, two blocks an SM and K in the most slices whose clusters all run
    at once (PHASED_CLUSTER_BLOCKS), each slice STREAM_MIN_SLICE_K deep; more tiles or more rows
    keep the spec with_phased_b gives."""
    from kgen.ops.tensorcore import (MAX_SHARED_BYTES, PHASED_CLUSTER_BLOCKS, PHASED_FILL_MAX_ROWS,
                                     SM_SHARED_BYTES, STREAM_MIN_SLICE_K)

    for (M, N, K), order, split in (((26, 5394, 11630), "col", 2), ((40, 3000, 9998), "col", 5),
                                    ((60, 5000, 8006), "col", 3), ((22, 1611, 2044), "col", 7),
                                    ((49, 1241, 5890), "col", 8), ((109, 5635, 4044), "col", 2),
                                    ((6, 2525, 6095), "row", 5), ((28, 4295, 1157), "row", 3)):
        p = {"M": M, "N": N, "K": K}
        got = TensorMatmul.default_spec(p, "bfloat16").for_layouts(p, layout_a="row", layout_b=order, b_phased=True)
        assert got.b_phased and got.split_k == split and got.split_merge == "cluster", (M, N, K, got.to_json())
        assert got.tile[0] <= PHASED_FILL_MAX_ROWS[order]
        tiles = -(-N // got.tile[1])
        assert tiles * split <= PHASED_CLUSTER_BLOCKS[split] and K >= STREAM_MIN_SLICE_K * split
        assert split == 8 or tiles * (split + 1) > PHASED_CLUSTER_BLOCKS[split + 1] \
            or K < STREAM_MIN_SLICE_K * (split + 1)
        assert 2 * (got.shared_bytes + 1024) <= SM_SHARED_BYTES and got.shared_bytes <= MAX_SHARED_BYTES
        assert 3 * (got.shared_bytes + 1024) > SM_SHARED_BYTES   # the deepest ring two blocks hold
        assert got == got.phased_fill_spec(p)   # applied once
    for (M, N, K), order in (((30, 12000, 3002), "col"), ((151, 3000, 4098), "col"), ((100, 3000, 4099), "row")):
        p = {"M": M, "N": N, "K": K}
        spec = TensorMatmul.default_spec(p, "bfloat16").for_layouts(p, layout_a="row", layout_b=order)
        assert spec.for_layouts(p, layout_a="row", layout_b=order, b_phased=True) == spec.with_phased_b(), (M, N, K)


def test_a_is_copied_to_a_128_byte_pitch_where_its_rows_straddle_lines(monkeypatch):
    """The wgmma kernel re-reads A in every block: the transposed tiles from A_PITCH_MIN_ROWS rows
    against a B of A_PITCH_MIN_B_BYTES or more copy an A whose rows are no multiple of 128 bytes
    apart to a buffer of that pitch first (the launch reads the copy's pitch); not otherwise, and
    an A copied anyway takes that pitch."""
    from kgen.ops.tensorcore import A_PITCH_MIN_B_BYTES, A_PITCH_MIN_ROWS

    problem = {"M": 58, "N": 12904, "K": 7000}
    spec = TensorMatmul.default_spec(problem, "bfloat16").for_layouts(problem, layout_a="row", layout_b="col")
    assert spec.wgmma and spec.swap_ab
    kernel = _planning_kernel(monkeypatch, spec)
    plan = kernel._plan(58, 12904, 7000, 7000, 7000, 12904, True, True, True)
    assert plan[0][0].name == "kgen_tc_repack" and plan[1] is None
    assert plan[0][2] == (58, 7000, 7000, 7040)          # rows, values, source pitch, copy's pitch
    assert plan[3][:5] == (58, 12904, 7000, 7040, 7000)  # the product reads A at the copy's pitch
    # A at a 128-byte pitch already, a view of a wider buffer: read in place.
    assert kernel._plan(58, 12904, 7000, 7040, 7000, 12904, True, True, True)[0] is None
    assert kernel._plan(58, 12904, 7000, 7168, 7000, 12904, True, True, True)[0] is None
    # An unaligned A (copied anyway) gets the wider pitch too.
    odd = kernel._plan(58, 12904, 6999, 6999, 7000, 12904, False, True, True)
    assert odd[0][2] == (58, 6999, 6999, 7040) and odd[3][3] == 7040
    # Too few rows, or too small a B to pay for the copy: A as it is.
    assert not spec.pads_a_pitch(A_PITCH_MIN_ROWS - 1, 12904, 7000, 7000)
    assert spec.pads_a_pitch(A_PITCH_MIN_ROWS, 12904, 7000, 7000)
    small_n = A_PITCH_MIN_B_BYTES // (2 * 7000) - 64
    assert not spec.pads_a_pitch(58, small_n, 7000, 7000) and spec.pads_a_pitch(58, small_n + 128, 7000, 7000)
    # mma.sync reads A as before; the general wgmma tiles (65+ rows past 132 column tiles) copy
    # only an A they cannot read, at the wider pitch.
    assert not TensorMatmul.element_spec(problem, "bfloat16").pads_a_pitch(58, 12904, 7000, 7000)
    wide = {"M": 200, "N": 12904, "K": 7000}
    general = TensorMatmul.general_wgmma_spec(wide, "bfloat16").for_layouts(wide, layout_a="row", layout_b="col")
    assert general.wgmma and not general.swap_ab and not general.pads_a_pitch(200, 12904, 7000, 7000)
    kernel = _planning_kernel(monkeypatch, general)
    assert kernel._plan(200, 12904, 7000, 7000, 7000, 12904, True, True, True)[0] is None
    assert kernel._plan(200, 12904, 6999, 6999, 7000, 12904, False, True, True)[0][2] == (200, 6999, 6999, 7040)
    # B by row sets against W.t(): A copied at the wider pitch where it is copied at all, or where
    # the rule asks.
    phased = TensorMatmul.swap_spec({"M": 58, "N": 12904, "K": 7002}, "bfloat16").replace(layout_b="col")
    phased = phased.with_phased_b()
    assert phased.b_phased
    kernel = _planning_kernel(monkeypatch, phased)
    plan = kernel._plan(58, 12904, 7002, 7002, 7002, 12904, False, False, True)
    assert plan[0][2] == (58, 7002, 7002, 7040) and plan[3][3] == 7040


def test_b_realign_slots_keep_each_warp_on_one_branch_of_the_shift():
    """b_realign's producer slots (realign_shift_rows, and the kernel's realign_row_of written
    out in Python): every row of a 64-row box once; each warp's 16 rows share the shift's case
    (phase / 4, its branch); the eight threads of a quarter warp (four slots, two halves) load
    consecutive staging windows, and store their swizzled chunks (rows with bit 3 set in the
    order 2, 3, 0, 1) meeting at most two to a bank group."""
    from kgen.ops.tensorcore import realign_shift_rows

    def kernel_row_of(s, base_phase, ldb):
        r0 = 8 >> min(3, (ldb & -ldb).bit_length() - 1)
        firsts = [0] * 4
        for j in range(r0):
            firsts[((base_phase + 2 * ((j * (ldb & 7)) & 7)) & 15) >> 2] |= 1 << j
        start = 0
        for c in range(4):
            n = bin(firsts[c]).count("1")
            assert n <= 2   # the kernel's bit pick takes the first or the second set bit
            size = n * (64 // r0)
            if start <= s < start + size:
                p = s - start
                bits = firsts[c] & (firsts[c] - 1) if p % n else firsts[c]
                return (p // n) * r0 + (bits & -bits).bit_length() - 1
            start += size
        raise AssertionError("no case holds slot %d" % s)

    src = kgen.render(TensorMatmul.swap_spec({"M": 26, "N": 2246, "K": 5606}, "bfloat16").with_realigned_b())
    assert "__device__ __forceinline__ int realign_row_of(int s, const unsigned (&firsts)[4], int r0)" in src
    assert "return (p / n) * r0 + __ffs(bits) - 1;" in src and "const int rotate = row & 8 ? 2 : 0;" in src
    for ldb in (2245, 2246, 2244, 8150, 8192, 4097, 3001, 7, 12, 5606, 10546, 4477):
        for base_phase in (0, 2, 6, 14):
            rows = realign_shift_rows(base_phase, ldb)
            assert rows == [kernel_row_of(s, base_phase, ldb) for s in range(64)], (ldb, base_phase)
            assert sorted(rows) == list(range(64))
            for warp in range(4):
                cases = {((base_phase + 2 * row * ldb) % 16) // 4 for row in rows[16 * warp:16 * warp + 16]}
                assert len(cases) == 1, (ldb, base_phase, warp)
            for quarter in range(16):
                for q in range(4):
                    groups: dict[int, int] = {}
                    for row in rows[4 * quarter:4 * quarter + 4]:
                        c = q ^ (2 if row & 8 else 0)
                        for half in (0, 1):
                            g = ((4 * half + c) ^ (row & 7)) % 8
                            groups[g] = groups.get(g, 0) + 1
                    assert max(groups.values()) <= 2, (ldb, base_phase, quarter, q, rows[4 * quarter:4 * quarter + 4])


def test_b_realign_on_wide_tiles_takes_transposed_tiles_that_read_b_in_place(monkeypatch):
    """Where the default's tiles are wider than 128 columns (65-256 rows against more than 132
    column tiles), asking for b_realign gives transposed tiles of REALIGN_SWAP_BN columns that read
    B in place, rather than the copy; not for more than SWAP_MAX_ROWS rows or a column-major A."""
    from kgen.ops.tensorcore import MAX_SHARED_BYTES, REALIGN_SWAP_BN, SWAP_MAX_ROWS

    for (M, N, K), order in (((69, 9537, 9265), "row"), ((150, 12001, 2049), "row"), ((100, 9600, 4099), "col"),
                             ((256, 16001, 1200), "row")):
        problem = {"M": M, "N": N, "K": K}
        with monkeypatch.context() as m:   # the default before the wide transposed tiles (which
            m.setattr(tc, "WIDE_SWAP_ROWS", (0, -1))   # give way to it here: test_wide_swap_cpu)
            spec = TensorMatmul.default_spec(problem, "bfloat16")
        # (129-192 rows may take one row tile of 192, not given b_realign: asked for it, they
        # give way to the cost model's 128 x 256.)
        assert (spec.tile[1] == 256 or spec.tile[0] == 192) and not spec.swap_ab, spec.to_json()
        got = spec.for_layouts(problem, layout_a="row", layout_b=order, b_realign=True)
        assert got.b_realign and got.swap_ab and got.layout_b == order, got.to_json()
        # Asked for row sets: the same tiles reading B by them.
        assert spec.for_layouts(problem, layout_a="row", layout_b=order, b_phased=True) == \
            got.with_phased_b().phased_fill_spec(problem)
        assert got.tile[:2] == (-(-M // 8) * 8, REALIGN_SWAP_BN) and got.split_k == 1
        assert got.shared_bytes <= MAX_SHARED_BYTES   # one block an SM, as the default
        # A column-major A: the transposed tiles read A K-major, so B is copied.
        kept = spec.for_layouts(problem, layout_a="col", layout_b=order, b_realign=True)
        assert not kept.b_realign and not kept.b_phased and not kept.swap_ab
    many = {"M": SWAP_MAX_ROWS + 8, "N": 12001, "K": 2049}
    assert TensorMatmul.default_spec(many, "bfloat16").realign_swap_spec(many) is None


def test_b_realign_on_unsplit_64_column_transposed_tiles_takes_128_columns_in_two_slices():
    """With b_realign a block's time follows its k steps: where the transposed tiles of 64
    columns keep K whole (67-132 of them), asking for b_realign gives 128-column tiles with K in
    REALIGN_SPLIT_SLICES slices merged in clusters that all run at once; elsewhere as before."""
    from kgen.ops.tensorcore import CLUSTER_WAVE_BLOCKS, MAX_SHARED_BYTES, REALIGN_SPLIT_SLICES

    s = REALIGN_SPLIT_SLICES
    for (M, N, K), order in (((116, 4293, 6771), "col"), ((88, 5607, 8323), "col"), ((21, 5198, 9437), "row"),
                             ((54, 7411, 2706), "row"), ((168, 5955, 8418), "row")):
        problem = {"M": M, "N": N, "K": K}
        # The 64-column tiles (where the default takes 128 columns on an aligned B, SWAP_128_MIN_GAIN,
        # the layouts it was not measured on start from these).
        plain = TensorMatmul.swap_spec(problem, "bfloat16", narrow=True).for_layouts(problem, layout_b=order)
        assert plain.swap_ab and plain.tile[1] == 64 and plain.split_k == 1, plain.to_json()
        got = TensorMatmul.default_spec(problem, "bfloat16").for_layouts(problem, layout_b=order, b_realign=True)
        assert got.b_realign and got.swap_ab and got.layout_b == order, got.to_json()
        assert got.tile[:2] == (plain.tile[0], 128) and got.split_k == s and got.split_merge == "cluster"
        assert -(-N // 128) * s <= CLUSTER_WAVE_BLOCKS[s] and got.shared_bytes <= MAX_SHARED_BYTES
        # Asked for row sets: read at TMA's pace, the tiles stay (two blocks an SM where
        # phased_fill_spec asks).
        phased = TensorMatmul.default_spec(problem, "bfloat16").for_layouts(problem, layout_b=order, b_phased=True)
        assert phased == plain.with_phased_b().phased_fill_spec(problem) and phased.b_phased, phased.to_json()
        assert phased.tile == plain.tile
    # Already split (two slices of 64-column tiles run at once), past 132 tiles, or K too short.
    for (M, N, K), order in (((77, 2506, 9946), "col"), ((30, 9434, 6285), "row"), ((40, 5000, 300), "col"),
                             ((161, 7605, 1111), "row")):
        problem = {"M": M, "N": N, "K": K}
        got = TensorMatmul.default_spec(problem, "bfloat16").for_layouts(problem, layout_b=order, b_realign=True)
        assert not (got.tile[1] == 128 and got.split_k == s and got.swap_ab), ((M, N, K), got.to_json())


def test_dispatch_reads_unaligned_row_major_16bit_b_in_place_by_its_strides():
    """kgen.matmul asks for b_realign where B's row stride is no multiple of 8 elements, the
    inputs are 16-bit and the rows at most REALIGN_MAX_ROWS; never for an aligned stride, one
    row of B, float32, or more rows."""
    import numpy as np

    from kgen.ops.tensorcore import REALIGN_MAX_ROWS
    from kgen.tune.dispatch import _realigns_b

    def b(K, N, ld):
        return np.empty((K, ld), np.float16)[:, :N]

    assert _realigns_b(b(5606, 2246, 2246), 26, 2246, 5606, "bfloat16")
    assert _realigns_b(b(100, 64, 65), REALIGN_MAX_ROWS, 64, 100, "float16")
    assert not _realigns_b(b(5606, 2248, 2248), 26, 2248, 5606, "bfloat16")        # 16-byte rows
    assert not _realigns_b(b(100, 64, 72), 26, 64, 100, "float16")                  # padded to 16 bytes
    assert not _realigns_b(b(1, 2246, 2246), 26, 2246, 1, "bfloat16")               # one row
    assert not _realigns_b(b(100, 2246, 2246), 26, 2246, 100, "float32")
    assert not _realigns_b(b(100, 2246, 2246), REALIGN_MAX_ROWS + 1, 2246, 100, "bfloat16")
    # W.t() of a weight W stored N x K: its leading dimension is K's pitch.
    assert _realigns_b(np.empty((3000, 4097), np.float16).T, 100, 3000, 4097, "bfloat16")
    assert not _realigns_b(np.empty((3000, 4104), np.float16)[:, :4097].T, 100, 3000, 4097, "bfloat16")


def _text_bytes(cubin: bytes, kernel: str) -> int:
    """Size of a kernel's code section in an ELF cubin."""
    import struct

    shoff = struct.unpack_from("<Q", cubin, 0x28)[0]
    entsize, count, names = struct.unpack_from("<HHH", cubin, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", cubin, shoff + i * entsize) for i in range(count)]
    strings = sections[names][4]
    for sec in sections:
        name = cubin[strings + sec[0]:cubin.index(b"\0", strings + sec[0])].decode()
        if name == ".text." + kernel:
            return sec[5]
    raise AssertionError(f"no code section for {kernel}")


def test_staged_epilogue_rules():
    """The block stores a tile from shared memory wherever the ring holds its float32 sums and
    nothing else writes the ring meanwhile."""
    base = _wg(tile=(128, 256, 64), warp_tile=(64, 256), stages=4)
    assert base.staged_epilogue
    assert not base.replace(persistent=True).staged_epilogue
    assert not base.replace(cluster=2).staged_epilogue
    assert not base.replace(split_k=2, split_merge="cluster").staged_epilogue
    assert base.replace(split_k=2, split_merge="workspace").staged_epilogue
    # 128 x 260 floats (133 KB) do not fit two stages of 48 KB.
    assert not base.replace(stages=2).staged_epilogue
    swap = _wg(tile=(232, 64, 64), warp_tile=(232, 64), stages=5, swap_ab=True, layout_b="col")
    assert swap.staged_epilogue


@pytest.mark.skipif(not shutil.which("nvcc"), reason="needs nvcc")
@pytest.mark.parametrize("fields", [
    dict(tile=(232, 64, 64), warp_tile=(232, 64), stages=6, swap_ab=True, layout_b="col"),
    dict(tile=(168, 128, 64), warp_tile=(168, 64), stages=6, swap_ab=True, layout_b="row"),
    dict(tile=(64, 256, 64), warp_tile=(64, 256), stages=5, layout_b="row"),
    dict(tile=(128, 256, 64), warp_tile=(64, 256), stages=4, layout_b="col", split_k=2),
])
def test_staged_epilogue_keeps_the_kernel_code_small(fields):
    """Every block fetches the kernel's code: with each consumer thread storing its own values
    (BM / 2 or BN / 4 unrolled, guarded stores) it took 96-136 KB for these tiles, and a block's
    fixed cost grew with it. Staged, the code stays under 48 KB whatever the tile."""
    spec = _wg(**fields)
    assert spec.staged_epilogue
    compiled = kgen.compile(spec, "sm_90a")
    res = compiled.resources["kgen_tc_wgmma"]
    assert res["spill_stores"] == 0 and res["spill_loads"] == 0
    assert _text_bytes(compiled.cubin, "kgen_tc_wgmma") < 48 * 1024


def test_unaligned_outputs_go_through_shared_memory_where_the_tile_fits():
    """The mma.sync kernel stores an output without pair stores (an odd N or pitch) through
    shared memory where BN is a multiple of 64 and the sums (float32, float64 for float64) fit
    over the stages; not the wgmma kernel (its own epilogues), and the rendered source has the
    staged store exactly then."""
    from kgen.ops.tensorcore import TensorMatmul as T

    cases = [
        (T(dtype="bfloat16", tile=(128, 128, 32), warp_tile=(64, 64), stages=4, repack=False), True),
        (T(dtype="float16", tile=(128, 64, 32), warp_tile=(64, 32), stages=4), True),
        (T(dtype="bfloat16", tile=(128, 128, 32), warp_tile=(64, 64), stages=3), False),   # 48 KB < 64 KB of sums
        (T(dtype="bfloat16", tile=(128, 256, 32), warp_tile=(64, 64), stages=3), False),
        (T(dtype="float16", tile=(64, 32, 32), warp_tile=(32, 32), stages=4), False),       # BN no multiple of 64
        (T(dtype="float32", tf32=True, tile=(128, 128, 32), warp_tile=(64, 64), stages=3, smem_layout="pad"), True),
        (T(dtype="float64", tile=(64, 64, 16), warp_tile=(32, 32), stages=4, smem_layout="pad"), True),
        # 57 KB of stages < 64 KB of float64 sums
        (T(dtype="float64", tile=(128, 64, 16), warp_tile=(32, 32), stages=2, smem_layout="pad"), False),
        (T.wgmma_default_spec({"M": 2000, "N": 2001, "K": 2000}, "bfloat16"), False),
    ]
    for spec, staged in cases:
        assert spec.staged_unaligned_output is staged, spec.to_json()
        BM, BN, _ = spec.tile
        if staged:
            assert BN % 64 == 0 and BM * BN * (8 if spec.dtype == "float64" else 4) <= spec.shared_bytes
        source = kgen.render(spec)
        rendered = "consecutive threads store consecutive elements of a row" in source
        assert rendered is staged, spec.to_json()
        if staged:   # the staged tile holds the sums at their own width
            assert "reinterpret_cast<acc2_t*>(tile + r * BN + c)" in source, spec.to_json()
            wide = "typedef double2 acc2_t;" in source
            assert wide is (spec.dtype == "float64"), spec.to_json()


def test_b_phased_row_sets_read_every_row_of_b_once_and_nothing_past_it():
    """b_phased's geometry (phase_sets, phase_maps) and the kernel's index arithmetic, written out
    in numpy: each stage's TMA box (BN + PHASE_PAD columns from the 16-byte aligned column at or
    before the tile's, zero past the set map's sizes) read by the consumers at the set's shift,
    stacked in the kernel's k order, times A copied as kgen_tc_phase_a orders it, equal A @ B
    exactly (integers) at every pitch modulo 8 and pointer offset; every box starts on a 16-byte
    boundary; every element a map may read lies within B's storage; the sets' pitch spans a
    multiple of 16 bytes."""
    import numpy as np

    from kgen.ops.tensorcore import PHASE_MAPS, PHASE_PAD, phase_maps, phase_sets

    spec = TensorMatmul.swap_spec({"M": 34, "N": 10212, "K": 2038}, "bfloat16").with_phased_b()
    src = kgen.render(spec)
    # The kernel's side of the arithmetic this test mirrors.
    assert "const int set = k / maps_b.seg, kb = k - set * maps_b.seg, cb = maps_b.col[set];" in src
    assert "tma_load(sb, mb, cb + (int)block_n - (cb & 7), kb, full);" in src
    assert "const unsigned shift = (unsigned)(maps_b.col[set] & 7);" in src
    assert "const index_t set = c / seg, k = (c - set * seg) * sets + set;" in src
    rng = np.random.default_rng(5)
    BK, BN = 64, 64
    for K, N, pad, offset in ((2038, 10212 % 997, 0, 0), (5, 37, 0, 1), (9, 100, 3, 7), (130, 129, 0, 2),
                              (777, 64, 6, 5), (64, 1000, 4, 3), (1000, 255, 1, 6), (8, 3, 5, 4), (300, 8, 0, 1)):
        ldb = N + pad
        g, seg = phase_sets(K, ldb, 2, BK)
        assert g <= PHASE_MAPS and (g * ldb * 2) % 16 == 0 and seg % BK == 0 and g * seg >= K
        flat = rng.integers(-50, 50, size=offset + (K - 1) * ldb + N)   # B's storage from the aligned base
        B = np.stack([flat[offset + k * ldb:offset + k * ldb + N] for k in range(K)])
        M = 3
        A = rng.integers(-50, 50, size=(M, K))
        maps = phase_maps(K, N, ldb, g, offset)
        tiles = -(-N // BN)
        rows = np.zeros((g * seg, tiles * BN), dtype=flat.dtype)
        for kp in range(g * seg):
            st = kp // seg
            kb = kp - st * seg
            inner, outer, cb = maps[st]
            if K >= g:
                assert outer >= 1
            assert (outer - 1) * g * ldb + inner <= len(flat)   # the map's last element is B's
            for block_n in range(0, tiles * BN, BN):
                start = cb + block_n - (cb & 7)
                assert start >= 0 and (start * 2) % 16 == 0   # the box's first address: 16-byte aligned
                box = np.array([flat[kb * g * ldb + c] if c < inner and kb < outer else 0
                                for c in range(start, start + BN + PHASE_PAD)])
                rows[kp, block_n:block_n + BN] = box[(cb & 7):(cb & 7) + BN]
        rows = rows[:, :N]
        copy = np.zeros((M, g * seg), dtype=A.dtype)
        for c in range(g * seg):
            st = c // seg
            k = (c - st * seg) * g + st
            if k < K:
                copy[:, c] = A[:, k]
                assert (rows[c] == B[k]).all(), (K, N, ldb, offset, c)
            else:
                assert not rows[c].any()
        assert (copy @ rows == A @ B).all(), (K, N, ldb, offset)


def test_b_phased_consumers_read_the_instruction_operand_of_the_box():
    """phased_operand, written out: thread (warp w, lane) of a consumer warpgroup loads, for each
    16-k step, rows 16 w + g and 16 w + g + 8 of the instruction's A (B's box transposed: row i
    is column shift + 64 wg + i of the box) at k 2q, 2q + 1, 2q + 8, 2q + 9 in the register order
    of wgmma's A fragment; every address lies within the stage's box."""
    from kgen.ops.tensorcore import PHASE_PAD

    spec = TensorMatmul.swap_spec({"M": 34, "N": 10212, "K": 2038}, "bfloat16").with_phased_b()
    src = kgen.render(spec)
    for line in ("fa[4 * kk] = pack16(lds16(r), lds16(r + B_PITCH));",
                 "fa[4 * kk + 1] = pack16(lds16(r + 16), lds16(r + B_PITCH + 16));",
                 "fa[4 * kk + 2] = pack16(lds16(r + 8 * B_PITCH), lds16(r + 9 * B_PITCH));",
                 "fa[4 * kk + 3] = pack16(lds16(r + 8 * B_PITCH + 16), lds16(r + 9 * B_PITCH + 16));",
                 "+ 2u * (shift + 64u * wg + 16u * (t >> 5) + (lane >> 2)), 0u, sa, it > 0);"):
        assert line in src, line
    for BN in (64, 128):
        pitch = (BN + PHASE_PAD) * 2
        for shift in range(8):
            for wg in range(BN // 64):
                seen = set()
                for t in range(128):
                    lane, warp = t % 32, t // 32
                    g, q = lane // 4, lane % 4
                    at = 2 * q * pitch + 2 * (shift + 64 * wg + 16 * warp + g)
                    for kk in range(4):
                        r = at + 16 * kk * pitch
                        regs = [(r, r + pitch), (r + 16, r + pitch + 16), (r + 8 * pitch, r + 9 * pitch),
                                (r + 8 * pitch + 16, r + 9 * pitch + 16)]
                        want = [((16 * warp + g, 2 * q)), ((16 * warp + g + 8, 2 * q)),
                                ((16 * warp + g, 2 * q + 8)), ((16 * warp + g + 8, 2 * q + 8))]
                        for (lo, hi), (i, k) in zip(regs, want):
                            for addr, kk_k in ((lo, k), (hi, k + 1)):
                                row, col = divmod(addr, pitch)
                                assert row == 16 * kk + kk_k and col == 2 * (shift + 64 * wg + i), (BN, shift, t)
                                assert 0 <= addr < 64 * pitch
                                seen.add((row, col))
                assert len(seen) == 64 * 64   # the warpgroup's 64 x 64 operand, each value once


def test_b_phased_plans_copy_a_in_the_sets_order_and_never_b(monkeypatch):
    from kgen.core import tma
    from kgen.ops import tensorcore as tc

    class Map:
        def __init__(self, dtype, inner, outer, ld, box, swizzle_bytes=128):
            self.geometry = (inner, outer, ld, box, swizzle_bytes)

        def at(self, ptr):
            return repr((self.geometry, ptr)).encode().ljust(128, b".")[:128]

    monkeypatch.setattr(tma, "TiledMap", Map)
    spec = TensorMatmul.swap_spec({"M": 34, "N": 10212, "K": 2038}, "bfloat16").with_phased_b()
    assert spec.b_phased and spec.tile[1] == 64
    kernel = _planning_kernel(monkeypatch, spec)
    plan = kernel._plan(34, 10212, 2038, 2038, 10212, 10212, False, False, True)
    assert plan[1] is None and plan[0][0].name == "kgen_tc_phase_a" and _copy_launches_early(kernel, plan[0][0])
    assert plan[0][2] == (34, 2038, 2038, 2048, 2, 1024)   # rows, K, lda, the copy's pitch, sets, k a set
    assert plan[2].name == "kgen_tc_wgmma" and plan[2].fmt == f"128s{tc.PHASE_MAPS_BYTES}sP" + "q" * 8 + "iff"
    assert plan[3][:5] == (34, 10212, 2048, 2048, 10212)  # the kernel's K: two sets of 1024
    base = 0x7000_0000
    a_map, b_maps = plan[7].encoded(1 << 30, base + 6)   # B three elements past a 16-byte boundary
    assert len(b_maps) == tc.PHASE_MAPS_BYTES
    for r, (inner, outer, _) in enumerate(tc.phase_maps(2038, 10212, 10212, 2, 3)):
        # Boxes of BN + PHASE_PAD columns of 64 rows, unswizzled.
        want = Map("bfloat16", inner, outer, 2 * 10212, (64 + tc.PHASE_PAD, 64), swizzle_bytes=0).at(base)
        assert b_maps[128 * r:128 * r + 128] == want
    assert b_maps[256:1024] == bytes(768)   # sets past g: never read
    words = struct.unpack_from(f"<{tc.PHASE_MAPS}ii", b_maps, 1024)
    assert words == (3, 3 + 10212, 0, 0, 0, 0, 0, 0, 1024)
    # Fewer rows than sets: B copied aligned, one set.
    kernel._plans.clear()
    small = kernel._plan(34, 10211, 5, 5, 10211, 10211, False, False, True)
    assert small[1][0].name == "kgen_tc_repack" and small[0][2][4:] == (1, 64)
    # No K: nothing copied, nothing read.
    kernel._plans.clear()
    empty = kernel._plan(34, 10211, 0, 0, 10211, 10211, False, False, True)
    assert empty[0] is None and empty[1] is None
    assert empty[7].encoded(1 << 30, base) == (bytes(128), bytes(tc.PHASE_MAPS_BYTES))


def test_b_phased_is_validated_and_keeps_the_shared_memory_it_replaces():
    """b_phased: the transposed tiles of 64 or 128 columns on row-major operands only (a clear
    error otherwise); with_phased_b keeps the spec's shared memory (from b_realign's too) with
    as deep a ring as fits, and leaves specs it does not apply to as they are."""
    swap = TensorMatmul.swap_spec({"M": 34, "N": 10212, "K": 2038}, "bfloat16")
    assert swap.replace(b_phased=True).b_phased
    for fields in ({"b_realign": True}, {"swap_ab": False, "tile": (128, 128, 64), "warp_tile": (64, 128)}):
        with pytest.raises(SpecError, match="b_phased"):
            swap.replace(b_phased=True, **fields)
    with pytest.raises(SpecError, match="b_phased"):
        TensorMatmul(b_phased=True)                                      # mma.sync
    for problem in ({"M": 34, "N": 10212, "K": 2038}, {"M": 98, "N": 2222, "K": 10690}, {"M": 7, "N": 3001, "K": 5000},
                    {"M": 200, "N": 3001, "K": 1500}):
        spec = TensorMatmul.swap_spec(problem, "bfloat16")
        for start in (spec, spec.with_realigned_b()):
            phased = start.with_phased_b()
            assert phased.b_phased and not phased.b_realign, (problem, start.to_json())
            assert phased.shared_bytes <= start.shared_bytes
            assert start.shared_bytes - phased.shared_bytes < phased.stage_bytes   # as deep as fits
            assert phased.replace(b_phased=False, stages=spec.stages) == spec
    # W.t() too: its rows of n by sets, K as it is.
    col = swap.replace(layout_b="col").with_phased_b()
    assert col.b_phased and col.stage_bytes == col.tile[0] * 128 + col.tile[1] * 72 * 2
    wide = _wg()
    assert wide.with_phased_b() is wide


def test_b_phased_w_t_row_sets_give_each_tile_its_n_in_order():
    """b_phased on W.t() (B's rows are n, K long), written out in numpy: for each tile of 64 n and
    k tile, each set's 64 / g rows land in the stage as the producer loads them (a box of BK +
    PHASE_PAD k from the aligned column at or before k, zero past the map's sizes), and the
    consumers' row i (box row i, of set i / (64 / g), at the set's shift) gives B[k, n] for the
    column the epilogue puts it in, n = block_n + phased_col(i), exactly; phased_col takes each
    of the 64 once; every box starts on a 16-byte boundary and no map reaches past B."""
    import numpy as np

    from kgen.ops.tensorcore import PHASE_PAD, phase_maps, phase_sets

    spec = TensorMatmul.swap_spec({"M": 78, "N": 2964, "K": 6268}, "bfloat16").replace(layout_b="col").with_phased_b()
    # the cluster merge's staged sums, and a workspace split's stores from the registers
    direct = spec.replace(tile=(256, 128, 64), warp_tile=(256, 64), stages=2, split_k=1, split_merge="workspace")
    assert spec.staged_epilogue or spec.split_merge == "cluster"
    assert not direct.staged_epilogue
    src = kgen.render(spec) + kgen.render(direct)
    for line in ("tma_load(sb + (unsigned)((64 * c + r * per_set) * B_PITCH), &maps_b.map[r], cb + k - (cb & 7),",
                 "((int)block_n + 64 * c) / sets, full);",
                 "const int i = 16 * (t >> 5) + (lane >> 2) + 8 * h, r = i / (64 / maps_b.sets);",
                 "rows_at[h] = A_STAGE_BYTES + (unsigned)((64 * wg + i) * B_PITCH)",
                 "+ 2u * (2u * (lane & 3) + (unsigned)(maps_b.col[r] & 7));",
                 "return (i % per) * sets + i / per;",
                 "const index_t n = block_n + wg * 64 + phased_col(row, maps_b.sets);",
                 "mine[(8 * j + e) * PART_STRIDE + col[h]] = ntiles ? d[4 * j + 2 * h + e] : 0.f;",
                 "fa[4 * kk] = pack16(lds16(r), lds16(r + 2));", "fa[4 * kk + 1] = pack16(lds16(r8), lds16(r8 + 2));"):
        assert line in src, line
    rng = np.random.default_rng(7)
    BK, width = 64, 64 + PHASE_PAD
    for N, K, pad, offset in ((130, 200, 0, 0), (77, 131, 1, 3), (64, 64, 5, 7), (200, 70, 2, 1), (9, 100, 3, 5)):
        ld = K + pad
        g, _ = phase_sets(K, ld, 2, BK)
        assert (g * ld * 2) % 16 == 0 and 64 % g == 0
        flat = rng.integers(-50, 50, size=offset + (N - 1) * ld + K)
        Bt = np.stack([flat[offset + n * ld:offset + n * ld + K] for n in range(N)])   # W: N x K
        maps = phase_maps(N, K, ld, g, offset)
        for block_n in range(0, N, 64):
            for k in range(0, K, BK):
                stage = np.zeros((64, width), dtype=flat.dtype)
                for r, (inner, outer, cb) in enumerate(maps):
                    assert (outer - 1) * g * ld + inner <= len(flat)
                    start = cb + k - (cb & 7)
                    assert start >= 0 and (start * 2) % 16 == 0
                    for jj in range(64 // g):
                        j = block_n // g + jj
                        for c in range(width):
                            if j < outer and start + c < inner:
                                stage[r * (64 // g) + jj, c] = flat[j * g * ld + start + c]
                per = 64 // g
                assert sorted((i % per) * g + i // per for i in range(64)) == list(range(64))
                for i in range(64):
                    r = i // per
                    row = stage[i, (maps[r][2] & 7):(maps[r][2] & 7) + BK]
                    n = block_n + (i % per) * g + i // per   # phased_col(i)
                    want = np.zeros(BK, dtype=flat.dtype)
                    if n < N:
                        want[:min(BK, K - k)] = Bt[n, k:k + BK]
                    assert (row == want).all(), (N, K, ld, offset, block_n, k, i)


def test_dispatch_asks_for_row_sets_where_they_suit_b(monkeypatch):
    """kgen.matmul asks for B by row sets (b_phased) for a row-major B of any unaligned pitch and
    for W.t() of an even one, and for the producer threads (b_realign) for W.t() of an odd pitch;
    17-64 rows against W.t() of an even unaligned pitch go to the transposed tiles (they read it
    by row sets), of an odd one to the skinny forms as before."""
    import numpy as np

    from kgen.ops.skinny import Skinny
    from kgen.ops.tensorcore import PHASED_SWAP_ROWS
    from kgen.tune import dispatch
    from kgen.tune.device import DeviceInfo, arch_limits

    monkeypatch.setattr(dispatch, "_runs_wgmma", lambda: True)
    cases = [(np.empty((6268, 2964), np.float16)[:, :2963], "row", "b_phased"),     # pitch 2964: 4 mod 8
             (np.empty((6268, 2963), np.float16), "row", "b_phased"),               # odd pitch
             (np.empty((2964, 6268), np.float16).T, "col", "b_phased"),             # W.t(), K 4 mod 8
             (np.empty((2964, 6266), np.float16).T, "col", "b_phased"),             # 2 mod 8
             (np.empty((2964, 6267), np.float16).T, "col", "b_realign")]            # odd
    for B, order, want in cases:
        M = 78
        A = np.empty((M, B.shape[0]), np.float16)
        over = dispatch.call_overrides(A, B, TensorMatmul, "float16", stand_in=True)
        assert over.get(want) is True and over["layout_b"] == order, (B.strides, over)
        assert ({"b_phased", "b_realign"} - {want}).isdisjoint(over)
        spec = dispatch.call_spec(A, B, device=DeviceInfo("Recorded GPU", "sm_90", arch_limits("sm_90")), db=False)
        assert getattr(spec, want) and spec.layout_b == order, spec.to_json()
    lo, hi = PHASED_SWAP_ROWS
    for M in (lo, 40, hi):
        A = np.empty((M, 5002), np.float16)
        even, odd = np.empty((4000, 5002), np.float16).T, np.empty((4000, 5003), np.float16).T
        assert dispatch.call_family(A, even, "float16") is TensorMatmul, M
        assert dispatch.call_family(np.empty((M, 5003), np.float16), odd, "float16") is Skinny, M
    # Below PHASED_SWAP_ROWS no b_phased: 16 rows against this 40 MB weight go by row sets a tile
    # (classes_suits), against one under CLASSES_MIN_B_BYTES to the skinny forms.
    A = np.empty((lo - 1, 5002), np.float16)
    wt = np.empty((4000, 5002), np.float16).T
    assert TensorMatmul.classes_suits(lo - 1, 4000, 5002, "float16")
    assert dispatch.call_family(A, wt, "float16") is TensorMatmul
    over = dispatch.call_overrides(A, wt, TensorMatmul, "float16", stand_in=True)
    assert over.get("b_classes") is True and "b_phased" not in over and "b_realign" not in over, over
    assert dispatch.call_family(A, np.empty((1500, 5002), np.float16).T, "float16") is Skinny


def test_l2_prefetch_is_asked_where_b_is_read_by_tma_and_searched_not_defaulted():
    """with_l2_prefetch applies to specs that read B by TMA as it is; b_realign and b_phased
    (the producer threads, row sets) clear it, and fields that cannot take it are refused
    naming the field. The default specs leave it at 0 (trees before and after measured level);
    the tuner's space for few rows offers the transposed tiles with and without it."""
    from kgen.ops.tensorcore import WGMMA_L2_PREFETCH_KIB

    p = {"M": 4, "N": 8192, "K": 4096}
    base = TensorMatmul.default_spec(p, "bfloat16")
    assert base.swap_ab and base.l2_prefetch == 0
    spec = base.with_l2_prefetch()
    assert spec.l2_prefetch == WGMMA_L2_PREFETCH_KIB and spec.replace(l2_prefetch=0) == base
    assert spec.with_phased_b().l2_prefetch == 0 and spec.with_realigned_b().l2_prefetch == 0
    assert spec.with_realigned_b().with_l2_prefetch().l2_prefetch == 0   # the producer threads read B
    with pytest.raises(ValueError, match="l2_prefetch"):
        spec.replace(b_phased=True)
    with pytest.raises(ValueError, match=r"l2_prefetch.*\[0, 8, 16, 32, 64\]"):
        spec.replace(l2_prefetch=3)
    with pytest.raises(ValueError, match="l2_prefetch"):
        TensorMatmul(dtype="bfloat16", l2_prefetch=16)   # the mma.sync kernel has no tensor maps
    assert TensorMatmul.mma_default_spec(p, "bfloat16").with_l2_prefetch().l2_prefetch == 0
    asked = {s.l2_prefetch for s in TensorMatmul.search_space(p, "bfloat16") if s.swap_ab}
    assert asked == {0, WGMMA_L2_PREFETCH_KIB, 64}
    src = kgen.render(spec)
    assert "#define PREFETCH_TILES 2 " in src   # 16 KiB of 64 x 64 bfloat16 tiles (8 KiB each)


def _tile_offset(ctx, which: str, r: int, c: int) -> int:
    """a_tile_off / b_tile_off of the template, in Python: element (r, c) of a shared tile."""
    stride, vec = ctx[f"{which}_STRIDE"], ctx["VEC"]
    if not ctx["swizzle"]:
        return r * stride + c
    div, mask = ctx[f"{which}_SW_DIV"], ctx[f"{which}_SW_MASK"]
    return r * stride + ((c // vec) ^ ((r // div) & mask)) * vec + c % vec


def _thread_pieces(threads: int, rows: int, ch: int, vec: int):
    """(thread, i, its first piece's (row, element), piece i's (row, element)) for every
    16-byte piece of a tile of `rows` rows of `ch` pieces, thread t taking pieces t + i threads."""
    for tid in range(threads):
        for i in range(-(-rows * ch // threads)):
            e = tid + i * threads
            if e >= rows * ch:
                break
            yield tid, i, (tid // ch, (tid % ch) * vec), (e // ch, (e % ch) * vec)


def test_whole_tile_copies_land_where_the_clamped_copies_do():
    """The mma.sync kernel copies a tile wholly inside A, B and the K range without clamps
    (load_a_whole / load_b_whole), each thread's chunk i at a fixed distance from its first
    where the rendered source says so. For every thread and chunk, in every storage order, both
    shared layouts and tiles whose chunks do not divide the threads, that distance lands on the
    clamped copy's place (a_tile_off(r, c), r * ld + c), and the source guards the whole-tile
    copies by the block's and the tile's extent. The loaders are the same with either
    edge_copies; this test reads the clamped form's guard, the masked test the other's."""
    ld = 1_000_003   # any pitch: the distances must hold for every one
    shifted = general = 0
    for spec in _mma_sync_tile_specs(edge_copies="clamped"):
        ctx = spec.template_context()
        source = kgen.render(spec)
        assert _whole_guard(spec, "whole_block && k + BK <= k_end") in source, spec.to_json()
        assert "const bool whole_block = m_lim == BM && n_lim == BN;" in source, spec.to_json()
        threads, vec = ctx["THREADS"], ctx["VEC"]
        for which in ("A", "B"):
            name = which.lower()
            body = source[source.index(f"void load_{name}_whole("):]
            body = body[:body.index("\n}\n")]
            rows, ch = ctx[f"{which}_ROWS"], ctx[f"{which}_CH"]
            found = re.search(r"copy_chunk<ALIGNED>\(sm \+ first \+ i \* (\d+), "
                              r"g \+ \(index_t\)\(i \* (\d+)\) \* ld, 16\)", body)
            if found is None:
                assert "(r - tid / " in body, (which, spec.to_json())
                general += 1
                continue
            shifted += 1
            step_at, step_rows = int(found.group(1)), int(found.group(2))
            for tid, i, (r0, c0), (r, c) in _thread_pieces(threads, rows, ch, vec):
                first_at, first = _tile_offset(ctx, which, r0, c0), r0 * ld + c0
                assert first_at + i * step_at == _tile_offset(ctx, which, r, c), (which, tid, i, spec.to_json())
                assert first + i * step_rows * ld == r * ld + c, (which, tid, i, spec.to_json())
    assert shifted > 0 and general > 0   # both forms of the copy are covered


def _mma_sync_tile_specs(**fields):
    """The mma.sync tiles whose copies the CPU tests step through, with `fields`, in all four
    storage orders: each dtype's default, float64's m16n8k16 tiles of 16, 64, 96 and 128 rows, short
    K, both shared layouts, rows of pieces that do not divide the threads (96 columns) and
    pieces that leave threads idle, and one warp whose pieces are 4 rows apart, which the
    swizzle moves."""
    from kgen.ops.tensorcore import TensorMatmul as T

    base = [T.mma_default_spec({"M": 4096, "N": 4096, "K": 4096}, d) for d in DTYPES]
    base += [T(dtype="float16", tile=(64, 96, 32), warp_tile=(32, 48), stages=3, smem_layout="pad"),
             T(dtype="bfloat16", tile=(96, 64, 32), warp_tile=(32, 32), stages=3, smem_layout="pad"),
             T(dtype="float16", tile=(32, 32, 16), warp_tile=(16, 16), stages=2, smem_layout="pad"),
             T(dtype="float64", tile=(32, 32, 8), warp_tile=(16, 16), stages=2, smem_layout="swizzle"),
             T(dtype="float16", tile=(32, 32, 64), warp_tile=(32, 32), stages=2),
             T(dtype="float32", tf32=True, tile=(64, 64, 16), warp_tile=(32, 32), stages=4, smem_layout="swizzle"),
             T.short_k_spec({"M": 4096, "N": 4096, "K": 64}, "bfloat16"),
             T.short_k_spec({"M": 1000, "N": 1000, "K": 20}, "float16"),
             T.few_rows_f64_spec({"M": 13, "N": 4096, "K": 4096}),
             T.row_tile_f64_spec({"M": 80, "N": 4096, "K": 4096}),
             T.row_tile_f64_spec({"M": 200, "N": 4096, "K": 4096}, 128),
             T.default_spec({"M": 4096, "N": 4096, "K": 4096}, "float64")]
    return [s.replace(layout_a=a, layout_b=b, **fields) for s in base for a in ("row", "col") for b in ("row", "col")]


def _whole_guard(spec, condition: str) -> str:
    """The rendered guard of the copies without clamps: the element-load entry takes them too
    where its elements are copied by cp.async (4- and 8-byte types), else only the one whose
    operands are both aligned."""
    return f"if ({'' if spec.template_context()['elem_async'] else 'A_ALIGNED && B_ALIGNED && '}{condition}) {{"


def _limit_args(call: str) -> tuple[str, str]:
    """The (r_lim, c_lim) arguments of a rendered load_a/load_b call (the two before `tid`)."""
    args = [a.strip() for a in call[call.index("(") + 1:call.rindex(")")].split(",")]
    return args[-3], args[-2]


def test_masked_edge_copies_copy_what_the_clamped_copies_do():
    """edge_copies="masked": an edge block copies its k tiles inside the K range as whole tiles
    are copied, each chunk's bytes inside the matrix fixed for the block. For every thread and
    chunk, in every storage order, both shared layouts and tiles whose chunks do not divide the
    threads, and blocks cut at every row or column of the tile, the masked copy (as rendered)
    writes the same shared element, reads the same global element (or the tile's origin where
    it reads nothing) and the same number of bytes as the clamped copy of a whole-K tile; and
    the kernel passes it the clamped copy's limit on the side that is not K's."""
    ld = 1_000_003
    forms = collections.Counter()
    for spec in _mma_sync_tile_specs(edge_copies="masked"):
        ctx = spec.template_context()
        source = kgen.render(spec)
        assert _whole_guard(spec, "k + BK <= k_end") in source, spec.to_json()
        assert "            if (!whole_block) {\n" in source, spec.to_json()
        threads, vec, item = ctx["THREADS"], ctx["VEC"], {"float64": 8, "float32": 4}.get(spec.dtype, 2)
        bk = spec.tile[2]
        for which in ("A", "B"):
            name = which.lower()
            clamped = re.search(rf"load_{name}<{which}_ALIGNED>\(sa[^;]*\);", source).group(0)
            masked = re.search(rf"load_{name}_masked<{which}_ALIGNED, (true|false)>\(sa[^;]*\);",
                               source[source.index("if (!whole_block)"):])
            cut_rows = masked.group(1) == "true"
            r_arg, c_arg = _limit_args(clamped)
            # the clamped copy's K-side limit is k_lim; the masked copy's limit is the other one
            assert (c_arg if cut_rows else r_arg) == "k_lim", (which, clamped, spec.to_json())
            lim_arg = masked.group(0)[:masked.group(0).rindex(",")].rsplit(",", 1)[1].strip()
            assert lim_arg == (r_arg if cut_rows else c_arg), (which, masked.group(0), clamped, spec.to_json())
            body = source[source.index(f"void load_{name}_masked("):]
            body = body[:body.index("\n}\n")]
            rows, ch = ctx[f"{which}_ROWS"], ctx[f"{which}_CH"]
            shifted = re.search(r"copy_chunk<ALIGNED>\(sm \+ first \+ i \* (\d+), "
                                r"b \? g \+ \(index_t\)\(i \* (\d+)\) \* ld : safe, b\)", body)
            if shifted is not None:
                step_at, step_rows = int(shifted.group(1)), int(shifted.group(2))
                assert f"!CUT_ROWS || r0 + i * {step_rows} < lim ? bytes : 0" in body
                assert "bytes = CUT_ROWS ? 16 : (n < 0 ? 0 : (n > VEC ? VEC : n)) * (int)sizeof(in_t);" in body
                assert "int n = lim - (tid % " in body
                forms["shifted"] += 1
            else:
                assert "n ? g + ((index_t)(r - tid / " in body and "n * (int)sizeof(in_t)" in body, body
                assert "int n = CUT_ROWS ? (r < lim ? VEC : 0) : lim - c;" in body
                assert "n = n < 0 ? 0 : (n > VEC ? VEC : n);" in body
                forms["general"] += 1
            sides = (rows, ch * vec)   # the tile's rows and elements a row; one of them is BK
            assert sides[0 if not cut_rows else 1] == bk, (which, sides, bk, spec.to_json())
            for lim in range(1, sides[0 if cut_rows else 1] + 1):
                r_lim, c_lim = (lim, bk) if cut_rows else (bk, lim)
                for tid, i, (r0, c0), (r, c) in _thread_pieces(threads, rows, ch, vec):
                    first_at, first = _tile_offset(ctx, which, r0, c0), r0 * ld + c0
                    n = max(0, min(vec, c_lim - c)) if r < r_lim else 0
                    if shifted is not None:   # the rendered copy, step by step
                        whole = 16 if cut_rows else max(0, min(vec, lim - c0)) * item
                        b = whole if not cut_rows or r0 + i * step_rows < lim else 0
                        got = (first_at + i * step_at, first + i * step_rows * ld if b else "safe", b)
                    else:
                        m = (vec if r < lim else 0) if cut_rows else max(0, min(vec, lim - c))
                        got = (_tile_offset(ctx, which, r, c), first + (r - r0) * ld + (c - c0) if m else "safe",
                               m * item)
                    assert got == (_tile_offset(ctx, which, r, c), r * ld + c if n else "safe", n * item), \
                        (which, lim, tid, i, spec.to_json())
    assert forms["shifted"] > 0 and forms["general"] > 0


def test_inside_mma_skips_exactly_the_row_tiles_past_m():
    """edge_mma="inside": a warp skips an MMA row tile (its MMAs and its A fragments) exactly
    where all the tile's rows lie at or past the block's last row of A. For every warp of the
    mma.sync tiles (every dtype's instruction rows: 16, and float64's m8n8k4 8) and every row
    count the block may hold, the rendered count of live row tiles says so."""
    forms = set()
    for spec in _mma_sync_tile_specs(edge_mma="inside"):
        ctx = spec.template_context()
        source = kgen.render(spec)
        found = re.search(r"const int mi_live = max\(0, min\(MI, \(m_lim - m_w \+ (\d+)\) / (\d+)\)\);", source)
        assert found is not None, spec.to_json()
        plus, per = int(found.group(1)), int(found.group(2))
        mma_m, mi_count, wm = ctx["MMA_M"], ctx["MI"], spec.warp_tile[0]
        assert per == mma_m, spec.to_json()
        forms.add(mma_m)
        body = source[source.index("void load_fragments("):]
        body = body[:body.index("\n}\n")]
        assert body.count("if (mi >= mi_live) continue;") == 1, spec.to_json()   # A's fragments only
        assert "fa, fb, mi_live);" in source
        loop = source[source.index("fa, fb, mi_live);"):]
        assert loop.index("if (mi >= mi_live) continue;") < loop.index("mma(acc[mi][ni], fa[mi], fb[ni]);")
        for m_w in range(0, spec.tile[0], wm):
            for m_lim in range(1, spec.tile[0] + 1):
                q = m_lim - m_w + plus
                live = max(0, min(mi_count, int(q / per)))   # C's division truncates toward zero
                for mi in range(mi_count):
                    assert (mi < live) == (m_w + mi * mma_m < m_lim), (m_w, m_lim, mi, spec.to_json())
    assert forms == {8, 16}


def test_edge_variants_are_the_mma_sync_kernels_and_render_only_when_asked():
    """The fields' own defaults render neither variant; float64's 64 x 64 default (sm_90) and
    its row tiles of 96 (the default at 65-96 rows) and 128 rows ask for the masked copies
    (F64_EDGE_COPIES), its few-row tiles and the 16-bit mma.sync defaults do not, and no default
    skips MMAs."""
    from kgen.ops.tensorcore import TensorMatmul as T

    problem = {"M": 300, "N": 8192, "K": 8192}
    assert T.mma_default_spec(problem, "float64").edge_copies == "clamped"
    f64 = T.default_spec(problem, "float64")
    assert f64.tile == (64, 64, 16) and f64.edge_copies == "masked", f64.to_json()
    rows = [T.default_spec({"M": 80, "N": 8192, "K": 8192}, "float64"),
            T.row_tile_f64_spec({"M": 200, "N": 8192, "K": 8192}, 128)]
    assert [r.tile[0] for r in rows] == [96, 128]
    for masked in [f64] + rows:
        assert masked.edge_copies == "masked", masked.to_json()
        assert "load_a_masked<" in kgen.render(masked) and "load_b_masked<" in kgen.render(masked)
    others = [T.few_rows_f64_spec({"M": 40, "N": 8192, "K": 8192}),
              T.short_k_spec({"M": 1000, "N": 1000, "K": 20}, "float16"), T.mma_default_spec(problem, "bfloat16")]
    for other in others + [f64] + rows:
        assert other.edge_mma == "all" and "mi_live" not in kgen.render(other), other.to_json()
    for other in others:
        assert other.edge_copies == "clamped", other.to_json()
        assert "load_a_masked" not in kgen.render(other), other.to_json()
        assert _whole_guard(other, "whole_block && k + BK <= k_end") in kgen.render(other), other.to_json()
    with pytest.raises(ValueError, match=r"edge_copies='edgy' is not allowed: one of \('clamped', 'masked'\)"):
        f64.replace(edge_copies="edgy")
    with pytest.raises(ValueError, match="edge_copies.*wgmma"):
        T.mma_default_spec({"M": 4096, "N": 4096, "K": 4096}, "bfloat16").replace(
            instruction="wgmma", tile=(128, 128, 64), warp_tile=(64, 128), stages=4, edge_copies="masked")
    with pytest.raises(ValueError, match=r"edge_mma='some' is not allowed: one of \('all', 'inside'\)"):
        f64.replace(edge_mma="some")
    with pytest.raises(ValueError, match="edge_mma.*wgmma"):
        T.mma_default_spec({"M": 4096, "N": 4096, "K": 4096}, "bfloat16").replace(
            instruction="wgmma", tile=(128, 128, 64), warp_tile=(64, 128), stages=4, edge_mma="inside")


@pytest.mark.nvcc
def test_edge_variants_compile_without_spills_at_the_defaults_bounds():
    """The masked copies hold two limits a block, not a count a chunk: the defaults that run
    mma.sync (float64 on sm_90 at three blocks an SM, 16-bit short K) still fit their
    __launch_bounds__ without spilling, and float64's tiles with the MMAs past M skipped too."""
    from kgen.ops.tensorcore import TensorMatmul as T

    f64 = [T.default_spec({"M": 4096, "N": 4096, "K": 4096}, "float64"),
           T.few_rows_f64_spec({"M": 13, "N": 4096, "K": 4096})]
    # The row tiles of 96 and 128 rows, two blocks an SM, fit with the masked copies; with the
    # MMAs past M skipped too (no default asks for it) ptxas spills them (28 stores at 96 rows).
    rows = [T.row_tile_f64_spec({"M": 200, "N": 4096, "K": 4096}, bm) for bm in (96, 128)]
    variants = [(s, "masked", "all") for s in f64 + rows + [T.short_k_spec({"M": 1000, "N": 1000, "K": 20}, "float16")]]
    variants += [(s, copies, "inside") for s in f64 for copies in ("clamped", "masked")]
    _assert_no_spills([s.replace(edge_copies=copies, edge_mma=mma, layout_b=b) for s, copies, mma in variants
                       for b in ("row", "col")])


def _assert_no_spills(specs):
    """Every entry point of every spec compiles for sm_90 without spill stores or loads."""
    with cf.ThreadPoolExecutor(2) as ex:
        built = list(ex.map(lambda s: kgen.compile(s, arch="sm_90"), specs))
    for s, c in zip(specs, built):
        for name, r in c.resources.items():
            assert not r["spill_stores"] and not r["spill_loads"], (s.to_json(), name, r)


def test_fragments_ahead_is_refused_where_there_are_no_fragments_or_an_odd_number_of_k_steps():
    """fragments_ahead alternates two fragment sets within a k tile: a BK that is one MMA deep
    (float64's m16n8k16 at BK = 16) is refused with the ratio named, and so is the wgmma kernel,
    which loads no fragments."""
    f64 = TensorMatmul.default_spec({"M": 4096, "N": 4096, "K": 4096}, "float64")
    with pytest.raises(SpecError, match=r"fragments_ahead=True is not allowed: False unless BK / MMA_K is even "
                                        r"\(here 16 / 16\)"):
        f64.replace(fragments_ahead=True)
    assert f64.replace(mma_shape="m16n8k8", fragments_ahead=True).fragments_ahead
    with pytest.raises(SpecError, match="fragments_ahead.*instruction='wgmma'"):
        TensorMatmul(dtype="bfloat16", tile=(128, 128, 64), warp_tile=(64, 128), stages=4, instruction="wgmma",
                     fragments_ahead=True)


def test_fragments_ahead_loads_the_next_k_step_before_the_mmas_and_refills_after_the_barrier():
    """The rendered main loop of fragments_ahead: two fragment sets, the prologue filling every
    stage, the next k-step's load before this k-step's MMAs, and at a tile's last k-step the
    wait for the next tile, the barrier, the refill of the stage just read and the next tile's
    first fragments, in that order; without the field the loop is the one-set pipeline."""
    for spec in (TensorMatmul.default_spec({"M": 4096, "N": 4096, "K": 4096}, "float64").replace(mma_shape="m16n8k8"),
                 TensorMatmul(dtype="bfloat16", tile=(64, 64, 32), warp_tile=(32, 32), stages=3),
                 TensorMatmul(dtype="float32", tf32=True, tile=(64, 64, 16), warp_tile=(32, 32), stages=4)):
        plain = kgen.render(spec)
        ahead = kgen.render(spec.replace(fragments_ahead=True))
        assert "frag_a_t fa[2][MI];" in ahead and "frag_a_t fa[2][MI];" not in plain
        assert "for (int s = 0; s < STAGES; ++s)" in ahead and "for (int s = 0; s < STAGES - 1; ++s)" in plain
        loop = ahead[ahead.index("for (int ks = 0;"):]
        order = [loop.index(part) for part in (
            "load_fragments(sa, sb, (ks + 1) *", "cp_async_wait<STAGES - 2>();", "__syncthreads();",
            "issue(t + STAGES, read_stage);", "cp_async_commit();", "load_fragments(na, na + A_TILE, 0,",
            "mma(acc[mi][ni], fa[cur][mi], fb[cur][ni]);")]
        assert order == sorted(order), order


@pytest.mark.nvcc
def test_fragments_ahead_float64_tiles_compile_without_spills():
    """float64's m16n8k8 tiles with fragments ahead hold two fragment sets: the few-row tiles the
    tuner's space holds (16-48 rows, at the blocks an SM their rule gives) and the 64 x 64 tile at
    two blocks an SM fit without spills, both storage orders of B, in place or copied."""
    few = [TensorMatmul.few_rows_f64_spec({"M": m, "N": 4096, "K": 4096}) for m in (13, 27, 40)]
    wide = TensorMatmul.default_spec({"M": 4096, "N": 4096, "K": 4096}, "float64").replace(min_blocks=2)
    _assert_no_spills([s.replace(mma_shape="m16n8k8", fragments_ahead=True, layout_b=b, repack=r)
                       for s in (*few, wide) for b in ("row", "col") for r in (True, False)])


@pytest.mark.nvcc
def test_wide_float64_tiles_compile_without_spills():
    """wide_f64_spec's 64 x 128 tiles (32 x 64 warp tiles of m16n8k8, two blocks an SM) fit their
    registers without spills in both orders of B, copied or read in place, K whole or split."""
    wide = [TensorMatmul.wide_f64_spec(p) for p in ({"M": 186, "N": 11244, "K": 1609},
                                                    {"M": 241, "N": 6395, "K": 5505})]
    assert wide[0].split_k == 1 and wide[1].split_k > 1
    _assert_no_spills([s.replace(layout_b=b, repack=r) for s in wide for b in ("row", "col") for r in (True, False)])


def test_l1_copies_make_the_16_byte_copies_allocate_in_l1_and_are_refused_outside_mma_sync():
    """l1_copies turns the operands' 16-byte cp.async from .cg (L2 only) into .ca (L1 too) and
    changes nothing else in the source; the wgmma kernel (TMA reads its tiles) refuses it."""
    spec = TensorMatmul.default_spec({"M": 150, "N": 8000, "K": 4000}, "float64")
    assert not spec.l1_copies
    on, off = kgen.render(spec.replace(l1_copies=True)), kgen.render(spec)
    assert "cp.async.ca.shared.global [%0], [%1], 16, %2;" in on
    assert "cp.async.cg.shared.global [%0], [%1], 16, %2;" in off and "cp.async.cg" not in on
    note = ("// .ca: the copies allocate in L1 as well (l1_copies), so a sector that two k tiles of a row share\n"
            "// is read from the L2 once.\n")
    assert on.replace(note, "").replace("cp.async.ca.shared.global [%0], [%1], 16,",
                                        "cp.async.cg.shared.global [%0], [%1], 16,").replace(
        '"l1_copies":true', '"l1_copies":false') == off
    with pytest.raises(SpecError, match="l1_copies.*instruction='wgmma'"):
        TensorMatmul(dtype="bfloat16", tile=(128, 128, 64), warp_tile=(64, 128), stages=4, instruction="wgmma",
                     l1_copies=True)


def test_l2_fetch_puts_the_prefetch_size_on_every_cp_async_and_is_refused_outside_mma_sync():
    """l2_fetch adds PTX's .L2::<n>B to the 16-byte and the element cp.async of the mma.sync
    kernel and nothing else; 0 renders the copies without it; a size PTX lacks and the wgmma
    kernel (TMA reads its tiles) are refused with what is allowed; the tuner's space of a
    few-row float64 product holds its tile with each size."""
    few = TensorMatmul.few_rows_f64_spec({"M": 29, "N": 14706, "K": 2300})
    assert few.l2_fetch == 128 and not few.l1_copies   # K = 0 mod 4: rows on sectors
    hinted, plain = kgen.render(few), kgen.render(few.replace(l2_fetch=0))
    assert "cp.async.cg.shared.global.L2::128B [%0], [%1], 16, %2;" in hinted
    assert "cp.async.ca.shared.global.L2::128B [%0], [%1], 8, %2;" in hinted
    assert ".L2::" not in plain and "cp.async.cg.shared.global [%0], [%1], 16, %2;" in plain
    note = "// .L2::128B: the L2 fetches 128 bytes around each copy's bytes from DRAM (l2_fetch).\n"
    assert hinted.replace(note, "").replace(".L2::128B", "").replace('"l2_fetch":128', '"l2_fetch":0') == plain
    assert ".L2::256B [%0]" in kgen.render(few.replace(l2_fetch=256))
    with pytest.raises(SpecError, match=r"l2_fetch=96 is not allowed: one of \[0, 64, 128, 256\] \(bytes\)"):
        few.replace(l2_fetch=96)
    with pytest.raises(SpecError, match="l2_fetch.*instruction='wgmma'"):
        TensorMatmul(dtype="bfloat16", tile=(128, 128, 64), warp_tile=(64, 128), stages=4, instruction="wgmma",
                     l2_fetch=128)
    space = TensorMatmul.search_space({"M": 29, "N": 14706, "K": 2300}, "float64")
    assert {s.l2_fetch for s in space if s.tile == few.tile and s.split_k == few.split_k
            and not s.fragments_ahead} == {0, 64, 128, 256}


def test_the_tuner_space_of_a_few_row_float64_product_holds_its_tiles_with_fragments_ahead():
    """For float64 products of 9-48 rows the search space holds the few-row tiles in m16n8k8
    with fragments loaded ahead (their tile, blocks an SM and split as dispatched), and every
    candidate with fragments ahead is a valid mma.sync spec of an even number of k-steps."""
    p = {"M": 40, "N": 4096, "K": 4096}
    few = TensorMatmul.few_rows_f64_spec(p)
    space = TensorMatmul.search_space(p, "float64")
    ahead = [s for s in space if s.fragments_ahead]
    assert few.replace(mma_shape="m16n8k8", fragments_ahead=True) in ahead
    assert all(s.instruction == "mma_sync" and (s.tile[2] // s.mma_mnk[2]) % 2 == 0 for s in ahead)
    assert not any(s.fragments_ahead for s in TensorMatmul.search_space({"M": 512, "N": 512, "K": 512}, "float64"))
    assert not any(s.fragments_ahead for s in TensorMatmul.search_space({"M": 60, "N": 4096, "K": 4096}, "float64"))


def test_repack_a_reads_only_b_by_elements_and_is_refused_where_repack_copies_already():
    """repack_a: the element-load entry instantiates the kernel body with A's copies 16 bytes wide
    (A is copied aligned first where it is not, so the repack kernel is rendered) and B's by
    elements; without it both operands are read by elements and no repack kernel is rendered.
    repack on (which copies every unaligned operand; the wgmma kernel needs it) refuses it."""
    spec = TensorMatmul.default_spec({"M": 119, "N": 8057, "K": 1097}, "float64").replace(
        layout_b="col", repack=False)
    plain, b_only = kgen.render(spec), kgen.render(spec.replace(repack_a=True))
    assert "tc_body<false, false>(A, B, out" in plain and "kgen_tc_repack(" not in plain
    assert "tc_body<true, false>(A, B, out" in b_only and "kgen_tc_repack(" in b_only
    assert "tc_body<true, true>(A, B, out" in plain and "tc_body<true, true>(A, B, out" in b_only
    with pytest.raises(SpecError, match=r"repack_a=True is not allowed: False unless repack=False"):
        spec.replace(repack=True, repack_a=True)


def test_spread_elements_orders_the_element_copies_along_rows_and_is_refused_where_it_cannot_apply():
    """spread_elements: every element-load path (whole, masked and clamped tiles) copies through
    copy_spread_async, which reads elements j, j + CH, ... of a row, and the 16-byte copies are as
    they were; it needs repack off, float32 or float64 and the padded layout, and says so."""
    spec = TensorMatmul.default_spec({"M": 119, "N": 8057, "K": 1097}, "float64").replace(repack=False)
    assert spec.smem_layout == "pad" and spec.edge_copies == "masked"
    spread, plain = kgen.render(spec.replace(spread_elements=True)), kgen.render(spec)
    assert "copy_spread_async" not in plain
    # One call in each of the clamped, whole and masked loaders, for A and for B.
    assert spread.count("copy_spread_async<") == 2 * 3
    assert "cp_async_elem(dst + j + u * CH, in ? src + j + u * CH : safe, in ? 8 : 0);" in spread
    assert spread.count("cp_async16(") == plain.count("cp_async16(")
    clamped = kgen.render(spec.replace(spread_elements=True, edge_copies="clamped"))
    assert clamped.count("copy_spread_async<") == 2 * 2   # no masked loaders
    for fields, why in ((dict(repack=True), "repack=False"), (dict(smem_layout="swizzle"), "smem_layout='pad'")):
        with pytest.raises(SpecError, match=f"spread_elements=True is not allowed: .*{re.escape(why)}"):
            spec.replace(spread_elements=True, **fields)
    with pytest.raises(SpecError, match="spread_elements=True is not allowed: .*dtype float32 or float64"):
        TensorMatmul(dtype="float16", tile=(64, 64, 32), warp_tile=(32, 32), smem_layout="pad", repack=False,
                     spread_elements=True)


@pytest.mark.nvcc
def test_element_copy_variants_of_the_float64_tiles_compile_without_spills():
    """The float64 tiles that take repack_a and spread_elements where dispatch reads a weight by
    elements (the 64 x 64 default, the few-row tiles of 64 rows), and the 96- and 48-row tiles,
    with both, in both weight orders: every entry point fits its registers. (The 64 x 128 tiles,
    at 248 registers without them, spill with spread_elements against a row-major weight; the rule
    leaves them out.)"""
    p = {"M": 119, "N": 8057, "K": 1097}
    tiles = [TensorMatmul.default_spec(p, "float64"), TensorMatmul.few_rows_f64_spec({"M": 60, "N": 8057, "K": 1097}),
             TensorMatmul.row_tile_f64_spec({"M": 80, "N": 8057, "K": 1097}),
             TensorMatmul.few_rows_f64_spec({"M": 40, "N": 8057, "K": 1097})]
    assert [t.tile[:2] for t in tiles] == [(64, 64), (64, 64), (96, 64), (48, 64)]
    _assert_no_spills([s.replace(layout_b=b, repack=False, repack_a=True, spread_elements=True)
                       for s in tiles for b in ("row", "col")])


def test_few_column_float64_tiles_mirror_the_few_row_tiles():
    """few_columns_f64_spec: column tiles of at most 64 covering N, each N's share rounded up to
    16, 32 x 16 warp tiles over the rows a tile, as many blocks an SM as shared memory (either
    operand order) and 128 registers a thread allow, K split by wave_split over those slots."""
    from kgen.ops.tensorcore import c_tiles, wave_split

    for (M, N, K), bn in (((5000, 9, 3000), 16), ((5000, 17, 3000), 32), ((700, 33, 4000), 48),
                          ((700, 64, 4000), 64), ((9000, 100, 2000), 64), ((9000, 120, 2000), 64)):
        for bm in (64, 128):
            s = TensorMatmul.few_columns_f64_spec({"M": M, "N": N, "K": K}, rows_tile=bm)
            assert s.tile == (bm, bn, 16) and s.warp_tile == (32, 16) and s.mma_shape == "m16n8k16", s.to_json()
            threads = (bm // 32) * (bn // 16) * 32
            shared = max(s.replace(layout_a=a, layout_b=b).shared_bytes for a in ("row", "col") for b in ("row", "col"))
            assert s.min_blocks == max(1, min(8, 227 * 1024 // shared, 65536 // (threads * 128)))
            assert s.split_k == wave_split(c_tiles(M, N, bm, bn), 132 * s.min_blocks, K)


@pytest.mark.nvcc
def test_few_column_float64_tiles_compile_without_spills():
    """The few-column float64 tiles of 16-64 columns and 64 or 128 rows fit their registers
    without spills, B row-major copied, read by the element entry beside A's 16-byte copies
    (repack_a) or W.t() read in place, and K merged in a cluster."""
    specs = [TensorMatmul.few_columns_f64_spec({"M": 4000, "N": n, "K": 4000}, rows_tile=bm)
             for n in (13, 30, 40, 60) for bm in (64, 128)]
    merged = [s.replace(split_k=4, split_merge="cluster") for s in specs if s.tile[1] < 64 and s.tile[0] == 64]
    b_elements = [s.replace(repack=False, repack_a=True) for s in specs + merged]
    _assert_no_spills([s.replace(layout_b=b, repack=r) for s in specs for b, r in (("row", True), ("col", False))]
                      + merged + b_elements)


def _staged_column(source: str, BN: int):
    """staged_column as the rendered kernel defines it, evaluated in Python: the branch its
    #if picks for BN, and that branch's return expression (the same operators in C and Python
    on non-negative ints)."""
    body = re.search(r"int staged_column\(int r, int c\) \{\n(.*?)\n\}", source, re.S).group(1)
    branches = re.fullmatch(r"#if (.+)\n\s+return (.+);\n#else\n\s+return (.+);\n#endif", body.strip())
    assert branches, body
    cond, then, other = branches.groups()
    expr = then if eval(cond, {"BN": BN}) else other
    return lambda r, c: eval(expr, {"BN": BN, "r": r, "c": c})


def test_staged_sums_keep_each_row_in_place_at_every_tile_width():
    """The layout a block stages its sums in (the cluster merge of K slices, and the output of
    an odd N through shared memory) is a permutation of each row's columns that keeps pairs
    together, for tiles of 16 to 256 columns: a narrow tile's columns would otherwise land in
    the next row and the merge would add the wrong sums."""
    for bm, bn in ((64, 16), (64, 32), (64, 48), (128, 16), (64, 64), (64, 128), (32, 192), (64, 256)):
        warp = (32, 16) if bn % 32 else (32, 32)
        spec = TensorMatmul(dtype="float64", tile=(bm, bn, 16), warp_tile=warp, stages=4, smem_layout="pad",
                            mma_shape="m16n8k16", split_k=3, split_merge="cluster") if bn <= 64 else \
            TensorMatmul(dtype="float64", tile=(bm, bn, 16), warp_tile=(32, 32), stages=4, smem_layout="pad",
                         mma_shape="m16n8k16")
        col = _staged_column(kgen.render(spec), bn)
        for r in range(bm):
            placed = [col(r, c) for c in range(0, bn, 2)]
            assert sorted(p + d for p in placed for d in (0, 1)) == list(range(bn)), (bn, r, placed)
            assert all(p % 2 == 0 for p in placed)
        # Eight consecutive rows start at different columns (different banks), where the row
        # leaves room for as many: at most one start a row per 8 columns.
        assert len({col(r, 0) for r in range(8)}) == min(8, bn // 8), bn


def test_mma_sync_last_k_tile_issues_only_the_k_steps_inside_k():
    """The plain k loop of mma.sync runs whole tiles unguarded and, in a last tile that ends
    inside it, stops at the first k-step wholly past K (tests/test_exact_gpu.py plants
    k_tail_step_short, a guard one k-step short, and the GPU tests must catch it); the
    fragments_ahead loop, the wgmma kernel and edge_mma="inside" (spills) keep their own."""
    import re

    for spec in (TensorMatmul(dtype="float16"), TensorMatmul(dtype="float64", tile=(64, 64, 16), warp_tile=(32, 32)),
                 TensorMatmul(dtype="float32", tf32=True, split_tf32=True, tile=(64, 64, 32), warp_tile=(32, 32),
                              smem_layout="pad", repack=False)):
        src = kgen.render(spec)
        assert "const int k_here = (int)min((index_t)BK, k_end - k_begin - (index_t)t * BK);" in src
        assert re.search(r"if \(k_here == BK\) \{.*?\} else \{.*?if \(kk >= k_here\) break;", src, re.S), spec
    ahead = TensorMatmul(dtype="float16", fragments_ahead=True)
    wgmma = TensorMatmul(dtype="float16", instruction="wgmma", tile=(128, 128, 64), warp_tile=(64, 128))
    inside = TensorMatmul(dtype="float64", tile=(64, 64, 16), warp_tile=(32, 32), edge_mma="inside")
    for spec in (ahead, wgmma, inside):
        assert "k_here" not in kgen.render(spec), spec


def test_staged_output_is_stored_with_each_thread_on_fixed_columns():
    """The mma.sync kernel's staged store of an output that allows no pair stores (an odd N or
    pitch; staged_unaligned_output) keeps each thread on fixed columns of the tile and walks its
    rows (store_staged_tile), with no division or 64-bit product per element, for every such
    spec the defaults, the representative set and the search space give: their thread counts
    and BN divide one another, the condition the template takes that walk under. The walk's
    rows and columns cover each of the tile's BM x BN places exactly once, by elements and, for
    outputs that allow pair stores (staged too where the block's K is short), by pairs."""
    T = TensorMatmul
    specs = {s.key: s for s in representative()}
    for dtype in ("bfloat16", "float16", "float64"):
        for problem in ({"M": 5122, "N": 5923, "K": 28}, {"M": 948, "N": 1217, "K": 21},
                        {"M": 301, "N": 259, "K": 300}, {"M": 2000, "N": 3001, "K": 4000}):
            specs.update((s.key, s) for s in T.search_space(problem, dtype) if not s.wgmma)
            defaults = [T.mma_default_spec(problem, dtype).replace(repack=False)]
            if dtype != "float64":
                defaults += [T.short_k_spec(problem, dtype), T.element_spec(problem, dtype)]
            specs.update((s.key, s) for s in defaults)
    staged = [s for s in specs.values() if s.staged_unaligned_output]
    assert len({(s.tile[:2], s.threads) for s in staged}) >= 4
    def walk(BM, BN, threads, width):
        """The places store_staged_tile's threads store, `width` columns a thread (1: elements;
        2: pairs, for outputs staged where the block's K is short)."""
        units = BN // width
        step, passes = max(1, threads // units), max(1, units // threads)
        places = collections.Counter()
        for tid in range(threads):
            for j in range(passes):
                c = width * ((tid % units if threads >= units else tid) + j * threads)
                for r in range(tid // units if threads >= units else 0, BM, step):
                    places.update((r, c + w) for w in range(width))
        return places

    for s in staged:
        BM, BN, _ = s.tile
        threads = s.threads
        for width in (1, 2):
            assert threads % (BN // width) == 0 or (BN // width) % threads == 0, (width, s.to_json())
            places = walk(BM, BN, threads, width)
            assert set(places) == {(r, c) for r in range(BM) for c in range(BN)} and set(places.values()) == {1}
    src = kgen.render(staged[0])
    assert "store_staged_tile((unsigned)__cvta_generic_to_shared(tile), out" in src
    assert "(beta == (acc_t)0 && k_end - k_begin <= STAGED_PAIRS_MAX_K)" in src
