"""CPU checks of the 128-column transposed tiles for 65-256 rows (swap_spec, SWAP_128_MIN_GAIN, SWAP_128_MIN_K):
the default's choice against a reimplementation over drawn shapes, the layouts that keep the
64-column tiles, named products, the tuner's space, and an nvcc build without spills.
tests/test_wide_swap_gpu.py runs them."""
from __future__ import annotations

import math
import random
import shutil

import pytest

import kgen
import kgen.ops.tensorcore as tc
from kgen.ops.tensorcore import TensorMatmul as T


def _most_slices(tiles, K):
    """The most slices (1-8) of at least 256 k whose clusters of that many blocks all run at once."""
    return max(s for s in range(1, 9) if s == 1 or (K >= 256 * s and tiles * s <= tc.CLUSTER_WAVE_BLOCKS[s]))


def _before(monkeypatch, p, dtype):
    """The default without the 128-column tiles (SWAP_128_MIN_GAIN, and SWAP_LONG_K, which
    tests/test_swap_long_k_cpu.py checks)."""
    with monkeypatch.context() as m:
        m.setattr(tc, "SWAP_128_MIN_GAIN", math.inf)
        m.setattr(tc, "SWAP_LONG_K", math.inf)
        return T.default_spec(p, dtype)


def test_the_default_takes_128_columns_where_they_make_a_quarter_more_blocks_of_a_long_k(monkeypatch):
    rng, took = random.Random(21041), {"128": 0, "kept": 0}
    for _ in range(800):
        M, N, K = rng.randint(1, 300), rng.randint(1024, 12000), rng.randint(1024, 17000)
        p = {"M": M, "N": N, "K": K}
        for dtype in ("bfloat16", "float16", "float32"):
            got, before = T.default_spec(p, dtype), _before(monkeypatch, p, dtype)
            BM = -(-M // 8) * 8
            narrow, wide = -(-N // 64), -(-N // 128)
            s = _most_slices(wide, K)
            inside = (dtype != "float32" and 65 <= M <= 256 and narrow <= 132 and K >= 3072
                      and wide * s >= 1.25 * narrow * _most_slices(narrow, K))
            if not inside:
                long_k = dtype != "float32" and 65 <= M <= 256 and narrow <= 132 and K >= tc.SWAP_LONG_K
                assert got == before or long_k, (p, dtype)
                took["kept"] += dtype != "float32" and 65 <= M <= 256 and narrow <= 132
                continue
            assert before.swap_ab and before.tile[:2] == (BM, 64), before.to_json()
            want = T(dtype=dtype, tile=(BM, 128, 64), warp_tile=(BM, 64), stages=tc.wgmma_ring_stages(BM, 128),
                     instruction="wgmma", swap_ab=True, split_k=s, split_merge="cluster" if s > 1 else "workspace")
            assert got == want, (p, dtype, got.to_json())
            took["128"] += 1
    assert took["128"] > 30 and took["kept"] > 200, took


def test_named_products():
    # 218 x 4440 x 3544 (W.t()): 70 tiles of 64 columns with K whole ran 35.6 µs; 35 of 128
    # columns in 3 slices 23.7 (cuBLAS 23.9), device time on an H200.
    s = T.default_spec({"M": 218, "N": 4440, "K": 3544}, "bfloat16")
    assert s.swap_ab and s.tile[:2] == (224, 128) and s.split_k == 3 and s.split_merge == "cluster"
    # 249 x 2168 x 1816: as many blocks either way (34 x 3, 17 x 6); the 64-column tiles stay,
    # as they do at 212 x 4416 x 1920 (K short of SWAP_128_MIN_K, 13.1 µs against 13.3).
    s = T.default_spec({"M": 212, "N": 4416, "K": 1920}, "bfloat16")
    assert s.swap_ab and s.tile[:2] == (216, 64)
    s = T.default_spec({"M": 249, "N": 2168, "K": 1816}, "bfloat16")
    assert s.swap_ab and s.tile[:2] == (256, 64) and s.split_k == 3
    # 48 rows: the 64-column tiles stay whatever their split.
    assert T.default_spec({"M": 48, "N": 5784, "K": 12928}, "float16").tile[:2] == (48, 64)


@pytest.mark.parametrize("layouts", [dict(layout_b="col", b_realign=True), dict(layout_b="row", b_realign=True),
                                     dict(layout_b="col", b_phased=True), dict(layout_b="row", b_phased=True),
                                     dict(layout_a="col", layout_b="col"), dict(layout_a="col", layout_b="row")])
def test_layouts_the_128_column_tiles_were_not_measured_on_keep_the_earlier_choice(monkeypatch, layouts):
    rng, changed = random.Random(21042), 0
    for _ in range(300):
        p = {"M": rng.randint(65, 256), "N": rng.randint(1024, 8448), "K": rng.randint(3072, 16000)}
        got, before = T.default_spec(p, "bfloat16"), _before(monkeypatch, p, "bfloat16")
        changed += got != before
        with monkeypatch.context() as m:
            m.setattr(tc, "SWAP_128_MIN_GAIN", math.inf)
            m.setattr(tc, "SWAP_LONG_K", math.inf)
            want = before.for_layouts(p, **layouts)
        assert got.for_layouts(p, **layouts) == want, (p, layouts)
    assert changed > 30


def test_the_tuner_searches_the_128_column_tiles():
    p = {"M": 218, "N": 4440, "K": 3544}
    assert T.default_spec(p, "bfloat16") in T.search_space(p, "bfloat16")


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_128_column_tiles_build_without_spills():
    for BM, split in ((256, 5), (152, 4)):
        spec = T(dtype="bfloat16", tile=(BM, 128, 64), warp_tile=(BM, 64), stages=tc.wgmma_ring_stages(BM, 128),
                 instruction="wgmma", swap_ab=True, split_k=split, split_merge="cluster", layout_b="col")
        res = kgen.compile(spec, arch="sm_90a").resources["kgen_tc_wgmma"]
        assert res["spill_stores"] == 0 and res["spill_loads"] == 0, (spec.to_json(), res)
