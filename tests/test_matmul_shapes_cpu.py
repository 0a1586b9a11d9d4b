"""kgen.matmul takes the shapes torch.matmul takes with one B: A of shape (..., K), B of
shape (K, N) or (K,). The leading dimensions of A are folded into rows of one 2-D product
(a view where the strides allow), out= is written through a view, and the result comes back
in torch.matmul's shape; kgen.reduce(x) of any shape reduces every element. No GPU: the 2-D
product (and the 1-D reduction) is a float64 numpy stand-in that records what it was given."""
from __future__ import annotations

import numpy as np
import pytest

import kgen
from kgen.core.runtime import ArrayError
from kgen.tune import dispatch


class DeviceArray:
    """A device array stand-in (__cuda_array_interface__ and reshape, as CuPy offers), backed
    by host memory; reshape returns a view where numpy's does, else a copy."""

    def __init__(self, array: np.ndarray):
        self.array = array
        self.shape = array.shape
        self.dtype = array.dtype
        self.__cuda_array_interface__ = {
            "shape": array.shape, "typestr": array.dtype.str, "data": (array.ctypes.data, False),
            "strides": array.strides, "version": 3,
        }

    def reshape(self, shape):
        return DeviceArray(self.array.reshape(shape))


@pytest.fixture
def product_2d(monkeypatch):
    """Replaces kgen.matmul's 2-D product with numpy's; .calls lists (A, B, out, options)."""
    calls: list = []

    def fake(A, B, out, alpha, beta, tune, stream, allow_tf32, repeat=None):
        assert repeat is None, "numpy and device-array stand-ins are not torch calls: no repeat key"
        calls.append((A, B, out, dict(alpha=alpha, beta=beta, tune=tune, stream=stream, allow_tf32=allow_tf32)))
        a = A.array if isinstance(A, DeviceArray) else A
        b = B.array if isinstance(B, DeviceArray) else B
        assert a.ndim == 2 and b.ndim == 2, "the 2-D product got an operand that is not a matrix"
        c = alpha * (a.astype(np.float64) @ b.astype(np.float64))
        if out is None:
            return c.astype(a.dtype)
        o = out.array if isinstance(out, DeviceArray) else out
        assert o.shape == c.shape
        o[...] = c if beta == 0 else c + beta * o   # beta 0: out is not read (it may hold NaN)
        return out

    monkeypatch.setattr(dispatch, "_product_2d", fake)
    fake.calls = calls
    return fake


def _ref(A, B):
    return np.matmul(A.astype(np.float64), B.astype(np.float64))


def test_leading_dimensions_of_a_fold_into_rows_of_one_product_without_a_copy(product_2d, rng):
    A = rng.standard_normal((2, 3, 5)).astype(np.float32)
    B = rng.standard_normal((5, 4)).astype(np.float32)
    C = kgen.matmul(A, B)
    assert C.shape == (2, 3, 4)
    np.testing.assert_allclose(C, _ref(A, B), rtol=1e-6)
    (A2, B2, out2, options), = product_2d.calls
    assert A2.shape == (6, 5) and np.shares_memory(A2, A), "a contiguous batch is read in place"
    assert B2 is B and out2 is None
    assert options == dict(alpha=1.0, beta=0.0, tune=False, stream=None, allow_tf32=False)


def test_vectors_on_either_side_give_torch_matmuls_shapes(product_2d, rng):
    W = rng.standard_normal((7, 5)).astype(np.float32)
    x = rng.standard_normal(7).astype(np.float32)
    y = rng.standard_normal(5).astype(np.float32)
    row = kgen.matmul(x, W)                      # (K,) @ (K, N): one row, a GEMV
    assert row.shape == (5,)
    np.testing.assert_allclose(row, _ref(x, W), rtol=1e-6)
    col = kgen.matmul(W, y)                      # (M, K) @ (K,): one column
    assert col.shape == (7,)
    np.testing.assert_allclose(col, _ref(W, y), rtol=1e-6)
    s = kgen.matmul(y, y)
    assert np.shape(s) == ()
    np.testing.assert_allclose(s, float(y.astype(np.float64) @ y.astype(np.float64)), rtol=1e-6)
    assert [c[0].shape for c in product_2d.calls] == [(1, 7), (7, 5), (1, 5)]
    assert [c[1].shape for c in product_2d.calls] == [(7, 5), (5, 1), (5, 1)]
    batch = kgen.matmul(rng.standard_normal((4, 1, 7)).astype(np.float32), x)
    assert batch.shape == (4, 1)


def test_a_batch_whose_strides_cannot_fold_is_copied_and_still_right(product_2d, rng):
    A = rng.standard_normal((3, 5, 2)).astype(np.float32).transpose(0, 2, 1)   # (3, 2, 5), not foldable
    B = rng.standard_normal((5, 6)).astype(np.float32)
    C = kgen.matmul(A, B, alpha=0.5)
    np.testing.assert_allclose(C, 0.5 * _ref(A, B), rtol=1e-6)
    assert product_2d.calls[0][3]["alpha"] == 0.5


def test_out_is_written_through_a_view_with_alpha_and_beta(product_2d, rng):
    A = rng.standard_normal((2, 3, 5)).astype(np.float32)
    B = rng.standard_normal((5, 4)).astype(np.float32)
    out = rng.standard_normal((2, 3, 4)).astype(np.float32)
    before = out.astype(np.float64).copy()
    got = kgen.matmul(A, B, out=out, alpha=2.0, beta=-1.0)
    assert got is out
    np.testing.assert_allclose(out, 2.0 * _ref(A, B) - before, rtol=1e-5, atol=1e-5)
    assert np.shares_memory(product_2d.calls[0][2], out)


def test_an_out_that_only_a_copy_could_fold_is_refused_and_left_untouched(product_2d, rng):
    A = rng.standard_normal((2, 3, 5)).astype(np.float32)
    B = rng.standard_normal((5, 4)).astype(np.float32)
    out = np.full((2, 4, 3), np.nan, np.float32).transpose(0, 2, 1)          # (2, 3, 4), strided
    with pytest.raises(ArrayError, match=r"out of shape \(2, 3, 4\) cannot be seen as \(6, 4\) without a copy"):
        kgen.matmul(A, B, out=out)
    dev_out = DeviceArray(np.full((2, 4, 3), np.nan, np.float32).transpose(0, 2, 1))
    with pytest.raises(ArrayError, match="without a copy"):
        kgen.matmul(DeviceArray(A), DeviceArray(B), out=dev_out)
    assert np.isnan(out).all() and np.isnan(dev_out.array).all()
    assert product_2d.calls == [], "nothing is launched for a refused call"


def test_device_arrays_fold_through_their_own_reshape(product_2d, rng):
    A = rng.standard_normal((2, 2, 3)).astype(np.float32)
    B = rng.standard_normal((3, 5)).astype(np.float32)
    out = DeviceArray(np.full((2, 2, 5), np.nan, np.float32))
    assert kgen.matmul(DeviceArray(A), DeviceArray(B), out=out) is out
    np.testing.assert_allclose(out.array, _ref(A, B), rtol=1e-6)
    C = kgen.matmul(DeviceArray(A), DeviceArray(B))
    assert C.shape == (2, 2, 5)


def test_empty_batches_keep_their_shape(product_2d, rng):
    A = np.ones((0, 3, 5), np.float32)
    C = kgen.matmul(A, rng.standard_normal((5, 4)).astype(np.float32))
    assert C.shape == (0, 3, 4)
    assert product_2d.calls[0][0].shape == (0, 5)


def test_two_matrices_go_straight_to_the_2d_product(product_2d, rng):
    A = rng.standard_normal((3, 5)).astype(np.float32)
    B = rng.standard_normal((5, 4)).astype(np.float32)
    kgen.matmul(A, B)
    (A2, B2, _, _), = product_2d.calls
    assert A2 is A and B2 is B


def test_reduce_without_y_takes_every_element_of_any_shape(monkeypatch, rng):
    """kgen.reduce(x) of a matrix or a batch reduces all its elements (as torch.sum(x) and
    np.sum(x) do): the 1-D kernel runs on x seen as one vector, in place where the strides
    allow; kgen.dot keeps to vectors."""
    got = []

    class Vector:
        def __call__(self, x, *args, out=None, stream=None):
            got.append(x)
            assert x.ndim == 1
            return np.asarray(x.astype(np.float64).sum() if not args else (x * args[0]).sum())

    monkeypatch.setattr(dispatch, "_kernel", lambda *a, **k: Vector())
    x = rng.standard_normal((3, 4, 5)).astype(np.float32)
    np.testing.assert_allclose(kgen.reduce(x), x.astype(np.float64).sum(), rtol=1e-6)
    assert got[-1].shape == (60,) and np.shares_memory(got[-1], x)
    strided = rng.standard_normal((6, 8)).astype(np.float32)[:, ::2]
    np.testing.assert_allclose(kgen.reduce(strided, op="sum"), strided.astype(np.float64).sum(), rtol=1e-6)
    assert got[-1].shape == (24,)
    kgen.reduce(np.float32(3.0) * np.ones((), np.float32))
    assert got[-1].shape == (1,)
    with pytest.raises(ArrayError, match="dot takes two vectors"):
        kgen.dot(x, x)
