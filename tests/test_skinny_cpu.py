"""CPU checks of the skinny-products family: validation, the launch plan (K slabs cover K
once, aligned, enough blocks), the choice of kernel form from strides, default_spec and
suits() on random skinny shapes, the warp reduction plan (simulated), rendering, and
nvcc/ptxas builds for sm_90 of a representative set with no register spills."""
from __future__ import annotations

import concurrent.futures as cf
import json
import math
import random
import re

import numpy as np
import pytest

import kgen
from kgen.core.spec import SpecError, spec_from_json
import kgen.ops.skinny as skinny_module
from kgen.ops.tensorcore import TensorMatmul
from kgen.ops.skinny import (MODE_ATOMIC, MODE_CLUSTER, MODE_DIRECT, MODE_PARTIALS, MODE_TICKET, SIMT_F32_ROWS,
                              SMALL_SIMT_F64_LARGE, SMALL_SIMT_F64_MAX_K, SMALL_SIMT_MIN_K, SMALL_SIMT_ROWS,
                              SMALL_SIMT_WIDE_ROWS, SUITS_ROWS, TC16_ALIGNED_ROWS, TC16_AXPY_ROWS, TC16_SUITS_ROWS,
                              TC_MIN_DIM, TC_SUITS_ROWS, WIDE_DOT_MIN_K_16, Skinny, _form, _slabs, tolerance)

DTYPES = ("float32", "float64", "float16", "bfloat16")


@pytest.mark.parametrize("fields, field", [
    (dict(dtype="int32"), "dtype"),
    (dict(rows=0), "rows"),
    (dict(rows=65), "rows"),
    (dict(warp_cols=9), "warp_cols"),
    (dict(lane_vectors=0), "lane_vectors"),
    (dict(threads=100), "threads"),
    (dict(threads=32), "threads"),
    (dict(vector_bytes=12), "vector_bytes"),
    (dict(vector_bytes=4, dtype="float64"), "vector_bytes"),   # narrower than one element
    (dict(loads=0), "loads"),
    (dict(k_split=-1), "k_split"),
    (dict(waves=0), "waves"),
    (dict(merge="tree"), "merge"),
    (dict(merge="atomic", dtype="bfloat16"), "merge"),         # 16-bit atomics would round partials
    (dict(merge="cluster"), "k_split"),                        # the cluster's size is compiled in
    (dict(merge="cluster", k_split=1), "k_split"),
    (dict(merge="cluster", k_split=9), "k_split"),             # past the portable cluster size
    (dict(rows=64, warp_cols=4), "warp_cols"),                 # 256 accumulators a thread
    (dict(rows=64, warp_cols=1, lane_vectors=4, dtype="float64"), "lane_vectors"),
    (dict(min_blocks=9), "min_blocks"),
    (dict(min_blocks=0), "min_blocks"),
    (dict(rows=8, warp_cols=8, loads=16, threads=512), "threads"),  # 64 accumulators + 64 in flight > 128
])
def test_invalid_fields_name_the_field(fields, field):
    with pytest.raises(SpecError, match=field):
        Skinny(**fields)


def test_json_round_trip_and_type_checks():
    s = Skinny(dtype="bfloat16", rows=12, warp_cols=2, merge="two_pass", k_split=7)
    assert spec_from_json(s.to_json()) == s and spec_from_json(s.to_json()).key == s.key
    with pytest.raises(SpecError, match="rows"):
        Skinny(rows="8")
    with pytest.raises(SpecError, match="unknown field"):
        spec_from_json(json.dumps({"kernel": "skinny", "tile": [1, 2, 3]}))


@pytest.mark.parametrize("dtype", DTYPES)
def test_geometry_slabs_cover_k_once_aligned(dtype):
    rng = random.Random(1)
    for _ in range(300):
        try:
            s = Skinny(dtype=dtype, rows=rng.choice([1, 4, 8, 16]), warp_cols=rng.choice([1, 2, 4]),
                       threads=rng.choice([64, 128, 256, 512]), k_split=rng.choice([0, 0, 1, 3, 64]),
                       merge=rng.choice(["single_pass", "two_pass"]), loads=rng.choice([2, 8]))
        except SpecError:
            continue  # too many registers for the block size
        form = rng.choice(["dot", "axpy"])
        width = rng.choice(s.widths() if form == "dot" else s.axpy_widths())
        R, NC, K = rng.randint(1, 64), rng.randint(1, 20000), rng.randint(1, 30000)
        slots = rng.choice([132, 264, 1056])
        g = s.geometry(form, width, R, NC, K, slots)
        splits, ks = g["splits"], g["ks"]
        assert splits >= 1 and (splits - 1) * ks < K <= splits * ks      # every k in exactly one slab
        if form == "dot":
            assert ks % (32 * s.vec) == 0                                 # slabs start on whole vectors
        cols = s.dot_cols() if form == "dot" else s.axpy_cols(width)
        assert g["grid"] == (-(-NC // cols), splits, -(-R // s.rows))
        merged = {"single_pass": MODE_TICKET, "two_pass": MODE_PARTIALS}
        assert g["mode"] == (MODE_DIRECT if splits == 1 else merged[s.merge])
        if s.k_split:
            assert splits <= s.k_split
        else:
            # Auto: near `waves` waves of blocks, K not cut finer than `least`, and the last wave
            # at least as full as with the split that asks for exactly `waves` waves.
            least = 2 * (s.dot_step if form == "dot" else s.warps * s.axpy_unroll)
            unit = 32 * s.vec if form == "dot" else s.warps
            most = max(1, K // least)
            want = min(-(-s.waves * slots // g["tiles"]), most)
            assert splits <= most and (splits >= _slabs(K, (want + 1) // 2, unit) or splits == 1)
            tiles = g["tiles"]
            assert round(_fill(tiles, splits, slots), 2) >= round(_fill(tiles, _slabs(K, want, unit), slots), 2)


def _fill(tiles: int, splits: int, slots: int) -> float:
    """How full the last wave of a grid of tiles x splits blocks is, on `slots` resident blocks."""
    waves = tiles * splits / slots
    return waves / math.ceil(waves)


def test_auto_split_fills_132_sms_for_decode_shapes():
    s = Skinny.default_spec({"M": 1, "N": 4096, "K": 4096}, "float32")
    g = s.geometry("dot", 4, 1, 4096, 4096, 132 * 4)
    assert g["grid"][0] * g["grid"][1] >= 2 * 132 and g["splits"] > 1
    assert Skinny(merge="atomic").geometry("axpy", 4, 8, 4096, 4096, 264)["mode"] == MODE_ATOMIC
    assert Skinny(k_split=1).geometry("dot", 4, 8, 4096, 4096, 264)["mode"] == MODE_DIRECT


def test_simt_dot_form_keeps_k_whole_from_half_the_sms():
    """The SIMT dot form (B = W.t()) splits K only while its column tiles are fewer than half
    the SMs (DOT_WHOLE_K_SM_SHARE); other forms, and a call that names no SM count, keep the
    wave rule."""
    from kgen.ops.skinny import DOT_WHOLE_K_SM_SHARE

    assert DOT_WHOLE_K_SM_SHARE == 0.5
    one = Skinny.default_spec({"M": 1, "N": 4096, "K": 4096}, "float32")   # 32 columns a block
    for N, whole in ((4096, True), (2112, True), (2080, False), (1216, False)):
        g = one.geometry("dot", 4, 1, N, 4096, 132 * 8, 132)
        assert (g["splits"] == 1) == whole, (N, g)
        assert g["tiles"] == -(-N // 32)
        assert one.geometry("dot", 4, 1, N, 4096, 132 * 8)["splits"] > 1   # no SM count: the wave rule
    # Where it splits, it splits as before; a fixed k_split is kept.
    assert one.geometry("dot", 4, 1, 1216, 4096, 132 * 8, 132) == one.geometry("dot", 4, 1, 1216, 4096, 132 * 8)
    assert one.replace(k_split=4).geometry("dot", 4, 1, 4096, 4096, 132 * 8, 132)["splits"] == 4
    # The axpy form (row-major B) and the tensor-core dot form are not affected.
    for form, spec in (("axpy", one), ("tc_dot", Skinny.default_spec({"M": 12, "N": 8192, "K": 4096}, "float32"))):
        assert spec.geometry(form, 4, 1 if form == "axpy" else 12, 8192, 4096, 132 * 8, 132) == \
            spec.geometry(form, 4, 1 if form == "axpy" else 12, 8192, 4096, 132 * 8)


def test_simt_dot_form_splits_few_tiles_of_three_rows_or_more():
    """No more column tiles than SMs (at least half of them) of 3+ float32 rows with a long K:
    about two blocks an SM (floor(2 x SMs / tiles) slabs; two slabs from a longer K than three);
    short K, 1-2 rows, other dtypes and more tiles than SMs keep K whole."""
    from kgen.ops.skinny import DOT_FEW_TILES_MIN_K, DOT_FEWER_TILES_MIN_K, dot_few_tile_slabs

    four = Skinny.default_spec({"M": 4, "N": 5432, "K": 9152}, "float32")
    assert four.dot_cols() == 64 and not four.tensor_cores
    for N, K, splits in ((5432, 9152, 3), (4998, 13248, 3), (6385, 5568, 2), (8404, 7424, 2),
                         (8512, 9152, 1), (5432, 1152, 1), (5432, DOT_FEWER_TILES_MIN_K, 3),
                         (6385, DOT_FEW_TILES_MIN_K - 1, 1), (6385, DOT_FEW_TILES_MIN_K, 2)):
        g = four.geometry("dot", 4, 4, N, K, 132 * 8, 132)
        assert g["splits"] == splits, (N, K, g)
        assert g["mode"] == (MODE_DIRECT if splits == 1 else MODE_TICKET)
    two = Skinny.default_spec({"M": 2, "N": 3000, "K": 9152}, "float32")   # 32 columns: 94 tiles
    assert two.geometry("dot", 4, 2, 3000, 9152, 132 * 8, 132)["splits"] == 1
    assert dot_few_tile_slabs("float64", 4, 85, 9152, 132) == 1
    assert dot_few_tile_slabs("float32", 4, 66, 9152, 132) == 4
    assert dot_few_tile_slabs("float32", 4, 132, 9152, 132) == 2
    assert dot_few_tile_slabs("float32", 4, 133, 9152, 132) == 1


def test_form_from_strides():
    assert _form(4096, 4096, 1, 4096) == ("dot", 4096)       # W stored N x K, B = W.T
    assert _form(4096, 4096, 4100, 1) == ("axpy", 4100)      # B row-major with a padded row
    assert _form(4096, 4096, 3, 5) == (None, 0)              # no unit stride
    assert _form(1, 777, 1, 9) == ("dot", 777)               # one column: k-contiguous vector
    assert _form(1, 777, 9, 1) == ("axpy", 9)                # one column, strided
    assert _form(300, 1, 5, 1) == ("axpy", 300)              # K = 1
    assert _form(300, 1, 1, 5) == ("dot", 5)


def test_default_spec_and_suits_on_random_skinny_shapes():
    rng = random.Random(7)
    limits = {"max_threads_per_block": 1024, "max_shared_per_block_optin": 227 * 1024}
    for _ in range(400):
        dtype = rng.choice(DTYPES)
        small, large, K = rng.randint(1, 300), rng.randint(1, 20000), rng.randint(1, 20000)
        M, N = (small, large) if rng.random() < 0.5 else (large, small)
        p = {"M": M, "N": N, "K": K}
        s = Skinny.default_spec(p, dtype)
        r = min(M, N)
        # float32 past the SIMT range, or past SIMT_F32_ROWS with N and K >= TC_MIN_DIM: the
        # split-TF32 tensor-core forms, merged by a second kernel; 16-bit from 2 rows: the
        # mma.m16n8k16 dot form, merged by a second kernel from 5 rows.
        half = dtype in ("float16", "bfloat16")
        wide = min(max(M, N), K) >= TC_MIN_DIM
        # float32 of 13-64 rows whose N and K are not both large: the SIMT forms (ticket merge).
        tc = (dtype == "float32" and (r > SMALL_SIMT_ROWS or wide and r > SIMT_F32_ROWS)) or (half and r > 1)
        assert s.dtype == dtype and s.k_split == 0 and s.tensor_cores == tc
        assert s.merge == ("two_pass" if tc and (r > 4 or not half) else "single_pass")
        assert s.prune_reason(p, limits) is None or min(M, N) == 1
        if r <= 16 and dtype == "float32" and tc:
            # float32's tensor-core forms work in whole 8-row tiles: one spec for each tile count
            assert s.rows == -(-r // 8) * 8 and s.tc_ntiles == -(-r // 8)
        elif r <= 16:
            assert s.rows == r                                   # no idle accumulator rows
        elif r <= 64:
            assert r <= s.rows < r + 8
        else:
            tiles = -(-r // s.rows)
            assert s.rows <= 64 and tiles * s.rows - r < 8 * tiles   # even tiles, little waste
        acc = 2 if dtype == "float64" else 1
        want = 4 if s.rows <= 2 else max(1, min(8, 64 // (s.rows * acc)))  # ~64 accumulator registers
        if half and s.rows == 1 and p["K"] >= WIDE_DOT_MIN_K_16:
            want = 8   # one row of a 16-bit weight along a long K: twice the loads in flight a lane
        assert s.warp_cols == want
        # One wave of blocks: 16-bit at 1-2 rows, float32's tensor-core forms up to 16 rows.
        one = (half and r <= 2) or (dtype == "float32" and s.tensor_cores and r <= 16)
        assert s.waves == (1 if one else 2)
        if half and tc:   # 16-bit dot form: warps share K slabs up to 8 rows; 1 tile a warp past 32
            assert s.k_warps == (4 if r <= 8 else 1) and s.tc_tiles == (2 if s.rows <= 32 else 1)
            assert s.axpy_k_warps == (4 if 3 <= r <= 16 else 1) and s.lane_vectors == 1   # axpy form: 3-16 rows
            assert s.runs_tc_axpy == (r >= 3)   # 1-2 rows: the SIMT axpy form for a row-major operand
        else:
            assert s.k_warps == 1 and s.axpy_k_warps == 1
        for kc in (False, True):
            for in_place in (False, True):
                big = max(M, N) >= TC_MIN_DIM and K >= TC_MIN_DIM
                if kc:
                    rows16 = TC16_ALIGNED_ROWS if in_place else TC16_SUITS_ROWS
                else:
                    rows16 = TC16_AXPY_ROWS[in_place]
                want_suits = (r <= SUITS_ROWS[dtype] or (dtype == "float32" and big and r <= TC_SUITS_ROWS[kc])
                              or (half and big and r <= rows16)
                              or (dtype == "float32" and not big and r <= SMALL_SIMT_ROWS and K >= SMALL_SIMT_MIN_K
                                  and (max(M, N) < TC_MIN_DIM or r <= SMALL_SIMT_WIDE_ROWS))
                              or (dtype == "float64" and r <= SMALL_SIMT_ROWS
                                  and SMALL_SIMT_MIN_K <= K <= SMALL_SIMT_F64_MAX_K and max(M, N) < SMALL_SIMT_F64_LARGE
                                  and not TensorMatmul.few_columns_f64_suits(M, N, K)))
                if half and in_place and M <= N and TensorMatmul.swap_suits(M, N, K, dtype):
                    want_suits = False   # A's rows as the wgmma N, from one row
                assert Skinny.suits(M, N, K, dtype, kc, in_place) == want_suits
    assert Skinny.suits(1, 4096, 4096, "float32") and Skinny.suits(4096, 8, 4096, "float32")
    assert Skinny.suits(1, 4096, 4096, "bfloat16") and Skinny.suits(4, 4096, 4096, "bfloat16")
    # 16-bit against a row-major weight: the mma.m16n8k16 axpy form up to 16 rows where wgmma would
    # copy it first, up to 8 where wgmma reads it in place.
    assert Skinny.suits(4096, 8, 4096, "bfloat16", False, True)
    assert not Skinny.suits(4096, 9, 4096, "bfloat16", False, True)
    assert Skinny.suits(8, 4096, 4096, "bfloat16", False)
    # ... but up to 64 rows against an aligned weight (N and K of 1024 or more) run on sm_90
    # with A's rows as the wgmma N (TensorMatmul.swap_suits), from one row, in either order.
    for M, N, K in ((1, 4096, 4096), (2, 8192, 2048), (8, 6720, 1088), (9, 2048, 3456), (16, 8192, 2048),
                    (64, 1024, 1024)):
        for kc in (False, True):
            assert not Skinny.suits(M, N, K, "bfloat16", kc, True), (M, N, K, kc)
            assert Skinny.suits(M, N, K, "bfloat16", True, False), (M, N, K)   # not in place: the skinny forms
    assert not Skinny.suits(9, 6720, 1088, "bfloat16", False, True)
    # Short K or a narrow weight keep the bounds they had: the tiled tensor-core family for 8
    # rows of K 512, the SIMT forms for 2 rows of 960 columns.
    assert not TensorMatmul.swap_suits(8, 4096, 512, "bfloat16")
    assert not TensorMatmul.swap_suits(2, 960, 4096, "bfloat16")
    assert not Skinny.suits(8, 4096, 512, "bfloat16", True, True) and Skinny.suits(2, 960, 4096, "bfloat16", True, True)
    assert Skinny.suits(16, 4098, 4096, "float16", False) and not Skinny.suits(17, 4098, 4096, "float16", False)
    assert not Skinny.suits(8, 4096, 512, "bfloat16", False, True)
    # 16-bit: 3-64 rows against a k-contiguous weight (W.T), on the mma.m16n8k16 dot form.
    assert Skinny.suits(4, 4096, 4096, "float16", True) and Skinny.suits(64, 4096, 4096, "bfloat16", True)
    assert not Skinny.suits(65, 4096, 4096, "bfloat16", True) and not Skinny.suits(17, 4096, 512, "float16", True)
    # ... up to 16 where the wgmma kernel reads the weight in place (aligned rows, sm_90) and
    # does not take the rows as its N: few columns.
    assert Skinny.suits(4096, 16, 4096, "bfloat16", True, True) and Skinny.suits(4096, 3, 4096, "float16", True, True)
    assert not Skinny.suits(4096, 17, 4096, "bfloat16", True, True) and Skinny.suits(17, 4096, 4096, "bfloat16", True)
    assert not Skinny.suits(4096, 4096, 4096, "float32") and not Skinny.suits(17, 4096, 4096, "float64")
    # float32: 13-96 rows in either storage order, up to 256 against a k-contiguous weight (W.T).
    assert Skinny.suits(17, 4096, 4096, "float32") and Skinny.suits(96, 4096, 4096, "float32", False)
    assert not Skinny.suits(97, 4096, 4096, "float32", False) and Skinny.suits(256, 4096, 4096, "float32", True)
    assert not Skinny.suits(257, 4096, 4096, "float32", True)
    # float32 small products of 13-64 rows (N and K not both >= TC_MIN_DIM, K >= SMALL_SIMT_MIN_K):
    # the SIMT forms with the ticket merge.
    assert Skinny.suits(17, 4096, 512, "float32", True) and Skinny.suits(193, 50, 461, "float32")
    # ... past 32 rows only where the large side is below TC_MIN_DIM.
    assert not Skinny.suits(65, 4096, 512, "float32") and not Skinny.suits(1142, 22, 48, "float32")
    assert Skinny.suits(32, 2833, 270, "float32") and not Skinny.suits(7152, 63, 262, "float32")
    s = Skinny.default_spec({"M": 193, "N": 50, "K": 461}, "float32")
    assert not s.tensor_cores and s.merge == "single_pass" and s.rows == 56
    # float64 small products of 9-64 rows or columns: the same forms where the large side is
    # below SMALL_SIMT_F64_LARGE and K at least SMALL_SIMT_MIN_K ...
    big = SMALL_SIMT_F64_LARGE
    assert Skinny.suits(16, 51, 554, "float64") and Skinny.suits(64, big - 1, 64, "float64")
    assert Skinny.suits(big - 1, 64, 255, "float64") and Skinny.suits(376, 16, 145, "float64")
    assert not Skinny.suits(16, big, 554, "float64") and not Skinny.suits(65, 100, 554, "float64")
    assert not Skinny.suits(16, 51, SMALL_SIMT_MIN_K - 1, "float64")
    # K past SMALL_SIMT_F64_MAX_K stays where it was: the tensor cores once past 2^28 multiply-adds.
    from kgen.tune import dispatch
    assert Skinny.suits(64, big - 1, SMALL_SIMT_F64_MAX_K, "float64")
    assert 64 * (big - 1) * SMALL_SIMT_F64_MAX_K < dispatch.TENSOR_F64_MIN_MACS
    assert not Skinny.suits(64, big - 1, SMALL_SIMT_F64_MAX_K + 1, "float64")
    assert dispatch.matmul_family(64, big - 1, 2 * SMALL_SIMT_F64_MAX_K, "float64") is TensorMatmul
    # ... except where the float64 few-column tiles run (9-64 columns, 128 rows or more, K >= 256).
    assert TensorMatmul.few_columns_f64_suits(300, 40, 700) and not Skinny.suits(300, 40, 700, "float64")
    assert Skinny.suits(40, 300, 700, "float64")


def test_search_space_is_valid_and_contains_the_default():
    p = {"M": 8, "N": 4096, "K": 4096}
    space = Skinny.search_space(p, "float32")
    assert Skinny.default_spec(p, "float32") in space and len(space) > 20
    assert len({s.key for s in space}) == len(space)
    assert {s.merge for s in space} == {"single_pass", "two_pass", "atomic", "cluster"}
    assert {s.k_split for s in space if s.merge == "cluster"} == {2, 4, 8}
    assert all(s.merge != "atomic" for s in Skinny.search_space(p, "float16"))


def test_family_interface_reference_and_tolerance():
    p = {"M": 3, "N": 50, "K": 70}
    rng = np.random.default_rng(0)
    A, B = Skinny.make_inputs(p, "float16", rng)
    assert A.dtype == np.float16 and A.shape == (3, 70) and B.shape == (70, 50)
    ref = Skinny.reference_output(p, (A, B))
    assert ref.dtype == np.float64 and np.allclose(ref, A.astype(np.float64) @ B.astype(np.float64))
    assert Skinny.output_shape(p) == (3, 50)
    w = Skinny.work(p, "bfloat16")
    assert w["bytes"] == (3 * 70 + 70 * 50 + 3 * 50) * 2 and w["flops"] == 2 * 3 * 50 * 70
    tol = {d: tolerance(d, 100) for d in ("bfloat16", "float16", "float32", "float64")}
    assert tol["bfloat16"] > tol["float16"] > tol["float32"] > tol["float64"]
    assert Skinny().tolerance_for(p) == tolerance("float32", 70)


def test_warp_reduce_scatter_plan_sums_every_value_once():
    """Simulate the dot form's shuffle reduction plan on 32 lanes: each flat index must end
    on exactly one emitting lane, holding the sum over all lanes."""
    rng = np.random.default_rng(3)
    for rows, wc in [(1, 1), (1, 4), (3, 4), (5, 3), (8, 4), (16, 4), (24, 2), (48, 1), (64, 1), (12, 5)]:
        s = Skinny(rows=rows, warp_cols=wc, loads=4)
        levels, kept, dup = s.scatter_levels()
        vals = rng.standard_normal((32, rows * wc))
        v, base = [list(x) for x in vals], [0] * 32
        for lv in levels:
            o, c, new = lv["offset"], lv["count"], [list(x) for x in v]
            for lane in range(32):
                if lv["halve"]:
                    h, up, p = c // 2, bool(lane & o), lane ^ o
                    for i in range(h):
                        new[lane][i] = (v[lane][i + h] if up else v[lane][i]) + (v[p][i] if p & o else v[p][i + h])
                    base[lane] += h if up else 0
                else:
                    for i in range(c):
                        new[lane][i] = v[lane][i] + v[lane ^ o][i]
            v = new
        got = {}
        for lane in range(32):
            if lane & dup:
                continue
            for i in range(kept):
                assert base[lane] + i not in got
                got[base[lane] + i] = v[lane][i]
        assert sorted(got) == list(range(rows * wc))
        assert np.allclose([got[f] for f in range(rows * wc)], vals.sum(0))


def test_render_is_deterministic_and_lists_every_width():
    for dtype in DTYPES:
        s = Skinny(dtype=dtype, rows=5)
        src = kgen.render(s)
        assert src == kgen.render(Skinny(dtype=dtype, rows=5))
        for w in s.widths():
            assert f"kgen_skinny_dot_v{w}(" in src
        for w in s.axpy_widths():
            assert f"kgen_skinny_axpy_v{w}(" in src
        assert "kgen_skinny_merge(" in src and "kgen_skinny_prescale(" in src
        assert ("atomicAdd(o.O" in src) == (dtype in ("float32", "float64"))
    assert Skinny(dtype="float16").widths() == [8, 4, 2, 1] and Skinny(dtype="float64").widths() == [2, 1]
    assert Skinny(vector_bytes=8).widths() == [2, 1]


def test_cluster_merge_always_launches_its_compiled_slabs_and_covers_k_once():
    rng = random.Random(11)
    for _ in range(300):
        dtype = rng.choice(DTYPES)
        splits = rng.randint(2, 8)
        tc = dtype != "float64" and rng.random() < 0.5
        s = Skinny(dtype=dtype, rows=rng.choice([1, 4, 8]), warp_cols=1 if tc else 4, tensor_cores=tc,
                   merge="cluster", k_split=splits)
        form = rng.choice(["tc_dot", "tc_axpy"] if tc else ["dot", "axpy"])
        K = rng.choice([1, 7, 64, 1000, 4099, 20000])
        g = s.geometry(form, 1, 8, 3000, K, 264, 132)
        # Grid y is the cluster: the compiled size even where K leaves some slabs empty.
        assert g["grid"][1] == g["splits"] == splits and g["mode"] == MODE_CLUSTER
        unit = {"tc_dot": 32 * s.k_warps, "tc_axpy": 16 * s.axpy_k_warps, "dot": 32 * s.vec, "axpy": s.warps}[form]
        assert g["ks"] % unit == 0 and g["ks"] * splits >= K and g["ks"] * (splits - 1) < K + unit * splits


def test_cluster_merge_renders_cluster_dims_on_the_main_entries_only():
    for spec in (Skinny(rows=4, merge="cluster", k_split=4),
                 Skinny(rows=12, warp_cols=1, tensor_cores=True, merge="cluster", k_split=8),
                 Skinny(dtype="bfloat16", rows=6, warp_cols=1, tensor_cores=True, merge="cluster", k_split=2)):
        src = kgen.render(spec)
        entries = re.findall(r'extern "C" __global__ void (.*?)\n?kgen_skinny_(\w+)\(', src)
        dims = f"__cluster_dims__(1, {spec.k_split}, 1) "
        for attrs, name in entries:
            assert (dims in attrs) == (name not in ("merge", "prescale")), (name, attrs)
        assert "barrier.cluster.arrive.release" in src
    assert "__cluster_dims__" not in kgen.render(Skinny(rows=4, merge="two_pass", k_split=4))
    with pytest.raises(ValueError, match="merge='cluster'"):
        Skinny(merge="cluster", k_split=4).target_arch("sm_80")
    assert "merge='cluster'" in Skinny(merge="cluster", k_split=4).prune_reason(
        {"M": 4, "N": 4096, "K": 4096}, {"compute_capability": 80})


def test_simt_forms_ask_ptxas_for_more_resident_blocks_where_few_accumulators_allow():
    # axpy: 1024 resident threads while a thread holds at most 16 accumulators (float32 to 4
    # rows, 16-bit to 2); dot: 512 while it holds fewer than 64; min_blocks is a floor for both.
    for dtype, rows, axpy in (("float32", 1, 4), ("float32", 4, 4), ("float32", 5, 1), ("float32", 8, 1),
                              ("bfloat16", 1, 4), ("bfloat16", 2, 4), ("float16", 3, 1), ("float64", 4, 4),
                              ("float64", 5, 1)):
        assert Skinny(dtype=dtype, rows=rows).axpy_min_blocks == axpy, (dtype, rows)
    assert Skinny(rows=2, threads=512).axpy_min_blocks == 2
    assert Skinny(rows=8, min_blocks=2).axpy_min_blocks == 2
    assert Skinny(rows=12, warp_cols=5).dot_min_blocks == 2          # 60 accumulators
    assert Skinny(rows=8, warp_cols=8).dot_min_blocks == 1           # 64: the cap spilled
    assert Skinny(rows=1, threads=128).dot_min_blocks == 4
    assert Skinny(rows=2, warp_cols=2, loads=2, min_blocks=3).dot_min_blocks == 3
    src = kgen.render(Skinny(rows=2, warp_cols=4))
    assert "__launch_bounds__(THREADS, 4)\nkgen_skinny_axpy_v4(" in src
    assert "__launch_bounds__(THREADS, 2)\nkgen_skinny_dot_v4(" in src


# A representative set: every dtype, 1-64 rows (the defaults of decode shapes), and
# non-default fields (narrow loads, wide blocks, many columns per warp).
def _representative():
    shapes = {"float32": (1, 16, 64), "float16": (8,), "bfloat16": (2, 4), "float64": (16,)}
    specs = [Skinny.default_spec({"M": small, "N": 4096, "K": 4096}, dtype)
             for dtype, smalls in shapes.items() for small in smalls]
    specs += [Skinny(rows=8, warp_cols=8, loads=16, threads=256), Skinny(dtype="float16", rows=3, lane_vectors=4,
              vector_bytes=8, merge="two_pass"), Skinny(dtype="float64", rows=32, warp_cols=2, merge="atomic")]
    # The cluster merge on the SIMT and the tensor-core forms.
    specs += [Skinny.default_spec({"M": small, "N": 4096, "K": 4096}, dtype).replace(merge="cluster", k_split=splits)
              for dtype, small, splits in (("float32", 1, 8), ("float32", 12, 4), ("bfloat16", 6, 2))]
    # The split-TF32 forms held to two blocks an SM (128 registers): validate lets this spec
    # through by tc_register_estimate, so its entries (the dot form's ring of windows in
    # flight among them) must fit the cap without spilling.
    specs.append(Skinny(rows=16, warp_cols=1, tensor_cores=True, tc_tiles=1, min_blocks=2))
    # The dot form's rounded sums beside its accumulators (tc_dot_flush) where the registers
    # are tightest with them: 24 rows, two tiles a warp, one block an SM (252 registers).
    specs.append(Skinny(rows=24, warp_cols=1, tensor_cores=True, tc_tiles=2))
    return specs


@pytest.mark.nvcc
def test_representative_specs_compile_for_sm90_without_spills():
    specs = _representative()
    with cf.ThreadPoolExecutor(2) as ex:
        built = list(ex.map(lambda s: kgen.compile(s, arch="sm_90"), specs))
    for s, c in zip(specs, built):
        names = set(c.resources)
        if s.tensor_cores and s.dtype == "float32":   # only the tensor-core entry points are built
            want = ({f"kgen_skinny_tc_{f}_v{w}" for f in ("dot", "axpy") for w in s.widths()}
                    | {f"kgen_skinny_tc_dot_phased_c{c}" for c in s.widths()})
            assert not any(n.startswith(("kgen_skinny_dot", "kgen_skinny_axpy")) for n in names)
        elif s.tensor_cores and s.runs_tc_axpy:   # 16-bit from 3 rows: both mma.m16n8k16 forms
            want = ({f"kgen_skinny_tc_{f}_v{w}" for f in ("dot", "axpy") for w in s.widths()}
                    | {f"kgen_skinny_tc_dot_phased_c{c}" for c in s.widths()})
            assert not any(n.startswith(("kgen_skinny_dot", "kgen_skinny_axpy")) for n in names)
        elif s.tensor_cores:   # 16-bit, 1-2 rows: the mma.m16n8k16 dot form and the SIMT axpy form
            want = ({f"kgen_skinny_tc_dot_v{w}" for w in s.widths()}
                    | {f"kgen_skinny_axpy_v{w}" for w in s.axpy_widths()}
                    | {f"kgen_skinny_tc_dot_phased_c{c}" for c in s.widths()})
            assert not any(n.startswith(("kgen_skinny_dot", "kgen_skinny_tc_axpy")) for n in names)
        else:
            want = ({f"kgen_skinny_dot_v{w}" for w in s.widths()} | {f"kgen_skinny_axpy_v{w}" for w in s.axpy_widths()}
                    | {f"kgen_skinny_dot_phased_c{c}" for c in s.widths()})
        assert want | {"kgen_skinny_merge", "kgen_skinny_prescale"} <= names, (s.to_json(), sorted(names))
        spilled = {n: r for n, r in c.resources.items() if r["spill_stores"] or r["spill_loads"]}
        assert not spilled, f"{s.to_json()} spills: {spilled}"
        for n in want:
            assert c.resources[n]["static_shared_bytes"] <= 64, "the slab is dynamic shared memory, sized per form"
        # The launch bounds reach ptxas: registers within what the entries' blocks per SM allow
        # (the SIMT forms; the 16-bit tensor-core dot form's element-load and phased entries).
        tc16 = s.tc_granule_min_blocks if s.dtype in ("float16", "bfloat16") else 1
        for n, blocks in (("kgen_skinny_dot_", s.dot_min_blocks), ("kgen_skinny_axpy_v", s.axpy_min_blocks),
                          ("kgen_skinny_tc_dot_phased_", tc16), ("kgen_skinny_tc_dot_v1", tc16)):
            for entry in (e for e in want if e.startswith(n)):
                assert c.resources[entry]["registers"] <= 65536 // (s.threads * blocks), (s.to_json(), entry)


# ---- the split-TF32 tensor-core forms ----
def test_dot_form_keeps_rounded_sums_where_its_registers_allow():
    # The defaults kgen.matmul runs at 7-16 rows of a float32 W.t() keep them ...
    for rows in (7, 12, 16):
        spec = Skinny.default_spec({"M": rows, "N": 4096, "K": 8192}, "float32")
        assert spec.tensor_cores and spec.tc_dot_flush, spec.to_json()
        assert "#define TC_DOT_FLUSH 1" in kgen.render(spec)
    # ... while specs whose estimate with the sums would pass the cap less TC_FLUSH_MARGIN do
    # without (32 rows at one block, two tiles; two blocks an SM of 128 registers), and so do
    # the 16-bit and SIMT specs, which have no such form.
    for spec in (Skinny(rows=32, warp_cols=1, tensor_cores=True, tc_tiles=2),
                 Skinny(rows=16, warp_cols=1, tensor_cores=True, tc_tiles=1, min_blocks=2),
                 Skinny(rows=8, warp_cols=1, tensor_cores=True, tc_tiles=2, min_blocks=3, threads=128),
                 Skinny(dtype="bfloat16", rows=8, warp_cols=1, tensor_cores=True),
                 Skinny(rows=4)):
        assert not spec.tc_dot_flush, spec.to_json()
    assert "#define TC_DOT_FLUSH 0" in kgen.render(Skinny(rows=32, warp_cols=1, tensor_cores=True, tc_tiles=2))


@pytest.mark.parametrize("fields, field", [
    (dict(tensor_cores=True, dtype="float64"), "tensor_cores"),
    (dict(tensor_cores=1), "tensor_cores"),
    (dict(tc_tiles=3), "tc_tiles"),
    (dict(tensor_cores=True, rows=64, warp_cols=1, min_blocks=2), "tc_tiles"),   # ~250 registers, 128 allowed
    (dict(tensor_cores=True, dtype="bfloat16", k_warps=3), "k_warps"),
    (dict(tensor_cores=True, dtype="bfloat16", k_warps=16), "k_warps"),          # 8 warps a block
    (dict(tensor_cores=True, k_warps=2), "k_warps"),                              # float32's forms
    (dict(dtype="float16", k_warps=2), "k_warps"),                                # the SIMT forms
    (dict(tensor_cores=True, tc_window=48), "tc_window"),
    (dict(tc_window=64), "tc_window"),                                            # the SIMT forms
    (dict(tensor_cores=True, dtype="bfloat16", tc_window=64), "tc_window"),       # 16-bit windows are 32
    (dict(tensor_cores=True, rows=24, instruction="wgmma", tc_window=64), "tc_window"),
])
def test_tensor_core_fields_are_checked(fields, field):
    with pytest.raises(SpecError, match=field):
        Skinny(**fields)


def test_tensor_core_geometry_covers_k_once_in_whole_windows():
    rng = random.Random(7)
    for _ in range(400):
        s = Skinny(rows=rng.choice([8, 16, 24, 40, 64]), warp_cols=1, tensor_cores=True,
                   tc_tiles=rng.choice([1, 2]), threads=rng.choice([128, 256]), k_split=rng.choice([0, 0, 5]))
        form = rng.choice(["tc_dot", "tc_axpy"])
        R, NC, K = rng.randint(1, 200), rng.randint(1, 20000), rng.randint(1, 30000)
        g = s.geometry(form, rng.choice([4, 2, 1]), R, NC, K, rng.choice([132, 264]))
        splits, ks = g["splits"], g["ks"]
        assert (splits - 1) * ks < K <= splits * ks
        # The dot form's lanes read k in 32-wide windows from the slab's start; the staged S
        # must start a window where the slab does.
        assert ks % (32 if form == "tc_dot" else 16) == 0
        cols = s.warps * (16 if form == "tc_dot" else 32) * s.tc_tiles
        assert g["grid"] == (-(-NC // cols), splits, -(-R // s.rows))
    s = Skinny(rows=16, warp_cols=4, tensor_cores=True)
    assert s.tc_ntiles == 2 and s.tc_chunk % 32 == 0
    assert s.shared_for("tc_dot") == s.tc_chunk * 64 * 2 <= s.shared_bytes


def test_64_k_windows_start_slabs_and_chunks_on_whole_windows():
    rng = random.Random(11)
    for rows in range(1, 65):
        for tiles in (1, 2):
            try:
                s = Skinny(rows=rows, warp_cols=1, tensor_cores=True, tc_tiles=tiles, tc_window=64)
            except SpecError:
                assert rows > 16 and tiles == 2   # the registers of two tiles past 16 rows
                continue
            assert s.tc_chunk % 64 == 0 and s.tc_dot_ring == 2
            assert s.tc_chunk * s.tc_stage_bytes_per_k * s.tc_ntiles <= 64 * 1024
            R, NC, K = rng.randint(1, 200), rng.randint(1, 20000), rng.randint(1, 30000)
            g = s.geometry("tc_dot", 4, R, NC, K, rng.choice([132, 264]))
            assert g["ks"] % 64 == 0 and (g["splits"] - 1) * g["ks"] < K <= g["splits"] * g["ks"]
    s = Skinny(rows=16, warp_cols=1, tensor_cores=True, tc_window=64)
    src = kgen.render(s)
    assert "#define TC_WIN 64" in src and "#define TC_DOT_RING 2" in src
    assert "#define TC_WIN 32" in kgen.render(s.replace(tc_window=32))
    # The default keeps 32-k windows; the search space offers 64 in float32 only.
    problem = {"M": 12, "N": 8192, "K": 8192}
    assert Skinny.default_spec(problem, "float32").tc_window == 32
    assert any(c.tc_window == 64 for c in Skinny.search_space(problem, "float32"))
    assert all(c.tc_window == 32 for c in Skinny.search_space(problem, "bfloat16"))


@pytest.mark.parametrize("window", [32, 64])
def test_dot_form_staging_puts_each_k_where_the_lanes_read_it(window):
    """The k order of the dot form as the template writes it, on both sides: S's staging
    (thread item = an 8-k group grp, its pair q goes to k8 step `step` and lane column t) and
    L's lanes (lane t reads 8G values from 8G*t of a window; step s takes values 2s, 2s+1).
    For every step and t the two must name the same k, and every k of a window appear once."""
    G = window // 32
    GS = 1 if G == 2 else 0
    staged = {}
    for grp in range(3 * 4 * G):   # three windows of 8-k groups
        for q in range(4):
            step = ((grp >> (2 + GS)) << (2 + GS)) + ((grp & (G - 1)) << 2) + q
            t = (grp >> GS) & 3
            staged[(step, t)] = (8 * grp + 2 * q, 8 * grp + 2 * q + 1)
    read = {}
    for w in range(3):
        for s in range(4 * G):
            for t in range(4):
                k0 = w * window + 8 * G * t + 2 * s
                read[(w * 4 * G + s, t)] = (k0, k0 + 1)
    assert staged == read
    assert sorted(k for v in read.values() for k in v) == list(range(3 * window))
    # ... and those are the template's expressions.
    src = kgen.render(Skinny(rows=16, warp_cols=1, tensor_cores=True, tc_window=window))
    for text in ("const int step = DOT ? ((grp >> (2 + GS)) << (2 + GS)) + ((grp & (G - 1)) << 2) + q : grp;",
                 "const int t = DOT ? (grp >> GS) & 3 : q;", "ld4<V>(colp[i][h] + k + 4 * q)",
                 "const int lane_k = 8 * TC_WG * t;", "* ldl + lane_k;", "for (int s = 0; s < 4 * TC_WG; ++s) {",
                 "(s & 1) ? split_a(p.z, q.z, p.w, q.w) : split_a(p.x, q.x, p.y, q.y)"):
        assert text in src, text


def test_16bit_dot_form_geometry_with_k_warps_and_lean_splits():
    rng = random.Random(11)
    for _ in range(400):
        kw = rng.choice([1, 2, 4, 8])
        s = Skinny(dtype=rng.choice(["bfloat16", "float16"]), rows=rng.choice([3, 8, 16, 40]), warp_cols=1,
                   tensor_cores=True, tc_tiles=rng.choice([1, 2]), k_warps=kw, k_split=rng.choice([0, 0, 5]))
        R, NC, K, slots = rng.randint(2, 64), rng.randint(1, 20000), rng.randint(1, 30000), rng.choice([132, 264])
        g = s.geometry("tc_dot", 8, R, NC, K, slots)
        splits, ks = g["splits"], g["ks"]
        assert (splits - 1) * ks < K <= splits * ks
        assert ks % (32 * kw) == 0          # every warp of a column group gets whole windows
        cols = s.warps // kw * 16 * s.tc_tiles
        assert g["grid"] == (-(-NC // cols), splits, -(-R // s.rows))
        tiles = g["grid"][0] * g["grid"][2]
        # Partial sums stay within an eighth of the large operand unless one wave needs more slabs.
        lean = max(1, K * 2 // (64 * R))
        assert splits <= max(lean, -(-slots // tiles), 1)


def test_16bit_axpy_form_geometry_and_fields():
    rng = random.Random(13)
    for _ in range(400):
        kw, lv = rng.choice([1, 2, 4, 8]), rng.choice([1, 2])
        s = Skinny(dtype=rng.choice(["bfloat16", "float16"]), rows=rng.choice([3, 8, 16, 24]), warp_cols=1,
                   tensor_cores=True, lane_vectors=lv, axpy_k_warps=kw, k_split=rng.choice([0, 0, 5]))
        R, NC, K, slots = rng.randint(2, 64), rng.randint(1, 20000), rng.randint(1, 30000), rng.choice([132, 264])
        g = s.geometry("tc_axpy", 8, R, NC, K, slots)
        splits, ks = g["splits"], g["ks"]
        assert (splits - 1) * ks < K <= splits * ks
        assert ks % (16 * kw) == 0          # every warp of a column group gets whole 16-k steps
        assert s.tc_axpy_tiles == 4 * lv
        assert g["grid"] == (-(-NC // (s.warps // kw * 16 * 4 * lv)), splits, -(-R // s.rows))
        tiles = g["grid"][0] * g["grid"][2]
        assert splits <= max(max(1, K * 2 // (64 * R)), -(-slots // tiles), 1)
        # Slabs as short as TC16_AXPY_MIN_SLAB_K k a warp (the dot form's stay TC_MIN_SLAB_K).
        assert splits <= max(1, K // (skinny_module.TC16_AXPY_MIN_SLAB_K * kw))
        # The reduction of the warps' sums fits the shared memory the form asks for.
        assert s.shared_for("tc_axpy") >= (s.warps - s.warps // kw) * 32 * 4 * s.tc_ntiles * 4 * lv * 4
    # A short-K product (the default spec of 6x3015x2281 in bfloat16) takes more slabs than the
    # dot form's shortest slab would allow: 4 of 512 k there, 9 of 256 here.
    s = Skinny.default_spec({"M": 6, "N": 3015, "K": 2281}, "bfloat16")
    g = s.geometry("tc_axpy", 8, 6, 3015, 2281, 264)
    assert g["splits"] > 2281 // (skinny_module.TC_MIN_SLAB_K * s.axpy_k_warps), g
    with pytest.raises(SpecError, match="lane_vectors"):
        Skinny(dtype="bfloat16", tensor_cores=True, lane_vectors=4)
    with pytest.raises(SpecError, match="axpy_k_warps"):
        Skinny(dtype="bfloat16", axpy_k_warps=2)          # the SIMT forms keep K to each warp
    with pytest.raises(SpecError, match="axpy_k_warps"):
        Skinny(dtype="bfloat16", tensor_cores=True, axpy_k_warps=16)


@pytest.mark.parametrize("kw, depth", [(1, 2), (2, 2), (4, 3), (8, 2)])
def test_16bit_axpy_step_schedule_covers_each_step_once(kw, depth):
    """The template's loop over 16-k steps (tc16_axpy_chunk): warp kg's slot d holds steps
    kg + d*AKW, then + DEPTH*AKW each round; the warps of a column group together must take
    every step of the chunk exactly once."""
    for steps in range(0, 40):
        taken = []
        for kg in range(kw):
            slots = {d: kg + d * kw for d in range(depth) if kg + d * kw < steps}   # the prologue's loads
            for s0 in range(kg, steps, depth * kw):
                for d in range(depth):
                    st = s0 + d * kw
                    if st < steps:
                        assert slots.get(d) == st      # the slot holds the step about to be used
                        taken.append(st)
                        if st + depth * kw < steps:
                            slots[d] = st + depth * kw
        assert sorted(taken) == list(range(steps))


def test_16bit_axpy_fragments_multiply_to_the_product():
    """One 16-k step of the 16-bit axpy form on a model of mma.m16n8k16 (row.col): lane
    (g, t) holds AX16 consecutive columns of L rows 4t..4t+3 at columns AX16*g and
    8*AX16 + AX16*g, packs element i of rows (4t, 4t+1) and (4t+2, 4t+3) as its A pairs of
    tile i, and the staged S entry holds S[g, 4t..4t+3]. Every tile's D must be L^T S^T for
    the columns its rows stand for."""
    rng = np.random.default_rng(5)
    for ax in (4, 8):
        L = rng.standard_normal((16, 16 * ax))   # k x columns of one warp
        St = rng.standard_normal((16, 8))        # k x 8 rows of S
        want = L.T @ St                          # columns x rows of S
        got = np.full_like(want, np.nan)
        for i in range(ax):
            A = np.zeros((16, 16))
            B = np.zeros((16, 8))
            rows_of_tile = {}
            for lane in range(32):
                g, t = lane >> 2, lane & 3
                ca, cb = ax * g + i, 8 * ax + ax * g + i
                rows_of_tile[g], rows_of_tile[g + 8] = ca, cb
                # a0a1: (row g, k positions 2t, 2t+1); a2a3: row g+8; a4a5, a6a7: positions 2t+8, 2t+9
                A[g, 2 * t], A[g, 2 * t + 1] = L[4 * t, ca], L[4 * t + 1, ca]
                A[g + 8, 2 * t], A[g + 8, 2 * t + 1] = L[4 * t, cb], L[4 * t + 1, cb]
                A[g, 2 * t + 8], A[g, 2 * t + 9] = L[4 * t + 2, ca], L[4 * t + 3, ca]
                A[g + 8, 2 * t + 8], A[g + 8, 2 * t + 9] = L[4 * t + 2, cb], L[4 * t + 3, cb]
                # b0b1: (k positions 2t, 2t+1; column g); b2b3: positions 2t+8, 2t+9 = S[g, 4t..4t+3]
                B[2 * t, g], B[2 * t + 1, g], B[2 * t + 8, g], B[2 * t + 9, g] = St[4 * t: 4 * t + 4, g]
            D = A @ B
            for r, col in rows_of_tile.items():
                got[col] = D[r]
        assert np.allclose(got, want)
    # ... and the template does what the model does.
    src = kgen.render(Skinny(dtype="bfloat16", rows=8, warp_cols=1, tensor_cores=True))
    assert "const unsigned a0 = pick2(v[0][0], v[1][0], i), a1 = pick2(v[0][1], v[1][1], i);" in src
    assert "const unsigned a2 = pick2(v[2][0], v[3][0], i), a3 = pick2(v[2][1], v[3][1], i);" in src
    assert "const int k = k0 + 4 * t + q;" in src and "k = 16 * st + 4 * (lane & 3);" in src
    assert "cb = n0 + 8 * AX16 + AX16 * g" in src


@pytest.mark.parametrize("kw, depth", [(1, 2), (1, 4), (2, 2), (4, 3), (8, 8)])
def test_16bit_dot_form_window_schedule_covers_each_window_once(kw, depth):
    """The template's loop over 32-k windows, as written (prologue of DEPTH slots, a main loop
    of DEPTH windows that refills each slot, a tail of full windows and at most one partial
    one), replayed for every warp of a column group: each window of a chunk of any length is
    multiplied exactly once, from the slot that was loaded with it."""
    for klen in list(range(1, 300)) + [2048, 2047, 32 * kw * depth * 3 + 5]:
        done = []
        for kg in range(kw):
            first, slots = 32 * kg, {}
            for d in range(depth):
                wk = first + d * 32 * kw
                if wk + 32 <= klen:
                    slots[d] = wk
            base = first
            while base + 32 * kw * (depth - 1) + 32 <= klen:
                for d in range(depth):
                    wk, nk = base + d * 32 * kw, base + d * 32 * kw + 32 * kw * depth
                    assert slots.get(d) == wk
                    done.append(wk)
                    if nk + 32 <= klen:
                        slots[d] = nk
                base += 32 * kw * depth
            for d in range(depth):
                wk = base + d * 32 * kw
                if wk + 32 <= klen:
                    assert slots.get(d) == wk
                    done.append(wk)
                elif wk < klen:
                    done.append(wk)   # the partial window, loaded element by element
        assert sorted(done) == list(range(0, klen, 32)), (klen, kw, depth)


def _fragment_positions(form: str) -> dict[tuple[int, int], tuple[int, int]]:
    """Where the kernel's lanes take their k positions from, as the template writes it: for
    each k8 step s of a 32-k window (dot) or of 8 k (axpy) and each lane, the physical k of
    the lane's fragment positions t and t + 4 (b0 and b1; a0/a1 and a2/a3)."""
    out = {}
    for step in range(4 if form == "dot" else 1):
        for lane in range(32):
            t = lane & 3
            k0 = 8 * t + 2 * step if form == "dot" else t
            out[(step, lane)] = (k0, k0 + 1 if form == "dot" else k0 + 4)
    return out


@pytest.mark.parametrize("form", ["dot", "axpy"])
def test_tensor_core_k_order_is_a_permutation_shared_by_both_operands(form):
    """Simulate one 16 x 8 x (32 or 8) step of the mma with the lanes' k order: each product
    term must appear exactly once, so D equals L^T S^T whatever the order."""
    rng = np.random.default_rng(0)
    span = 32 if form == "dot" else 8
    Lt = rng.standard_normal((16, span))   # 16 columns of L (mma rows) x k
    St = rng.standard_normal((span, 8))    # k x 8 rows of S
    pos = _fragment_positions(form)
    D = np.zeros((16, 8))
    steps = 4 if form == "dot" else 1
    for step in range(steps):
        # The mma m16n8k8: logical k position c of row g is held by lane (g, c % 4), the
        # lane's first (c < 4) or second (c >= 4) value.
        A = np.zeros((16, 8))
        B = np.zeros((8, 8))
        for lane in range(32):
            g, t = lane >> 2, lane & 3
            k0, k1 = pos[(step, lane)]
            A[g, t], A[g, t + 4], A[g + 8, t], A[g + 8, t + 4] = Lt[g, k0], Lt[g, k1], Lt[g + 8, k0], Lt[g + 8, k1]
            B[t, g], B[t + 4, g] = St[k0, g], St[k1, g]
        D += A @ B
    assert np.allclose(D, Lt @ St)
    used = sorted(k for v in pos.values() for k in v)
    assert sorted(set(used)) == list(range(span))


def test_split_tf32_keeps_float32_accuracy():
    """The host model of the kernel's split: x = hi + lo, both TF32 (10 explicit mantissa
    bits); hi*hi + hi*lo + lo*hi is within ~2^-21 of the float32 product."""
    rng = np.random.default_rng(1)

    def tf32(x):
        b = x.astype(np.float32).view(np.uint32).astype(np.uint64)
        b = (b + 0x1000) & 0xFFFFE000   # round half away from zero on the magnitude (cvt.rna)
        return b.astype(np.uint32).view(np.float32)

    a = rng.standard_normal(100000).astype(np.float32)
    b = rng.standard_normal(100000).astype(np.float32)
    ah, bh = tf32(a), tf32(b)
    al, bl = tf32((a - ah).astype(np.float32)), tf32((b - bh).astype(np.float32))
    approx = ah.astype(np.float64) * bh + ah.astype(np.float64) * bl + al.astype(np.float64) * bh
    exact = a.astype(np.float64) * b
    rel = np.abs(approx - exact) / np.abs(exact)
    assert rel.max() < 2.0 ** -20 and np.median(rel) < 2.0 ** -22
    # TF32 alone would be ~2^-11: the split is what makes this a float32 product.
    assert np.median(np.abs(ah.astype(np.float64) * bh - exact) / np.abs(exact)) > 2.0 ** -13


@pytest.mark.nvcc
def test_tensor_core_forms_compile_for_sm90_without_spills():
    specs = [Skinny(rows=r, warp_cols=1, tensor_cores=True, tc_tiles=t, threads=th)
             for r, t, th in ((8, 1, 128), (16, 2, 256), (40, 1, 256), (64, 2, 256))]
    specs += [Skinny(rows=r, warp_cols=1, tensor_cores=True, tc_tiles=t, tc_window=64)
              for r, t in ((16, 2), (8, 2), (13, 2), (64, 1))]
    # what dispatch runs for a row-major 13x2944x1600 on 132 SMs (one tile a warp)
    few_blocks = {"M": 13, "N": 2944, "K": 1600}
    specs.append(Skinny.default_spec(few_blocks, "float32").for_layouts(few_blocks, axpy_sms=132))
    assert specs[-1].tc_tiles == 1
    with cf.ThreadPoolExecutor(2) as ex:
        built = list(ex.map(lambda s: kgen.compile(s, arch="sm_90"), specs))
    specs16 = [Skinny(dtype=d, rows=r, warp_cols=1, tensor_cores=True, tc_tiles=t, k_warps=kw, loads=ld,
                      lane_vectors=lv, axpy_k_warps=akw)
               for d, r, t, kw, ld, lv, akw in (("bfloat16", 16, 2, 1, 8, 2, 1), ("float16", 64, 1, 1, 4, 1, 2),
                                                ("bfloat16", 8, 2, 4, 8, 2, 8), ("float16", 3, 1, 8, 16, 1, 4))]
    with cf.ThreadPoolExecutor(2) as ex:
        built16 = list(ex.map(lambda s: kgen.compile(s, arch="sm_90"), specs16))
    assert "#define KW 4" in kgen.render(specs16[2]) and "#define DEPTH 8" in kgen.render(specs16[3])
    assert "#define AKW 8" in kgen.render(specs16[2]) and "#define AX16 8" in kgen.render(specs16[2])
    for s, c in zip(specs16, built16):
        # 16-bit: both mma.m16n8k16 forms, no SIMT entry point
        want = {f"kgen_skinny_tc_{f}_v{w}" for f in ("dot", "axpy") for w in (8, 4, 2, 1)}
        assert want <= set(c.resources), sorted(c.resources)
        assert not any(n.startswith(("kgen_skinny_dot", "kgen_skinny_axpy")) for n in c.resources)
        spilled = {n: r for n, r in c.resources.items() if r["spill_stores"] or r["spill_loads"]}
        assert not spilled, f"{s.to_json()} spills: {spilled}"
    assert "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32" in kgen.render(specs16[0])
    for s, c in zip(specs, built):
        want = {f"kgen_skinny_tc_{f}_v{w}" for f in ("dot", "axpy") for w in (4, 2, 1)}
        assert want <= set(c.resources), (s.to_json(), sorted(c.resources))
        spilled = {n: r for n, r in c.resources.items() if r["spill_stores"] or r["spill_loads"]}
        assert not spilled, f"{s.to_json()} spills: {spilled}"
    assert "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32" in kgen.render(specs[0])
    assert "kgen_skinny_tc_" not in kgen.render(Skinny(rows=8))


def test_wave_fitted_splits_fill_the_last_wave():
    from kgen.ops.skinny import wave_fitted_splits

    # 112 column tiles on 264 resident slots: 5 slabs make 2.12 waves (the third nearly
    # empty), 7 make 2.97.
    assert wave_fitted_splits(4096, 64, 112, 264, 5, 8) == 7
    # Capped by `most`, never below half the target, and one slab when K allows no more.
    assert wave_fitted_splits(4096, 64, 112, 264, 5, 5) in (3, 4, 5)
    assert wave_fitted_splits(64, 64, 10, 264, 1, 1) == 1
    rng = random.Random(3)
    for _ in range(300):
        K, unit = rng.randint(1, 30000), rng.choice([16, 32, 64, 256])
        tiles, slots = rng.randint(1, 500), rng.choice([132, 264, 528, 1056])
        most = max(1, K // (2 * unit))
        want = min(-(-2 * slots // tiles), most)
        n = wave_fitted_splits(K, unit, tiles, slots, want, most)
        assert 1 <= n <= max(most, 1)
        assert round(_fill(tiles, n, slots), 2) >= round(_fill(tiles, _slabs(K, want, unit), slots), 2)


def test_float32_tensor_core_forms_from_seven_rows_where_n_and_k_are_large(monkeypatch):
    """7-12 rows against large N and K: the split-TF32 forms (measured ahead of the SIMT ones
    there); 1-6 rows, a short side, or KGEN_SPLIT_TF32=0: the SIMT forms."""
    monkeypatch.delenv("KGEN_SPLIT_TF32", raising=False)
    for M in range(1, SUITS_ROWS["float32"] + 1):
        for N, K in ((4096, 4096), (TC_MIN_DIM - 1, 8192), (8192, TC_MIN_DIM - 1)):
            s = Skinny.default_spec({"M": M, "N": N, "K": K}, "float32")
            big = min(N, K) >= TC_MIN_DIM
            assert s.tensor_cores == (M > SIMT_F32_ROWS and big), (M, N, K)
            assert Skinny.default_spec({"M": N, "N": M, "K": K}, "float32").tensor_cores == s.tensor_cores
    monkeypatch.setenv("KGEN_SPLIT_TF32", "0")
    assert not Skinny.default_spec({"M": 10, "N": 4096, "K": 4096}, "float32").tensor_cores


# ---- the Hopper wgmma forms (float32 as three TF32 products, 16-bit inputs as they are) ----
@pytest.mark.parametrize("fields, field", [
    (dict(instruction="wgmma"), "instruction"),                                   # SIMT spec
    (dict(instruction="wgmma", tensor_cores=True, dtype="float64"), "tensor_cores"),
    (dict(instruction="wgmma", tensor_cores=True, warp_cols=1, dtype="bfloat16", rows=65), "rows"),
    (dict(instruction="hmma", tensor_cores=True), "instruction"),
    (dict(instruction="wgmma", tensor_cores=True, warp_cols=1, threads=512), "threads"),
    (dict(instruction="wgmma", tensor_cores=True, warp_cols=1, rows=129), "rows"),
    (dict(rows=100, warp_cols=1, tensor_cores=True), "rows"),                     # 100 rows need wgmma
])
def test_wgmma_fields_are_checked(fields, field):
    with pytest.raises(SpecError, match=field):
        Skinny(**fields)


def test_wgmma_forms_target_sm90_only():
    s = Skinny.wgmma_default_spec({"M": 40, "N": 4096, "K": 4096})
    assert s.instruction == "wgmma" and s.target_arch("sm_90") == "sm_90a"
    for arch in ("sm_80", "sm_89", "sm_100"):
        with pytest.raises(ValueError, match="sm_90"):
            s.target_arch(arch)
        assert "compute capability 90" in s.prune_reason({"M": 40, "N": 4096, "K": 4096},
                                                         {"compute_capability": int(arch[3:])})
    assert Skinny(rows=40, warp_cols=1, tensor_cores=True).target_arch("sm_80") == "sm_80"


def test_wgmma_default_spec_tiles_rows_evenly_and_fits_its_chunks_in_shared_memory():
    from kgen.ops.skinny import WG_MAX_ROWS, WG_STAGE_BYTES, WG_TWO_GROUP_ROWS

    for small in range(1, 600):
        s = Skinny.wgmma_default_spec({"M": small, "N": 5000, "K": 3000})
        tiles = -(-small // s.rows)
        assert s.rows % 8 == 0 and s.rows <= WG_MAX_ROWS and tiles == -(-small // WG_MAX_ROWS)
        assert tiles * s.rows - small < 8 * tiles          # at most 7 spare rows a tile
        assert s.threads == (256 if s.rows <= WG_TWO_GROUP_ROWS else 128)
        assert s.wg_n == s.rows and s.wg_chunk % 32 == 0 and s.wg_chunk_bytes <= max(WG_STAGE_BYTES, 32 * 8 * s.wg_n)
        # two chunk buffers; one 32-k window each where a window alone passes WG_STAGE_BYTES
        assert s.shared_bytes == 2 * s.wg_chunk_bytes <= 2 * max(WG_STAGE_BYTES, 32 * 8 * s.wg_n)
        assert Skinny.wgmma_default_spec({"M": 5000, "N": small, "K": 3000}) == s


def test_wgmma_default_spec_splits_k_for_one_wave_where_one_warpgroup_row_tiles_read_little():
    """float32 row tiles of one warpgroup (past WG_TWO_GROUP_ROWS rows) that read at most
    WG_ONE_WAVE_MAX_ELEMENTS of the large operand in all (row tiles x large side x K) split K
    for one wave of resident blocks; two warpgroups, larger products and 16-bit types two."""
    from kgen.ops.skinny import WG_ONE_WAVE_MAX_ELEMENTS, WG_TWO_GROUP_ROWS

    rng, seen = random.Random(22011), {1: 0, 2: 0}
    for _ in range(2000):
        small, K = rng.randint(1, 300), rng.randint(1, 20000)
        large = rng.randint(small, 20000)
        for dtype in ("float32", "bfloat16"):
            s = Skinny.wgmma_default_spec({"M": small, "N": large, "K": K}, dtype)
            reads = -(-small // s.rows) * large * K
            want = 1 if dtype == "float32" and s.rows > WG_TWO_GROUP_ROWS and reads <= WG_ONE_WAVE_MAX_ELEMENTS else 2
            assert s.waves == want, (small, large, K, dtype, s.to_json())
            assert Skinny.wgmma_default_spec({"M": large, "N": small, "K": K}, dtype) == s   # few columns alike
            seen[want] += 1
    assert seen[1] > 100 and seen[2] > 1000, seen


def test_kgen_matmul_asks_one_wave_of_the_wgmma_forms_on_small_float32_products(monkeypatch):
    """On an sm_90 GPU, the float32 products of the measured lows (49+ rows, short K) run the
    wgmma forms with one wave in either storage order of B; a large product and a 40-row one
    (two warpgroups a block) keep two."""
    from kgen.tune import dispatch
    from kgen.tune.device import DeviceInfo, arch_limits

    h200 = DeviceInfo("Recorded H200", "sm_90", dict(arch_limits("sm_90"), multiprocessors=132))
    monkeypatch.setattr(dispatch, "_runs_wgmma", lambda: True)
    monkeypatch.setattr(dispatch, "_this_device", lambda: h200)
    for (M, N, K), waves in (((51, 5725, 1037), 1), ((109, 1225, 3716), 1), ((206, 1774, 1264), 1),
                             ((195, 10050, 5959), 2), ((68, 7642, 6317), 2), ((40, 7581, 1083), 2)):
        A = np.empty((M, K), np.float32)
        for B in (np.empty((K, N), np.float32), np.empty((N, K), np.float32).T):
            spec = dispatch.call_spec(A, B, device=h200, db=False)
            assert isinstance(spec, Skinny) and spec.instruction == "wgmma", spec.to_json()
            assert spec.waves == waves and spec.k_split == 0, ((M, N, K), B.strides, spec.to_json())


def test_wgmma_geometry_slabs_are_whole_chunks_covering_k_once():
    rng = random.Random(17)
    for _ in range(400):
        s = Skinny.wgmma_default_spec({"M": rng.randint(1, 256), "N": 4096, "K": 4096}).replace(
            tc_tiles=1, threads=rng.choice([128, 256]), k_split=rng.choice([0, 0, 3]))
        form = rng.choice(["wg_dot", "wg_axpy"])
        R, NC, K = rng.randint(1, 300), rng.randint(1, 20000), rng.randint(1, 30000)
        g = s.geometry(form, rng.choice([4, 2, 1]), R, NC, K, rng.choice([132, 264]))
        assert (g["splits"] - 1) * g["ks"] < K <= g["splits"] * g["ks"]
        assert g["ks"] % s.wg_chunk == 0        # a block's slab is whole chunk images
        assert g["grid"] == (-(-NC // (s.warps * 16)), g["splits"], -(-R // s.rows))


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_16_bit_wgmma_spec_tiles_rows_to_64_and_stages_raw_values(dtype):
    """16-bit wgmma specs: row tiles of at most WG16_MAX_ROWS, chunks of whole 64-k windows of
    raw 2-byte values within WG_STAGE_BYTES, the wgmma dot form for a k-contiguous large
    operand and mma.sync's axpy form for a row-major one, both in shared_bytes."""
    from kgen.ops.skinny import WG16_MAX_ROWS, WG_STAGE_BYTES

    for small in range(1, 400):
        s = Skinny.wgmma_default_spec({"M": small, "N": 5000, "K": 3000}, dtype)
        tiles = -(-small // s.rows)
        assert s.dtype == dtype and s.rows % 8 == 0 and s.rows <= WG16_MAX_ROWS
        assert tiles == -(-small // WG16_MAX_ROWS) and tiles * s.rows - small < 8 * tiles
        assert s.wg_window == 64 and s.wg_chunk % 64 == 0 and s.wg_chunk_bytes == s.wg_chunk * s.wg_n * 2
        assert s.wg_chunk_bytes <= WG_STAGE_BYTES < s.wg_chunk_bytes + 64 * s.wg_n * 2
        assert s.tc_form("dot") == "wg_dot" and s.tc_form("axpy") == "tc_axpy"
        assert s.shared_bytes == max(s.shared_for("wg_dot"), s.shared_for("tc_axpy"))
    f32 = Skinny.wgmma_default_spec({"M": 40, "N": 5000, "K": 3000})
    assert f32.tc_form("axpy") == "wg_axpy" and f32.wg_window == 32 and f32.wg_value_bytes == 8


def test_16_bit_wgmma_render_has_the_k16_instruction_and_no_wgmma_axpy_entry():
    import kgen

    for dtype, kind in (("bfloat16", "bf16"), ("float16", "f16")):
        s = Skinny.wgmma_default_spec({"M": 24, "N": 4096, "K": 4096}, dtype)
        src = kgen.render(s)
        assert f"wgmma.mma_async.sync.aligned.m64n24k16.f32.{kind}.{kind}" in src
        for w in (8, 4, 2, 1):
            assert f"kgen_skinny_wg_dot_v{w}(" in src and f"kgen_skinny_wg_dot_direct_v{w}(" in src
            assert f"kgen_skinny_tc_axpy_v{w}(" in src
        assert "kgen_skinny_wg_axpy" not in src and "kgen_skinny_wg_image_axpy" not in src
        assert "kgen_skinny_wg_image_dot" in src


class _PlannedLaunch:
    def __init__(self, fn, name, grid, block, shared, fmt, programmatic=False):
        self.name, self.grid, self.block, self.shared = name, grid, block, shared
        self.programmatic = programmatic


def test_wgmma_plan_images_s_before_the_main_kernel_and_reads_them(monkeypatch):
    """The plan of a wgmma spec: one image launch over (chunks, 1, row tiles) before the main
    kernel (none for few column tiles, or few elements of S split again over them: wg_direct),
    the images behind the partial sums in the workspace, and the main kernel reading the
    images where the other forms read S."""
    from kgen.ops import skinny as skinny_module
    from kgen.ops.skinny import SkinnyKernel

    monkeypatch.setattr(skinny_module, "Launch", _PlannedLaunch)
    rng = random.Random(5)
    seen = set()
    for _ in range(60):
        M, N, K = rng.randint(17, 256), rng.randint(1024, 9000), rng.randint(1024, 9000)
        if rng.random() < 0.3:
            N = rng.randint(M, 600)   # few column tiles: the direct entry, no image launch
        elif rng.random() < 0.3:
            K = rng.randint(64, 1200)   # a small product: few elements of S split again
        dtype = rng.choice(["float32", "float32", "bfloat16"])
        merges = MERGES_ALL if dtype == "float32" else ("single_pass", "two_pass")
        spec = Skinny.wgmma_default_spec({"M": M, "N": N, "K": K}, dtype).replace(merge=rng.choice(merges))
        k = object.__new__(SkinnyKernel)
        k.spec, k._plans, k._sms, k._slots = spec, {}, 132, {}
        k._fmt_main = k._fmt_merge = k._fmt_prescale = k._fmt_image = "P"
        k.handle = lambda name, shared=0: 0
        k._resident_slots = lambda name, shared: 264
        col = rng.random() < 0.5                     # the weight stored N x K (passed as W.T) or K x N
        b_strides = (1, K) if col else (N, 1)
        plan = k._plan(M, K, (K, 1), K, N, b_strides, (M, N), (N, 1), 1 << 20, 1 << 20)
        kinds = [kind for kind, _, _ in plan.launches]
        assert plan.form == spec.tc_form("dot" if col else "axpy"), plan.form
        main = next(launch for kind, launch, _ in plan.launches if kind == "main")
        if not plan.form.startswith("wg_"):
            # 16-bit, row-major weight: the mma.sync axpy form, S read in place
            assert dtype != "float32" and plan.form == "tc_axpy" and "image" not in kinds
            assert main.name.startswith("kgen_skinny_tc_axpy_v") and plan.image_offset == -1
            seen.add("tc_axpy")
            continue
        tiles = main.grid[0]
        direct = tiles <= skinny_module.WG_DIRECT_MAX_COLUMN_TILES or \
            tiles * M * K <= skinny_module.WG_DIRECT_MAX_SPLIT_ELEMENTS
        assert direct == skinny_module.wg_direct(tiles, M, K)
        if direct:
            # each block splits its own chunks of S: no image launch, S read where it is
            assert "image" not in kinds and plan.image_offset == -1
            assert main.name.startswith(f"kgen_skinny_{plan.form}_direct_v")
            monkeypatch.setattr(k, "_workspace", lambda stream, size, tickets: (7 << 30, 9 << 30), raising=False)
            args = k._arguments(plan, 1 << 20, 2 << 20, 3 << 20, 1.0, 0.0, 0)
            assert args[kinds.index("main")][1][0] == 1 << 20
            seen.add("direct" if tiles <= skinny_module.WG_DIRECT_MAX_COLUMN_TILES else "direct_small")
            continue
        seen.add("imaged")
        assert kinds.index("image") == kinds.index("main") - 1, kinds
        image = next(launch for kind, launch, _ in plan.launches if kind == "image")
        chunks, tiles = -(-K // spec.wg_chunk), -(-M // spec.rows)
        assert image.grid == (chunks, 1, tiles) and image.name == f"kgen_skinny_wg_image_{plan.form[3:]}"
        partials = plan.splits * M * N * 4 if plan.mode in (MODE_PARTIALS, MODE_TICKET) else 0
        assert plan.image_offset % 256 == 0 and partials <= plan.image_offset < partials + 256
        assert plan.workspace[0] == plan.image_offset + tiles * chunks * spec.wg_chunk_bytes
        assert main.name.startswith(f"kgen_skinny_{plan.form}_v") and main.shared == spec.shared_for(plan.form)
        monkeypatch.setattr(k, "_workspace", lambda stream, size, tickets: (7 << 30, 9 << 30), raising=False)
        args = k._arguments(plan, 1 << 20, 2 << 20, 3 << 20, 1.0, 0.0, 0)
        image_args = args[kinds.index("image")][1]
        main_args = args[kinds.index("main")][1]
        assert image_args[0] == 1 << 20 and image_args[-1] == (7 << 30) + plan.image_offset
        assert main_args[0] == (7 << 30) + plan.image_offset   # S := the images
    assert seen == {"direct", "direct_small", "imaged", "tc_axpy"}


MERGES_ALL = ("single_pass", "two_pass", "atomic")


def test_wgmma_suits_where_the_measurements_put_it():
    from kgen.ops.skinny import WG_MIN_ROWS, WG_SUITS_ROWS, WG_WIDE_ROWS

    # (M, N, K): shapes of the measurement (docs/matmul-record.md, "Where the wgmma forms run") on
    # either side of each bound.
    yes = [(17, 4096, 4096), (256, 11008, 4096), (51, 583, 9173), (480, 1570, 6587), (46, 5102, 475),
           (140, 211, 474), (842, 148, 3115), (19, 9739, 748), (300, 2000, 1024)]
    no = [(16, 4096, 4096), (600, 4096, 4096), (491, 1847, 1837), (20, 436, 380), (18, 1917, 848),
          (221, 7309, 66), (22, 384, 568), (40, 300, 150), (300, 2000, 399)]
    for M, N, K in yes:
        assert Skinny.wgmma_suits(M, N, K) and Skinny.wgmma_suits(N, M, K), (M, N, K)
    for M, N, K in no:
        assert not Skinny.wgmma_suits(M, N, K) and not Skinny.wgmma_suits(N, M, K), (M, N, K)
    rng = random.Random(23)
    for _ in range(500):
        small, big, K = rng.randint(1, 700), rng.randint(1, 20000), rng.randint(1, 20000)
        got = Skinny.wgmma_suits(small, big, K)
        assert got == Skinny.wgmma_suits(big, small, K)
        if got:
            assert WG_MIN_ROWS <= min(small, big) <= WG_SUITS_ROWS
            for kc in (False, True):   # either storage order of the large operand
                assert Skinny.suits(small, big, K, "float32", kc, wgmma=True)
        if WG_MIN_ROWS <= min(small, big) <= WG_WIDE_ROWS and K >= TC_MIN_DIM:
            assert got   # long K: every large side


def test_wgmma_search_space_only_where_it_suits():
    p = {"M": 100, "N": 4096, "K": 4096}
    wg = [s for s in Skinny.search_space(p, "float32") if s.instruction == "wgmma"]
    assert Skinny.wgmma_default_spec(p) in wg and len({s.threads for s in wg}) == 2
    assert all(s.prune_reason(p, {"compute_capability": 80}) for s in wg)
    assert not any(s.instruction == "wgmma" for s in Skinny.search_space({"M": 8, "N": 4096, "K": 4096}, "float32"))
    assert not any(s.instruction == "wgmma" for s in Skinny.search_space(p, "bfloat16"))


@pytest.mark.nvcc
def test_wgmma_forms_compile_for_sm90a_without_spills():
    specs = [Skinny.wgmma_default_spec({"M": m, "N": 4096, "K": 4096}) for m in (17, 48, 100, 128)]
    specs.append(specs[0].replace(tc_tiles=2, threads=128, merge="single_pass"))
    with cf.ThreadPoolExecutor(2) as ex:
        built = list(ex.map(lambda s: kgen.compile(s, arch="sm_90"), specs))
    for s, c in zip(specs, built):
        want = {f"kgen_skinny_wg_{f}{d}_v{w}" for f in ("dot", "axpy") for d in ("", "_direct") for w in s.widths()}
        want |= {"kgen_skinny_wg_image_dot", "kgen_skinny_wg_image_axpy", "kgen_skinny_merge"}
        assert want <= set(c.resources), (s.to_json(), sorted(c.resources))
        assert not any(n.startswith("kgen_skinny_tc_") for n in c.resources)
        spilled = {n: r for n, r in c.resources.items() if r["spill_stores"] or r["spill_loads"]}
        assert not spilled, f"{s.to_json()} spills: {spilled}"
        assert f"wgmma.mma_async.sync.aligned.m64n{s.wg_n}k8.f32.tf32.tf32" in kgen.render(s)


def test_narrow_entry_points_keep_the_widest_loads_bytes_in_flight():
    """An entry point that may only load elements of an unaligned row keeps as many registers of
    loaded data as the widest one: more k steps in the dot form, more vectors a lane (and so the
    same columns a block) in the axpy form; 16-bit axpy entry points hold at most 4 elements."""
    from kgen.ops.skinny import ITEMSIZE

    for dtype, rows in (("float32", 1), ("float32", 4), ("float64", 2), ("bfloat16", 1), ("float16", 2)):
        s = Skinny.simt_default_spec({"M": rows, "N": 4096, "K": 4096}, dtype)

        def regs(w, item=ITEMSIZE[dtype]):   # 32-bit registers one load of w elements fills
            return max(1, w * item // 4)
        for w in s.widths():
            assert s.dot_loads(w) * regs(w) == s.dot_loads(s.vec) * regs(s.vec), (dtype, w)
            assert s.dot_step % (32 * w * s.dot_loads(w)) == 0, "the chunks hold whole steps of every width"
        for w in s.axpy_widths():
            if ITEMSIZE[dtype] >= 4:
                assert s.axpy_cols(w) == s.axpy_cols(s.axpy_vec), (dtype, w)
            else:
                assert s.axpy_lanes(w) == s.lane_vectors * {8: 1, 4: 1, 2: 2, 1: 4}[w], (dtype, w)
        src = kgen.render(s)
        for w in s.widths():
            assert f"dot_form<{w}, {s.dot_loads(w)}, 0>(" in src
        for c in s.widths():   # the phased entries: the widest loads from each class's boundary
            assert f"dot_form<{s.vec}, {s.dot_loads(s.vec)}, {c}>(" in src
        for w in s.axpy_widths():
            assert f"axpy_form<{w}, {s.axpy_lanes(w)}>(" in src


def test_float32_tensor_core_forms_take_one_wave_up_to_16_rows():
    from kgen.ops.skinny import TC_ONE_WAVE_ROWS

    for rows, waves in ((7, 1), (12, 1), (TC_ONE_WAVE_ROWS, 1), (TC_ONE_WAVE_ROWS + 1, 2), (64, 2)):
        s = Skinny.default_spec({"M": rows, "N": 8192, "K": 8192}, "float32")
        assert s.tensor_cores and s.waves == waves, (rows, s.to_json())
    for rows, waves in ((1, 1), (2, 1), (3, 2), (16, 2)):   # 16-bit: one wave at 1-2 rows only
        assert Skinny.default_spec({"M": rows, "N": 8192, "K": 8192}, "bfloat16").waves == waves, rows


@pytest.mark.parametrize("dtype", ["bfloat16", "float16", "float32"])
def test_one_row_of_a_long_16_bit_weight_streams_eight_columns_a_warp(dtype):
    """16-bit, one row, K from WIDE_DOT_MIN_K_16 up: 8 columns a warp (twice the loads in flight
    a lane); shorter K, two rows or float32 keep 4. The render carries it."""
    long_k, short_k = WIDE_DOT_MIN_K_16, WIDE_DOT_MIN_K_16 - 1
    half = dtype != "float32"
    spec = Skinny.default_spec({"M": 1, "N": 4096, "K": long_k}, dtype)
    assert spec.warp_cols == (8 if half else 4)
    assert Skinny.default_spec({"M": 1, "N": 4096, "K": short_k}, dtype).warp_cols == 4
    assert Skinny.default_spec({"M": 2, "N": 4096, "K": long_k}, dtype).simt_default_spec(
        {"M": 2, "N": 4096, "K": long_k}, dtype).warp_cols == 4
    assert f"#define WARP_COLS {spec.warp_cols} " in kgen.render(spec)


def test_odd_pitch_entry_of_the_16_bit_dot_form_reads_granules_two_blocks_an_sm_up_to_8_rows():
    # kgen_skinny_tc_dot_v1 (rows 2 bytes off a 4-byte boundary) loads whole granules and keeps
    # a fifth one a lane; up to 8 rows with shallow windows it asks ptxas for two blocks an SM.
    few = Skinny.default_spec({"M": 8, "N": 4096, "K": 4097}, "bfloat16")
    assert few.tensor_cores and few.tc_ntiles == 1 and few.tc_granule_min_blocks == 2
    src = kgen.render(few)
    assert "__launch_bounds__(THREADS, 2)\nkgen_skinny_tc_dot_v1(" in src
    assert "__launch_bounds__(THREADS, 1)\nkgen_skinny_tc_dot_v8(" in src
    assert "granule_pick" in src and "#define GRANULE_REACH 40" in src
    more = Skinny.default_spec({"M": 16, "N": 4096, "K": 4097}, "float16")
    assert more.tc_granule_min_blocks == more.min_blocks == 1
    deep = few.replace(loads=16, tc_tiles=1)   # eight windows in flight: the bound would spill
    assert deep.tc_depth * deep.tc_tiles > 4 and deep.tc_granule_min_blocks == 1
    f32 = Skinny.default_spec({"M": 16, "N": 4096, "K": 4097}, "float32")
    assert f32.tensor_cores and f32.tc_granule_min_blocks == f32.min_blocks
    assert "granule_pick" not in kgen.render(f32)
    res = kgen.compile(few, "sm_90").resources["kgen_skinny_tc_dot_v1"]
    assert res["registers"] <= 128 and not res["spill_stores"] and not res["spill_loads"], res


@pytest.mark.parametrize("dtype", ["float32", "float64", "bfloat16", "float32 tensor cores",
                                   "bfloat16 tensor cores", "float16 tensor cores"])
def test_simt_dot_plan_reads_unaligned_weight_rows_by_offset_class(monkeypatch, dtype):
    """A weight N x K passed as W.T whose rows are not all 16-byte aligned runs the phased dot
    entry with V / gcd(K mod V, V) classes of columns (V elements in 16 bytes); a weight that is
    off a boundary as a whole runs one class; an aligned one runs the widest plain entry, and with
    phased=False an unaligned one the narrower entry its alignment allows. Each class gets whole
    column tiles of its own."""
    from kgen.ops.skinny import ITEMSIZE, SkinnyKernel

    monkeypatch.setattr(skinny_module, "Launch", _PlannedLaunch)
    form = "tc_dot" if dtype.endswith("tensor cores") else "dot"
    dtype = dtype.split()[0]
    item = ITEMSIZE[dtype]
    half = item == 2
    if form == "tc_dot":   # the mma.sync dot form (float32 split-TF32 from 7 rows; 16-bit up to 8)
        base = Skinny.default_spec({"M": 5 if half else 12, "N": 4096, "K": 4096}, dtype)
        assert base.tensor_cores and base.instruction == "mma_sync"
        assert not half or base.tc16_fits_two_blocks
        cols = base.warps // base.k_warps * 16 * base.tc_tiles
    else:
        base = Skinny.simt_default_spec({"M": 1, "N": 4096, "K": 4096}, dtype)
        cols = base.dot_cols()
    V = base.vec
    rng = random.Random(7)
    for _ in range(40):
        spec = base.replace(phased=rng.random() < 0.8)
        M = rng.randint(1, 2) if form == "dot" else rng.randint(2, 8) if half else rng.randint(7, 16)
        N, K = rng.randint(17, 9000), rng.randint(1, 9000)
        offset = rng.choice([0, 0, 1, V - 1])
        k = object.__new__(SkinnyKernel)
        k.spec, k._plans, k._sms, k._slots = spec, {}, 132, {}
        k._fmt_main = k._fmt_merge = k._fmt_prescale = k._fmt_image = "P"
        k.handle = lambda name, shared=0: 0
        k._resident_slots = lambda name, shared: 264
        plan = k._plan(M, K, (K, 1), K, N, (1, K), (M, N), (N, 1), 1 << 20, (1 << 20) + offset * item)
        main = next(launch for kind, launch, _ in plan.launches if kind == "main")
        widest = max(w for w in spec.widths() if K % w == 0 and offset % w == 0)
        # 16-bit rows 4 or 8 bytes off a boundary keep their 4- and 8-byte loads.
        if widest == V or not spec.phased or (half and widest > 1):
            assert plan.classes == 0 and main.name == f"kgen_skinny_{form}_v{widest}", (K, offset, main.name)
            continue
        classes = V // math.gcd(K % V, V)
        assert plan.classes == classes and main.name == f"kgen_skinny_{form}_phased_c{classes}", \
            (K, offset, main.name)
        assert classes == (1 if K % V == 0 else V // math.gcd(K, V))
        per_class = math.ceil(N / classes)
        assert main.grid[0] == classes * math.ceil(per_class / cols)
        assert spec.geometry(form, V, M, N, K, 264, 132, classes)["grid"][0] == main.grid[0]


def test_calls_captured_in_one_graph_share_one_workspace_and_one_ticket_reset(monkeypatch):
    """Calls captured on one stream in one capture run in order at every replay: they share a
    workspace, zeroed once (one memset node in the graph, not one per call); another capture,
    another stream or eager calls get workspaces of their own."""
    from kgen.core import runtime
    from kgen.ops import skinny as skinny_module
    from kgen.ops.skinny import SkinnyKernel

    made = []

    class Fake:
        _workspaces: dict = {}
        _captured: dict = {}
        _retired: list = []

        @staticmethod
        def _new_workspace(stream, pbytes, tickets):
            made.append((stream, pbytes, tickets))
            n = len(made)
            return {"part": n, "tick": -n, "pbytes": pbytes, "tickets": tickets, "ptrs": (n, -n)}

    fake = Fake()
    capture = {"id": 7}
    monkeypatch.setattr(runtime, "torch_capturing", lambda: capture["id"] != 0)
    monkeypatch.setattr(skinny_module, "capture_id", lambda stream: capture["id"])
    ws = SkinnyKernel._workspace
    first = ws(fake, 11, 4096, 8)
    assert ws(fake, 11, 2048, 4) == first and ws(fake, 11, 4096, 8) == first
    assert len(made) == 1
    bigger = ws(fake, 11, 8192, 8)   # outgrown within the capture: a larger one, zeroed once more
    assert bigger != first and ws(fake, 11, 4096, 8) == bigger and len(made) == 2
    other_stream = ws(fake, 12, 4096, 8)
    assert other_stream not in (first, bigger)
    capture["id"] = 8   # the next capture on the same stream
    second_graph = ws(fake, 11, 4096, 8)
    assert second_graph not in (first, bigger, other_stream)
    capture["id"] = 0   # eager calls
    eager = ws(fake, 11, 4096, 8)
    assert eager not in (first, bigger, other_stream, second_graph)
    assert ws(fake, 11, 4096, 8) == eager
    assert len(made) == 5


# -- programmatic launches (Skinny.programmatic, Skinny.l2_prefetch) --------------------------------

_FORMS = ("dot_form", "axpy_form", "tc_dot_form", "tc_axpy_form")


def _form_bodies(source: str) -> dict[str, list[str]]:
    """{form name: the statements of each of its definitions in `source`, in order}."""
    out: dict[str, list[str]] = {}
    for name in _FORMS:
        for m in re.finditer(r"void " + name + r"\([^{]*\{\n", source):
            body = source[m.end():source.index("\n}\n", m.end())]
            out.setdefault(name, []).append(body)
    return out


@pytest.mark.parametrize("spec", [
    Skinny(dtype="float32", rows=4, warp_cols=8),
    Skinny.default_spec({"M": 12, "N": 4096, "K": 4096}, "float32"),
    Skinny.default_spec({"M": 6, "N": 4096, "K": 4096}, "bfloat16"),
    Skinny.default_spec({"M": 2, "N": 4096, "K": 4096}, "float16"),
    Skinny(dtype="float64", rows=3, warp_cols=2)], ids=lambda s: f"{s.dtype}-{s.rows}")
def test_programmatic_forms_wait_before_their_first_memory_access(spec):
    """Every SIMT and mma.sync form begins with await_inputs (griddepcontrol.wait, and the L2
    prefetch ahead of it): a load or store of the form placed before it could read what the
    kernel before has not yet written, or write what it still reads. Plain specs render no
    wait and no prefetch; the prefetch renders only where it is asked for."""
    plain = kgen.render(spec)
    wait, trigger = 'asm volatile("griddepcontrol.wait', 'asm volatile("griddepcontrol.launch_dependents'
    prefetch = 'asm volatile("cp.async.bulk.prefetch.L2'
    assert wait not in plain and trigger not in plain and prefetch not in plain
    for kib in (0, 16):
        source = kgen.render(spec.replace(programmatic=True, l2_prefetch=kib))
        assert wait in source and trigger in source
        assert (prefetch in source) == bool(kib)
        bodies = _form_bodies(source)
        assert bodies, "no form found in the source"
        for name, defs in bodies.items():
            for body in defs:
                # Compile-time constants may come first; nothing that runs.
                first = next(ln.strip() for ln in body.splitlines() if not ln.strip().startswith("constexpr"))
                assert first.startswith("await_inputs<"), (name, first)
        if kib:
            assert f"#define L2_PREFETCH {kib * 1024} " in source


def test_programmatic_fields_are_checked():
    base = Skinny(dtype="float32", rows=4)
    with pytest.raises(ValueError, match="l2_prefetch.*programmatic=True"):
        base.replace(l2_prefetch=16)
    with pytest.raises(ValueError, match=r"l2_prefetch.*\[0, 4, 8, 16, 32, 64\]"):
        base.replace(programmatic=True, l2_prefetch=3)
    wg = Skinny.wgmma_default_spec({"M": 40, "N": 4096, "K": 4096})
    with pytest.raises(ValueError, match="programmatic.*wgmma"):
        wg.replace(programmatic=True)
    spec = base.replace(programmatic=True, l2_prefetch=32)
    assert spec_from_json(spec.to_json()) == spec and spec.key != base.key


@pytest.mark.parametrize("arch,pdl,launched", [("sm_90a", None, True), ("sm_90", "0", False),
                                               ("sm_80", None, False)])
def test_programmatic_specs_launch_their_main_kernel_programmatically(monkeypatch, arch, pdl, launched):
    """On sm_90 the main kernel goes through a programmatic launch (KGEN_PDL=0 turns it off);
    compiled for an earlier GPU, where the wait is not in the code, it is launched plainly. The
    merge and pre-scaling kernels, which do not wait, always launch plainly."""
    from kgen.ops.skinny import SkinnyKernel

    monkeypatch.setattr(skinny_module, "Launch", _PlannedLaunch)
    if pdl is None:
        monkeypatch.delenv("KGEN_PDL", raising=False)
    else:
        monkeypatch.setenv("KGEN_PDL", pdl)
    for merge in ("single_pass", "two_pass", "atomic"):
        spec = Skinny(dtype="float32", rows=2, warp_cols=4, merge=merge, programmatic=True, l2_prefetch=16)
        k = object.__new__(SkinnyKernel)
        k.spec, k._plans, k._sms, k._slots = spec, {}, 132, {}
        k._programmatic = skinny_module.launches_programmatically(spec, arch)
        k._fmt_main = k._fmt_merge = k._fmt_prescale = k._fmt_image = "P"
        k.handle = lambda name, shared=0: 0
        k._resident_slots = lambda name, shared: 264
        M, N, K = 2, 1000, 8192
        plan = k._plan(M, K, (K, 1), K, N, (1, K), (M, N), (N, 1), 1 << 20, 1 << 21)
        kinds = {kind: launch for kind, launch, _ in plan.launches}
        assert plan.splits > 1 and set(kinds) >= {"main"} and len(kinds) == (1 if merge == "single_pass" else 2)
        assert kinds["main"].programmatic is launched
        assert not any(v.programmatic for kind, v in kinds.items() if kind != "main")


def test_float32_tensor_core_products_of_one_tile_count_share_one_spec(monkeypatch):
    """kgen.matmul's float32 split-TF32 forms work in whole 8-row mma tiles, so the products of
    7-8 rows against one weight run one spec, and those of 9-16 rows another (one compile each,
    not one a row count); the plan still has one row tile, and the spec's rows hold the
    product's."""
    from kgen.tune import dispatch
    from kgen.tune.device import DeviceInfo, arch_limits

    h200 = DeviceInfo("Recorded H200", "sm_90", dict(arch_limits("sm_90"), multiprocessors=132))
    monkeypatch.setattr(dispatch, "_runs_wgmma", lambda: True)
    monkeypatch.setattr(dispatch, "_this_device", lambda: h200)
    rng = random.Random(8)
    checked = 0
    for _ in range(12):
        N, K = int(2 ** rng.uniform(10, 13.5)), int(2 ** rng.uniform(10, 14))
        for order in ("col", "row"):
            B = np.empty((N, K), np.float32).T if order == "col" else np.empty((K, N), np.float32)
            by_tiles: dict[int, set] = {}
            for M in range(7, 17):
                spec = dispatch.call_spec(np.empty((M, K), np.float32), B, device=h200, db=False)
                assert isinstance(spec, Skinny) and spec.tensor_cores, ((M, N, K), order, spec.to_json())
                if spec.instruction != "mma_sync":
                    continue   # the wide wgmma dot form already rounds its rows (wgmma_default_spec)
                tiles = -(-M // 8)
                assert spec.rows == 8 * tiles and spec.tc_ntiles == tiles, ((M, N, K), spec.to_json())
                assert spec.geometry("tc_dot" if order == "col" else "tc_axpy", 4, M, N, K, 132)["grid"][2] == 1
                by_tiles.setdefault(tiles, set()).add(spec.key)
                checked += 1
            assert all(len(keys) == 1 for keys in by_tiles.values()), ((N, K), order, by_tiles)
    assert checked >= 150   # most weights of this draw run the mma.sync forms
