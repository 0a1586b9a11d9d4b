"""CPU checks of stream-K on the transposed tiles (TensorMatmul stream_k=True): what validation
admits and says, the grid (stream_k_blocks), the launch plan on stand-in launches (the pieces'
workspace and the zeroed flags passed after the scalars), the tuner's space, the rendered kernel
of a spec without it unchanged by the option, and an nvcc build without spills.
tests/test_stream_k_gpu.py runs them."""
from __future__ import annotations

import shutil

import pytest
from test_split_tf32_cpu import _Go, _kernel

import kgen
import kgen.ops.tensorcore as tc
from kgen.core import render
from kgen.core.spec import SpecError
from kgen.ops.tensorcore import TensorMatmul as T


def _sk(BM, BN, **kw):
    kw.setdefault("stream_k", True)
    kw.setdefault("stages", tc.wgmma_ring_stages(BM, BN))
    return T(dtype="bfloat16", tile=(BM, BN, 64), warp_tile=(BM, 64), instruction="wgmma", swap_ab=True, **kw)


def test_validation_names_what_stream_k_needs():
    s = _sk(232, 128)
    assert s.staged_epilogue and kgen.spec_from_json(s.to_json()) == s
    with pytest.raises(SpecError, match="stream_k.*swap_ab"):
        T(dtype="bfloat16", tile=(128, 128, 64), warp_tile=(64, 128), stages=6, instruction="wgmma", stream_k=True)
    for bad in (dict(split_k=2, split_merge="cluster"), dict(wave_tail=3), dict(l2_prefetch=16),
                dict(b_realign=True, layout_b="col")):
        with pytest.raises(SpecError, match="stream_k"):
            _sk(64, 128, **bad)
    with pytest.raises(SpecError, match=r"stages.*stream_k.*sums"):
        _sk(232, 128, stages=2)


@pytest.mark.parametrize("M,N,K,sms,blocks", [
    (229, 9024, 5760, 132, 132),    # 71 tiles of 128 columns: one block an SM
    (229, 9024, 64, 132, 71),       # one k step a tile: a block a tile
    (229, 9024, 0, 132, 71),        # no k at all
    (229, 9024, 5760, 114, 114),    # the GPU's own SMs
    (8, 40000, 4096, 132, 313),     # more tiles than SMs: a block a tile
    (300, 1000, 128, 132, 32),      # 2 row tiles x 8 column tiles x 2 k steps
])
def test_grid_is_one_block_an_sm_where_tiles_are_fewer(M, N, K, sms, blocks):
    s = _sk(232, 128)
    assert s.stream_k_blocks(M, N, K, sms) == blocks
    assert s.launch_geometry(M, N, K, sms)[0] == (blocks, 1, 1)


def test_plan_passes_the_pieces_and_zeroed_flags(monkeypatch):
    spec = _sk(232, 128, layout_b="col")
    k = _kernel(spec, monkeypatch)
    k._item = k._out_item = 2
    k._wave_sms, k._tail, k._live = 132, None, [True]
    asked, given = [], {}

    def buffer(name, nbytes, zeroed=False):
        asked.append((name, nbytes, zeroed))
        given[name] = 0x1000000 * len(asked)
        return given[name]

    monkeypatch.setattr(k, "_buffer", buffer, raising=False)
    M, N, K = 229, 9024, 5760
    _Go.made = []
    k._run(k._plan(M, N, K, K, K, N, True, True, True), 0xA000, 0xB000, 0xC000, 1.0, 0.0, 0)
    main = [g for g in _Go.made if g.name == "kgen_tc_wgmma"][-1]
    assert main.grid == (132, 1, 1) and main.fmt.endswith("iPPff")
    pieces, published = [x for x in asked if x[0] in ("pieces", "published")]
    assert pieces == ("pieces", 132 * 232 * 128 * 4, False) and published == ("published", 132 * 4, True)
    args = main.calls[0]
    assert args[-4:] == (given["pieces"], given["published"], 1.0, 0.0) and args[2] == 0xC000


def test_tuner_searches_stream_k_where_tiles_are_fewer_than_the_sms():
    space = T.search_space({"M": 229, "N": 9024, "K": 5760}, "bfloat16")
    sk = [s for s in space if s.stream_k]
    assert {s.tile[:2] for s in sk} >= {(232, 128), (120, 192)}
    assert all(s.swap_ab and s.staged_epilogue for s in sk)
    wide = T.search_space({"M": 229, "N": 60000, "K": 5760}, "bfloat16")
    assert not [s for s in wide if s.stream_k and -(-60000 // s.tile[1]) * -(-229 // s.tile[0]) >= 132]


def test_a_spec_without_stream_k_renders_no_pieces():
    plain = render.render(_sk(232, 128, stream_k=False))
    assert "published" not in plain and "unit_span" not in plain
    assert "published" in render.render(_sk(232, 128))


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_stream_k_builds_without_spills():
    for spec in (_sk(232, 128), _sk(120, 192, layout_b="col"), _sk(8, 64), _sk(96, 256)):
        res = kgen.compile(spec, arch="sm_90a").resources["kgen_tc_wgmma"]
        assert res["spill_stores"] == 0 and res["spill_loads"] == 0, (spec.to_json(), res)
