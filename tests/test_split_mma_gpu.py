"""GPU property tests of float32 as three TF32 products on mma.sync (TensorMatmul split_tf32 with
instruction mma_sync: each fragment split into hi and lo in registers, the tensor cores' sums
added into float32 registers every SPLIT_PROMOTE_K of K): a pool of tiles on random shapes (1,
primes, past and below every tile), both storage orders of both operands, pitches and offsets
that rule out 16-byte copies, K split in a workspace, alpha and beta, outputs NaN-poisoned
before each launch. Each result is checked against float64 by the spec's bounds and against
cuBLAS's own float32 SGEMM (TF32 off) on the same inputs: float32 accuracy, not TF32's."""
from __future__ import annotations

import os

import pytest
from conftest import cuda_torch, strided_operand
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kgen
from kgen.ops.tensorcore import TensorMatmul

pytestmark = pytest.mark.gpu

EXAMPLES = int(os.environ.get("KGEN_TC_EXAMPLES", "60"))


def split_mma_pool() -> list[TensorMatmul]:
    """128 x 128 tiles of 64 x 32 warp tiles one block an SM; 128 x 64 and 64 x 64 tiles of 32 x 32
    warp tiles two and three blocks an SM, 3 and 4 stages; K split 3 ways in a workspace; the
    short-K tiles dispatch runs (64 x 64 x 16, four blocks an SM); the aligned (vector) entry only
    (repack on)."""
    T = TensorMatmul
    base = dict(dtype="float32", tf32=True, split_tf32=True, smem_layout="pad", repack=False)
    return [T(tile=(128, 128, 32), warp_tile=(64, 32), stages=3, min_blocks=1, **base),
            T(tile=(128, 64, 32), warp_tile=(32, 32), stages=3, min_blocks=2, **base),
            T(tile=(128, 64, 32), warp_tile=(32, 32), stages=4, min_blocks=2, split_k=3, **base),
            T(tile=(64, 64, 32), warp_tile=(32, 32), stages=3, min_blocks=3, **base),
            T.split_mma_spec({"M": 3000, "N": 2000, "K": 40}),
            T(tile=(64, 64, 32), warp_tile=(32, 32), stages=3, min_blocks=3, **dict(base, repack=True))]


SIDE = st.one_of(st.sampled_from([1, 2, 15, 16, 17, 63, 64, 65, 127, 129, 131, 1031]), st.integers(1, 2500))


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@given(index=st.integers(0, len(split_mma_pool()) - 1), M=SIDE, N=SIDE,
       K=st.one_of(st.sampled_from([1, 7, 8, 9, 31, 32, 33, 127, 129, 4097]), st.integers(1, 6000)),
       layout_a=st.sampled_from(["row", "col"]), layout_b=st.sampled_from(["row", "col"]),
       pad=st.sampled_from([0, 0, 1, 3]), offset=st.sampled_from([0, 0, 1]), beta=st.sampled_from([0.0, 0.5]))
def test_split_tf32_on_mma_sync_keeps_float32_accuracy(index, M, N, K, layout_a, layout_b, pad, offset, beta):
    torch = cuda_torch()
    torch.backends.cuda.matmul.allow_tf32 = False
    spec = split_mma_pool()[index].replace(layout_a=layout_a, layout_b=layout_b)
    k = kgen.build(spec)
    A = strided_operand(torch, M, K, layout_a, pad, offset, torch.float32)
    B = strided_operand(torch, K, N, layout_b, pad, offset, torch.float32)
    C0 = torch.randn(M, N, device="cuda")
    C = C0.clone() if beta else torch.full((M, N), float("nan"), device="cuda")
    k(A, B, out=C, alpha=-0.75, beta=beta)
    sgemm = torch.mm(A, B)
    torch.cuda.synchronize()
    ref = -0.75 * (A.double() @ B.double()) + beta * C0.double()
    label = f"{spec.to_json()} {M}x{N}x{K} A strides {A.stride()} B strides {B.stride()} beta {beta}"
    assert torch.isfinite(C).all(), f"{label}: unwritten (NaN) or non-finite outputs"
    typical = torch.linalg.norm(0.75 * (A.double().abs() @ B.double().abs())).item() / max(K, 1) ** 0.5
    scale = max(torch.linalg.norm(ref).item(), typical)
    rel = torch.linalg.norm(C.double() - ref).item() / scale
    assert rel <= spec.tolerance_for({"M": M, "N": N, "K": K}), f"{label}: relative error {rel:.2e}"
    peer_ref = A.double() @ B.double()
    peer = torch.linalg.norm(sgemm.double() - peer_ref).item() / max(torch.linalg.norm(peer_ref).item(),
                                                                       typical / 0.75)
    # float32 accuracy: within a small factor of SGEMM's (TF32 alone is ~1000x). With few outputs
    # SGEMM's own error is a matter of luck (one dot product may land within an ulp): there the
    # yardstick is float32's typical rounding of a K-term sum, sqrt(K) units of the output's scale.
    floor = 8 * max(K, 1) ** 0.5 * 2.0 ** -24 if M * N < 64 else 4e-7
    assert rel <= 16 * peer + floor, f"{label}: relative error {rel:.2e} against SGEMM's {peer:.2e}"
