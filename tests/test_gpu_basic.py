"""GPU checks of the foundation: build, launch, numpy / device interop, cache reuse."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kgen
from conftest import rel_error

pytestmark = pytest.mark.gpu

GPU_EXAMPLES = 200
SIZES = st.one_of(st.integers(1, 70), st.sampled_from([1, 2, 3, 17, 31, 33, 127, 129, 257, 263, 509]))


def _poisoned(shape, dtype):
    from pycuda import gpuarray

    out = gpuarray.empty(shape, dtype)
    out.fill(np.nan)
    return out


@settings(max_examples=GPU_EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@given(M=SIZES, N=SIZES, K=SIZES, dtype=st.sampled_from(["float32", "float64"]),
       layout_a=st.sampled_from(["row", "col"]), layout_b=st.sampled_from(["row", "col"]))
def test_naive_matmul_matches_float64(M, N, K, dtype, layout_a, layout_b):
    from pycuda import gpuarray

    rng = np.random.default_rng()
    spec = kgen.Matmul(dtype=dtype, layout_a=layout_a, layout_b=layout_b)
    k = kgen.build(spec)
    A = rng.standard_normal((M, K)).astype(dtype)
    B = rng.standard_normal((K, N)).astype(dtype)
    dA = gpuarray.to_gpu(A if layout_a == "row" else np.asfortranarray(A))
    dB = gpuarray.to_gpu(B if layout_b == "row" else np.asfortranarray(B))
    out = _poisoned((M, N), dtype)
    k(dA, dB, out=out)
    assert rel_error(out.get(), spec.reference(A, B)) <= spec.tolerance(K)


@settings(max_examples=GPU_EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@given(n=st.one_of(st.integers(1, 5000), st.sampled_from([1, 2, 3, 1021, 65537, 1 << 20, (1 << 20) + 7])),
       dtype=st.sampled_from(["float32", "float64"]), block=st.sampled_from([32, 64, 128, 256, 512, 1024]))
def test_shared_tree_dot_matches_float64(n, dtype, block):
    rng = np.random.default_rng()
    spec = kgen.Reduce(op="dot", dtype=dtype, block_size=block)
    k = kgen.build(spec)
    x = rng.standard_normal(n).astype(dtype)
    y = rng.standard_normal(n).astype(dtype)
    got = k(x, y)
    ref = float(np.dot(x.astype(np.float64), y.astype(np.float64)))
    scale = float(np.abs(x.astype(np.float64) * y).sum())
    eps = np.finfo(dtype).eps
    assert np.isfinite(got) and abs(got - ref) <= 4 * eps * scale * np.log2(n + 2) + 1e-30


def test_numpy_in_numpy_out_and_transposed_view():
    rng = np.random.default_rng()
    A = rng.standard_normal((300, 200)).astype(np.float32)
    B = rng.standard_normal((150, 200)).astype(np.float32)
    k = kgen.build(kgen.Matmul(layout_b="col"))
    C = k(A, B.T)
    assert isinstance(C, np.ndarray) and C.shape == (300, 150)
    assert rel_error(C, A.astype(np.float64) @ B.T.astype(np.float64)) < 1e-5


def test_torch_and_cupy_zero_copy():
    torch = pytest.importorskip("torch")
    A = torch.randn(129, 65, device="cuda")
    B = torch.randn(65, 33, device="cuda")
    k = kgen.build(kgen.Matmul())
    C = k(A, B)
    assert isinstance(C, torch.Tensor) and C.is_cuda
    assert rel_error(C.cpu().numpy(), (A.double() @ B.double()).cpu().numpy()) < 1e-5
    out = torch.full((129, 33), float("nan"), device="cuda")
    assert k(A, B, out=out) is out and torch.isfinite(out).all()
    # A row slice of a bigger matrix: the leading dimension carries it, no copy.
    big = torch.randn(129, 100, device="cuda")
    C2 = k(big[:, :65], B)
    assert rel_error(C2.cpu().numpy(), (big[:, :65].double() @ B.double()).cpu().numpy()) < 1e-5
    x = torch.randn(10007, device="cuda")
    s = kgen.build(kgen.Reduce(op="dot"))(x, x)
    assert isinstance(s, torch.Tensor) and abs(s.item() - float((x.double() * x.double()).sum())) < 1e-2
    cupy = pytest.importorskip("cupy")
    xc = cupy.random.standard_normal(4099, dtype=cupy.float32)
    sc = kgen.build(kgen.Reduce(op="sum"))(xc)
    assert abs(float(sc) - float(xc.astype(cupy.float64).sum())) < 1e-3


def test_beta_accumulates_into_out():
    rng = np.random.default_rng()
    A = rng.standard_normal((70, 50)).astype(np.float64)
    B = rng.standard_normal((50, 90)).astype(np.float64)
    C0 = rng.standard_normal((70, 90))
    k = kgen.build(kgen.Matmul(dtype="float64", shared_memory=True, tile=(32, 32, 8), thread_tile=(2, 2)))
    out = C0.copy()
    k(A, B, out=out, alpha=0.5, beta=-2.0)
    assert rel_error(out, 0.5 * (A @ B) - 2.0 * C0) < 1e-12
