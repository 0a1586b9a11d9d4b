"""CPU checks of wave_tail (TensorMatmul): the field's rules, its second launch's spec, the
launch plan that splits C's columns between the whole waves and the tiles past them (stand-in
launches), what dispatch gives products of 65-192 rows, and the tuner's space.
tests/test_wave_tail_gpu.py runs it."""
from __future__ import annotations

import pytest
from test_split_tf32_cpu import _Go, _kernel

import kgen
from kgen.core.spec import SpecError
from kgen.ops.tensorcore import TensorMatmul


def _tiles(BM=192, BN=128, stages=5, **kw):
    return TensorMatmul(dtype="bfloat16", tile=(BM, BN, 64), warp_tile=(64, BN), stages=stages, instruction="wgmma",
                        **kw)


def test_wave_tail_is_the_general_wgmma_tiles_and_its_tail_is_a_cluster_split():
    s = _tiles(wave_tail=8)
    assert s.tail_spec() == _tiles(split_k=8, split_merge="cluster")
    assert s.key != _tiles().key and kgen.spec_from_json(s.to_json()) == s
    for bad, match in ((dict(wave_tail=9), "from 1"), (dict(wave_tail=0), "from 1"),
                       (dict(wave_tail=2, persistent=True), "persistent"), (dict(wave_tail=2, cluster=2), "cluster"),
                       (dict(wave_tail=2, split_k=2), "split_k"), (dict(wave_tail=2, b_realign=True), "b_realign")):
        with pytest.raises(SpecError, match="wave_tail"):
            _tiles(BM=128, stages=6, **bad)
        with pytest.raises(SpecError, match=match):
            _tiles(BM=128, stages=6, **bad)
    with pytest.raises(SpecError, match="wave_tail"):   # TF32: not measured
        TensorMatmul(dtype="float32", tf32=True, tile=(128, 128, 32), warp_tile=(64, 128), stages=4,
                     instruction="wgmma", wave_tail=2)
    with pytest.raises(SpecError, match="wave_tail"):
        TensorMatmul(dtype="bfloat16", wave_tail=2)   # mma.sync
    with pytest.raises(SpecError, match="stages"):    # the tail's 192 x 192 sums need a ring of 4 stages
        _tiles(BN=192, stages=3, wave_tail=4)
    # The kernel's code is the same (its header names the spec): the plan, not the source, differs.
    differ = [(a, b) for a, b in zip(kgen.render(s).splitlines(), kgen.render(_tiles()).splitlines()) if a != b]
    assert len(differ) == 1 and '"wave_tail":8' in differ[0][0] and '"wave_tail":1' in differ[0][1]


@pytest.mark.parametrize("layout_b", ["row", "col"])
def test_the_plan_runs_whole_waves_then_the_tail_columns_split(monkeypatch, layout_b):
    spec = _tiles(wave_tail=8, layout_b=layout_b)
    k, tail = _kernel(spec, monkeypatch), _kernel(spec.tail_spec(), monkeypatch)
    for x in (k, tail):
        x._item = x._out_item = 2
        x._wave_sms, x._tail = 132, None
    k._tail = tail
    M, N, K = 150, 133 * 128 + 77, 4096     # 134 tiles of 128 columns: one wave and two tiles past it
    ldb = -(-N // 8) * 8 + 64 if layout_b == "row" else K + 8
    _Go.made = []
    plan = k._plan(M, N, K, K, ldb, N + 2, True, True, True)
    k._run(plan, 0xA000, 0xB000, 0xC000, 1.5, 0.25, 7)
    whole, last = _Go.made
    n0 = 132 * 128
    assert whole.grid == (132, 1, 1) and last.grid == (2, 1, 8)
    (w,), (t,) = whole.calls, last.calls
    # (map A, map B, C, M, N, K, lda, ldb, ldc, ...): the tail's B and C start n0 columns in.
    assert w[2] == 0xC000 and w[3:9] == (M, n0, K, K, ldb, N + 2)
    assert t[2] == 0xC000 + 2 * n0 and t[3:9] == (M, N - n0, K, K, ldb, N + 2)
    b_step = 2 * n0 * (ldb if layout_b == "col" else 1)
    assert w[1] == (0xB000).to_bytes(8, "little") * 16 and t[1] == (0xB000 + b_step).to_bytes(8, "little") * 16
    assert w[-2:] == t[-2:] == (1.5, 0.25)
    # Two row tiles (193 rows) of 134 columns: 132 of them fill two waves, two are left (4 tiles).
    _Go.made = []
    k._run(k._plan(193, N, K, K, ldb, N, True, True, True), 0xA000, 0xB000, 0xC000, 1.0, 0.0, 0)
    whole, last = _Go.made
    assert whole.grid == (264, 1, 1) and whole.calls[0][4] == n0 and last.grid == (4, 1, 8)
    assert last.calls[0][3:5] == (193, N - n0)
    # Five row tiles of 30 columns: 26 columns (130 tiles) in the first launch, 20 tiles after.
    _Go.made = []
    k._run(k._plan(900, 30 * 128, K, K, ldb, 30 * 128, True, True, True), 0xA000, 0xB000, 0xC000, 1.0, 0.0, 0)
    assert [g.grid for g in _Go.made] == [(130, 1, 1), (20, 1, 8)] and _Go.made[0].calls[0][4] == 26 * 128
    # No whole wave, or nothing past them: one launch, as without wave_tail.
    for M2, N2 in ((150, 131 * 128), (150, 132 * 128), (150, 264 * 128 - 5), (300, 66 * 128)):
        _Go.made = []
        k._run(k._plan(M2, N2, K, K, ldb, N2, True, True, True), 0xA000, 0xB000, 0xC000, 1.0, 0.0, 0)
        assert len(_Go.made) == 1 and _Go.made[0].calls[0][4] == N2, (M2, N2)


def test_release_frees_the_tail_kernels_plans_too(monkeypatch):
    spec = _tiles(wave_tail=8)
    k, tail = _kernel(spec, monkeypatch), _kernel(spec.tail_spec(), monkeypatch)
    for x in (k, tail):
        x._item = x._out_item = 2
        x._wave_sms, x._tail, x._live = 132, None, [True]
    k._tail = tail
    M, N, K = 150, 133 * 128 + 77, 4096
    k._run(k._plan(M, N, K, K, K + 8, N, True, True, True), 0xA000, 0xB000, 0xC000, 1.0, 0.0, 0)
    tail._buffers["slices"] = (0x1234, 64)    # a workspace the second launch holds
    assert k._plans and tail._plans
    held = tail._live
    k.release()
    assert not k._plans and not tail._plans and not tail._buffers and held == [False]


def test_whole_wave_columns_and_slices():
    from kgen.ops.tensorcore import CLUSTER_WAVE_BLOCKS, whole_wave_columns, wave_tail_slices

    rng = __import__("random").Random(20509)
    for _ in range(2000):
        rows, cols, sms = rng.randint(1, 9), rng.randint(1, 700), rng.choice([132, 114, 78])
        first = whole_wave_columns(rows, cols, sms)
        whole = rows * cols // sms * sms   # the tiles of the whole waves
        if first:   # the most columns whose tiles fit those waves, some columns left
            assert rows * first <= whole < rows * (first + 1) and first < cols
        else:       # no whole wave, or every column in them
            assert whole // rows in (0, cols)
        K = rng.randint(1, 20000)
        s = wave_tail_slices(rows, cols, K, sms)
        if s > 1:
            rest = rows * (cols - whole_wave_columns(rows, cols, sms))
            assert rest * s <= CLUSTER_WAVE_BLOCKS[s] and K // s >= 256
            assert all(rest * t > CLUSTER_WAVE_BLOCKS[t] or K // t < 256 for t in range(s + 1, 9))


def test_the_general_tiles_split_the_last_wave_of_65_to_256_rows_only():
    """The general tiles' rule (general_wgmma_spec; the default weighs these against the wide
    transposed tiles, tests/test_wide_swap_cpu.py)."""
    from kgen.ops.tensorcore import CLUSTER_WAVE_BLOCKS, WAVE_TAIL_ROWS

    general = TensorMatmul.general_wgmma_spec
    # 78 tokens against a 39936-column weight: 156 blocks of 128 x 256, one wave and 24 tiles,
    # those in 4 slices (96 blocks) where 8 would not all run at once.
    s = general({"M": 78, "N": 39936, "K": 2688}, "bfloat16")
    assert s.tile[:2] == (128, 256) and s.wave_tail == 4
    assert 24 * 4 <= CLUSTER_WAVE_BLOCKS[4] and all(24 * s > CLUSTER_WAVE_BLOCKS[s] for s in (5, 6, 7, 8))
    # 170 tokens against 50944 columns: 266 blocks of 192 x 192, two waves and two tiles past them.
    s = general({"M": 170, "N": 50944, "K": 2048}, "float16")
    assert s.tile[:2] == (192, 192) and s.wave_tail == 8
    # 238 tokens: 2 x 141 blocks of 128 x 256, 132 columns in two waves, 18 tiles past them in
    # 5 slices (90 blocks; clusters of 6 run 102 blocks at once, of 7 105 and of 8 120).
    s = general({"M": 238, "N": 36032, "K": 1792}, "bfloat16")
    assert s.tile[:2] == (128, 256) and s.wave_tail == 5
    # Slices of at least 256 k: K = 600 splits in two at most.
    assert TensorMatmul.default_spec({"M": 170, "N": 50944, "K": 600}, "bfloat16").wave_tail in (1, 2)
    rng, seen = __import__("random").Random(20503), set()
    for _ in range(300):
        M, N, K = rng.randint(1, 400), rng.randint(1024, 80000), rng.randint(256, 16384)
        assert TensorMatmul.default_spec({"M": M, "N": N, "K": K}, "float32").wave_tail == 1
        s = general({"M": M, "N": N, "K": K}, "bfloat16")
        if s.wave_tail > 1:
            assert WAVE_TAIL_ROWS[0] <= M <= WAVE_TAIL_ROWS[1]
            rows, cols = -(-M // s.tile[0]), -(-N // s.tile[1])
            assert rows == 1 or (M > 192 and rows == 2)
            assert rows * cols > 132 and rows * cols % 132
            assert K // s.wave_tail >= 256
            seen.add(rows)
    assert seen == {1, 2}


def test_b_that_tma_cannot_read_keeps_one_launch():
    p = {"M": 78, "N": 39936, "K": 2688}
    spec = TensorMatmul.default_spec(p, "bfloat16")
    assert spec.wave_tail > 1
    for layouts in (dict(layout_b="col", b_realign=True), dict(layout_b="row", b_realign=True),
                    dict(layout_b="col", b_phased=True)):
        assert spec.for_layouts(p, **layouts).wave_tail == 1
    assert spec.for_layouts(p, layout_b="col") == spec.replace(layout_b="col")


def test_the_tuner_searches_the_tail_split():
    space = TensorMatmul.search_space({"M": 150, "N": 50944, "K": 2048}, "bfloat16")
    tails = [s for s in space if s.wave_tail > 1 and not s.swap_ab]
    assert {s.tile[:2] for s in tails} >= {(192, 128), (192, 192)}
    assert all(s.split_k == 1 and not s.persistent for s in tails)
    # Two row tiles of 128 x 256 at 250 rows: 398 tiles, 198 columns in three waves, one left.
    assert any(s.tile[:2] == (128, 256) for s in TensorMatmul.search_space({"M": 250, "N": 50944, "K": 2048},
                                                                          "bfloat16") if s.wave_tail > 1)
