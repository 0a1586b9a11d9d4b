"""CPU checks of the matmul launch-level fields (tail_split_k, repack, interior_fast_path,
prefetch_fragments): validation, the tail plan (pure), the search space offering them,
and the entry points they render and compile to."""
from __future__ import annotations

import pytest

import kgen
from kgen.bench import matmul as bench_matmul
from kgen.ops.matmul import Matmul
from kgen.core.spec import SpecError

W16 = Matmul(**bench_matmul._W16)
SMALL = Matmul(tile=(64, 64, 8), thread_tile=(4, 4), warp_tile=(16, 32), shared_memory=True, vector_loads=True,
               smem_pad=4, stages=3, async_copy=True, tail_split_k=4)


@pytest.mark.parametrize("fields, field", [
    (dict(tail_split_k=2, split_k=2), "tail_split_k"),    # every tile is split already
    (dict(tail_split_k=17), "tail_split_k"),
    (dict(tail_split_k=0), "tail_split_k"),
    (dict(prefetch_fragments=True, stages=1, async_copy=False), "prefetch_fragments"),
    (dict(prefetch_fragments=True, vector_loads=False, repack=False, tile=(128, 256, 9)), "prefetch_fragments"),
    (dict(repack=True, vector_loads=False), "repack"),
    (dict(shared_memory=False, warp_tile=(0, 0), vector_loads=False, repack=False, stages=1, async_copy=False,
          interior_fast_path=True), "interior_fast_path"),
])
def test_invalid_combinations_name_the_field(fields, field):
    kw = dict(bench_matmul._W16)
    kw.update(fields)
    with pytest.raises(SpecError) as err:
        Matmul(**kw)
    assert field in str(err.value)


def test_prefetch_fragments_accepts_an_even_bk_with_two_stages():
    assert Matmul(**dict(bench_matmul._W16, prefetch_fragments=True, stages=2)).prefetch_fragments


def test_tail_plan_splits_the_last_rows_of_a_partial_wave():
    # 4097^3 in 128x256 tiles: 17 x 33 = 561 tiles, 4 full waves of 132 and 33 over. The
    # head keeps 31 tile rows (527 tiles, under 4 waves); the last 2 rows (34 tiles) fit
    # 3 ways split in one wave of 132.
    assert W16.replace(tail_split_k=4).tail_plan(4097, 4097, 4097, 132) == (2, 3)
    # At most tail_split_k ways.
    assert W16.replace(tail_split_k=2).tail_plan(4097, 4097, 4097, 132) == (2, 2)
    # 1000^2 in 64x64 tiles at 84 slots: 256 tiles = 3 waves + 4; one row of 16 tiles, 4 ways.
    assert SMALL.tail_plan(1000, 1000, 1000, 84) == (1, 4)


@pytest.mark.parametrize("M, N, K, slots", [
    (4096, 4096, 4096, 264),
    (4096, 4096, 4096, 132),
    (100, 100, 1000, 132),     # fewer tiles than slots: nothing to split
    (3000, 5000, 700, 132),
    (1000, 1000, 40, 84),      # K too short to split into slices of 4 tiles
])
def test_tail_plan_declines_when_it_cannot_help(M, N, K, slots):
    for spec in (W16.replace(tail_split_k=4), SMALL):
        rows, ways = spec.tail_plan(M, N, K, slots)
        if rows:
            # When it does plan a tail, the tail fits one wave and the head whole waves.
            BM, BN, _ = spec.tile
            tiles_n, tiles_m = -(-N // BN), -(-M // BM)
            full = (tiles_n * tiles_m) // slots
            assert rows * tiles_n * ways <= slots
            assert (tiles_m - rows) * tiles_n <= full * slots
            assert ways >= 2
        else:
            assert ways == 1
    # Specific declines: 4096^3 in 128x256 tiles is 512 tiles = 3.9 waves of 132, but
    # the 4 rows of the last wave hold 116 tiles: no split fits in one wave.
    assert W16.replace(tail_split_k=4).tail_plan(4096, 4096, 4096, 132) == (0, 1)
    assert W16.replace(tail_split_k=4).tail_plan(100, 100, 1000, 132) == (0, 1)
    assert SMALL.tail_plan(1000, 1000, 40, 84) == (0, 1)
    assert W16.tail_plan(4097, 4097, 4097, 132) == (0, 1)  # tail_split_k = 1: off


def test_search_space_offers_the_fields_where_they_matter():
    aligned = Matmul.search_space({"M": 4096, "N": 4096, "K": 4096}, "float32")
    unaligned = Matmul.search_space({"M": 4097, "N": 4097, "K": 4097}, "float32")
    tuned = [s for s in aligned if s.vector_loads and s.split_k == 1]
    assert any(s.interior_fast_path for s in tuned) and any(not s.interior_fast_path for s in tuned)
    assert any(s.tail_split_k > 1 for s in aligned)
    assert not any(s.prefetch_fragments for s in aligned + unaligned)  # measured slower
    # Aligned problems need no repacking; unaligned ones repack in the tuned family, with
    # element-load contrasts kept.
    assert not any(s.repack for s in aligned)
    assert sum(s.repack for s in unaligned) > len(unaligned) // 2
    assert any(s.vector_loads and not s.repack for s in unaligned)


def test_default_spec_uses_the_measured_defaults():
    big = Matmul.default_spec({"M": 4096, "N": 4096, "K": 4096}, "float32")
    assert (big.tile, big.thread_tile, big.interior_fast_path, big.repack, big.tail_split_k) == \
        ((128, 256, 16), (8, 16), True, True, 4)
    few_tiles = Matmul.default_spec({"M": 1024, "N": 1024, "K": 1024}, "float32")
    assert few_tiles.split_k > 1 and few_tiles.tail_split_k == 1 and few_tiles.tile == (128, 128, 8)


def test_repack_renders_the_repack_and_vector_entry_points_only():
    src = kgen.render(W16.replace(tail_split_k=4))
    assert "kgen_matmul_repack(" in src and "kgen_matmul_vec_cs(" in src and "kgen_matmul_vec(" in src
    assert "kgen_matmul_splitk_reduce(" in src  # the tail's K slices are folded by it
    assert "\nkgen_matmul(" not in src           # nothing falls back to element loads
    plain = kgen.render(W16.replace(repack=False))
    assert "\nkgen_matmul(" in plain and "kgen_matmul_repack(" not in plain
    assert "kgen_matmul_splitk_reduce(" not in plain
    # The standalone check runs the element entry point, so it keeps it.
    assert "\nkgen_matmul(" in kgen.render(W16, standalone=True)


def test_interior_fast_path_is_rendered_only_when_asked():
    on = kgen.render(W16)
    off = kgen.render(W16.replace(interior_fast_path=False))
    assert "copy_async_full" in on and "interior && k + BK <= k_end" in on
    assert "interior && k + BK <= k_end" not in off


@pytest.mark.nvcc
def test_launch_field_variants_compile_without_spills_in_the_vector_kernels():
    specs = [W16.replace(tail_split_k=4), SMALL.replace(repack=True, interior_fast_path=True),
             SMALL.replace(prefetch_fragments=True), SMALL.replace(async_copy=False, stages=2, interior_fast_path=True),
             Matmul(dtype="float64", tile=(64, 64, 8), thread_tile=(4, 4), warp_tile=(16, 32), shared_memory=True,
                    vector_loads=True, smem_pad=2, stages=3, async_copy=True, repack=True, interior_fast_path=True)]
    for spec in specs:
        res = kgen.compile(spec, "sm_90").resources
        expected = {"kgen_matmul_vec"} | ({"kgen_matmul_repack", "kgen_matmul_vec_cs"} if spec.repack else set())
        assert expected <= set(res), (spec.to_json(), sorted(res))
        for entry in ("kgen_matmul_vec", "kgen_matmul_vec_cs"):
            if entry in res:
                assert res[entry]["spill_stores"] == 0, (entry, spec.to_json(), res[entry])
