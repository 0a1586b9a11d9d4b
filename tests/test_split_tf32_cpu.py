"""CPU checks of float32 as three TF32 products (TensorMatmul split_tf32): the field's rules,
the rendered split copies, the launch plan (both operands copied K-major as [hi lo] and
[lo hi], the main kernel on inner size 3 * seg reading them as hi lo hi and lo hi hi), a numerical
model of what that plan sums,
dispatch's routing, and sm_90a builds without spills. tests/test_tensorcore_gpu.py runs it."""
from __future__ import annotations

import re

import numpy as np
import pytest

import kgen
from kgen.core.spec import SpecError
from kgen.ops import tensorcore as tc
from kgen.ops.tensorcore import TensorMatmul


def _split(**kw):
    base = dict(dtype="float32", tf32=True, split_tf32=True, tile=(128, 128, 32), warp_tile=(64, 128), stages=4,
                instruction="wgmma")
    base.update(kw)
    return TensorMatmul(**base)


def test_split_needs_tf32_and_reads_both_operands_k_major():
    with pytest.raises(SpecError, match="split_tf32"):
        TensorMatmul(dtype="float16", split_tf32=True)
    with pytest.raises(SpecError, match="split_tf32"):   # mma.sync's split holds hi and lo: one fragment set
        TensorMatmul(dtype="float32", tf32=True, split_tf32=True, tile=(64, 64, 32), warp_tile=(32, 32),
                     fragments_ahead=True)
    for BM, BN in ((128, 256), (128, 192), (64, 256)):   # no room for the second set of accumulators
        with pytest.raises(SpecError, match="BN"):
            _split(tile=(BM, BN, 32), warp_tile=(64, BN))
    for a in ("row", "col"):
        for b in ("row", "col"):
            s = _split(layout_a=a, layout_b=b)
            # The split copies write K-major buffers: no transposing copy, both tiles K-major.
            assert not s.transposes("A") and not s.transposes("B")
            assert s.kernel_k_major("A") and s.kernel_k_major("B")
            src = kgen.render(s)
            assert "kgen_tc_split_copies(" in src and "kgen_tc_transpose(" not in src
            # Each operand's part of the copy as its storage needs: K-major rows as they are,
            # an M-major A or N-major B through the shared tile.
            assert ("split_rows(a_src" if a == "row" else "split_cols(a_src") in src
            assert ("split_rows(b_src" if b == "col" else "split_cols(b_src") in src
            assert "cvt.rna.tf32.f32" in src and "#define PROMOTE_TILES 4" in src and "acc[i] + d[i]" in src
    plain = _split(split_tf32=False)
    assert "kgen_tc_split_copies" not in kgen.render(plain) and "PROMOTE_TILES" not in kgen.render(plain)
    assert kgen.spec_from_json(_split().to_json()) == _split() and _split().key != plain.key


def test_split_tolerance_is_float32_level_and_counts_3k_products():
    s, tf = _split(), _split(split_tf32=False)
    assert s.input_roundoff == 2.0 ** -21 and tf.input_roundoff == 2.0 ** -10
    p = {"M": 64, "N": 64, "K": 4096}
    # Where the inputs' rounding dominates the bound (short K), the split's is far below TF32's.
    assert s.tolerance_for({"M": 64, "N": 64, "K": 100}) < tf.tolerance_for({"M": 64, "N": 64, "K": 100}) / 10
    # 3K products accumulate: the accumulation part of the bound is that of K' = 3K.
    flat = tf.replace(split_tf32=False)
    assert s.tolerance_for(p) - 4 * s.input_roundoff == pytest.approx(
        flat.tolerance_for({"M": 64, "N": 64, "K": 3 * 4096}) - 4 * flat.input_roundoff)
    assert s.elementwise_bound(100)[0] == pytest.approx(2 * (2 * 2.0 ** -21 + (300 + 64) * 2 * 2.0 ** -24))


class _Go:
    """Launch's stand-in: records the entry point, grid, format and each call's arguments."""

    made: list = []

    def __init__(self, fn, name, grid, block, shared, fmt, programmatic=False):
        self.name, self.grid, self.fmt, self.calls = name, grid, fmt, []
        self.programmatic = programmatic
        _Go.made.append(self)

    def __call__(self, stream, *args):
        self.calls.append(args)


def _kernel(spec, monkeypatch):
    from kgen.core import tma

    monkeypatch.setattr(tc, "Launch", _Go)
    # TMA descriptors name the copies: a stand-in encodes the base address it was given.
    monkeypatch.setattr(tma, "encode_tiled_2d", lambda dtype, ptr, *geometry: ptr.to_bytes(8, "little") * 16)
    k = object.__new__(tc.TensorMatmulKernel)
    k.spec = spec
    k._item = k._out_item = k._acc_item = 4
    k._sms = 132
    k._fmt = "PPP" + "q" * 8 + "iff"
    k._fmt_reduce = "PP" + "q" * 5 + "iff"
    k._buffers, k._retired, k._plans, k._torch_calls = {}, [], {}, {}
    monkeypatch.setattr(k, "handle", lambda name, shared=0, carveout=None: 1, raising=False)
    addresses = iter(range(0x10000, 0x10000000, 0x100000))
    k.buffer_bytes = {}   # workspace bytes asked for, by buffer name

    def buffer(name, nbytes):
        k.buffer_bytes[name] = nbytes
        return next(addresses)

    monkeypatch.setattr(k, "_buffer", buffer, raising=False)
    return k


@pytest.mark.parametrize("layout_a, layout_b", [("row", "row"), ("col", "col"), ("row", "col")])
def test_plan_copies_both_operands_and_runs_the_main_kernel_on_3k(monkeypatch, layout_a, layout_b):
    spec = _split(layout_a=layout_a, layout_b=layout_b)
    k = _kernel(spec, monkeypatch)
    _Go.made = []
    M, N, K = 300, 200, 1001      # K not a multiple of the k tile (32): seg = 1024
    lda = K + 3 if layout_a == "row" else M + 1
    ldb = N + 5 if layout_b == "row" else K + 7
    plan = k._plan(M, N, K, lda, ldb, N, False, False, True)
    k._run(plan, 0xA0, 0xB0, 0xC0, 1.0, 0.0, 0)
    copies, main = _Go.made       # one launch copies both operands
    seg = 1024
    assert copies.name == "kgen_tc_split_copies" and copies.fmt == "PPPPqqqqqqiii"
    # (A, A's copy, B, B's copy, M, N, K, lda, ldb, seg, B's grid x and y, A's grid x).
    (c_args,) = copies.calls
    assert c_args[0] == 0xA0 and c_args[2] == 0xB0 and c_args[4:10] == (M, N, K, lda, ldb, seg)
    b_gx, b_gy, a_gx = c_args[10:]
    # K-major rows: k in 256-wide blocks along x, a row each along y; else 32 x 32 tiles.
    assert (b_gx, b_gy) == ((4, N) if layout_b == "col" else (-(-N // 32), seg // 32))
    a_grid = (4, M) if layout_a == "row" else (-(-M // 32), seg // 32)
    assert a_gx == a_grid[0] and copies.grid == (b_gx * b_gy + a_grid[0] * a_grid[1], 1, 1)
    assert main.name == "kgen_tc_wgmma"
    (m_args,) = main.calls
    # The TMA maps name the copies (two segments wide); the product's inner size is 3 * seg.
    assert m_args[:3] == (c_args[1].to_bytes(8, "little") * 16, c_args[3].to_bytes(8, "little") * 16, 0xC0)
    assert m_args[3:9] == (M, N, 3 * seg, 2 * seg, 2 * seg, N)
    assert plan[-1].a[:3] == (2 * seg, M, 2 * seg) and plan[-1].b[:3] == (2 * seg, N, 2 * seg)
    # Each copy's buffer holds its rows x two segments of float32.
    assert k.buffer_bytes == {"A": M * 2 * seg * 4, "B": N * 2 * seg * 4}


def test_large_copies_go_in_two_launches_b_first(monkeypatch):
    spec = _split(layout_a="row", layout_b="row")
    k = _kernel(spec, monkeypatch)
    M, N, K = 300, 200, 1001
    seg = 1024
    monkeypatch.setattr(tc, "SPLIT_COPIES_ONE_LAUNCH", (M + N) * seg - 1)
    _Go.made = []
    k._run(k._plan(M, N, K, K, N, N, False, False, True), 0xA0, 0xB0, 0xC0, 1.0, 0.0, 0)
    copy_b, copy_a, main = _Go.made
    assert copy_b.name == copy_a.name == "kgen_tc_split_copies" and main.name == "kgen_tc_wgmma"
    (b_args,), (a_args,) = copy_b.calls, copy_a.calls
    b_gx, b_gy = -(-N // 32), seg // 32   # B row-major: 32 x 32 tiles
    a_gx, a_gy = 4, M                     # A K-major: 256 k a block, a row each
    # B's launch: B's grid alone (no blocks left for A); A's: B's grid empty (b_gy = 0).
    assert copy_b.grid == (b_gx * b_gy, 1, 1) and b_args[10:] == (b_gx, b_gy, a_gx)
    assert copy_a.grid == (a_gx * a_gy, 1, 1) and a_args[10:] == (1, 0, a_gx)
    assert b_args[:10] == a_args[:10] == (0xA0, a_args[1], 0xB0, a_args[3], M, N, K, K, N, seg)
    # At the bound itself, one launch.
    monkeypatch.setattr(tc, "SPLIT_COPIES_ONE_LAUNCH", (M + N) * seg)
    k._plans.clear()
    _Go.made = []
    k._run(k._plan(M, N, K, K, N, N, False, False, True), 0xA0, 0xB0, 0xC0, 1.0, 0.0, 0)
    assert [g.name for g in _Go.made] == ["kgen_tc_split_copies", "kgen_tc_wgmma"]


def _tf32(x: np.ndarray) -> np.ndarray:
    """Round float32 to TF32 (10 mantissa bits) to nearest, ties away from zero: cvt.rna."""
    bits = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    bits = ((bits + 0x1000) & 0xFFFFE000).astype(np.uint32)
    return bits.view(np.float32)


def _segments(x: np.ndarray, lo_seg: int) -> np.ndarray:
    """What kgen_tc_split3 writes for `x` (rows x K): two segments side by side, `lo_seg` holding
    lo, the other hi."""
    hi = _tf32(x)
    lo = _tf32((x - hi).astype(np.float32))
    return np.concatenate([lo if s == lo_seg else hi for s in range(2)], axis=1)


def _column_maps(src: str):
    """split_col_a and split_col_b of the rendered kernel, as Python functions of (k, seg)."""
    maps = []
    for name in ("split_col_a", "split_col_b"):
        body = re.search(name + r"\(int k, int seg\) \{ return (.+?); \}", src).group(1)
        cond, yes, no = re.fullmatch(r"(.+) \? (.+) : (.+)", body).groups()
        maps.append(eval(f"lambda k, seg: ({yes}) if ({cond}) else ({no})"))
    return maps


def test_the_plans_segments_sum_three_tf32_products_at_float32_accuracy(monkeypatch):
    spec = _split()
    k = _kernel(spec, monkeypatch)
    _Go.made = []
    k._run(k._plan(8, 8, 512, 512, 8, 8, True, True, True), 0xA0, 0xB0, 0xC0, 1.0, 0.0, 0)
    src = kgen.render(spec)
    # The segment each operand's copy puts lo in, as the rendered copy kernel passes it.
    lo_a, lo_b = (int(re.search(r"split_(?:rows|cols)\(" + o + r"_src, \w+, \w+, K, \w+, seg, (\d),", src).group(1))
                  for o in "ab")
    K3 = _Go.made[1].calls[0][5]   # the main kernel's inner size, 3 * seg
    seg = K3 // 3
    col_a, col_b = _column_maps(src)
    rng = np.random.default_rng(7)
    a = rng.standard_normal((8, 512)).astype(np.float32)
    b = rng.standard_normal((512, 8)).astype(np.float32)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    sa, sb = _segments(a, lo_a), _segments(b.T, lo_b)
    # The product the kernel runs over the two copies, k by k through its column maps, in float64:
    # exactly the three wanted terms.
    ka = np.array([col_a(kk, seg) for kk in range(K3)])
    kb = np.array([col_b(kk, seg) for kk in range(K3)])
    assert ka.max() < 2 * seg and kb.max() < 2 * seg
    got = sa[:, ka].astype(np.float64) @ sb[:, kb].T.astype(np.float64)
    hi_a, hi_b = _tf32(a).astype(np.float64), _tf32(b).astype(np.float64)
    lo_a_ = _tf32((a - hi_a).astype(np.float32)).astype(np.float64)
    lo_b_ = _tf32((b - hi_b).astype(np.float32)).astype(np.float64)
    assert np.allclose(got, hi_a @ hi_b + hi_a @ lo_b_ + lo_a_ @ hi_b, rtol=0, atol=1e-9 * np.abs(ref).max())
    rel = np.linalg.norm(got - ref) / np.linalg.norm(ref)
    tf32_only = np.linalg.norm(hi_a @ hi_b - ref) / np.linalg.norm(ref)
    assert rel < 2.0 ** -20 and tf32_only > 2.0 ** -13   # float32-level against TF32's ~2^-11


def test_dispatch_routes_large_float32_products_to_the_split_on_request():
    from kgen.ops.matmul import Matmul
    from kgen.ops.skinny import Skinny
    from kgen.tune.dispatch import matmul_family

    assert matmul_family(4096, 4096, 4096, "float32", split_tf32=True) is TensorMatmul
    assert matmul_family(4096, 4096, 4096, "float32") is Matmul              # no sm_90, or KGEN_SPLIT_TF32=0
    assert matmul_family(4096, 4096, 4096, "float32", allow_tf32=True, split_tf32=True) is TensorMatmul
    assert matmul_family(4, 4096, 4096, "float32", split_tf32=True) is Skinny
    # K under SPLIT_TF32_DEEP_K: from SPLIT_TF32_MIN_MACS up.
    k = tc.SPLIT_TF32_DEEP_K - 1
    side = 1 << ((tc.SPLIT_TF32_MIN_MACS // k).bit_length() // 2)
    n = -(-tc.SPLIT_TF32_MIN_MACS // (side * k))
    assert tc.split_tf32_suits(side, n, k) and not tc.split_tf32_suits(side, n - 1, k)
    # Below the wgmma split's sizes, from SPLIT_MMA_MIN_MACS up: the split in registers on mma.sync.
    assert tc.split_mma_suits(side, n - 1, k)
    assert matmul_family(side, n - 1, k, "float32", split_tf32=True) is TensorMatmul
    # K of SPLIT_TF32_DEEP_K or more: from SPLIT_TF32_DEEP_MIN_MACS up, both sides still >= SPLIT_TF32_MIN_SIDE.
    m, k = tc.SPLIT_TF32_MIN_SIDE, tc.SPLIT_TF32_DEEP_K
    n = tc.SPLIT_TF32_DEEP_MIN_MACS // (m * k)
    assert tc.split_tf32_suits(m, n, k) and not tc.split_tf32_suits(m, n - 1, k)
    assert not tc.split_mma_suits(m, n, k)
    assert matmul_family(m, n, k, "float32", split_tf32=True) is TensorMatmul
    # K one short of SPLIT_TF32_DEEP_K at twice the size still goes to mma.sync.
    assert not tc.split_tf32_suits(m, 2 * n, k - 1) and tc.split_mma_suits(m, 2 * n, k - 1)
    # The deep rule needs both sides of SPLIT_TF32_MIN_SIDE: a narrow product with K past its
    # larger side stays off the wgmma split whatever its size.
    assert 300 * 400 * 2000 >= tc.SPLIT_TF32_DEEP_MIN_MACS and not tc.split_tf32_suits(300, 400, 2000)
    side = tc.SPLIT_TF32_MIN_SIDE
    assert tc.split_tf32_suits(side, 1 << 16, 1 << 12)
    # Below SPLIT_TF32_MIN_SIDE, from SPLIT_TF32_NARROW_SIDE, any size, where K is at most the larger side.
    narrow = tc.SPLIT_TF32_NARROW_SIDE
    assert tc.split_tf32_suits(side - 1, 1 << 16, 1 << 12) and tc.split_tf32_suits(944, narrow, 201)
    assert not tc.split_tf32_suits(narrow - 1, 944, 201) and not tc.split_tf32_suits(300, 1775, 1776)
    assert tc.split_tf32_suits(300, 1775, 1775) and not tc.split_tf32_suits(300, 1775, tc.SPLIT_TF32_MIN_K - 1)
    assert matmul_family(944, 357, 201, "float32", split_tf32=True) is TensorMatmul
    assert matmul_family(944, 357, 201, "float32") is Matmul
    macs = tc.SPLIT_MMA_MIN_MACS
    k = -(-macs // (4096 * 200))
    assert tc.split_mma_suits(4096, 200, k) and not tc.split_mma_suits(4096, 200, k - 1)
    assert matmul_family(4096, 200, k, "float32", split_tf32=True) is TensorMatmul
    assert matmul_family(4096, 200, k - 1, "float32", split_tf32=True) is Matmul
    assert matmul_family(4096, 200, k, "float32") is Matmul   # no sm_90
    assert not tc.split_mma_suits(4096, 4096, 4096)   # the wgmma split's
    assert not tc.split_tf32_suits(1 << 14, 1 << 14, tc.SPLIT_TF32_MIN_K - 1)
    # The copies (2 (M + N) seg float32, seg = K rounded up to 32) must fit SPLIT_TF32_MAX_BYTES.
    K = tc.SPLIT_TF32_MAX_BYTES // (8 * 2 * 8192)
    assert K % 32 == 0 and tc.split_tf32_suits(8192, 8192, K) and not tc.split_tf32_suits(8192, 8192, K + 1)


@pytest.mark.nvcc
def test_split_specs_compile_for_sm90a_without_spills():
    specs = [TensorMatmul.wgmma_default_spec({"M": 4096, "N": 4096, "K": 4096}, "float32", split_tf32=True),
             _split(tile=(64, 192, 32), warp_tile=(64, 192), stages=6, split_k=2, layout_b="col"),
             _split(tile=(128, 64, 32), warp_tile=(64, 64), stages=3, persistent=True, layout_a="col")]
    for spec in specs:
        res = kgen.compile(spec, "sm_90")
        for entry in ("kgen_tc_split_copies", "kgen_tc_wgmma"):
            r = res.resources[entry]
            assert not (r["spill_stores"] or r["spill_loads"]), f"{spec.to_json()} {entry} spills: {r}"
        assert "kgen_tc_transpose" not in res.resources
        assert "C7515" not in res.log   # reading d between runs must not serialize the wgmmas


def test_split_default_and_dispatch_spec_hold_both_accumulator_sets():
    for M, N, K in ((4096, 4096, 4096), (300, 9000, 2000), (8192, 300, 700), (20000, 20000, 256)):
        p = {"M": M, "N": N, "K": K}
        s = TensorMatmul.wgmma_default_spec(p, "float32", split_tf32=True)
        assert s.split_tf32 and s.tile[1] <= tc.SPLIT_MAX_BN[s.tile[0]]
        # What dispatch does with the TF32 rule's spec (128x256 on large products) for a split call.
        tf = TensorMatmul.default_spec(p, "float32")
        got = tf.for_layouts(p, layout_a="row", layout_b="row", split_tf32=True)
        assert got == s.replace(layout_a="row", layout_b="row")
        # A split spec (tuned, say) stands as it is; TF32 calls keep the TF32 spec.
        assert s.for_layouts(p, layout_b="col", split_tf32=True) == s.replace(layout_b="col")
        assert not tf.for_layouts(p, layout_b="col", split_tf32=False).split_tf32


def test_matmul_asks_for_the_split_unless_tf32_is_allowed_and_never_tunes_it(monkeypatch):
    from kgen.tune import dispatch

    seen = []
    monkeypatch.setattr(dispatch, "call_family", lambda A, B, dtype, allow_tf32=False: TensorMatmul)
    monkeypatch.setattr(dispatch, "_kernel", lambda cls, problem, dtype, tune, overrides:
                        seen.append((tune, dict(overrides))) or (lambda A, B, **kw: "C"))
    A, B = np.ones((600, 700), np.float32), np.ones((700, 800), np.float32)
    assert dispatch.matmul(A, B, tune=True) == "C"
    assert dispatch.matmul(A, B, tune=True, allow_tf32=True) == "C"
    assert seen == [(False, {"split_tf32": True}), (True, {"split_tf32": False})]


def test_matmul_runs_the_wgmma_skinny_forms_on_sm90_for_17_to_256_rows(monkeypatch):
    """On an sm_90 GPU, float32 products of 17-256 rows (or columns) against N and K of 1024
    or more take the Skinny family with instruction="wgmma", whatever the storage order of
    the weight; elsewhere (another GPU, the split off, fewer rows, a short side) they do not."""
    from kgen.ops.skinny import Skinny
    from kgen.tune import dispatch

    seen = []
    monkeypatch.setattr(dispatch, "_kernel", lambda cls, problem, dtype, tune, overrides:
                        seen.append((cls.kernel, dict(overrides))) or (lambda A, B, **kw: "C"))
    monkeypatch.delenv("KGEN_SPLIT_TF32", raising=False)
    rng = np.random.default_rng(3)

    def route(M, N, K, sm90=True, transposed=False):
        monkeypatch.setattr(dispatch, "_runs_wgmma", lambda: sm90)
        A = np.empty((M, K), np.float32)
        B = np.empty((N, K), np.float32).T if transposed else np.empty((K, N), np.float32)
        seen.clear()
        dispatch.matmul(A, B)
        return seen[0]

    for _ in range(40):
        small, big, K = int(rng.integers(17, 257)), int(rng.integers(1024, 16385)), int(rng.integers(1024, 16385))
        t = bool(rng.integers(2))
        assert route(small, big, K, transposed=t) == ("skinny", {"instruction": "wgmma"}), (small, big, K, t)
        assert route(big, small, K)[1].get("instruction") == "wgmma"
        assert route(small, big, K, sm90=False)[1].get("instruction") is None
        few = int(rng.integers(1, 17))
        assert route(few, big, K)[1].get("instruction") is None
    for _ in range(200):   # the wider domain: exactly where Skinny.wgmma_suits says
        small, big, K = (int(2 ** rng.uniform(lo, 14)) for lo in (4, 4, 4))
        small = min(small, 700)
        want = Skinny.wgmma_suits(small, big, K)
        got = route(small, big, K, transposed=bool(rng.integers(2)))
        assert (got == ("skinny", {"instruction": "wgmma"})) == want, (small, big, K, got)
    assert route(600, 4096, 4096)[0] != "skinny"
    monkeypatch.setenv("KGEN_SPLIT_TF32", "0")
    assert route(100, 4096, 4096)[1].get("instruction") is None
    # What the kernel then runs: the wgmma default for the shape, unless a tuned entry for
    # this very problem says otherwise (dispatch._kernel drops the override for exact entries).
    p = {"M": 100, "N": 4096, "K": 4096}
    mma = Skinny.default_spec(p, "float32")
    assert mma.for_layouts(p, instruction="wgmma") == Skinny.wgmma_default_spec(p)
    tuned = Skinny.wgmma_default_spec(p).replace(merge="atomic")
    assert tuned.for_layouts(p, instruction="wgmma") == tuned


@pytest.mark.parametrize("origin, want_wgmma", [("exact", False), ("nearest", True), ("shipped", True),
                                                ("default", True)])
def test_an_exact_tuned_entry_keeps_its_instruction(monkeypatch, origin, want_wgmma):
    import kgen.core.kernel as kernel_module
    from kgen.ops.skinny import Skinny
    from kgen.tune import dispatch

    p = {"M": 100, "N": 4096, "K": 4096}
    tuned = Skinny.default_spec(p, "float32")          # an mma.sync spec
    monkeypatch.setattr(dispatch, "select", lambda cls, problem, dtype: dispatch.Choice(tuned, origin))
    monkeypatch.setattr(kernel_module, "build", lambda spec: spec)
    monkeypatch.setattr(dispatch, "_kernels", {})
    got = dispatch._kernel(Skinny, p, "float32", False, {"instruction": "wgmma"})
    assert got == (Skinny.wgmma_default_spec(p) if want_wgmma else tuned)


@pytest.mark.parametrize("pdl", ["1", "0"])
def test_the_wgmma_kernel_is_told_whether_its_launch_overlaps_the_kernel_before(monkeypatch, pdl):
    """flags carries OVERLAPPED exactly where the launch is programmatic, so that the L2 prefetch
    ahead of the wait (l2_prefetch) runs only where something runs beside it."""
    monkeypatch.setenv("KGEN_PDL", pdl)
    spec = _split(layout_a="row", layout_b="col")
    seen = set()
    for M, N, K in ((300, 200, 1001), (4096, 4096, 4096), (128, 128, 20000)):
        k = _kernel(spec, monkeypatch)
        _Go.made = []
        plan = k._plan(M, N, K, K, K, N, False, False, True)
        k._run(plan, 0xA0, 0xB0, 0xC0, 1.0, 0.0, 0)
        main = next(g for g in _Go.made if g.name == "kgen_tc_wgmma")
        (m_args,) = main.calls
        flags = m_args[11]
        assert bool(flags & tc.OVERLAPPED) == main.programmatic, (M, N, K, flags)
        seen.add(main.programmatic)
    assert seen == ({True, False} if pdl == "1" else {False})


def _mma_split(**kw):
    return TensorMatmul.split_mma_spec({"M": 3000, "N": 2000, "K": 100}).replace(**kw)


def test_split_on_mma_sync_splits_fragments_in_registers_without_copies():
    """split_tf32 on mma.sync: no split copies, both operands read in their own orders, each
    fragment value split into hi and lo (cvt.rna twice), three MMAs a step (lo * hi first), the
    tensor cores' sums added into float32 registers every SPLIT_PROMOTE_K of K."""
    for a in ("row", "col"):
        for b in ("row", "col"):
            s = _mma_split(layout_a=a, layout_b=b)
            assert not s.split_copies and not s.transposes("A") and not s.transposes("B")
            assert s.kernel_k_major("A") == (a == "row") and s.kernel_k_major("B") == (b == "col")
            src = kgen.render(s)
            assert "kgen_tc_split3" not in src and "kgen_tc_wgmma" not in src
            assert "lo = to_tf32(x - __uint_as_float(hi));" in src
            assert src.count("mma_tf32(d, a + 4, b);") == 1 and "sums[mi][ni][v] += acc[mi][ni][v];" in src
            assert f"(t + 1) % {tc.SPLIT_PROMOTE_K // s.tile[2]} == 0" in src
    plain = _mma_split(split_tf32=False)
    assert "sums[mi]" not in kgen.render(plain) and "split_tf32(" not in kgen.render(plain)
    assert _mma_split().key != plain.key and _mma_split().tolerance_for({"M": 9, "N": 9, "K": 100}) < \
        plain.tolerance_for({"M": 9, "N": 9, "K": 100}) / 10


def test_split_mma_spec_is_what_dispatch_gives_the_products_it_suits():
    """split_default_spec: the mma.sync split where split_mma_suits (64 x 64 tiles, 32 k a tile
    three blocks an SM, or up to SPLIT_MMA_SHORT_K 16 k four blocks an SM; operands in place, K
    split by wave_split below a wave of tiles), else the wgmma split; the TF32 rule's spec asked
    for the split gives the same."""
    short = tc.SPLIT_MMA_SHORT_K
    for M, N, K in ((4701, 3739, 52), (800, 700, 250), (2000, 300, 100), (180, 6700, 40),
                    (3000, 2000, short), (3000, 2000, short + 1)):
        p = {"M": M, "N": N, "K": K}
        assert tc.split_mma_suits(M, N, K)
        s = TensorMatmul.split_default_spec(p)
        tiles = tc.c_tiles(M, N, 64, 64)
        assert s == TensorMatmul.split_mma_spec(p) and not s.wgmma and s.split_tf32 and not s.repack
        bk, blocks = (16, 4) if K <= short else (32, 3)
        assert s.tile == (64, 64, bk) and s.warp_tile == (32, 32) and s.min_blocks == blocks
        assert s.split_k == tc.wave_split(tiles, 132 * blocks, K)
        tf = TensorMatmul.default_spec(p, "float32")
        assert tf.for_layouts(p, layout_a="row", layout_b="col", split_tf32=True) == s.replace(layout_b="col")
    assert TensorMatmul.split_mma_spec({"M": 180, "N": 6700, "K": 40}).tile[2] == 16
    assert TensorMatmul.split_mma_spec({"M": 2000, "N": 300, "K": 100}).tile[2] == 32
    assert TensorMatmul.split_mma_spec({"M": 800, "N": 700, "K": 700}).split_k == 2   # 143 tiles
    # Fewer 64 x 64 tiles than SPLIT_MMA_MIN_TILES: the SIMT tiles' (their shipped specs split K).
    assert tc.c_tiles(393, 290, 64, 64) < tc.SPLIT_MMA_MIN_TILES and not tc.split_mma_suits(393, 290, 684)
    assert tc.split_mma_suits(2393, 250, 684)   # 38 x 4 tiles
    big = {"M": 4096, "N": 4096, "K": 4096}
    assert TensorMatmul.split_default_spec(big) == TensorMatmul.wgmma_default_spec(big, "float32", split_tf32=True)


@pytest.mark.nvcc
def test_split_mma_specs_compile_for_sm90a_without_spills():
    specs = [_mma_split(layout_a=a, layout_b=b) for a in ("row", "col") for b in ("row", "col")]
    specs += [_mma_split(split_k=4, repack=True), _mma_split(tile=(128, 64, 32), min_blocks=2)]
    short = TensorMatmul.split_mma_spec({"M": 3000, "N": 2000, "K": 40})   # four blocks an SM: 128 registers
    specs += [short.replace(layout_a=a, layout_b=b) for a in ("row", "col") for b in ("row", "col")]
    for spec in specs:
        res = kgen.compile(spec, "sm_90")
        for entry, r in res.resources.items():
            assert not (r["spill_stores"] or r["spill_loads"]), f"{spec.to_json()} {entry} spills: {r}"
