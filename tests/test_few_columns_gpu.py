"""GPU property tests of the few-column float64 tiles (TensorMatmul.few_columns_f64_spec: the
mirror image of the few-row tiles, a tile of 64 or 128 rows and the columns rounded up to 16):
fixed specs on random shapes (1, primes, past and below every tile), both storage orders of B,
an A of odd pitch or at an odd offset read in place, K split in a workspace or merged in a
cluster, alpha and beta, outputs NaN-poisoned before each launch, against float64."""
from __future__ import annotations

import os

import pytest
from conftest import cuda_torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kgen
from kgen.ops.tensorcore import TensorMatmul

pytestmark = pytest.mark.gpu

EXAMPLES = int(os.environ.get("KGEN_TC_EXAMPLES", "60"))


def few_columns_pool() -> list[TensorMatmul]:
    """16 columns four blocks an SM, K whole; 16 columns in 128-row tiles, K in 3 slices
    merged in a cluster; 16 columns in 64-row tiles, 4 slices in a cluster; 32 columns with K in
    4 slices (workspace) and in 5 merged in a cluster; 48 columns in 128-row tiles read in
    place, and in 64-row tiles with 6 slices in a cluster; 64 columns with 3 slices merged in a
    cluster. The cluster merges of 16-48 columns are those dispatch gives 9722x10x1775,
    608x16x1119, 3927x22x1355 and 774x47x1715. Then B read by the element entry beside A's
    16-byte copies (repack_a, A copied aligned first where it is not), as dispatch runs a
    row-major B of odd N: 16 columns in 128-row tiles with 3 slices in a cluster, 48 columns
    with 4 slices in a workspace and with 6 in a cluster."""
    T = TensorMatmul
    return [T.few_columns_f64_spec({"M": 1500, "N": 13, "K": 700}).replace(split_k=1),
            T.few_columns_f64_spec({"M": 9000, "N": 13, "K": 4000}).replace(split_k=3, split_merge="cluster"),
            T.few_columns_f64_spec({"M": 608, "N": 16, "K": 1119}).replace(split_k=4, split_merge="cluster"),
            T.few_columns_f64_spec({"M": 3000, "N": 20, "K": 4096}).replace(split_k=4),
            T.few_columns_f64_spec({"M": 3927, "N": 22, "K": 1355}).replace(split_k=5, split_merge="cluster"),
            T.few_columns_f64_spec({"M": 2000, "N": 45, "K": 3001}, rows_tile=128).replace(repack=False),
            T.few_columns_f64_spec({"M": 774, "N": 47, "K": 1715}).replace(split_k=6, split_merge="cluster"),
            T.few_columns_f64_spec({"M": 2000, "N": 60, "K": 3000}).replace(split_k=3, split_merge="cluster"),
            T.few_columns_f64_spec({"M": 9722, "N": 11, "K": 1776}).replace(
                split_k=3, split_merge="cluster", repack=False, repack_a=True),
            T.few_columns_f64_spec({"M": 3000, "N": 33, "K": 2000}).replace(split_k=4, repack=False, repack_a=True),
            T.few_columns_f64_spec({"M": 774, "N": 47, "K": 1716}).replace(
                split_k=6, split_merge="cluster", repack=False, repack_a=True)]


def _hopper() -> bool:
    """Whether the GPU runs sm_90 code, as test_tensorcore_gpu asks it."""
    from kgen.core import runtime

    return runtime.device_arch() == "sm_90"


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@given(index=st.integers(0, len(few_columns_pool()) - 1),
       M=st.one_of(st.sampled_from([1, 63, 64, 65, 127, 129, 1031]), st.integers(1, 3000)),
       N=st.one_of(st.sampled_from([1, 9, 15, 16, 17, 33, 47, 48, 49, 64, 65]), st.integers(1, 130)),
       K=st.one_of(st.sampled_from([1, 15, 16, 17, 1023, 4097]), st.integers(1, 5000)),
       layout_b=st.sampled_from(["row", "col"]), a_offset=st.integers(0, 1), a_pad=st.integers(0, 1),
       beta=st.sampled_from([0.0, 0.5]))
def test_few_column_float64_tiles_on_random_shapes(index, M, N, K, layout_b, a_offset, a_pad, beta):
    if not _hopper():
        pytest.skip("the m16n8k16 float64 MMA and the cluster merge need an sm_90 GPU")
    torch = cuda_torch()
    spec = few_columns_pool()[index].replace(layout_b=layout_b)
    k = kgen.build(spec)
    storage = torch.randn(M, K + a_pad + a_offset, device="cuda", dtype=torch.float64)
    A = storage[:, a_offset:a_offset + K]
    B = torch.randn(K, N, device="cuda", dtype=torch.float64) if layout_b == "row" else \
        torch.randn(N, K, device="cuda", dtype=torch.float64).t()
    C0 = torch.randn(M, N, device="cuda", dtype=torch.float64)
    C = C0.clone() if beta else torch.full((M, N), float("nan"), device="cuda", dtype=torch.float64)
    k(A, B, out=C, alpha=1.5, beta=beta)
    torch.cuda.synchronize()
    ref = 1.5 * (A @ B) + beta * C0
    label = f"{spec.to_json()} {M}x{N}x{K} A strides {A.stride()} offset {a_offset} beta {beta}"
    assert torch.isfinite(C).all(), f"{label}: unwritten (NaN) or non-finite outputs"
    scale = max(torch.linalg.norm(ref).item(), torch.linalg.norm(A.abs() @ B.abs()).item() / max(K, 1) ** 0.5)
    rel = torch.linalg.norm(C - ref).item() / scale
    assert rel <= 1e-13, f"{label}: relative error {rel:.2e}"


@settings(max_examples=max(4, EXAMPLES // 3), deadline=None, suppress_health_check=list(HealthCheck))
@given(M=st.integers(128, 12000), N=st.integers(9, 64), K=st.integers(256, 4000),
       weights=st.booleans(), a_offset=st.integers(0, 1))
def test_few_column_float64_products_as_dispatch_runs_them(M, N, K, weights, a_offset):
    """kgen.matmul on few-column float64 products as a user calls it: whatever tile, K split
    and merge dispatch chooses (the cluster merge of 16-48 columns among them), into an output
    poisoned with NaN, against float64."""
    if not _hopper():
        pytest.skip("the few-column tiles run on sm_90 GPUs")
    torch = cuda_torch()
    N = min(N, M - 1)
    A = torch.randn(M, K + a_offset, device="cuda", dtype=torch.float64)[:, a_offset:]
    B = torch.randn(N, K, device="cuda", dtype=torch.float64).t() if weights else \
        torch.randn(K, N, device="cuda", dtype=torch.float64)
    C = torch.full((M, N), float("nan"), device="cuda", dtype=torch.float64)
    kgen.matmul(A, B, out=C)
    torch.cuda.synchronize()
    ref = A @ B
    label = f"{M}x{N}x{K} weights={weights} A offset {a_offset}"
    assert torch.isfinite(C).all(), f"{label}: unwritten (NaN) or non-finite outputs"
    rel = torch.linalg.norm(C - ref).item() / torch.linalg.norm(ref).item()
    assert rel <= 1e-13, f"{label}: relative error {rel:.2e}"
