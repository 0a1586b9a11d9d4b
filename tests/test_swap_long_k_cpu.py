"""CPU checks of SWAP_LONG_K: 16-bit products of 65-256 rows whose default was one wave of
64-column transposed tiles with K whole take 128-column tiles with K in the most slices whose
blocks all run at once, where K is long. The default against a reimplementation over drawn
shapes, named products, the layouts it was not measured on, the tuner's space, and an nvcc
build without spills. tests/test_wide_swap_gpu.py and the tensor-core property tests run the
kernels."""
from __future__ import annotations

import math
import random
import shutil

import pytest

import kgen
import kgen.ops.tensorcore as tc
from kgen.ops.tensorcore import TensorMatmul as T


def _before(monkeypatch, p, dtype):
    with monkeypatch.context() as m:
        m.setattr(tc, "SWAP_LONG_K", math.inf)
        return T.default_spec(p, dtype)


def _slices(tiles, K, capacity):
    return max(s for s in range(1, 9)
               if s == 1 or (K >= 256 * s and tiles * s <= (capacity if isinstance(capacity, int) else capacity[s])))


def test_long_k_products_of_one_wave_of_64_column_tiles_take_128_columns_in_slices(monkeypatch):
    rng, took = random.Random(24301), {"128": 0, "kept": 0}
    for _ in range(1500):
        M, N, K = rng.randint(1, 300), rng.randint(1024, 12000), int(2 ** rng.uniform(10, 15))
        p = {"M": M, "N": N, "K": K}
        for dtype in ("bfloat16", "float16", "float32"):
            got, before = T.default_spec(p, dtype), _before(monkeypatch, p, dtype)
            BM = -(-M // 8) * 8
            wide = -(-N // 128)
            s = _slices(wide, K, 132)
            inside = (dtype != "float32" and 65 <= M <= 256 and K >= tc.SWAP_LONG_K and before.swap_ab
                      and before.tile[1] == 64 and before.split_k == 1 and -(-N // 64) <= 132 and s > 1)
            if not inside:
                assert got == before, (p, dtype)
                took["kept"] += dtype != "float32" and 65 <= M <= 256 and K >= tc.SWAP_LONG_K
                continue
            merge = "cluster" if wide * s <= tc.CLUSTER_WAVE_BLOCKS[s] else "workspace"
            want = T(dtype=dtype, tile=(BM, 128, 64), warp_tile=(BM, 64), stages=tc.wgmma_ring_stages(BM, 128),
                     instruction="wgmma", swap_ab=True, split_k=s, split_merge=merge)
            assert got == want, (p, dtype, got.to_json())
            took["128"] += 1
    assert took["128"] > 30 and took["kept"] > 30, took


def test_named_products():
    # 163 x 5120 x 27648 (W.t()): 80 tiles of 64 columns, K whole, 117.7 µs; 40 of 128 columns
    # in 3 slices (a workspace: 120 blocks, more than clusters of 3 hold at once) 97.4 (cuBLAS
    # 96.3), device time on an H200.
    s = T.default_spec({"M": 163, "N": 5120, "K": 27648}, "bfloat16")
    assert s.swap_ab and s.tile[:2] == (168, 128) and s.split_k == 3 and s.split_merge == "workspace"
    # 173 x 6272 x 24832: 49 tiles of 128 in 2 slices merged in clusters (106.9-109.1 against 121.4).
    s = T.default_spec({"M": 173, "N": 6272, "K": 24832}, "bfloat16")
    assert s.swap_ab and s.tile[:2] == (176, 128) and s.split_k == 2 and s.split_merge == "cluster"
    # K of 5312: the 64-column tiles stay (200 x 6208 x 5312, 31.6 µs against 31.5).
    s = T.default_spec({"M": 200, "N": 6208, "K": 5312}, "bfloat16")
    assert s.swap_ab and s.tile[:2] == (200, 64) and s.split_k == 1
    # Already split (64 tiles of 64 columns in 2 slices): unchanged.
    s = T.default_spec({"M": 240, "N": 4096, "K": 14336}, "bfloat16")
    assert s.tile[:2] == (240, 64) and s.split_k == 2


@pytest.mark.parametrize("layouts", [dict(layout_b="col", b_realign=True), dict(layout_b="row", b_realign=True),
                                     dict(layout_b="col", b_phased=True), dict(layout_b="row", b_phased=True)])
def test_layouts_it_was_not_measured_on_keep_the_earlier_choice(monkeypatch, layouts):
    rng, changed = random.Random(24302), 0
    for _ in range(200):
        p = {"M": rng.randint(65, 256), "N": rng.randint(4200, 8448), "K": rng.randint(12288, 30000)}
        got, before = T.default_spec(p, "bfloat16"), _before(monkeypatch, p, "bfloat16")
        changed += got != before
        with monkeypatch.context() as m:
            m.setattr(tc, "SWAP_LONG_K", math.inf)
            want = before.for_layouts(p, **layouts)
        assert got.for_layouts(p, **layouts) == want, (p, layouts)
    assert changed > 30


def test_the_tuner_searches_the_long_k_tiles():
    for p in ({"M": 163, "N": 5120, "K": 27648}, {"M": 173, "N": 6272, "K": 24832}):
        assert T.default_spec(p, "bfloat16") in T.search_space(p, "bfloat16"), p


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_long_k_tiles_build_without_spills():
    for BM, split, merge in ((256, 2, "cluster"), (168, 3, "workspace")):
        spec = T(dtype="bfloat16", tile=(BM, 128, 64), warp_tile=(BM, 64), stages=tc.wgmma_ring_stages(BM, 128),
                 instruction="wgmma", swap_ab=True, split_k=split, split_merge=merge, layout_b="col")
        res = kgen.compile(spec, arch="sm_90a").resources["kgen_tc_wgmma"]
        assert res["spill_stores"] == 0 and res["spill_loads"] == 0, (spec.to_json(), res)
