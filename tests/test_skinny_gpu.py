"""GPU property tests of the skinny-products family: random specs from a fixed pool (the
defaults of 1-64 rows and variants of every field), random shapes (the small dimension
1-64 as M or as N, the large one 1-5000, K 1-20000), both storage orders of A and B,
pointers at odd element offsets and padded leading dimensions (the buffers NaN outside the
operands), every dtype, alpha/beta, outputs poisoned with NaN (and framed by NaN columns that
must stay NaN); the reference is the float64 product of the very inputs (already rounded to
the dtype), on the GPU."""
from __future__ import annotations

import math
import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kgen
from kgen.core.runtime import ArrayError
import kgen.ops.skinny as skinny_module
from kgen.ops.skinny import Skinny, tolerance

pytestmark = pytest.mark.gpu

EXAMPLES = int(os.environ.get("KGEN_SKINNY_EXAMPLES", "300"))
DTYPES = ("float32", "float64", "float16", "bfloat16")


def spec_pool() -> dict[str, list[Skinny]]:
    """The specs the property test draws from (fixed, so they can be compiled ahead)."""
    pool = {}
    for dtype in DTYPES:
        specs = [Skinny.default_spec({"M": small, "N": 4096, "K": 4096}, dtype) for small in (1, 2, 3, 16, 64)]
        b = Skinny.default_spec({"M": 8, "N": 4096, "K": 4096}, dtype)
        variants = [dict(k_split=3, merge="two_pass"), dict(k_split=40, threads=128, warp_cols=2, loads=4),
                    dict(vector_bytes=8, lane_vectors=2, loads=4), dict(rows=5, warp_cols=3, waves=4, k_split=1),
                    dict(phased=False)]
        if dtype in ("float32", "float64"):
            variants.append(dict(merge="atomic"))
        # The slabs of a tile merged in a thread block cluster (short K: some slabs empty).
        variants += [dict(merge="cluster", k_split=8), dict(merge="cluster", k_split=2, rows=3)]
        for v in variants:
            try:
                specs.append(b.replace(**v))
            except ValueError:
                pass
        if dtype == "float32":
            # The split-TF32 tensor-core forms (the defaults from 13 rows) and their other fields.
            t = Skinny.default_spec({"M": 40, "N": 4096, "K": 4096}, dtype)
            specs += [t, t.replace(tc_tiles=1, merge="single_pass"), t.replace(merge="atomic", waves=1),
                      t.replace(rows=16, merge="cluster", k_split=4),
                      t.replace(rows=24, tc_tiles=1, min_blocks=2, k_split=5),
                      t.replace(rows=13)]   # rows not a multiple of 8: a tile's spare mma rows stay out
            # 64-k windows of the dot form (two tiles a warp and one; slabs short of a window)
            specs += [t.replace(rows=16, tc_window=64, merge="two_pass"),
                      t.replace(rows=8, tc_tiles=1, tc_window=64, merge="single_pass", k_split=5),
                      t.replace(tc_tiles=1, tc_window=64, waves=1)]
            # what dispatch runs for few blocks of a row-major large operand (one_tile_axpy_suits)
            specs.append(Skinny.default_spec({"M": 13, "N": 2944, "K": 1600}, dtype).replace(tc_tiles=1))
            # what dispatch runs for 3-6 rows of a W.t() with few tiles (narrow_dot_suits) and for
            # 1-4 rows of a row-major weight (one_wave_axpy_suits)
            specs += [Skinny.default_spec({"M": 5, "N": 6016, "K": 2048}, dtype).replace(warp_cols=4),
                      Skinny.default_spec({"M": 3, "N": 4096, "K": 4096}, dtype).replace(waves=1),
                      # and for 5-6 rows of a row-major one (tc_axpy_few_rows_suits)
                      Skinny.default_spec({"M": 5, "N": 4096, "K": 4096}, dtype).replace(
                          tensor_cores=True, tc_tiles=2, merge="two_pass", waves=1, programmatic=False, l2_prefetch=0)]
        if dtype in ("float16", "bfloat16"):
            # The 16-bit tensor-core forms (dot for a k-contiguous large operand, axpy for an
            # n-contiguous one: the test draws both storage orders).
            specs += [Skinny(dtype=dtype, rows=r, warp_cols=1, tensor_cores=True, tc_tiles=t, merge=m)
                      for r, t, m in ((8, 2, "two_pass"), (16, 1, "single_pass"), (40, 2, "two_pass"),
                                      (5, 2, "two_pass"), (13, 1, "single_pass"))]
            specs += [Skinny(dtype=dtype, rows=r, warp_cols=1, tensor_cores=True, merge="cluster", k_split=ks,
                             k_warps=kw, axpy_k_warps=kw)
                      for r, ks, kw in ((8, 8, 4), (12, 3, 1))]
            # Warps sharing a K slab (k_warps) with windows loaded 2-8 ahead (loads).
            specs += [Skinny(dtype=dtype, rows=r, warp_cols=1, tensor_cores=True, tc_tiles=t, merge=m, k_warps=kw,
                             loads=ld, k_split=ks)
                      for r, t, m, kw, ld, ks in ((8, 2, "two_pass", 2, 16, 0), (5, 1, "single_pass", 8, 16, 0),
                                                  (24, 2, "single_pass", 4, 8, 3), (3, 1, "two_pass", 4, 16, 0))]
            # The axpy form's vector width (lane_vectors) and warps sharing a K slab (axpy_k_warps).
            specs += [Skinny(dtype=dtype, rows=r, warp_cols=1, tensor_cores=True, lane_vectors=lv, axpy_k_warps=akw,
                             merge=m, threads=th, k_split=ks)
                      for r, lv, akw, m, th, ks in ((8, 2, 8, "two_pass", 256, 0), (16, 2, 1, "single_pass", 256, 0),
                                                    (5, 1, 2, "single_pass", 128, 3), (40, 1, 4, "two_pass", 256, 0))]
        # Programmatic launches, with and without the L2 prefetch ahead of the wait (the SIMT
        # and mma.sync forms; drawn shapes exercise empty classes, empty slabs and edges).
        specs += [s.replace(programmatic=True, l2_prefetch=f) for s, f in ((specs[0], 16), (specs[2], 64), (b, 4),
                                                                          (b.replace(merge="two_pass"), 0))]
        pool[dtype] = list({s.key: s for s in specs}.values())
    return pool


POOL = spec_pool()


def _torch():
    return pytest.importorskip("torch")


@pytest.fixture(scope="module", autouse=True)
def _prebuild():
    """Compile the pool in parallel up front (a warm disk cache makes this free)."""
    import concurrent.futures as cf

    from kgen.core.kernel import compile as kcompile, default_arch

    arch = default_arch()
    every = [s for specs in POOL.values() for s in specs]
    with cf.ThreadPoolExecutor(min(16, os.cpu_count() or 2)) as ex:
        list(ex.map(lambda s: kcompile(s, arch), every))


def operand(torch, rows, cols, order, offset, pad, dtype):
    """A rows x cols tensor stored row-major ("row") or as a transposed view ("col"), starting
    `offset` elements into its buffer, with `pad` spare elements per stored line. Every element
    of the buffer outside the tensor is NaN: a kernel that lets one into a sum fails the check."""
    tdt = getattr(torch, dtype)
    outer, inner = (rows, cols) if order == "row" else (cols, rows)
    ld = inner + pad
    buf = torch.full((offset + max(outer, 1) * ld + 1,), float("nan"), device="cuda", dtype=tdt)
    x = torch.as_strided(buf, (outer, inner), (ld, 1), offset)
    x.copy_(torch.randn(outer, inner, device="cuda").to(tdt))
    return x if order == "row" else x.t()


SMALL = st.integers(1, 64)
LARGE = st.one_of(st.integers(1, 5000), st.sampled_from([1, 2, 3, 127, 4096, 4099]))
INNER = st.one_of(st.integers(1, 20000), st.sampled_from([1, 2, 3, 7, 8, 9, 15, 16, 17, 255, 4095, 4096, 4097]))


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_random_skinny_products_match_float64(data):
    dtype = data.draw(st.sampled_from(DTYPES), label="dtype")
    spec = data.draw(st.sampled_from(POOL[dtype]), label="spec")
    _check_random_product(data, spec, SMALL)


_ENTRY_KERNELS: dict = {}


def _built_by_entries(spec: Skinny):
    """A kernel of `spec` that compiles each entry point on its first launch, as kgen.build makes
    one where the whole module is not in the cache (the pool's modules are compiled ahead, so
    kgen.build loads them whole)."""
    from kgen.core.kernel import default_arch

    k = _ENTRY_KERNELS.get(spec.key)
    if k is None:
        k = _ENTRY_KERNELS[spec.key] = spec.kernel_class(spec, kgen.render(spec), None, default_arch())
    return k


@settings(max_examples=max(8, EXAMPLES // 3), deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_kernels_compiling_entries_on_first_use_match_float64(data):
    dtype = data.draw(st.sampled_from(DTYPES), label="dtype")
    spec = data.draw(st.sampled_from(POOL[dtype]), label="spec")
    k = _built_by_entries(spec)
    _check_random_product(data, spec, SMALL, kernel=k)
    assert k._compiled is None, "a call compiled the whole module"


def test_build_compiles_entries_on_first_use_unless_the_whole_module_is_cached(tmp_path, monkeypatch):
    from kgen.core import kernel as kernel_module

    monkeypatch.setenv("KGEN_CACHE_DIR", str(tmp_path))
    torch = _torch()
    spec = Skinny(rows=3, warp_cols=2, loads=4, threads=128)   # built by no other test
    assert not kernel_module.is_compiled(spec)
    k = kgen.build(spec)
    assert k._compiled is None
    A = torch.randn(3, 3001, device="cuda")
    W = torch.randn(1500, 3001, device="cuda")
    C = k(A, W.t())
    torch.cuda.synchronize()
    ref = A.double() @ W.t().double()
    assert float((C.double() - ref).norm() / ref.norm()) <= tolerance("float32", 3001)
    assert k._compiled is None and not kernel_module.is_compiled(spec)
    assert {"kgen_skinny_dot_v4", "kgen_skinny_axpy_v1", "kgen_skinny_merge"} <= set(k.resources)
    assert kernel_module.is_compiled(spec)
    # The whole module now in the cache, a new build loads it whole.
    kernel_module._built.pop((spec.kernel, spec.key, kernel_module.default_arch(), "kgen"))
    again = kgen.build(spec)
    assert again is not k and again._compiled is not None
    C2 = again(A, W.t())
    torch.cuda.synchronize()
    assert torch.equal(C, C2)


# The Hopper wgmma forms (float32 as three TF32 products): one instruction for up to 128 rows
# of the small operand, several row tiles past that ...
WGMMA_POOL = [Skinny.wgmma_default_spec({"M": small, "N": 4096, "K": 4096}) for small in (17, 40, 100, 128, 256)] + [
    Skinny.wgmma_default_spec({"M": 24, "N": 4096, "K": 4096}).replace(tc_tiles=2, threads=128),
    Skinny.wgmma_default_spec({"M": 64, "N": 4096, "K": 4096}).replace(threads=256, merge="atomic", waves=1),
    Skinny.wgmma_default_spec({"M": 100, "N": 4096, "K": 4096}).replace(merge="single_pass", k_split=3),
    Skinny.wgmma_default_spec({"M": 8, "N": 4096, "K": 4096}).replace(k_split=1),
]
# ... and in float16/bfloat16 (m64nNk16, rows up to 64; a row-major large operand runs the
# mma.sync axpy form).
WGMMA_POOL += [Skinny.wgmma_default_spec({"M": small, "N": 4096, "K": 4096}, dtype)
               for small, dtype in ((17, "bfloat16"), (40, "float16"), (64, "bfloat16"), (200, "float16"))] + [
    Skinny.wgmma_default_spec({"M": 24, "N": 4096, "K": 4096}, "bfloat16").replace(tc_tiles=2, threads=128),
    Skinny.wgmma_default_spec({"M": 8, "N": 4096, "K": 4096}, "float16").replace(merge="single_pass", k_split=3),
    Skinny.wgmma_default_spec({"M": 48, "N": 4096, "K": 4096}, "bfloat16").replace(k_split=1),
]
WGMMA_POOL = list({s.key: s for s in WGMMA_POOL}.values())


@pytest.fixture(scope="module")
def wgmma_built():
    from kgen.core.kernel import compile as kcompile, default_arch

    arch = default_arch()
    if not arch.startswith("sm_90"):
        pytest.skip(f"the wgmma forms run on sm_90 only; this GPU is {arch}")
    import concurrent.futures as cf

    with cf.ThreadPoolExecutor(min(16, os.cpu_count() or 2)) as ex:
        list(ex.map(lambda s: kcompile(s, arch), WGMMA_POOL))
    return True


@settings(max_examples=EXAMPLES // 2, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_random_wgmma_products_match_float64(data, wgmma_built):
    spec = data.draw(st.sampled_from(WGMMA_POOL), label="spec")
    _check_random_product(data, spec, st.one_of(st.integers(1, 520), st.sampled_from([17, 128, 129, 256, 512])))


@settings(max_examples=max(8, EXAMPLES // 4), deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_wgmma_kernels_compiling_entries_on_first_use_match_float64(data):
    """The wgmma forms built entry by entry: the plan compiles only the twin it launches (the
    imaged entry, or the _direct one for few column tiles, whose occupancy then sets the K
    split), never the whole module."""
    spec = data.draw(st.sampled_from(WGMMA_POOL), label="spec")
    k = _built_by_entries(spec)
    _check_random_product(data, spec, st.one_of(st.integers(1, 300), st.sampled_from([17, 128, 129, 256])), kernel=k)
    assert k._compiled is None, "a call compiled the whole module"


def _check_random_product(data, spec, small_sizes, kernel=None):
    torch = _torch()
    dtype = spec.dtype
    small, large = data.draw(small_sizes, label="small"), data.draw(LARGE, label="large")
    K = data.draw(INNER, label="K")
    few_cols = data.draw(st.booleans(), label="few columns")
    M, N = (large, small) if few_cols else (small, large)
    a_order, b_order = data.draw(st.sampled_from(["row", "col"])), data.draw(st.sampled_from(["row", "col"]))
    a_off, b_off = data.draw(st.sampled_from([0, 1, 2, 3, 8])), data.draw(st.sampled_from([0, 1, 2, 3, 8]))
    a_pad, b_pad = data.draw(st.sampled_from([0, 0, 1, 8])), data.draw(st.sampled_from([0, 0, 1, 8]))
    alpha = data.draw(st.sampled_from([1.0, -0.75]), label="alpha")
    beta = data.draw(st.sampled_from([0.0, 0.0, 0.5]), label="beta")
    use_out = beta != 0 or data.draw(st.booleans(), label="out=")
    A = operand(torch, M, K, a_order, a_off, a_pad, dtype)
    B = operand(torch, K, N, b_order, b_off, b_pad, dtype)
    k = kernel if kernel is not None else kgen.build(spec)
    tdt = getattr(torch, dtype)
    if use_out:
        frame = torch.full((M, N + 3), float("nan"), device="cuda", dtype=tdt)
        C = frame[:, 1:N + 1]                      # an unaligned, padded output between NaN columns
        if beta:
            C.copy_(torch.randn(M, N, device="cuda").to(tdt))
        # A copy (for float64, .double() is C itself, which the call overwrites); with
        # beta = 0, C holds NaN and must not be read.
        C0 = C.double().clone() if beta else 0.0
        got = k(A, B, C, alpha=alpha, beta=beta)
        assert got is C
    else:
        got = k(A, B, alpha=alpha)
        C0 = 0.0
    torch.cuda.synchronize()
    ref = alpha * (A.double() @ B.double()) + beta * C0
    err = float((got.double() - ref).norm() / ref.norm().clamp_min(1e-300))
    bound = tolerance(dtype, K) * (2 if beta else 1)
    where = f"{spec.to_json()} M={M} N={N} K={K} A {a_order}+{a_off} pad {a_pad}, B {b_order}+{b_off} pad {b_pad}"
    assert math.isfinite(err) and err <= bound, f"relative error {err:.3g} > {bound:.3g}: {where}"
    if use_out:
        assert bool(frame[:, 0].isnan().all()) and bool(frame[:, N + 1:].isnan().all()), f"wrote outside C: {where}"


def _product_on_offset_weight(torch, k, rows: int, N: int, K: int, offset: int, tdt):
    """k(A, W.t()) on a random weight N x K stored `offset` elements into a buffer of NaN, with a
    fresh plan (the kernel may be shared with other tests): (A, W, C, the call's main launch)."""
    k._plans.clear()
    buf = torch.full((offset + N * K + 8,), float("nan"), device="cuda", dtype=tdt)
    W = buf[offset:offset + N * K].view(N, K)
    W.copy_(torch.randn(N, K, device="cuda").to(tdt))
    A = torch.randn(rows, K, device="cuda").to(tdt)
    C = torch.full((rows, N), float("nan"), device="cuda", dtype=tdt)
    k(A, W.t(), out=C)
    torch.cuda.synchronize()
    plan = next(iter(k._plans.values()))
    return A, W, C, next(launch for kind, launch, _ in plan.launches if kind == "main")


@pytest.mark.parametrize("dtype", ["float32", "float64", "bfloat16", "float32 tensor cores",
                                   "bfloat16 tensor cores", "float16 tensor cores"])
def test_phased_dot_form_matches_float64_at_every_offset(dtype):
    # A weight N x K passed as W.t() whose rows lie at several offsets from a 16-byte boundary
    # (K of every residue modulo the widest load, the weight itself 0-7 elements into its
    # buffer): the phased entry of the SIMT dot form and of the mma.sync tensor-core dot forms
    # (float32 split-TF32; 16-bit with one warp or several a column group), with the class count
    # the pitch asks for, products of more rows than a tile, K slabs merged by every strategy,
    # fewer columns than classes (empty classes), K shorter than a class's head, NaN all
    # around the weight.
    torch = _torch()
    form = "tc_dot" if dtype.endswith("tensor cores") else "dot"
    dtype = dtype.split()[0]
    tdt = getattr(torch, dtype)
    half = dtype in ("float16", "bfloat16")
    if form == "tc_dot":   # the mma.sync dot form (16-bit: four warps a column group at 5 rows)
        base = Skinny.default_spec({"M": 5 if half else 12, "N": 4096, "K": 4096}, dtype)
        assert base.tensor_cores and base.instruction == "mma_sync" and (not half or base.k_warps > 1)
    else:
        base = Skinny.default_spec({"M": 3, "N": 4096, "K": 4096}, dtype)
        if base.tensor_cores:
            base = Skinny.simt_default_spec({"M": 1, "N": 4096, "K": 4096}, dtype)
        assert not base.tensor_cores
    V = base.vec
    merges = [dict(), dict(k_split=3, merge="two_pass"), dict(k_split=5, merge="single_pass"),
              dict(k_split=4, merge="cluster")] + ([] if half else [dict(k_split=3, merge="atomic")])
    if form == "tc_dot" and half:   # one warp a column group; and 16 rows (the granules, not phased)
        merges += [dict(k_warps=1), dict(k_warps=1, rows=16, k_split=3, merge="two_pass")]
    if form == "tc_dot" and not half:   # 64-k windows
        merges += [dict(tc_window=64), dict(tc_window=64, tc_tiles=1, k_split=3, merge="two_pass")]
    cases = [(1, 300, 4097, 0), (3, 257, 4098, 1), (2, 3, 1001, 2), (5, 129, 3, 3), (1, 2, 2, 1),
             (4, 1000, 6915, 5), (7, 77, 65, 7), (2, 640, 8192 + V // 2, 0), (3, 100, 4096, 1),
             (12, 500, 4099, 0), (20, 333, 2050, 3)]
    for rows, N, K, offset in cases:
        offset %= V
        for merge in merges:
            spec = base.replace(**merge)   # products of more rows than the spec's run in row tiles
            A, W, C, main = _product_on_offset_weight(torch, kgen.build(spec), rows, N, K, offset, tdt)
            want_classes = V // math.gcd(K % V, V)
            where = f"{dtype} {rows}x{N}x{K} offset {offset} {merge}"
            # 16-bit rows 4 or 8 bytes off a boundary keep their 4- or 8-byte loads (phased_dot).
            narrow = next(w for w in base.widths() if K % w == 0 and offset % w == 0)
            want = f"kgen_skinny_{form}_phased_c{want_classes}" if skinny_module.phased_dot(spec, narrow) else \
                f"kgen_skinny_{form}_v{narrow}"
            assert main.name == want, (main.name, where)
            ref = A.double() @ W.double().t()
            err = float((C.double() - ref).norm() / ref.norm())
            assert math.isfinite(err) and err <= tolerance(dtype, K), f"relative error {err:.3g}: {where}"


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_axpy_shift_entry_matches_float64_at_every_row_offset(dtype):
    # A row-major weight K x N whose rows lie off a 16-byte boundary (a pitch of every residue
    # modulo the widest load, the weight 0..V-1 elements into a buffer of NaN): the SIMT axpy
    # form's _shift entry reads whole granules and shifts them across lanes. Blocks whose last
    # granule would cross N read element by element; products of more rows than the spec's, K
    # slabs merged by every strategy, fewer columns than a block, N just past one block.
    torch = _torch()
    tdt = getattr(torch, dtype)
    half = dtype in ("float16", "bfloat16")
    base = Skinny.simt_default_spec({"M": 2, "N": 4096, "K": 4096}, dtype)
    assert not base.tensor_cores and base.axpy_shifts
    V = base.axpy_vec
    CB = 32 * V * base.axpy_lanes(V)
    merges = [dict(), dict(k_split=3, merge="two_pass"), dict(k_split=5, merge="single_pass"),
              dict(k_split=4, merge="cluster"), dict(rows=1), dict(rows=4, lane_vectors=2)]
    merges += [] if half else [dict(k_split=3, merge="atomic")]
    cases = [(1, 4 * CB + 1, 300, 0, 1), (2, CB + V + 1, 257, 1, 0), (2, CB + 3, 1001, 2, 2), (3, 7, 129, 3, 0),
             (1, 3 * CB - 1, 2, 1, 5), (4, 2 * CB + V, 77, 5, 3), (5, 1000, 65, 7, 6), (2, 641, 4099, 0, 7)]
    for rows, N, K, offset, pad in cases:
        offset %= V
        pad %= V
        for merge in merges:
            spec = base.replace(**merge)
            if not spec.axpy_shifts:
                continue
            k = kgen.build(spec)
            k._plans.clear()
            buf = torch.full((offset + K * (N + pad) + 8,), float("nan"), device="cuda", dtype=tdt)
            W = torch.as_strided(buf, (K, N), (N + pad, 1), offset)
            W.copy_(torch.randn(K, N, device="cuda").to(tdt))
            A = torch.randn(rows, K, device="cuda").to(tdt)
            C = torch.full((rows, N), float("nan"), device="cuda", dtype=tdt)
            k(A, W, out=C)
            torch.cuda.synchronize()
            plan = next(iter(k._plans.values()))
            main = next(launch for kind, launch, _ in plan.launches if kind == "main")
            where = f"{dtype} {rows}x{N}x{K} offset {offset} pad {pad} {merge}"
            width = next(w for w in spec.axpy_widths() if (N + pad) % w == 0 and offset % w == 0)
            want = "kgen_skinny_axpy_shift" if width * 2 <= skinny_module.AXPY_SHIFT_MAX_LOAD_BYTES else \
                f"kgen_skinny_axpy_v{width}"
            assert main.name == want, (main.name, where)
            ref = A.double() @ W.double()
            err = float((C.double() - ref).norm() / ref.norm())
            assert math.isfinite(err) and err <= tolerance(dtype, K), f"relative error {err:.3g}: {where}"


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_granule_reads_of_odd_pitch_weights_match_float64(dtype):
    # The 16-bit tensor-core dot form reads rows 2 bytes off a 4-byte boundary as whole
    # granules and picks each lane's values out of its own and the next lane's: every offset
    # of a row in its granule (the rows of an odd pitch go through all eight), the element
    # loads of a row's last windows, K split into slabs, 2-64 rows (the bound of two blocks
    # at up to 8), the weight starting off its buffer's granule, NaN all around it. (phased=False:
    # the entry such rows run where the phased one is not taken.)
    torch = _torch()
    tdt = getattr(torch, dtype)
    cases = [(6, 67, 4097, 0, 0), (8, 45, 77, 1, 3), (16, 130, 1001, 3, 0), (24, 33, 2049, 7, 2),
             (40, 70, 41, 5, 0), (64, 19, 8191, 2, 0), (5, 300, 16383, 6, 5),
             (2, 100, 999, 1, 0), (3, 57, 4097, 3, 2)]
    for rows, N, K, offset, k_split in cases:
        spec = Skinny.default_spec({"M": rows, "N": N, "K": K}, dtype).replace(phased=False)
        if k_split:
            spec = spec.replace(k_split=k_split)
        assert spec.tensor_cores
        A, W, C, main = _product_on_offset_weight(torch, kgen.build(spec), rows, N, K, offset, tdt)
        assert main.name == "kgen_skinny_tc_dot_v1", main.name
        ref = A.double() @ W.double().t()
        err = float((C.double() - ref).norm() / ref.norm())
        where = f"{dtype} {rows}x{N}x{K} offset {offset} k_split {k_split}"
        assert math.isfinite(err) and err <= tolerance(dtype, K), f"relative error {err:.3g}: {where}"


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_deterministic_merges_repeat_bit_for_bit(dtype):
    torch = _torch()
    A = torch.randn(8, 20000, device="cuda").to(getattr(torch, dtype))
    W = torch.randn(3000, 20000, device="cuda").to(getattr(torch, dtype))
    single = kgen.build(Skinny.default_spec({"M": 8, "N": 3000, "K": 20000}, dtype))
    two = kgen.build(single.spec.replace(merge="two_pass"))
    runs = [single(A, W.t()) for _ in range(3)] + [two(A, W.t()) for _ in range(2)]
    torch.cuda.synchronize()
    plan = next(iter(single._plans.values()))
    assert plan.splits > 1, "the test needs a split K"
    for r in runs[1:]:
        assert torch.equal(r, runs[0])


@pytest.mark.parametrize("dtype,rows,merge,order", [("float32", 1, "single_pass", "col"),
                                                    ("float32", 4, "two_pass", "row"),
                                                    ("float32", 12, "single_pass", "col"),
                                                    ("float32", 3, "atomic", "col"),
                                                    ("bfloat16", 6, "two_pass", "col"),
                                                    ("float16", 2, "single_pass", "row")])
def test_programmatic_launches_wait_for_the_kernel_before(dtype, rows, merge, order):
    """A chain of products launched programmatically with the L2 prefetch, each reading the
    buffer the one before wrote and writing the buffer it read (ping-pong), eagerly and replayed
    from a CUDA graph: a block that read or wrote before griddepcontrol.wait returned would
    take the poison or a value of the step before. Against the same chain in float64 with each
    step's output rounded to the dtype."""
    torch = _torch()
    tdt = getattr(torch, dtype)
    N, K, steps = 3001, 2048, 6
    base = Skinny.default_spec({"M": rows, "N": N, "K": K}, dtype)
    spec = base.replace(merge=merge, programmatic=True, l2_prefetch=16)
    kern = kgen.build(spec)
    # Weights scaled so that each step keeps values near 1 (the chain neither grows nor fades).
    W1 = (torch.randn(N, K, device="cuda") / math.sqrt(K)).to(tdt)
    W2 = (torch.randn(K, N, device="cuda") / math.sqrt(N)).to(tdt)
    if order == "col":
        B1, B2 = W1.t(), W2.t()     # K x N and N x K, k-contiguous
    else:
        B1, B2 = W1.t().contiguous(), W2.t().contiguous()
    x = torch.randn(rows, K, device="cuda").to(tdt)
    a, b = torch.empty(rows, K, device="cuda", dtype=tdt), torch.empty(rows, N, device="cuda", dtype=tdt)

    def chain():
        for i in range(steps):
            if i % 2 == 0:
                kern(x if i == 0 else a, B1, out=b)
            else:
                kern(b, B2, out=a)

    ref = x.double()
    for i in range(steps):
        ref = (ref @ (B1 if i % 2 == 0 else B2).double()).to(tdt).double()
    tol = steps * tolerance(dtype, max(N, K)) * 4

    for _ in range(2):
        a.fill_(float("nan")), b.fill_(float("nan"))
        chain()
        torch.cuda.synchronize()
        err = float((a.double() - ref).norm() / ref.norm())
        assert math.isfinite(err) and err <= tol, (spec.to_json(), err, tol)
    plan = kern.bind(b, B2, a).plan
    launches = {name: launch for name, launch, _ in plan.launches}
    assert launches["main"].programmatic and all(not v.programmatic for n, v in launches.items() if n != "main")

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        chain()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        chain()
    for _ in range(2):
        a.fill_(float("nan")), b.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        err = float((a.double() - ref).norm() / ref.norm())
        assert math.isfinite(err) and err <= tol, ("graph", spec.to_json(), err, tol)


def test_row_major_float32_products_of_few_blocks_run_one_tile_a_warp_and_match_float64():
    """kgen.matmul on this GPU: a row-major float32 weight whose two-tile blocks would be few
    runs one tile a warp (Skinny.one_tile_axpy_suits with this GPU's SM count), W.t() and
    larger weights keep two; every result matches float64 on a NaN-poisoned output."""
    from kgen.tune import dispatch

    torch = _torch()
    sms = dispatch._sm_count()
    assert sms and sms > 0
    seen = set()
    for M, N, K, weights in ((13, 2944, 1600, False), (16, 2178, 2391, False), (7, 4422, 2007, False),
                             (15, 1233, 3685, False), (8, 6361, 3674, False), (10, 2752, 13696, False),
                             (13, 2944, 1600, True), (9, 2051, 1999, False)):
        A = torch.randn(M, K, device="cuda")
        B = torch.randn(N, K, device="cuda").t() if weights else torch.randn(K, N, device="cuda")
        spec = dispatch.call_spec(A, B)
        p = {"M": M, "N": N, "K": K}
        want = not weights and Skinny.default_spec(p, "float32").one_tile_axpy_suits(p, sms)
        assert isinstance(spec, Skinny) and spec.tc_tiles == (1 if want else 2), (M, N, K, weights, spec.to_json())
        seen.add(want)
        out = torch.full((M, N), float("nan"), device="cuda")
        kgen.matmul(A, B, out=out)
        ref = A.double() @ B.double()
        err = float((out.double() - ref).norm() / ref.norm())
        assert err <= tolerance("float32", K), (M, N, K, weights, err)
        # a second call through the shortcuts, into a fresh poisoned output
        out2 = torch.full((M, N), float("nan"), device="cuda")
        kgen.matmul(A, B, out=out2)
        assert torch.equal(out, out2)
    assert seen == {True, False}


def test_16bit_one_row_products_take_the_narrow_dot_rule_and_match_float64():
    """kgen.matmul on this GPU: one row against a float16 or bfloat16 W.t() whose rows are off a
    16-byte boundary and K of WIDE_DOT_MIN_K_16 or more runs the SIMT dot form with 4 columns a
    warp where 8 would leave K whole on fewer tiles than SMs (Skinny.narrow_dot_suits with this
    GPU's SM count), 8 elsewhere; every result matches float64 on a NaN-poisoned output, again on
    a second call."""
    from kgen.ops.skinny import DOT_NARROW_WARP_COLS, WIDE_DOT_MIN_K_16
    from kgen.tune import dispatch

    torch = _torch()
    sms = dispatch._sm_count()
    assert sms and sms > 0
    seen = set()
    for dtype, N, K in (("bfloat16", 64 * sms - 70, 12093), ("float16", 40 * sms + 3, 6229),
                        ("bfloat16", 80 * sms + 5, 6681), ("float16", 3354, 15297), ("bfloat16", 1248, 7836)):
        assert K % 8 and K >= WIDE_DOT_MIN_K_16
        tdt = getattr(torch, dtype)
        A = torch.randn(1, K, device="cuda").to(tdt)
        B = torch.randn(N, K, device="cuda").to(tdt).t()
        spec = dispatch.call_spec(A, B)
        p = {"M": 1, "N": N, "K": K}
        base = Skinny.simt_default_spec(p, dtype)
        assert isinstance(spec, Skinny) and not spec.tensor_cores and base.warp_cols == 8, (N, K, spec)
        want = base.narrow_dot_suits(p, sms)
        assert spec.warp_cols == (DOT_NARROW_WARP_COLS if want else 8), (dtype, N, K, spec.to_json())
        seen.add(want)
        ref = A.double() @ B.double()
        for _ in range(2):
            out = torch.full((1, N), float("nan"), device="cuda", dtype=tdt)
            kgen.matmul(A, B, out=out)
            err = float((out.double() - ref).norm() / ref.norm())
            assert err <= tolerance(dtype, K), (dtype, N, K, err)
    assert seen == {True, False}


def test_float32_few_row_products_take_the_narrow_dot_and_one_wave_axpy_rules_and_match_float64():
    """kgen.matmul on this GPU: float32 W.t() products of 3-6 rows whose 8-column tiles would
    leave K whole on fewer tiles than SMs stream 4 columns a warp (Skinny.narrow_dot_suits with
    this GPU's SM count), row-major ones of 1-4 rows split K for one wave (one_wave_axpy_suits)
    and of 5-6 rows run the tensor-core axpy form (tc_axpy_few_rows_suits); odd N and K among
    them (narrower loads, phased entries); every result matches float64 on a NaN-poisoned
    output, again on a second call."""
    from kgen.ops.skinny import AXPY_SIMT_WAVES, DOT_NARROW_WARP_COLS
    from kgen.tune import dispatch

    torch = _torch()
    sms = dispatch._sm_count()
    assert sms and sms > 0
    seen = set()
    for M, N, K, weights in ((4, 7552, 2176, True), (3, 5824, 1983, True), (5, 6001, 1500, True),
                             (4, 1856, 11904, True), (6, 8448, 1024, True), (2, 2624, 2944, False),
                             (4, 3137, 7103, False), (1, 8000, 3136, False), (5, 6592, 1517, False),
                             (6, 3520, 4992, False), (5, 4801, 1501, False), (5, 4800, 1024, False)):
        A = torch.randn(M, K, device="cuda")
        B = torch.randn(N, K, device="cuda").t() if weights else torch.randn(K, N, device="cuda")
        spec = dispatch.call_spec(A, B)
        p = {"M": M, "N": N, "K": K}
        base = Skinny.default_spec(p, "float32")
        tc = not weights and base.tc_axpy_few_rows_suits(p)
        assert isinstance(spec, Skinny) and spec.tensor_cores == tc, (M, N, K, weights, spec.to_json())
        if tc:
            seen.add("tc")
        elif weights:
            want = base.narrow_dot_suits(p, sms)
            assert spec.warp_cols == (DOT_NARROW_WARP_COLS if want else base.warp_cols), (M, N, K, spec.to_json())
            seen.add((weights, want))
        else:
            want = base.one_wave_axpy_suits()
            assert spec.waves == (AXPY_SIMT_WAVES if want else base.waves), (M, N, K, spec.to_json())
            seen.add((weights, want))
        for _ in range(2):
            out = torch.full((M, N), float("nan"), device="cuda")
            kgen.matmul(A, B, out=out)
            ref = A.double() @ B.double()
            err = float((out.double() - ref).norm() / ref.norm())
            assert err <= tolerance("float32", K), (M, N, K, weights, err)
    assert seen == {(True, True), (True, False), (False, True), (False, False), "tc"}


@pytest.mark.parametrize("dtype,rows,col", [("float32", 12, True), ("float32", 3, False), ("bfloat16", 8, True),
                                            ("bfloat16", 8, False), ("float64", 2, True)])
def test_cluster_merge_sums_as_the_two_pass_merge_bit_for_bit(dtype, rows, col):
    # The same slabs summed in the same order: the two merges must agree to the bit, with
    # beta applied once.
    torch = _torch()
    tdt = getattr(torch, dtype)
    N, K = 3001, 9000
    A = torch.randn(rows, K, device="cuda").to(tdt)
    B = torch.randn(N, K, device="cuda").to(tdt).t() if col else torch.randn(K, N, device="cuda").to(tdt)
    C0 = torch.randn(rows, N, device="cuda").to(tdt)
    base = Skinny.default_spec({"M": rows, "N": N, "K": K}, dtype)
    outs = []
    for merge in ("cluster", "two_pass"):
        k = kgen.build(base.replace(merge=merge, k_split=5))
        C = C0.clone()
        k(A, B, C, alpha=1.5, beta=-0.5)
        plan = next(iter(k._plans.values()))
        assert plan.splits == 5 and len([x for x in plan.launches if x[0] == "merge"]) == (merge == "two_pass")
        outs.append(C)
    torch.cuda.synchronize()
    assert torch.equal(outs[0], outs[1])
    ref = 1.5 * (A.double() @ B.double()) - 0.5 * C0.double()
    assert float((outs[0].double() - ref).norm() / ref.norm()) <= tolerance(dtype, K) * 2


def test_atomic_merge_is_close_and_applies_beta_once():
    torch = _torch()
    spec = Skinny.default_spec({"M": 4, "N": 4096, "K": 8192}, "float32").replace(merge="atomic")
    k = kgen.build(spec)
    A, B = torch.randn(4, 8192, device="cuda"), torch.randn(8192, 4096, device="cuda")
    C = torch.randn(4, 4096, device="cuda")
    ref = 2.0 * (A.double() @ B.double()) - 0.5 * C.double()
    k(A, B, C, alpha=2.0, beta=-0.5)
    torch.cuda.synchronize()
    assert next(iter(k._plans.values())).splits > 1
    assert float((C.double() - ref).norm() / ref.norm()) <= tolerance("float32", 8192) * 2


def test_repeat_calls_reuse_one_plan_and_follow_the_current_stream():
    torch = _torch()
    k = kgen.build(Skinny.default_spec({"M": 2, "N": 1000, "K": 3000}, "float16"))
    A = torch.randn(2, 3000, device="cuda", dtype=torch.float16)
    W = torch.randn(1000, 3000, device="cuda", dtype=torch.float16)
    ref = A.double() @ W.t().double()
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        outs = [k(A, W.t())]
        planned = dict(k._plans)   # the pool's tests may have planned other shapes on this kernel
        outs += [k(A, W.t()) for _ in range(4)]
    side.synchronize()
    assert k._plans.keys() == planned.keys() and all(k._plans[key] is planned[key] for key in planned), \
        "a repeat call planned again"
    for o in outs:
        assert float((o.double() - ref).norm() / ref.norm()) <= tolerance("float16", 3000)
    launcher = k.bind(A, W.t(), outs[0])
    outs[0].fill_(float("nan"))
    launcher()
    torch.cuda.synchronize()
    assert float((outs[0].double() - ref).norm() / ref.norm()) <= tolerance("float16", 3000)


@pytest.mark.parametrize("dtype", ["float32", "float16", "float64"])
def test_numpy_inputs_round_trip(dtype):
    rng = np.random.default_rng(5)
    A = rng.standard_normal((37, 5)).astype(dtype)      # few columns: C^T = B^T A^T
    B = rng.standard_normal((5, 3)).astype(dtype)
    k = kgen.build(Skinny.default_spec({"M": 37, "N": 3, "K": 5}, dtype))
    C = k(A, B)
    assert isinstance(C, np.ndarray) and C.dtype == np.dtype(dtype) and C.shape == (37, 3)
    ref = A.astype(np.float64) @ B.astype(np.float64)
    assert np.linalg.norm(C.astype(np.float64) - ref) / np.linalg.norm(ref) <= tolerance(dtype, 5)
    out = np.full((37, 3), np.nan, dtype=dtype)
    assert k(A.T.copy().T, B, out=out) is out and np.all(np.isfinite(out))


def test_bfloat16_numpy_through_ml_dtypes():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    rng = np.random.default_rng(6)
    A = rng.standard_normal((3, 700)).astype(ml_dtypes.bfloat16)
    B = rng.standard_normal((700, 900)).astype(ml_dtypes.bfloat16)
    C = kgen.build(Skinny.default_spec({"M": 3, "N": 900, "K": 700}, "bfloat16"))(A, B)
    ref = A.astype(np.float64) @ B.astype(np.float64)
    assert np.linalg.norm(C.astype(np.float64) - ref) / np.linalg.norm(ref) <= tolerance("bfloat16", 700)


def test_zero_sizes_and_k_zero():
    torch = _torch()
    k = kgen.build(Skinny(rows=4))
    assert k(torch.randn(0, 5, device="cuda"), torch.randn(5, 7, device="cuda")).shape == (0, 7)
    C = torch.full((3, 7), float("nan"), device="cuda")
    k(torch.randn(3, 0, device="cuda"), torch.randn(0, 7, device="cuda"), C)
    torch.cuda.synchronize()
    assert bool((C == 0).all())


def test_errors_name_the_problem():
    torch = _torch()
    k = kgen.build(Skinny(rows=4))
    A, B = torch.randn(4, 64, device="cuda"), torch.randn(64, 100, device="cuda")
    with pytest.raises(ArrayError, match="inner dimensions"):
        k(A, torch.randn(65, 100, device="cuda"))
    with pytest.raises(ArrayError, match="dtype"):
        k(A.double(), B.double())
    with pytest.raises(ArrayError, match="unit stride"):
        k(A, torch.randn(128, 200, device="cuda")[::2, ::2])
    with pytest.raises(ArrayError, match="beta"):
        k(A, B, beta=1.0)
    with pytest.raises(ArrayError, match="CPU"):
        k(A.cpu(), B)


@pytest.mark.parametrize("order", ["col", "row"])
def test_kgen_matmul_runs_the_row_counts_of_a_tile_count_on_one_spec(order):
    """float32 products of 7-16 rows against one weight (W.t() or row-major) through kgen.matmul:
    each matches float64 on a NaN-poisoned output, and the row counts of one 8-row tile count run
    one spec (tc_rows_shared), so the loop compiles two specs, not ten."""
    torch = _torch()
    from kgen.tune.dispatch import call_spec

    N, K = 2304, 3072
    W = torch.randn(N, K, device="cuda")
    B = W.t() if order == "col" else W.t().contiguous()
    keys: dict[int, set] = {}
    for M in range(7, 17):
        A = torch.randn(M, K, device="cuda")
        C = torch.full((M, N), float("nan"), device="cuda")
        got = kgen.matmul(A, B, out=C)
        torch.cuda.synchronize()
        ref = A.double() @ B.double()
        err = float((got.double() - ref).norm() / ref.norm())
        assert got is C and math.isfinite(err) and err <= tolerance("float32", K), (M, order, err)
        spec = call_spec(A, B)
        assert isinstance(spec, Skinny) and spec.tensor_cores and spec.rows == 8 * -(-M // 8), spec.to_json()
        keys.setdefault(-(-M // 8), set()).add(spec.key)
    assert {t: len(k) for t, k in keys.items()} == {1: 1, 2: 1}


def test_float64_small_products_run_the_skinny_forms_and_match_float64():
    """kgen.matmul on float64 products of 9-64 rows or columns against a large side below
    SMALL_SIMT_F64_LARGE (Skinny.suits): the skinny SIMT forms, both weight orders, A at an odd
    offset among them, K odd and even; every result matches float64 on a NaN-poisoned output,
    again on a second call (the merge's tickets reset)."""
    from kgen.ops.skinny import SMALL_SIMT_F64_LARGE
    from kgen.tune import dispatch

    torch = _torch()
    for M, N, K, weights, offset in ((16, 51, 554, True, 0), (16, 51, 554, False, 1), (9, 11, 64, False, 0),
                                     (64, SMALL_SIMT_F64_LARGE - 1, 1001, True, 1), (376, 16, 145, False, 0),
                                     (SMALL_SIMT_F64_LARGE - 1, 64, 255, True, 0), (34, 15, 6256, True, 1)):
        A = torch.randn(M, K + offset, device="cuda", dtype=torch.float64)[:, offset:]
        B = torch.randn(N, K, device="cuda", dtype=torch.float64).t() if weights else \
            torch.randn(K, N, device="cuda", dtype=torch.float64)
        spec = dispatch.call_spec(A, B)
        assert isinstance(spec, Skinny) and not spec.tensor_cores, (M, N, K, spec.to_json())
        ref = A @ B
        for _ in range(2):
            out = torch.full((M, N), float("nan"), device="cuda", dtype=torch.float64)
            kgen.matmul(A, B, out=out)
            err = float((out - ref).norm() / ref.norm())
            assert err <= tolerance("float64", K), (M, N, K, weights, err)
