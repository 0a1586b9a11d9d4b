"""GPU tests of the matmul launch-level features: the tail launch with split K
(tail_split_k), repacking of unaligned operands (repack) and fragments prefetched across
the tile barrier (prefetch_fragments), on random shapes, layouts and leading dimensions,
NaN-poisoned outputs, float64 references."""
from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import kgen
from kgen.bench import matmul as bench_matmul
from kgen.ops.matmul import Matmul
from conftest import rel_error
from test_matmul_gpu import SIZE, _device

pytestmark = pytest.mark.gpu


# Specs with the launch-level features: a tail launch with split K, repacking of unaligned
# operands, fragments prefetched across the barrier (cp.async and register pipelines).
_V = dict(shared_memory=True, vector_loads=True, interior_fast_path=True, repack=True, tail_split_k=4)
TAIL_SPECS = [
    # prefetch_fragments (measured slower, kept as a field) on both pipelines
    Matmul(tile=(64, 64, 8), thread_tile=(4, 4), warp_tile=(16, 32), smem_pad=4, stages=3, async_copy=True,
           prefetch_fragments=True, **_V),
    Matmul(tile=(64, 64, 16), thread_tile=(8, 4), warp_tile=(32, 32), smem_pad=4, stages=2,
           prefetch_fragments=True, **_V),
    Matmul(tile=(64, 64, 8), thread_tile=(4, 4), warp_tile=(16, 32), smem_pad=4, stages=3, async_copy=True, **_V),
    Matmul(tile=(64, 64, 16), thread_tile=(8, 4), warp_tile=(32, 32), smem_pad=4, stages=2, **_V),
    Matmul(**dict(bench_matmul._ASYNC, min_blocks=2, **_V)),
    Matmul(**dict(bench_matmul._WIDE, **_V)),
    Matmul(**dict(bench_matmul._W16, **_V)),
    Matmul(dtype="float64", tile=(64, 64, 8), thread_tile=(4, 4), warp_tile=(16, 32), smem_pad=2, stages=3,
           async_copy=True, **_V),
]


def _set_slots(k, slots):
    """Pretend the GPU runs `slots` blocks at once, so small products take the tail path."""
    k._slots = {True: slots, False: slots}
    k._plans.clear()


@settings(max_examples=int(os.environ.get("KGEN_TAIL_EXAMPLES", "150")), deadline=None,
          suppress_health_check=list(HealthCheck))
@given(data=st.data(), M=st.integers(1, 700), N=st.integers(1, 700), K=st.one_of(st.just(1), SIZE),
       layout_a=st.sampled_from(["row", "col"]), layout_b=st.sampled_from(["row", "col"]),
       pad_a=st.sampled_from([0, 1, 3, 4]), pad_b=st.sampled_from([0, 1, 2, 4]),
       slots=st.integers(1, 60), beta=st.sampled_from([0.0, -0.5]))
def test_tail_split_repack_prefetch_property(data, M, N, K, layout_a, layout_b, pad_a, pad_b, slots, beta):
    torch = pytest.importorskip("torch")
    spec = data.draw(st.sampled_from(TAIL_SPECS), label="spec").replace(layout_a=layout_a, layout_b=layout_b)
    dtype = spec.dtype
    k = kgen.build(spec)
    _set_slots(k, slots)
    rows, ways = spec.tail_plan(M, N, K, slots)
    event(f"tail rows {rows > 0}, ways {ways}")
    rng = np.random.default_rng()
    A = rng.standard_normal((M, K)).astype(dtype)
    B = rng.standard_normal((K, N)).astype(dtype)
    dA, dB = _device(A, layout_a, dtype, pad_a), _device(B, layout_b, dtype, pad_b)
    tdt = torch.float32 if dtype == "float32" else torch.float64
    C0 = rng.standard_normal((M, N))
    # C as a row slice too (ldc = N + 1: unaligned), poisoned where the product must write.
    base = torch.full((M, N + 1), float("nan"), dtype=tdt, device="cuda")
    out = base[:, :N]
    if beta != 0.0:
        out.copy_(torch.from_numpy(C0).to(tdt))
    k(dA, dB, out=out, alpha=0.75, beta=beta)
    ref = 0.75 * (A.astype(np.float64) @ B.astype(np.float64)) + \
        (beta * C0.astype(dtype).astype(np.float64) if beta != 0.0 else 0.0)
    tol = spec.tolerance(K) * (2.0 if beta != 0.0 else 1.0)
    assert rel_error(out.cpu().numpy(), ref) <= tol, (spec.to_json(), M, N, K, slots)
    assert torch.isnan(base[:, N]).all(), "wrote past the last column"


def test_tail_split_takes_two_launches_and_is_exact():
    torch = pytest.importorskip("torch")
    spec = TAIL_SPECS[2]
    k = kgen.build(spec)
    _set_slots(k, 84)
    # 1000^2 in 64x64 tiles: 256 tiles = 3 waves of 84 + 4; the last tile row goes split 4 ways.
    assert spec.tail_plan(1000, 1000, 1000, 84) == (1, 4)
    plan = k._plan(1000, 1000, 1000, True)
    assert [(p[0], p[1], p[3]) for p in plan] == [(0, 960, 1), (960, 40, 4)]
    A = torch.randn(1000, 1000, device="cuda")
    B = torch.randn(1000, 1000, device="cuda")
    C = torch.full((1000, 1000), float("nan"), device="cuda")
    k(A, B, out=C)
    assert rel_error(C.cpu().numpy(), (A.double() @ B.double()).cpu().numpy()) <= spec.tolerance(1000)
    C2 = k(A, B)
    assert torch.equal(C, C2), "the tail's split-K reduction must be deterministic"


def test_repack_reads_unaligned_operands_through_the_vector_kernel():
    torch = pytest.importorskip("torch")
    spec = TAIL_SPECS[4]
    k = kgen.build(spec)
    A = torch.randn(301, 1025, device="cuda")[:, 1:]  # pointer off by 4 bytes: unaligned
    B = torch.randn(1024, 259, device="cuda")          # ldb = 259: unaligned
    C = torch.full((301, 259), float("nan"), device="cuda")
    k(A, B, out=C)
    plan = k._launch_plan(301, 259, 1024, 1025, 259, 259, False, False, False)
    repack_a, repack_b, parts = plan
    assert repack_a is not None and repack_b is not None, "both operands go through the repack kernel"
    assert all(p[0].name in ("kgen_matmul_vec", "kgen_matmul_vec_cs") for p in parts), "then a vector kernel reads them"
    assert rel_error(C.cpu().numpy(), (A.double() @ B.double()).cpu().numpy()) <= spec.tolerance(1024)
