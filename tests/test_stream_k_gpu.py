"""GPU property tests of stream-K on the transposed tiles (TensorMatmul stream_k=True): the k
steps of all C tiles shared out evenly among one block an SM, the pieces of a tile added by the
block that ends it. Random shapes of 1-140 C tiles (fewer than the SMs: pieces; as many or more:
one block a tile), K from 1 to 12000 (one step to hundreds of steps a tile), 1-300 rows (several
row tiles past BM), both orders of B, leading dimensions and pointer offsets that rule out
16-byte copies, alpha/beta, outputs poisoned with NaN before each launch, against float64
products (the bounds of test_tensorcore_gpu). Then the flags every launch leaves clear: products
of different grids on one kernel object in turn, each right, and one product's result equal to
the bit in every launch (the pieces are added in block order)."""
from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_tensorcore_gpu import LAYOUTS, _torch
from test_tensorcore_rows192_gpu import check_product, prebuild
from test_wave_tail_gpu import check_ragged

import kgen
from kgen.ops.tensorcore import TensorMatmul as T
from kgen.ops.tensorcore import wgmma_ring_stages

pytestmark = pytest.mark.gpu

EXAMPLES = int(os.environ.get("KGEN_TC_EXAMPLES", "300")) // 3 + 1


def _sk(dtype, BM, BN, **kw):
    return T(dtype=dtype, tile=(BM, BN, 64), warp_tile=(BM, 64), stages=wgmma_ring_stages(BM, BN),
             instruction="wgmma", swap_ab=True, stream_k=True, **kw)


POOL = [
    _sk("bfloat16", 232, 128),
    _sk("float16", 120, 192, out_dtype="float32"),
    _sk("bfloat16", 64, 128),
    _sk("float16", 8, 64),
    _sk("bfloat16", 256, 64),
    _sk("float16", 96, 256),
]


@pytest.fixture(scope="module", autouse=True)
def _prebuild():
    prebuild(POOL, lambda spec: [])


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@given(index=st.integers(0, len(POOL) - 1), layouts=st.sampled_from(LAYOUTS),
       M=st.one_of(st.sampled_from([1, 7, 8, 9, 63, 64, 65, 119, 120, 121, 199, 200, 201, 231, 232, 233]),
                   st.integers(1, 300)),
       tiles=st.one_of(st.sampled_from([1, 2, 65, 66, 67, 131, 132, 133]), st.integers(1, 140)),
       short=st.integers(0, 255),
       K=st.one_of(st.sampled_from([1, 63, 64, 65, 129, 4097, 12000]), st.integers(1, 12000)),
       pad_a=st.sampled_from([0, 0, 1, 8]), pad_b=st.sampled_from([0, 0, 3, 8]),
       off_a=st.sampled_from([0, 0, 0, 1]), off_b=st.sampled_from([0, 0, 0, 1]),
       alpha=st.sampled_from([1.0, 1.0, -0.75]), beta=st.sampled_from([0.0, 0.0, 0.5]))
def test_stream_k_matches_float64(index, layouts, M, tiles, short, K, pad_a, pad_b, off_a, off_b, alpha, beta):
    check_ragged(POOL[index], layouts, M, tiles, short, K, pad_a, pad_b, off_a, off_b, alpha, beta)


@pytest.mark.parametrize("spec", [POOL[0], POOL[1]], ids=["232x128", "120x192"])
def test_stream_k_grids_in_turn_and_bitwise_repeats(spec):
    """Products of different grids and piece counts on one kernel object in turn (the flags a
    launch publishes are cleared by the block that reads them, so the next grid finds them
    clear), each against float64, then one product five times: equal to the bit."""
    for M, N, K in ((229, 9024, 5760), (17, 300, 9000), (240, 16000, 777), (229, 9024, 5760), (100, 130, 64)):
        check_product(spec, M, N, K, 0, 0, 0, 0, 1.0, 0.0)
    torch = _torch()
    k = kgen.build(spec)
    dt = getattr(torch, spec.dtype)
    A = torch.randn(229, 5760, device="cuda").to(dt)
    B = torch.randn(5760, 9024, device="cuda").to(dt)
    first = k(A, B)
    for _ in range(4):
        again = torch.full_like(first, float("nan"))
        k(A, B, out=again)
        assert torch.equal(first, again)


def test_stream_k_replays_in_a_cuda_graph_on_new_inputs():
    """A stream-K product captured into a torch CUDA graph (warmed up on a side stream first, as
    torch's recipe does), replayed on new operands with an eager call of the same kernel between
    replays: each against float64 (the flags every launch leaves clear serve both)."""
    from test_graph_capture_gpu import _capture, _rel

    torch = _torch()
    spec = POOL[0]
    k = kgen.build(spec)
    dt = getattr(torch, spec.dtype)
    A = torch.randn(229, 5760, device="cuda").to(dt)
    B = torch.randn(5760, 9024, device="cuda").to(dt)
    graph, C = _capture(torch, lambda: k(A, B))
    for _ in range(3):
        A.copy_(torch.randn(229, 5760, device="cuda").to(dt))
        B.copy_(torch.randn(5760, 9024, device="cuda").to(dt))
        C.fill_(float("nan"))
        graph.replay()
        eager = k(A, B)
        torch.cuda.synchronize()
        ref = A.double() @ B.double()
        assert _rel(C, ref) < 1e-2 and _rel(eager, ref) < 1e-2
