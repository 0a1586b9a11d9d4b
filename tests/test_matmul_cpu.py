"""CPU checks of the matmul family: spec validation, launch geometry, split plans, the
search space, rendering, and nvcc/ptxas builds of representative variants for sm_90 with
no register spills in the variants kgen uses by default (default_spec and the bench specs)."""
from __future__ import annotations

import concurrent.futures as cf

import pytest

import kgen
from kgen.bench import matmul as bench_matmul
from kgen.ops.matmul import Matmul
from kgen.core.spec import SpecError

LIMITS = {"max_threads_per_block": 1024, "max_shared_per_block_optin": 227 * 1024, "multiprocessors": 132,
          "l2_bytes": 50 << 20}
SQUARE = {"M": 4096, "N": 4096, "K": 4096}


def fast(**kw):
    base = dict(tile=(128, 128, 8), thread_tile=(8, 8), warp_tile=(32, 64), shared_memory=True,
                vector_loads=True, smem_pad=4, stages=2, min_blocks=2)
    base.update(kw)
    return Matmul(**base)


def test_default_constructor_stays_the_textbook_kernel():
    m = Matmul()
    assert not m.shared_memory and m.split_k == 1 and m.stages == 1 and m.warp_tile == (0, 0)


@pytest.mark.parametrize("fields, field", [
    (dict(warp_tile=(32, 32)), "warp_tile"),                        # 4 x 4 lanes, not 32
    (dict(warp_tile=(48, 64)), "warp_tile"),                        # does not divide BM
    (dict(stages=3, async_copy=False), "stages"),                   # >2 stages need cp.async
    (dict(stages=1, async_copy=True), "stages"),
    (dict(stages=5, async_copy=True), "stages"),
    (dict(split_k=0), "split_k"),
    (dict(tile=(128, 128, 6), warp_tile=(32, 64)), "vector_loads"),  # BK not a multiple of 4
    (dict(min_blocks=2, launch_bounds=False), "min_blocks"),
    (dict(tile=(256, 256, 64), stages=4, async_copy=True, warp_tile=(64, 64), thread_tile=(8, 16),
          min_blocks=0), "tile"),                                   # shared memory past 227 KiB
])
def test_invalid_fields_name_the_field(fields, field):
    with pytest.raises(SpecError, match=field):
        fast(**fields)


def test_pipeline_fields_need_shared_memory():
    for name, value in (("warp_tile", (32, 64)), ("vector_loads", True), ("split_k", 2), ("stages", 2)):
        with pytest.raises(SpecError, match=name):
            Matmul(**{name: value})


def test_launch_geometry_and_split_plan():
    s = fast()
    assert s.launch_geometry(4096, 4096, 4096) == ((32, 32, 1), (256, 1, 1), s.shared_bytes)
    assert s.launch_geometry(1, 1, 1)[0] == (1, 1, 1)
    assert s.launch_geometry(129, 4097, 7)[0] == (33, 2, 1)
    sk = fast(split_k=4)
    grid, block, _ = sk.launch_geometry(127, 4096, 4096)
    assert grid == (32, 1, 4) and block == (256, 1, 1)
    splits, chunk = sk.split_plan(4096)
    assert splits == 4 and chunk == 1024 and chunk % 8 == 0
    # Slices are whole BK steps, cover K exactly once, and never come out empty.
    for K in (1, 7, 8, 9, 100, 1001, 4097):
        for split in (2, 3, 4, 16):
            n, c = fast(split_k=split).split_plan(K)
            assert n >= 1 and c >= 1 and (n - 1) * c < K <= n * c and (n == 1 or c % 8 == 0)
    naive = Matmul(tile=(32, 8, 16))
    assert naive.launch_geometry(100, 100, 5) == ((13, 4, 1), (8, 32, 1), 0)
    assert Matmul(tile=(32, 8, 16), mapping="1d").launch_geometry(100, 100, 5)[1] == (256, 1, 1)


def test_shared_bytes_count_stages_and_padding():
    s = fast(stages=2, async_copy=False)
    assert s.shared_bytes == 2 * (8 * 132 + 8 * 132) * 4
    assert fast(stages=4, async_copy=True, min_blocks=0).shared_bytes == 2 * s.shared_bytes


def test_search_space_is_large_valid_and_pruned_sensibly():
    space = Matmul.search_space(SQUARE, "float32")
    kept = [s for s in space if s.prune_reason(SQUARE, LIMITS) is None]
    assert len(kept) >= 150
    assert len({s.key for s in space}) == len(space)
    skinny = {"M": 4096, "N": 64, "K": 4096}
    assert any(s.split_k > 1 for s in Matmul.search_space(skinny, "float32"))
    assert not any(s.split_k > 1 for s in space)
    assert Matmul.search_space(SQUARE, "float64")
    assert fast().prune_reason(SQUARE, LIMITS) is None
    assert fast(split_k=64).prune_reason({"M": 64, "N": 64, "K": 64}, LIMITS)


def test_default_spec_splits_k_only_for_few_tiles():
    assert Matmul.default_spec(SQUARE, "float32").split_k == 1
    assert Matmul.default_spec({"M": 4096, "N": 64, "K": 4096}, "float32").split_k > 1
    assert Matmul.default_spec({"M": 64, "N": 64, "K": 64}, "float32").split_k == 1
    assert Matmul.default_spec(SQUARE, "float64").dtype == "float64"


def test_render_contains_the_switched_features():
    src = kgen.render(fast(stages=3, async_copy=True, split_k=2, min_blocks=0))
    assert "cp.async.cg.shared.global" in src and "kgen_matmul_vec" in src
    assert "kgen_matmul_splitk_reduce" in src and "__launch_bounds__(THREADS)" in src
    assert "__launch_bounds__(THREADS, 2)" in kgen.render(fast())
    assert "kgen_matmul_vec" not in kgen.render(fast(vector_loads=False))
    assert kgen.render(fast()) == kgen.render(fast())


def _default_specs():
    specs = {}
    for problem in (SQUARE, {"M": 4096, "N": 64, "K": 4096}, {"M": 127, "N": 4096, "K": 4096},
                    {"M": 1000, "N": 1000, "K": 1000}):
        for dtype in ("float32", "float64"):
            s = Matmul.default_spec(problem, dtype)
            specs[s.key] = s
    for shape in bench_matmul.SHAPES:
        s = bench_matmul.best_spec(shape)
        specs[s.key] = s
    for fields in bench_matmul.BASELINES.values():
        s = Matmul(**fields)
        specs[s.key] = s
    return list(specs.values())


def _representative():
    out = []
    for la in ("row", "col"):
        for lb in ("row", "col"):
            out += [fast(layout_a=la, layout_b=lb), fast(layout_a=la, layout_b=lb, stages=3, async_copy=True,
                                                         min_blocks=0, smem_a_transposed=la == "col")]
    out += [fast(dtype="float64", thread_tile=(4, 4), warp_tile=(16, 32), tile=(64, 64, 8), min_blocks=0, smem_pad=2),
            fast(split_k=3), fast(warp_tile=(0, 0), min_blocks=0, vector_loads=False),
            Matmul(mapping="1d", tile=(32, 32, 16), thread_tile=(2, 2))]
    return out


@pytest.mark.nvcc
def test_representative_variants_compile_for_sm90():
    specs = _representative()
    with cf.ThreadPoolExecutor(2) as ex:
        results = list(ex.map(lambda s: kgen.compile(s, "sm_90"), specs))
    for spec, compiled in zip(specs, results):
        assert "kgen_matmul" in compiled.resources or spec.repack, spec.to_json()
        if spec.vector_loads:
            assert "kgen_matmul_vec" in compiled.resources


@pytest.mark.nvcc
def test_default_and_bench_specs_do_not_spill():
    specs = _default_specs()
    with cf.ThreadPoolExecutor(2) as ex:
        results = list(ex.map(lambda s: kgen.compile(s, "sm_90"), specs))
    spills = []
    for spec, compiled in zip(specs, results):
        for entry, r in compiled.resources.items():
            if r["spill_stores"] or r["spill_loads"]:
                spills.append(f"{entry} of {spec.to_json()}: {r['spill_stores']} bytes spill stores, "
                              f"{r['spill_loads']} bytes spill loads")
    assert not spills, "ptxas spills:\n" + "\n".join(spills)
