"""CPU checks of the wide transposed tiles (TensorMatmul with swap_ab and 128-256 columns, one
block an SM, wave_tail allowed): what validation admits and says, the default's choice between
them and the general tiles (wide_swap_suits, wide_swap_specs, wide_swap_cost) against a
reimplementation over drawn shapes, the B layouts that keep the tree's earlier choice, the
tuner's space, the two-launch plan on stand-in launches, and an nvcc build without spills.
tests/test_wide_swap_gpu.py runs them."""
from __future__ import annotations

import math
import random
import shutil

import pytest
from test_split_tf32_cpu import _Go, _kernel

import kgen
import kgen.ops.tensorcore as tc
from kgen.core.spec import SpecError
from kgen.ops.tensorcore import TensorMatmul as T


def _swap(BM, BN, **kw):
    return T(dtype="bfloat16", tile=(BM, BN, 64), warp_tile=(BM, 64), stages=tc.wgmma_ring_stages(BM, BN),
             instruction="wgmma", swap_ab=True, **kw)


def test_validation_keeps_the_sums_in_the_registers():
    for BM, BN in ((128, 256), (192, 192), (256, 128), (72, 256)):
        _swap(BM, BN)
    for BM, BN, most in ((136, 256, 128), (200, 192, 192)):
        with pytest.raises(SpecError, match=r"tile\[0\] \(BM\).*at most %d.*registers" % most):
            _swap(BM, BN)
    # The general tiles and the narrow transposed ones are not touched by the rule.
    T(dtype="bfloat16", tile=(192, 192, 64), warp_tile=(64, 192), stages=4, instruction="wgmma")
    _swap(256, 64)


def test_wave_tail_on_the_transposed_tiles():
    s = _swap(72, 192, wave_tail=4)
    assert s.tail_spec() == _swap(72, 192, split_k=4, split_merge="cluster")
    assert kgen.spec_from_json(s.to_json()) == s
    with pytest.raises(SpecError, match="wave_tail"):
        _swap(72, 128, wave_tail=2, split_k=2, split_merge="cluster")


def _before(monkeypatch, p, dtype="bfloat16"):
    """The default without the wide transposed tiles (the tree before them)."""
    with monkeypatch.context() as m:
        m.setattr(tc, "WIDE_SWAP_ROWS", (0, -1))
        return T.wgmma_default_spec(p, dtype)


def _cost(spec, M, N, K):
    BM, BN, _ = spec.tile
    a, b, c = tc.WIDE_SWAP_COST["swap" if spec.swap_ab else "general"]
    rows, cols = -(-M // BM), -(-N // BN)
    waves = math.ceil(rows * cols / 132)
    if spec.wave_tail > 1:
        first = tc.whole_wave_columns(rows, cols)
        waves = rows * first / 132 + 1 / spec.wave_tail + tc.WAVE_TAIL_COST
    return waves * BN * (K * (a + b * BM) + c)


def test_the_default_takes_the_cheaper_of_the_general_and_the_wide_transposed_tiles(monkeypatch):
    rng, took = random.Random(20611), {128: 0, 192: 0, 256: 0, "general": 0, "two rows": 0, "over stream": 0}
    for _ in range(600):
        M = rng.randint(1, 320)
        N = int(math.exp(rng.uniform(math.log(2000), math.log(90000))))
        K = int(math.exp(rng.uniform(math.log(300), math.log(20000))))
        p = {"M": M, "N": N, "K": K}
        for dtype in ("bfloat16", "float16", "float32"):
            got, before = T.wgmma_default_spec(p, dtype), _before(monkeypatch, p, dtype)
            inside = dtype != "float32" and 65 <= M <= 256 and K >= 512 and -(-N // 64) > 132 and \
                not T.stream_suits(M, N, K, dtype) and before == T.general_wgmma_spec(p, dtype) and before.split_k == 1
            if not inside:
                lo, hi = tc.SWAP_OVER_STREAM_ROWS
                if (dtype != "float32" and T.stream_suits(M, N, K, dtype) and lo <= M <= hi and K >= 512
                        and 132 < -(-N // 64) and -(-N // 128) <= 132):
                    # The streaming tiles' products of 65-128 rows: the rows in one transposed
                    # tile of 128 columns instead.
                    assert got == _swap(-(-M // 8) * 8, 128).replace(dtype=dtype), (p, dtype, got.to_json())
                    took["over stream"] += 1
                else:
                    assert got == before, (p, dtype)
                continue
            BM = -(-M // 8) * 8
            options = [before]
            for BN in (128, 192, 256):
                if BM // 2 + 32 > min(255, 65536 // (128 * (BN // 64 + 1))) // 8 * 8:
                    continue
                tiles = -(-N // BN)
                s = tc.wave_tail_slices(1, tiles, K)
                ways = math.ceil(tiles / 132)
                tail = s if s > 1 and tc.whole_wave_columns(1, tiles) / 132 + 1 / s + tc.WAVE_TAIL_COST < ways else 1
                options.append(_swap(BM, BN, wave_tail=tail).replace(dtype=dtype))
            want = min(options, key=lambda o: _cost(o, M, N, K))
            if (want.swap_ab and want.tile[1] == 128 and want.wave_tail == 1 and 129 <= M <= 256
                    and -(-N // 128) <= 132 and 2 * -(-N // 192) <= 132):
                half = math.ceil(math.ceil(M / 2) / 8) * 8   # two row tiles of half the rows, 192 columns
                want = _swap(half, 192).replace(dtype=dtype)
                took["two rows"] += 1
            assert got == want, (p, dtype, got.to_json(), want.to_json())
            took[want.tile[1] if want.swap_ab else "general"] += 1
    assert took[128] and took[192] and took["general"] and took["two rows"] and took["over stream"], took


def test_named_products():
    # 72 tokens against 34496 columns at K = 1280 (measured 43.2 µs on 128 x 256 tiles, 35.7 on
    # these; cuBLAS 30.2): 270 tiles of 128 columns, the last 6 in 5 slices.
    s = T.default_spec({"M": 72, "N": 34496, "K": 1280}, "bfloat16")
    assert s.swap_ab and s.tile[:2] == (72, 128) and s.wave_tail == 5
    # 115 x 60928 x 6720 (measured fastest on the general tiles): those stay.
    s = T.default_spec({"M": 115, "N": 60928, "K": 6720}, "bfloat16")
    assert not s.swap_ab and s.tile[:2] == (128, 256)
    # 196 x 44544 x 4416: all rows in one transposed tile of 200 (135.1 µs against 166.5 on two
    # row tiles of 128 x 256).
    s = T.default_spec({"M": 196, "N": 44544, "K": 4416}, "float16")
    assert s.swap_ab and s.tile[:2] == (200, 128)


def test_two_row_tiles_where_one_row_tile_of_128_columns_leaves_sms_idle(monkeypatch):
    """129-256 rows against N of 8448-12672: the 128-column transposed tiles of the cost's choice
    give way to two row tiles of half the rows and 192 columns (SWAP_TWO_ROW_TILES); past 12672
    columns (more than one wave of those) and below 129 rows the choice stands."""
    for (M, N, K), want in (((246, 8576, 5952), _swap(128, 192)), ((238, 8512, 4288), _swap(120, 192)),
                            ((203, 9856, 1088), _swap(104, 192)), ((232, 11200, 2560), _swap(120, 192))):
        p = {"M": M, "N": N, "K": K}
        with monkeypatch.context() as m:
            m.setattr(tc, "SWAP_TWO_ROW_TILES", (0, -1))
            before = T.default_spec(p, "bfloat16")
        assert before.swap_ab and before.tile[1] == 128 and before.tile[0] >= M and before.wave_tail == 1, p
        assert T.default_spec(p, "bfloat16") == want == before.two_row_tiles_spec(p), p
        assert T.default_spec(p, "float16") == want.replace(dtype="float16")
    for M, N, K in ((250, 13000, 4000), (120, 9000, 4000), (162, 25472, 2688)):
        p = {"M": M, "N": N, "K": K}
        with monkeypatch.context() as m:
            m.setattr(tc, "SWAP_TWO_ROW_TILES", (0, -1))
            before = T.default_spec(p, "bfloat16")
        assert T.default_spec(p, "bfloat16") == before and before.two_row_tiles_spec(p) is None, p
    space = T.search_space({"M": 238, "N": 8512, "K": 4288}, "bfloat16")
    assert _swap(120, 192) in space


@pytest.mark.parametrize("layouts", [dict(layout_b="col", b_realign=True), dict(layout_b="row", b_realign=True),
                                     dict(layout_b="col", b_phased=True), dict(layout_a="col", layout_b="col"),
                                     dict(layout_a="col", layout_b="row")])
def test_layouts_the_wide_tiles_were_not_measured_on_keep_the_earlier_choice(monkeypatch, layouts):
    rng, changed = random.Random(20612), 0
    for _ in range(150):
        p = {"M": rng.randint(65, 256), "N": rng.randint(9000, 70000), "K": rng.randint(1024, 12000)}
        got = T.default_spec(p, "bfloat16")
        changed += got.swap_ab
        with monkeypatch.context() as m:
            m.setattr(tc, "WIDE_SWAP_ROWS", (0, -1))
            want = T.default_spec(p, "bfloat16").for_layouts(p, **layouts)
        assert got.for_layouts(p, **layouts) == want, (p, layouts)
    assert changed > 50


def test_the_tuner_searches_the_wide_transposed_tiles():
    space = T.search_space({"M": 72, "N": 34496, "K": 1280}, "bfloat16")
    wide = {(s.tile[1], s.wave_tail) for s in space if s.swap_ab and s.tile[1] >= 128 and s.split_k == 1
            and s.stages == tc.wgmma_ring_stages(72, s.tile[1])}
    assert {(128, 1), (128, 5), (192, 1), (256, 1)} <= wide and any(bn == 256 and t > 1 for bn, t in wide)


def test_the_plan_runs_whole_waves_then_the_tail_columns_split(monkeypatch):
    spec = _swap(104, 192, wave_tail=4, layout_b="col")
    k, tail = _kernel(spec, monkeypatch), _kernel(spec.tail_spec(), monkeypatch)
    for x in (k, tail):
        x._item = x._out_item = 2
        x._wave_sms, x._tail, x._live = 132, None, [True]
    k._tail = tail
    M, N, K = 100, 140 * 192 - 50, 3000        # 140 tiles: one wave and 8 past it
    _Go.made = []
    k._run(k._plan(M, N, K, K, K + 8, N, True, True, True), 0xA000, 0xB000, 0xC000, 1.0, 0.0, 0)
    whole, last = [g for g in _Go.made if g.name == "kgen_tc_wgmma"]   # (A's pitch may be padded first)
    n0 = 132 * 192
    assert whole.calls[0][4] == n0 and last.calls[0][4] == N - n0
    assert last.calls[0][2] == 0xC000 + 2 * n0
    assert last.calls[0][1] == (0xB000 + 2 * n0 * (K + 8)).to_bytes(8, "little") * 16
    assert math.prod(last.grid) == 8 * 4


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_wide_transposed_tiles_build_without_spills():
    for spec in (_swap(128, 256, layout_b="col"), _swap(192, 192), _swap(72, 128, wave_tail=5).tail_spec(),
                 _swap(128, 192, layout_b="col"), _swap(104, 192)):
        res = kgen.compile(spec, arch="sm_90a").resources["kgen_tc_wgmma"]
        assert res["spill_stores"] == 0 and res["spill_loads"] == 0, (spec.to_json(), res)
