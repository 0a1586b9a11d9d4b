"""kgen.matmul on this GPU with the shapes a model layer passes: a batch of token rows
(batch, tokens, K), one token as a vector (K,), a weight times a vector, out= of the batch's
shape. Each result against the float64 product on a NaN-poisoned output, and equal to the
bit to the same rows multiplied as one matrix (the same kernel runs)."""
from __future__ import annotations

import pytest

import kgen
from kgen.ops.skinny import tolerance

pytestmark = pytest.mark.gpu


def _torch():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA device")
    return torch


def _err(torch, got, ref) -> float:
    return float((got.double() - ref).norm() / ref.norm())


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
@pytest.mark.parametrize("lead,N,K,weights", [((2, 3), 4099, 1537, True), ((1, 1), 6144, 2048, True),
                                              ((4, 16), 3001, 2050, False), ((3, 1, 5), 1024, 4096, True)])
def test_batched_rows_fold_into_one_product(dtype, lead, N, K, weights):
    torch = _torch()
    tdt = getattr(torch, dtype)
    x = torch.randn(*lead, K, device="cuda").to(tdt)
    W = torch.randn(N, K, device="cuda").to(tdt)
    B = W.t() if weights else W.t().contiguous()
    ref = x.double() @ B.double()
    for _ in range(2):   # the second call takes the repeat path
        C = kgen.matmul(x, B)
        assert C.shape == (*lead, N) and C.dtype == tdt and C.device == x.device
        assert _err(torch, C, ref) <= tolerance(dtype, K), (lead, N, K, weights)
    flat = kgen.matmul(x.reshape(-1, K), B)
    assert torch.equal(C.reshape(-1, N), flat), "the folded call runs the 2-D product of the same rows"
    out = torch.full((*lead, N), float("nan"), device="cuda", dtype=tdt)
    assert kgen.matmul(x, B, out=out) is out
    assert _err(torch, out, ref) <= tolerance(dtype, K)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_vectors_give_torch_matmuls_shapes_and_match_float64(dtype):
    torch = _torch()
    tdt = getattr(torch, dtype)
    N, K = 5003, 3071
    W = torch.randn(N, K, device="cuda").to(tdt)
    v = torch.randn(K, device="cuda").to(tdt)
    y = kgen.matmul(v, W.t())                 # one token against a weight: a GEMV, shape (N,)
    assert y.shape == (N,)
    assert _err(torch, y, v.double() @ W.t().double()) <= tolerance(dtype, K)
    u = torch.randn(K, device="cuda").to(tdt)
    z = kgen.matmul(W, u)                     # a weight times a vector: one column, shape (N,)
    assert z.shape == (N,)
    assert _err(torch, z, W.double() @ u.double()) <= tolerance(dtype, K)
    s = kgen.matmul(u, v)
    assert s.shape == ()
    assert _err(torch, s, u.double() @ v.double()) <= tolerance(dtype, K)


def test_a_batch_that_cannot_fold_in_place_is_copied_and_an_out_that_cannot_is_refused():
    torch = _torch()
    from kgen.core.runtime import ArrayError

    K, N = 1100, 2500
    x = torch.randn(4, K, 3, device="cuda").transpose(1, 2)       # (4, 3, K), K strided
    B = torch.randn(N, K, device="cuda").t()
    C = kgen.matmul(x, B)
    assert _err(torch, C, x.double() @ B.double()) <= tolerance("float32", K)
    out = torch.full((4, N, 3), float("nan"), device="cuda").transpose(1, 2)
    with pytest.raises(ArrayError, match="without a copy"):
        kgen.matmul(x, B, out=out)
    assert torch.isnan(out).all()


def test_reduce_of_a_matrix_takes_every_element():
    torch = _torch()
    x = torch.randn(37, 1001, device="cuda")
    scale = float(x.double().abs().sum())
    assert abs(float(kgen.reduce(x)) - float(x.double().sum())) <= 1e-6 * scale
    assert float(kgen.reduce(x, op="max")) == float(x.max())
    assert float(kgen.reduce(x, op="min")) == float(x.min())
    strided = x[:, ::3]                     # copied to one vector: its strides do not fold
    assert abs(float(kgen.reduce(strided)) - float(strided.double().sum())) <= 1e-6 * scale
    batch = torch.randn(3, 5, 7, device="cuda", dtype=torch.float64)
    assert abs(float(kgen.reduce(batch)) - float(batch.sum())) <= 1e-12 * float(batch.abs().sum())
