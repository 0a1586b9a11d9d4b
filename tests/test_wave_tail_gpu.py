"""GPU property tests of wave_tail (TensorMatmul): the whole waves of C tiles in one launch and
the tiles past them in a second with K split in clusters, on random shapes just short of, at and
past one and two waves of the SMs, both layouts, leading dimensions and pointer offsets that rule
out 16-byte copies, alpha/beta, outputs poisoned with NaN before each launch, against float64
products (the bounds of test_tensorcore_gpu); and kgen.matmul where dispatch gives the split."""
from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_tensorcore_gpu import LAYOUTS, _layouts
from test_tensorcore_rows192_gpu import check_matmul_call, check_product, prebuild

from kgen.ops.tensorcore import TensorMatmul as T

pytestmark = pytest.mark.gpu

EXAMPLES = int(os.environ.get("KGEN_TC_EXAMPLES", "300")) // 4 + 1


def wave_tail_pool() -> list[T]:
    return [
        T(dtype="bfloat16", tile=(192, 128, 64), warp_tile=(64, 128), stages=5, instruction="wgmma", wave_tail=8),
        T(dtype="float16", tile=(192, 192, 64), warp_tile=(64, 192), stages=4, instruction="wgmma", wave_tail=3,
          layout_b="col", out_dtype="float32"),
        T(dtype="bfloat16", tile=(128, 256, 64), warp_tile=(64, 256), stages=4, instruction="wgmma", wave_tail=4,
          layout_b="col"),
        T(dtype="float16", tile=(128, 128, 64), warp_tile=(64, 128), stages=6, instruction="wgmma", wave_tail=2),
    ]


POOL = wave_tail_pool()


@pytest.fixture(scope="module", autouse=True)
def _prebuild():
    prebuild(POOL, lambda spec: [spec.tail_spec()])


def ragged_strategies(rows: list[int], least_tiles: int) -> dict:
    """Hypothesis strategies of a product of C tiles just short of, at and past one and two waves
    (`tiles`, the last ragged by `short`), `rows` and any rows up to 300, both layouts, pads,
    offsets, alpha and beta (check_ragged's arguments)."""
    return dict(layouts=st.sampled_from(LAYOUTS), M=st.one_of(st.sampled_from(rows), st.integers(1, 300)),
                tiles=st.one_of(st.sampled_from([131, 132, 133, 134, 263, 264, 265]), st.integers(least_tiles, 280)),
                short=st.integers(0, 255),
                K=st.one_of(st.sampled_from([1, 63, 64, 65, 257, 1000]), st.integers(1, 2500)),
                pad_a=st.sampled_from([0, 0, 1, 8]), pad_b=st.sampled_from([0, 0, 3, 8]),
                off_a=st.sampled_from([0, 0, 0, 1]), off_b=st.sampled_from([0, 0, 0, 1]),
                alpha=st.sampled_from([1.0, 1.0, -0.75]), beta=st.sampled_from([0.0, 0.0, 0.5]))


def check_ragged(base, layouts, M, tiles, short, K, pad_a, pad_b, off_a, off_b, alpha, beta):
    """`base` in the test's layouts on M x N x K, N = `tiles` C tiles, the last ragged (check_product)."""
    a_layout, b_layout = _layouts(base, *layouts)
    spec = base.replace(layout_a=a_layout, layout_b=b_layout)
    N = max(1, tiles * spec.tile[1] - short % spec.tile[1])
    check_product(spec, M, N, K, pad_a, pad_b, off_a, off_b, alpha, beta)


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@given(index=st.integers(0, len(POOL) - 1), **ragged_strategies([1, 63, 65, 127, 128, 129, 191, 192, 193, 257], 100))
def test_wave_tail_matches_float64(index, layouts, M, tiles, short, K, pad_a, pad_b, off_a, off_b, alpha, beta):
    check_ragged(POOL[index], layouts, M, tiles, short, K, pad_a, pad_b, off_a, off_b, alpha, beta)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("M,N,K,order,offset,split", [
    (78, 39936, 2688, "col", 0, True), (170, 50944, 700, "row", 1, True), (187, 36479, 1920, "col", 1, True),
    (100, 33800, 1030, "row", 0, True), (238, 36031, 1792, "col", 1, True), (256, 20544, 5888, "row", 0, True),
    (150, 50944, 2050, "col", 0, False), (300, 50944, 2048, "col", 0, False)])
def test_kgen_matmul_splits_the_last_wave_where_dispatch_says(dtype, M, N, K, order, offset, split):
    """kgen.matmul as users call it on products that dispatch gives wave_tail (one and two row
    tiles, odd N, B as W.t() or row-major, A at an odd element offset), on one whose B's rows
    are not 16-byte aligned and one of three row tiles (split=False: one launch): the spec dispatch ran, and the result
    against float64 on a NaN-poisoned output, twice (the repeat path too)."""
    check_matmul_call(dtype, M, N, K, order, offset, lambda spec: isinstance(spec, T) and (spec.wave_tail > 1) == split)
