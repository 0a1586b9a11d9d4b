"""Reliability on the GPU: bad calls are refused before anything is launched or written,
empty inputs give the empty or identity result, and sizes past 2^31 elements index
correctly (checked against float64 references computed on the device in chunks).

The sanitizer half of the memory-safety check is scripts/sanitize (compute-sanitizer
memcheck and racecheck over every reduction variant and a sample of matmul specs).
"""
from __future__ import annotations

import numpy as np
import pytest

import kgen
from kgen import ArrayError

pytestmark = pytest.mark.gpu


def _gpu_nan(shape, dtype):
    from pycuda import gpuarray

    dt = np.dtype(dtype)
    return gpuarray.to_gpu(np.full(shape, np.nan if dt.kind == "f" else np.iinfo(dt).min, dtype=dt))


def _strategies():
    from kgen.ops import reduce as red

    return list(getattr(red, "STRATEGIES", ("shared_tree",)))


# ---------------------------------------------------------------------------------
# Bad calls: a specific ArrayError, nothing launched, the caller's output untouched
# ---------------------------------------------------------------------------------

def test_matmul_mismatched_shapes_leave_out_untouched(rng):
    from pycuda import gpuarray

    k = kgen.build(kgen.Matmul())
    A = rng.standard_normal((33, 17)).astype(np.float32)
    B = rng.standard_normal((18, 9)).astype(np.float32)
    host_out = np.full((33, 9), np.nan, np.float32)
    with pytest.raises(ArrayError, match="inner dimensions"):
        k(A, B, out=host_out)
    assert np.isnan(host_out).all()
    dev_out = _gpu_nan((33, 9), np.float32)
    with pytest.raises(ArrayError, match="inner dimensions"):
        k(gpuarray.to_gpu(A), gpuarray.to_gpu(B), out=dev_out)
    assert np.isnan(dev_out.get()).all()
    with pytest.raises(ArrayError, match="out has shape"):
        k(gpuarray.to_gpu(A), gpuarray.to_gpu(B[:17]), out=_gpu_nan((9, 33), np.float32))
    # The kernel is unharmed by the refused calls.
    good = k(A, B[:17])
    assert np.allclose(good, A.astype(np.float64) @ B[:17], rtol=1e-4, atol=1e-4)


def test_wrong_and_mixed_dtypes(rng):
    from pycuda import gpuarray

    mm = kgen.build(kgen.Matmul())
    A = rng.standard_normal((8, 8))
    with pytest.raises(ArrayError, match="float64.*float32"):
        mm(A, A.astype(np.float32))
    with pytest.raises(ArrayError, match="B has dtype float64"):
        mm(gpuarray.to_gpu(A.astype(np.float32)), gpuarray.to_gpu(A))
    dot = kgen.build(kgen.Reduce(op="dot", dtype="float32"))
    x = rng.standard_normal(100).astype(np.float32)
    with pytest.raises(ArrayError, match="y has dtype float64"):
        dot(x, x.astype(np.float64))
    with pytest.raises(ArrayError, match="int64"):
        dot(gpuarray.to_gpu(np.arange(100)), gpuarray.to_gpu(x))


def test_non_contiguous_device_operands_are_refused(rng):
    torch = pytest.importorskip("torch")
    mm = kgen.build(kgen.Matmul())
    A = torch.randn(64, 64, device="cuda")
    B = torch.randn(32, 16, device="cuda")
    out = torch.full((64, 16), float("nan"), device="cuda")
    with pytest.raises(ArrayError, match="layout_a"):
        mm(A[:, ::2], B, out=out)  # column stride 2: no leading dimension expresses it
    with pytest.raises(ArrayError, match="layout_a"):
        mm(A.T[:, :32], B, out=out)  # a transposed view needs layout_a="col"
    assert torch.isnan(out).all()
    s = kgen.build(kgen.Reduce(op="sum"))
    with pytest.raises(ArrayError, match="contiguous"):
        s(torch.randn(1000, device="cuda")[::3])


def test_host_and_device_arrays_mixed(rng):
    from pycuda import gpuarray

    mm = kgen.build(kgen.Matmul())
    A = rng.standard_normal((16, 16)).astype(np.float32)
    host_out = np.full((16, 16), np.nan, np.float32)
    with pytest.raises(ArrayError, match="mixed"):
        mm(A, gpuarray.to_gpu(A), out=host_out)
    with pytest.raises(ArrayError, match="mixed"):
        mm(A, A, out=_gpu_nan((16, 16), np.float32))
    assert np.isnan(host_out).all()
    dot = kgen.build(kgen.Reduce(op="dot"))
    with pytest.raises(ArrayError, match="mixed"):
        dot(A[0], gpuarray.to_gpu(A[1]))
    torch = pytest.importorskip("torch")
    with pytest.raises(ArrayError):
        dot(torch.randn(16), torch.randn(16))  # CPU tensors are neither numpy nor device arrays


# ---------------------------------------------------------------------------------
# Empty inputs
# ---------------------------------------------------------------------------------

@pytest.mark.parametrize("M,N,K", [(0, 5, 7), (5, 0, 7), (0, 0, 0)])
def test_matmul_empty_output(M, N, K, rng):
    mm = kgen.build(kgen.Matmul())
    C = mm(np.ones((M, K), np.float32), np.ones((K, N), np.float32))
    assert C.shape == (M, N)


def test_matmul_with_k_zero_is_beta_times_c(rng):
    mm = kgen.build(kgen.Matmul.default_spec({"M": 33, "N": 65, "K": 1}, "float32"))
    A = np.ones((33, 0), np.float32)
    B = np.ones((0, 65), np.float32)
    C = mm(A, B)
    assert np.array_equal(C, np.zeros((33, 65), np.float32))
    C0 = rng.standard_normal((33, 65)).astype(np.float32)
    out = C0.copy()
    mm(A, B, out=out, alpha=2.0, beta=-0.5)
    assert np.allclose(out, -0.5 * C0, rtol=1e-6, atol=0)


@pytest.mark.parametrize("strategy", _strategies())
def test_empty_reductions(strategy):
    from pycuda import gpuarray

    for op, arity in (("sum", 1), ("dot", 2)):
        k = kgen.build(kgen.Reduce(op=op, dtype="float32", strategy=strategy))
        empty = np.zeros(0, np.float32)
        assert k(*[empty] * arity) == 0.0
        out = _gpu_nan((1,), np.float32)
        k(*[gpuarray.to_gpu(empty) for _ in range(arity)], out=out)
        assert out.get()[0] == 0.0  # written, not left as the NaN poison
    for op in ("min", "max"):
        k = kgen.build(kgen.Reduce(op=op, dtype="float32", strategy=strategy))
        with pytest.raises(ArrayError, match="empty"):
            k(np.zeros(0, np.float32))


# ---------------------------------------------------------------------------------
# Sizes past what 32-bit indices hold
# ---------------------------------------------------------------------------------

def _chunks(total, step=1 << 28):
    for start in range(0, total, step):
        yield start, min(total, start + step)


def _free_bytes():
    import torch

    free, _ = torch.cuda.mem_get_info()
    return free


@pytest.fixture
def torch_cuda():
    torch = pytest.importorskip("torch")
    yield torch
    torch.cuda.empty_cache()


def test_reduction_beyond_2_31_elements(torch_cuda):
    """n = 2^31 + 4099: the values past index 2^31 carry spikes that a 32-bit index
    (wrapping, or stopping short) would drop, so sum, min and max all see them."""
    torch = torch_cuda
    n = (1 << 31) + 4099
    if _free_bytes() < 3 * n * 4:
        pytest.skip("needs about 26 GB of free GPU memory")
    g = torch.Generator(device="cuda").manual_seed(1)
    x = torch.rand(n, device="cuda", generator=g)
    spike = float(1 << 24)  # about 1.6% of the sum of ~2^30
    x[(1 << 31) + 1] = spike
    x[n - 1] = spike
    x[(1 << 31) + 7] = -3.0   # the minimum, past 2^31
    x[(1 << 31) + 11] = 5.0   # the maximum (below the spikes) is checked on a copy
    ref_sum = sum(float(x[a:b].double().sum()) for a, b in _chunks(n))
    for strategy in _strategies():
        k = kgen.build(kgen.Reduce(op="sum", dtype="float32", strategy=strategy))
        got = float(k(x))
        assert abs(got - ref_sum) <= 1e-4 * abs(ref_sum), (strategy, got, ref_sum)
    # Wider or compensated accumulators, where the family offers them, are much tighter.
    from kgen.ops import reduce as red

    for acc in getattr(red, "ACCUMULATE", ("native",)):
        if acc == "native":
            continue
        got = float(kgen.build(kgen.Reduce(op="sum", dtype="float32", accumulate=acc))(x))
        assert abs(got - ref_sum) <= 1e-6 * abs(ref_sum), (acc, got, ref_sum)
    assert float(kgen.build(kgen.Reduce(op="min", dtype="float32"))(x)) == -3.0
    x[(1 << 31) + 1] = 0.5
    x[n - 1] = 7.0  # the very last element is the maximum
    assert float(kgen.build(kgen.Reduce(op="max", dtype="float32"))(x)) == 7.0
    del x
    torch.cuda.empty_cache()
    # dot of two such vectors: the product of the last pair dominates if it is read.
    x = torch.rand(n, device="cuda", generator=g)
    y = torch.rand(n, device="cuda", generator=g)
    x[n - 1], y[n - 1] = 4096.0, 4096.0
    ref = sum(float((x[a:b].double() * y[a:b].double()).sum()) for a, b in _chunks(n))
    got = float(kgen.build(kgen.Reduce(op="dot", dtype="float32"))(x, y))
    assert abs(got - ref) <= 1e-4 * abs(ref), (got, ref)
    del x, y
    torch.cuda.empty_cache()
    # int32: exact, so one element dropped or read twice past 2^31 changes the answer.
    xi = torch.randint(-1, 2, (n,), device="cuda", dtype=torch.int32, generator=g)
    xi[n - 1] = 1_000_000
    xi[(1 << 31) + 3] = -1_000_003
    ref_i = sum(int(xi[a:b].to(torch.int64).sum()) for a, b in _chunks(n))
    assert int(kgen.build(kgen.Reduce(op="sum", dtype="int32"))(xi)) == ref_i
    assert int(kgen.build(kgen.Reduce(op="max", dtype="int32"))(xi)) == 1_000_000
    assert int(kgen.build(kgen.Reduce(op="min", dtype="int32"))(xi)) == -1_000_003


def _matmul_specs_for(problem):
    """The default spec and one without shared memory (the other code path)."""
    specs = [kgen.Matmul.default_spec(problem, "float32")]
    for s in kgen.Matmul.search_space(problem, "float32"):
        if not s.shared_memory and s.tile[0] >= 32:
            specs.append(s)
            break
    return specs


def test_matmul_with_m_times_k_beyond_2_31(torch_cuda):
    """A is M x K with M*K > 2^31: row offsets m*lda overflow 32 bits for the last rows."""
    torch = torch_cuda
    K, N = 4099, 37
    M = (1 << 31) // K + 67
    assert M * K > 1 << 31
    if _free_bytes() < (M * K + M * N) * 4 * 1.3:
        pytest.skip("needs about 12 GB of free GPU memory")
    g = torch.Generator(device="cuda").manual_seed(2)
    A = torch.randn(M, K, device="cuda", generator=g)
    B = torch.randn(K, N, device="cuda", generator=g)
    Bd = B.double()
    for spec in _matmul_specs_for({"M": M, "N": N, "K": K}):
        k = kgen.build(spec)
        C = torch.full((M, N), float("nan"), device="cuda")
        k(A, B, out=C)
        num = den = 0.0
        for a, b in _chunks(M, 1 << 16):
            ref = A[a:b].double() @ Bd
            num += float(((C[a:b].double() - ref) ** 2).sum())
            den += float((ref ** 2).sum())
        err = (num / den) ** 0.5
        assert err <= spec.tolerance_for({"M": M, "N": N, "K": K}), (spec.to_json(), err)
        # The rows whose offsets pass 2^31 specifically (a 32-bit index wraps there).
        last = A[-64:].double() @ Bd
        assert float((C[-64:].double() - last).norm() / last.norm()) <= spec.tolerance_for({"K": K, "M": M, "N": N})
        del C


def test_grid_row_limit_is_an_error_or_correct():
    """M so large that M / tile[0] blocks pass the 65535 limit of gridDim.y: kgen must
    either compute it right or refuse with an ArrayError, never launch a partial grid."""
    spec = kgen.Matmul()  # tile[0] = 16
    M = 65535 * spec.tile[0] + 5
    k = kgen.build(spec)
    A = np.ones((M, 3), np.float32)
    B = np.ones((3, 2), np.float32)
    out = np.full((M, 2), np.nan, np.float32)
    try:
        k(A, B, out=out)
    except ArrayError as exc:
        assert "65535" in str(exc)
        assert np.isnan(out).all()
    else:
        assert np.array_equal(out, np.full((M, 2), 3.0, np.float32))


def test_tuned_entry_points_on_bad_and_empty_input(rng):
    from pycuda import gpuarray

    A = rng.standard_normal((16, 8)).astype(np.float32)
    B = rng.standard_normal((8, 4)).astype(np.float32)
    with pytest.raises(ArrayError, match="mixed"):
        kgen.matmul(A, gpuarray.to_gpu(B))
    with pytest.raises(ArrayError, match="inner dimensions"):
        kgen.matmul(A, B.T)
    assert kgen.matmul(np.ones((0, 8), np.float32), B).shape == (0, 4)
    assert kgen.dot(np.zeros(0, np.float32), np.zeros(0, np.float32)) == 0.0
    assert kgen.reduce(np.zeros(0, np.float64), op="sum") == 0.0
    with pytest.raises(ArrayError, match="empty"):
        kgen.reduce(np.zeros(0, np.float32), op="max")
    # ...and the entry points still give right answers afterwards.
    assert np.allclose(kgen.matmul(A, B), A.astype(np.float64) @ B, rtol=1e-4, atol=1e-5)
