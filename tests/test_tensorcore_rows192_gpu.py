"""GPU property tests of the wgmma kernel's tiles of 192 rows (three consumer warpgroups, four
warpgroups a block): random shapes around and past one and two such tiles, both layouts,
leading dimensions and pointer offsets that rule out 16-byte copies, alpha/beta, outputs
poisoned with NaN before each launch, against float64 products (the bounds of
test_tensorcore_gpu)."""
from __future__ import annotations

import concurrent.futures as cf
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from conftest import strided_operand
from test_tensorcore_gpu import LAYOUTS, _check, _hopper, _layouts, _torch

import kgen
from kgen.ops.tensorcore import WIDE_SWAP_BN, TensorMatmul as T

pytestmark = pytest.mark.gpu

EXAMPLES = int(os.environ.get("KGEN_TC_EXAMPLES", "300")) // 4 + 1
ROWS = st.one_of(st.sampled_from([1, 63, 64, 65, 127, 129, 191, 192, 193, 383, 384, 385]), st.integers(1, 600))
SIZE = st.one_of(st.sampled_from([1, 7, 63, 64, 65, 127, 129, 257, 509]), st.integers(1, 400))


def rows192_pool() -> list[T]:
    return [
        T(dtype="bfloat16", tile=(192, 128, 64), warp_tile=(64, 128), stages=5, instruction="wgmma"),
        T(dtype="bfloat16", tile=(192, 192, 64), warp_tile=(64, 192), stages=4, instruction="wgmma", layout_b="col"),
        T(dtype="float16", tile=(192, 64, 64), warp_tile=(64, 64), stages=6, instruction="wgmma", split_k=3,
          split_merge="cluster", out_dtype="float32"),
        T(dtype="float32", tf32=True, tile=(192, 128, 32), warp_tile=(64, 128), stages=4, instruction="wgmma"),
        T(dtype="bfloat16", tile=(192, 128, 64), warp_tile=(64, 128), stages=4, instruction="wgmma", persistent=True,
          split_k=2),
        T(dtype="bfloat16", tile=(192, 64, 64), warp_tile=(64, 64), stages=6, instruction="wgmma", cluster=2,
          raster="col"),
    ]


POOL = rows192_pool()


@pytest.fixture(scope="module", autouse=True)
def _prebuild():
    prebuild(POOL)


def prebuild(pool, related=lambda spec: []):
    """Skip off sm_90; else compile every spec of `pool` in every layout the tests give it, and
    the specs `related` names for each (a second launch's), in parallel."""
    if not _hopper():
        pytest.skip("the wgmma kernel runs on sm_90 GPUs only")
    specs = {s.replace(layout_a=a, layout_b=b) for s in pool for a, b in (_layouts(s, *ab) for ab in LAYOUTS)}
    with cf.ThreadPoolExecutor(max_workers=min(16, os.cpu_count() or 2)) as ex:
        list(ex.map(kgen.compile, list(specs) + [r for s in specs for r in related(s)]))


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@given(index=st.integers(0, len(POOL) - 1), layouts=st.sampled_from(LAYOUTS), M=ROWS, N=SIZE,
       K=st.one_of(st.just(1), SIZE), pad_a=st.sampled_from([0, 0, 1, 8]), pad_b=st.sampled_from([0, 0, 3, 8]),
       off_a=st.sampled_from([0, 0, 0, 1]), off_b=st.sampled_from([0, 0, 0, 1]),
       alpha=st.sampled_from([1.0, 1.0, -0.75]), beta=st.sampled_from([0.0, 0.0, 0.5]))
def test_rows192_tiles_match_float64(index, layouts, M, N, K, pad_a, pad_b, off_a, off_b, alpha, beta):
    a_layout, b_layout = _layouts(POOL[index], *layouts)
    check_product(POOL[index].replace(layout_a=a_layout, layout_b=b_layout), M, N, K, pad_a, pad_b, off_a, off_b,
                  alpha, beta)


def check_product(spec, M, N, K, pad_a, pad_b, off_a, off_b, alpha, beta):
    """The spec's kernel on fresh operands of these pads and offsets into a NaN-poisoned C
    (holding C0 where beta is not 0), against float64 (_check)."""
    torch = _torch()
    k = kgen.build(spec)
    dt, odt = getattr(torch, spec.dtype), getattr(torch, spec.output_dtype)
    A = strided_operand(torch, M, K, spec.layout_a, pad_a, off_a, dt)
    B = strided_operand(torch, K, N, spec.layout_b, pad_b, off_b, dt)
    C0 = torch.randn(M, N, device="cuda", dtype=torch.float64).to(odt) if beta != 0 else None
    C = torch.full((M, N + 1), float("nan"), device="cuda", dtype=odt)[:, :N]
    if C0 is not None:
        C.copy_(C0)
    assert k(A, B, out=C, alpha=alpha, beta=beta) is C
    torch.cuda.synchronize()
    label = f"{spec.to_json()} M={M} N={N} K={K} pads={pad_a},{pad_b} offsets={off_a},{off_b}"
    _check(spec, A, B, C, C0, alpha, beta, label)


def _tiles(spec) -> str:
    """Which tiles a dispatched spec runs: "tall" (the general tiles of 192 rows), "wide" (the
    transposed tiles of more than 128 of WIDE_SWAP_BN's columns, which
    TensorMatmul.wide_swap_suits weighs against them from WIDE_SWAP_MIN_K), "in place" (tiles
    that read a B whose rows TMA cannot read as they are), or "other"."""
    if not isinstance(spec, T):
        return "other"
    if spec.b_phased or spec.b_realign or spec.b_classes:
        return "in place"
    if spec.tile[0] == 192 and not spec.swap_ab:
        return "tall"
    return "wide" if spec.swap_ab and spec.tile[1] in WIDE_SWAP_BN and spec.tile[1] > 128 else "other"


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("M,N,K,order,offset,tiles", [
    (150, 12001, 336, "col", 0, "tall"), (180, 12800, 336, "row", 1, "tall"), (174, 21247, 336, "col", 1, "tall"),
    # From K of WIDE_SWAP_MIN_K the wide transposed tiles take weights this wide.
    (170, 19304, 700, "row", 1, "wide"), (129, 24577, 1000, "col", 1, "wide"), (192, 20000, 515, "row", 0, "wide"),
    # B's rows off a 16-byte boundary: the tiles that read such a B in place.
    (150, 12001, 333, "col", 0, "in place"), (160, 20001, 1000, "row", 0, "in place")])
def test_kgen_matmul_runs_192_row_tiles_where_dispatch_picks_them(dtype, M, N, K, order, offset, tiles):
    """kgen.matmul as users call it on products the rows-of-192 rules give those tiles (odd N,
    B as W.t() or row-major with rows 16-byte aligned, A at an odd element offset or of an odd
    length), on three wide enough for the wide transposed tiles, and on two whose B's rows are
    not 16-byte aligned: the tiles of the spec dispatch ran, and the result against float64 on
    a NaN-poisoned output, twice (the repeat path too)."""
    check_matmul_call(dtype, M, N, K, order, offset, lambda spec: _tiles(spec) == tiles)


def check_matmul_call(dtype, M, N, K, order, offset, want):
    """kgen.matmul on A (at `offset` elements into its rows) and B (W.t() for order "col", else
    row-major): `want` holds for the spec dispatch runs, and the result of two calls (the
    repeat path too) against float64 on NaN-poisoned outputs."""
    from kgen.tune.dispatch import call_spec

    torch = _torch()
    dt = getattr(torch, dtype)
    A = torch.randn(M, K + offset, device="cuda", dtype=torch.float64).to(dt)[:, offset:]
    B = (torch.randn(N, K, device="cuda", dtype=torch.float64).to(dt).t() if order == "col"
         else torch.randn(K, N, device="cuda", dtype=torch.float64).to(dt))
    spec = call_spec(A, B)
    assert want(spec), spec.to_json()
    ref = A.double() @ B.double()
    for _ in range(2):
        C = torch.full((M, N), float("nan"), device="cuda", dtype=dt)
        kgen.matmul(A, B, out=C)
        torch.cuda.synchronize()
        rel = ((C.double() - ref).norm() / ref.norm()).item()
        assert torch.isfinite(C).all() and rel < 4e-3, (spec.to_json(), rel)
