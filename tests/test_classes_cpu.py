"""CPU tests of b_classes (the wgmma kernel reading W.t() of a 16-bit weight whose rows lie off
16-byte boundaries by row sets, one set a C tile, A copied shifted a set): the kernel's index
arithmetic written out in numpy against an exact integer product, validation, the launch plan's
pieces, and where kgen.matmul routes such products."""
from __future__ import annotations

import random

import numpy as np
import pytest

import kgen
from kgen.ops.skinny import Skinny
from kgen.ops.tensorcore import CLASSES_MIN_B_BYTES, CLASSES_ROWS, TensorMatmul, phase_maps
from test_tensorcore_cpu import _copy_launches_early, _planning_kernel

BASE = dict(instruction="wgmma", swap_ab=True, layout_b="col", b_classes=True)


def _class_col(v: int, g: int, BN: int) -> int:
    tn = v // BN
    return tn % g + g * ((tn // g) * BN + v % BN)


def test_b_classes_row_sets_a_tile_multiply_every_row_of_w_by_a_once():
    """The kernel's arithmetic, written out: virtual tile tn is set tn % g, rows (tn / g) BN on
    of the set's map (phase_maps, from B's aligned base), boxes of 64 k from the set's aligned
    column, zero past the map's sizes, the sh values before each row's first zeroed in the first
    k tile; A's images shifted by sh as kgen_tc_class_a writes them; sums stored at class_col.
    Equal to A @ W.T exactly (integers) at every pitch modulo 8 and pointer offset, every box on a
    16-byte boundary, every element a map reads inside W's storage, every column of C written
    once and none past N."""
    spec = TensorMatmul(dtype="bfloat16", tile=(16, 64, 64), warp_tile=(16, 64), stages=16, **BASE)
    src = kgen.render(spec)
    # The kernel's side of the arithmetic this test mirrors.
    for line in ("const int set = tile_n % maps_b.sets, row0 = tile_n / maps_b.sets * BN;",
                 "const int kb = (maps_b.col[set] & ~7) + k;",
                 "tma_load(sb, mb, kb, row0, full);",
                 "tma_load_a(sa, &map_a, k, set * (int)(((M + BM - 1) / BM) * BM) + (int)block_m, full);",
                 "return tn % g + g * ((tn / g) * BN + v % BN);",
                 "return (index_t)g * BN * (((N + g - 1) / g + BN - 1) / BN);",
                 "const int sh = maps_b.col[tile_n % maps_b.sets] & 7;",
                 "const int sh = (int)(((index_t)offset + (index_t)set * (ldb % 8)) % 8);",
                 "const index_t k0 = 8 * c - sh;"):
        assert line in src, line
    rng = np.random.default_rng(7)
    BK, BN, BM = 64, 64, 16
    for N, K, pad, offset, M in ((100, 77, 0, 3, 5), (9, 130, 1, 0, 16), (200, 64, 3, 7, 1), (70, 5, 2, 1, 9),
                                 (3, 200, 0, 5, 3), (130, 129, 6, 2, 12), (64, 1000, 4, 6, 2)):
        ldb = K + pad
        g = 16 // np.gcd(16, ldb * 2)
        if N < g:
            continue   # copied aligned first (one set): the plan's business, below
        flat = rng.integers(-40, 40, size=offset + (N - 1) * ldb + K)   # W's storage from its aligned base
        W = np.stack([flat[offset + n * ldb:offset + n * ldb + K] for n in range(N)])
        A = rng.integers(-40, 40, size=(M, K))
        rows_pad = -(-M // BM) * BM
        k_img = K + 8
        maps = phase_maps(N, K, ldb, g, offset)
        # A's images (kgen_tc_class_a)
        ldd = -(-k_img // 64) * 64
        image = np.zeros((g * rows_pad, ldd), dtype=A.dtype)
        for r in range(g * rows_pad):
            st, m = divmod(r, rows_pad)
            sh = (offset + st * (ldb % 8)) % 8
            assert sh == maps[st][2] % 8
            for c in range(ldd):
                k = c - sh
                image[r, c] = A[m, k] if m < M and 0 <= k < K else 0
        n_virtual = g * BN * (((N + g - 1) // g + BN - 1) // BN)
        C = np.full((M, N), np.iinfo(np.int64).min)
        written = np.zeros(N, dtype=int)
        for tn in range(n_virtual // BN):
            st, row0 = tn % g, tn // g * BN
            inner, outer, col = maps[st]
            assert (outer - 1) * g * ldb + inner <= len(flat)   # the map's last element is W's
            sums = np.zeros((BN, rows_pad), dtype=np.int64)
            for kt in range(-(-k_img // BK)):
                start = (col & ~7) + kt * BK
                assert (start * 2) % 16 == 0   # the box's first address: 16-byte aligned
                box = np.array([[flat[j * g * ldb + x] if x < inner and j < outer else 0
                                 for x in range(start, start + BK)] for j in range(row0, row0 + BN)])
                if kt == 0:
                    box[:, :col & 7] = 0   # the consumers' zeros
                a_tile = image[st * rows_pad:(st + 1) * rows_pad, kt * BK:(kt + 1) * BK]
                a_tile = np.pad(a_tile, ((0, 0), (0, BK - a_tile.shape[1])))
                sums += box @ a_tile.T
            for i in range(BN):
                n = _class_col(tn * BN + i, g, BN)
                if n < N:
                    C[:, n] = sums[i, :M]
                    written[n] += 1
        assert (written == 1).all(), (N, K, ldb, offset)
        assert (C == A @ W.T).all(), (N, K, ldb, offset)


def test_b_classes_is_validated_and_stores_from_the_registers():
    """b_classes asks for the transposed wgmma tiles over W.t(), none of the other ways to read
    an unaligned B, one tile a block; its sums are never staged (a tile's columns of C are g
    apart); kgen_tc_class_a is rendered only with it."""
    spec = TensorMatmul(dtype="float16", tile=(16, 64, 64), warp_tile=(16, 64), stages=16, **BASE)
    assert not spec.staged_epilogue
    assert "kgen_tc_class_a" in kgen.render(spec)
    assert "kgen_tc_class_a" not in kgen.render(spec.replace(b_classes=False))
    assert spec.replace(b_classes=False).staged_epilogue
    for bad in (dict(layout_b="row"), dict(b_phased=True), dict(stream_k=True), dict(wave_tail=2),
                dict(l2_prefetch=16)):
        with pytest.raises(ValueError, match="b_classes|l2_prefetch|b_phased|stream_k|wave_tail"):
            spec.replace(**bad)
    with pytest.raises(ValueError, match="b_classes"):
        TensorMatmul(dtype="float16", tile=(64, 64, 16), warp_tile=(32, 32), stages=3, layout_b="col",
                     b_classes=True)
    # split K in a workspace or in clusters keeps the class map in its stores
    for merge in ("workspace", "cluster"):
        src = kgen.render(spec.replace(split_k=3, split_merge=merge))
        assert "class_col(" in src


def test_b_classes_with_classed_b_takes_the_transposed_tiles_over_k_whole_or_cluster_slices():
    """with_classed_b: the transposed tiles with K whole or in cluster slices become b_classes (no
    L2 prefetch, one launch); slices merged in a workspace (a second launch), the general tiles
    or a spec that already reads B its own way: None. The twin's 3 slices over its 33 tiles of
    2077 columns (99 blocks) become 2 over the sets' 40 tiles (3 would make 40 clusters where 39
    run at once)."""
    t = TensorMatmul(dtype="bfloat16", tile=(16, 64, 64), warp_tile=(16, 64), stages=16, instruction="wgmma",
                     swap_ab=True, l2_prefetch=16)
    p = {"M": 14, "N": 2077, "K": 11751}
    c = t.with_classed_b(p)
    assert c is not None and c.b_classes and c.layout_b == "col" and c.l2_prefetch == 0 and c.split_k == 1
    split = t.replace(split_k=3, split_merge="cluster", l2_prefetch=0).with_classed_b(p)
    assert split is not None and split.b_classes and (split.split_k, split.split_merge) == (2, "cluster")
    assert t.replace(split_k=3, l2_prefetch=0).with_classed_b(p) is None   # workspace: a second launch
    assert t.replace(b_phased=True, l2_prefetch=0).with_classed_b(p) is None
    assert TensorMatmul.default_spec({"M": 4096, "N": 4096, "K": 4096}, "bfloat16").with_classed_b(p) is None


def test_b_classes_k_slices_fit_the_sets_tiles_in_one_wave_of_clusters(monkeypatch):
    """For products of 9-16 rows drawn at random against W.t() of any K but a multiple of 8, the
    launch plan of what dispatch runs by row sets a tile: where K is split, the main launch's
    blocks (the sets' whole tiles times the slices) are no more than the clusters of that many
    slices that run at once (CLUSTER_WAVE_BLOCKS, or PHASED_CLUSTER_BLOCKS for a ring two blocks
    an SM hold), and one slice more would not fit or would leave a slice too short."""
    from kgen.ops import tensorcore as tc

    rng = random.Random(31)
    seen = 0
    for _ in range(60):
        dt = rng.choice(("float16", "bfloat16"))
        M, N, K = rng.randint(9, 16), rng.randint(1024, 16384), rng.randint(1024, 16384)
        if K % 8 == 0:
            K += rng.randint(1, 7)
        p = {"M": M, "N": N, "K": K}
        twin = TensorMatmul.default_spec(p, dt).for_layouts(p, layout_a="row", layout_b="col")
        spec = twin.with_classed_b(p)
        if spec is None or twin.split_k == 1:
            continue
        seen += 1
        main = _planned(monkeypatch, spec, M, N, K)[0][2]
        slices, blocks = main.grid[2], main.grid[0] * main.grid[1] * main.grid[2]
        assert slices == spec.split_k, (M, N, K, main.grid)
        two = spec.stages <= tc.wgmma_ring_stages(spec.tile[0], spec.tile[1], 2)
        capacity = tc.PHASED_CLUSTER_BLOCKS if two else tc.CLUSTER_WAVE_BLOCKS
        assert slices == 1 or blocks <= capacity[slices], (M, N, K, dt, main.grid)
        more = slices + 1
        assert (more > max(tc.SWAP_SPLITS) or (K + 8) < tc.STREAM_MIN_SLICE_K * more
                or blocks // slices * more > capacity[more]), (M, N, K, dt, main.grid)
    assert seen >= 10


def _planned(monkeypatch, spec, M, N, K, ldb=None):
    """The launch plan of `spec` for an M x N x K product on row-major A (pitch K) and W.t() (pitch
    ldb, K by default), with the driver's maps and launches recorded instead of made."""
    from kgen.core import tma

    monkeypatch.setattr(tma, "TiledMap", _Map)
    kernel = _planning_kernel(monkeypatch, spec)
    return kernel._plan(M, N, K, K, K if ldb is None else ldb, N, False, False, True), kernel


class _Map:
    def __init__(self, dtype, inner, outer, ld, box, swizzle_bytes=128):
        self.geometry = (inner, outer, ld, box, swizzle_bytes)

    def at(self, ptr):
        return repr((self.geometry, ptr)).encode().ljust(128, b".")[:128]


def test_unaligned_weights_of_9_16_rows_go_to_the_transposed_tiles_by_row_sets_a_tile(monkeypatch):
    """On an sm_90 GPU, 9-16 rows against W.t() of a 16-bit weight whose rows are not 16-byte
    aligned run the wgmma kernel by row sets a tile (b_classes) where the weight holds
    CLASSES_MIN_B_BYTES or more and the aligned twin's tiles are the transposed ones over K whole
    or in cluster slices (classes_suits), the skinny forms elsewhere; aligned weights, 1-8 rows,
    float32 and GPUs without wgmma never take b_classes."""
    from kgen.tune import dispatch

    monkeypatch.setattr(dispatch, "_runs_wgmma", lambda: True)
    monkeypatch.setattr(dispatch, "_sm_count", lambda: 132)
    lo, hi = CLASSES_ROWS
    rng = random.Random(13)
    seen = {True: 0, False: 0}
    for _ in range(40):
        M, N, K = rng.randint(lo, hi), rng.randint(1024, 16384), rng.randint(1024, 16384)
        K += 1 if K % 8 == 0 else 0
        A, B = np.zeros((M, K), np.float16), np.zeros((N, K), np.float16).T
        suits = TensorMatmul.classes_suits(M, N, K, "float16")
        seen[suits] += 1
        fam = dispatch.call_family(A, B, "float16")
        if suits:
            assert fam is TensorMatmul, (M, N, K)
            over = dispatch.call_overrides(A, B, fam, "float16", stand_in=True)
            assert over.get("b_classes") is True, (M, N, K, over)
            p = {"M": M, "N": N, "K": K}
            spec = TensorMatmul.default_spec(p, "float16").for_layouts(p, **over)
            twin = TensorMatmul.default_spec(p, "float16").for_layouts(p, layout_a="row", layout_b="col")
            assert spec.b_classes and spec.swap_ab and spec == twin.with_classed_b(p), spec.to_json()
            assert N * K * 2 >= CLASSES_MIN_B_BYTES
        else:
            assert fam is Skinny, (M, N, K)
    assert seen[True] and seen[False]
    M, N, K = 12, 12000, 4001
    assert TensorMatmul.classes_suits(M, N, K, "float16")
    for m, n, k, dt in ((8, N, K, "float16"), (17, N, K, "float16"), (M, N, K, "float32"),
                        (M, CLASSES_MIN_B_BYTES // (2 * K), K, "float16")):   # just under the bytes
        assert not TensorMatmul.classes_suits(m, n, k, dt)
    assert TensorMatmul.classes_suits(M, -(-CLASSES_MIN_B_BYTES // (2 * K)), K, "float16")
    aligned = np.zeros((N, 4000), np.float16).T
    fam = dispatch.call_family(np.zeros((M, 4000), np.float16), aligned, "float16")
    assert "b_classes" not in dispatch.call_overrides(np.zeros((M, 4000), np.float16), aligned, fam, "float16",
                                                      stand_in=True)
    monkeypatch.setattr(dispatch, "_runs_wgmma", lambda: False)
    assert dispatch.call_family(np.zeros((M, K), np.float16), np.zeros((N, K), np.float16).T, "float16") is Skinny


def test_b_classes_plans_copy_a_once_a_set_and_read_w_by_the_sets_maps(monkeypatch):
    """The launch plan: A copied once a set (kgen_tc_class_a, its pitch a multiple of 64 values,
    K + 8 columns, BM-row blocks a set), W.t() never copied, one TMA map a set from W's aligned
    base (boxes of 64 k by BN rows, swizzled) with each set's column of k = 0, the grid over the
    sets' whole tiles, the kernel's K = K + 8; fewer rows than sets: W copied aligned, one set;
    no K: nothing copied, and the maps' parameter still names one set (the columns map by it)."""
    import struct

    from kgen.ops import tensorcore as tc

    Map = _Map
    spec = TensorMatmul(dtype="bfloat16", tile=(16, 64, 64), warp_tile=(16, 64), stages=16, **BASE)
    M, N, K = 12, 4864, 12595   # an odd K: eight sets
    ldd = -(-(K + 8) // 64) * 64
    plan, kernel = _planned(monkeypatch, spec, M, N, K)
    copy_a, copy_b, main, args = plan[0], plan[1], plan[2], plan[3]
    assert copy_b is None and copy_a[0].name == "kgen_tc_class_a" and copy_a[0].fmt == "PPPqqqqqqq"
    assert _copy_launches_early(kernel, copy_a[0])   # waits for the kernel before it itself
    assert copy_a[2] == (M, K, K, ldd, 16, 8, K)   # rows, K, lda, the copy's pitch, rows a set, sets, ldb
    assert main.name == "kgen_tc_wgmma" and main.fmt == f"128s{tc.PHASE_MAPS_BYTES}sP" + "q" * 8 + "iff"
    assert args[:4] == (M, N, K + 8, ldd)
    per_set = -(-N // 8)
    assert main.grid == (8 * -(-per_set // 64), 1, 1)   # whole tiles of each set's rows
    base = 0x7000_0000
    a_map, b_maps = plan[7].encoded(1 << 30, base + 6)   # W three elements past a 16-byte boundary
    assert a_map == Map("bfloat16", K + 8, 8 * 16, ldd, (64, 16)).at(1 << 30)
    for r, (inner, outer, _) in enumerate(phase_maps(N, K, K, 8, 3)):
        assert b_maps[128 * r:128 * r + 128] == Map("bfloat16", inner, outer, 8 * K, (64, 64), 128).at(base)
    assert struct.unpack_from("<8iii", b_maps, 1024) == (*[3 + r * K for r in range(8)], 0, 8)
    kernel._plans.clear()
    small = kernel._plan(M, 5, K, K, K, 5, False, False, True)
    assert small[1][0].name == "kgen_tc_repack" and small[0][2][5] == 1
    assert not _copy_launches_early(kernel, small[1][0]) and _copy_launches_early(kernel, small[0][0])
    kernel._plans.clear()
    empty = kernel._plan(M, N, 0, 0, K, N, False, False, True)
    assert empty[0] is None and empty[1] is None
    a0, b0 = empty[7].encoded(1 << 30, base)
    assert a0 == bytes(128) and b0[:1060] == bytes(1060) and struct.unpack_from("<i", b0, 1060) == (1,)
