"""CPU checks of the reductions' torch call path: a repeat call with the same signature
(shapes, strides, dtypes, 16-byte alignment class, devices, stream) reuses one launch
plan and runs no argument checks; anything that changes the launch gets its own plan; a
call that fails its checks leaves nothing behind. torch is replaced by a stand-in module,
so this runs without torch and without a GPU (tests/test_launch_gpu.py runs the real
thing)."""
from __future__ import annotations

import sys
import types

import numpy as np
import pytest

import kgen
from kgen.core import runtime
from kgen.core.runtime import ArrayError
from kgen.ops import reduce as reduce_mod


class _Dtype:
    def __init__(self, name):
        self.name = name

    def __str__(self):
        return f"torch.{self.name}"


FLOAT32, FLOAT64 = _Dtype("float32"), _Dtype("float64")


class _Size(tuple):
    pass


class Tensor:
    """Just the accessors kgen's torch path reads."""

    def __init__(self, n, ptr, dtype=FLOAT32, device=0, stride=1):
        self.shape, self._ptr, self.dtype, self._device, self._stride = _Size((n,)), ptr, dtype, device, stride

    def data_ptr(self):
        return self._ptr

    def stride(self, dim=None):
        return self._stride if dim is not None else (self._stride,)

    def dim(self):
        return len(self.shape)

    def numel(self):
        return int(np.prod(self.shape))

    def get_device(self):
        return self._device

    @property
    def is_cuda(self):
        return self._device >= 0

    def new_empty(self, shape, dtype=None):
        allocations.append(tuple(shape))
        out = Tensor(0, 0x9000 + 0x10000 * len(allocations), dtype or self.dtype, self._device)
        out.shape = _Size(shape)
        return out

    def element_size(self):
        return 8 if self.dtype is FLOAT64 else 4

    def as_strided(self, size, stride):
        out = Tensor(0, self._ptr, self.dtype, self._device)
        out.shape, out._strides = _Size(size), tuple(stride)
        return out

    def unbind(self, dim=0):
        step = getattr(self, "_strides", (1,))[0] * self.element_size()
        views = []
        for i in range(self.shape[0]):
            v = Tensor(0, self._ptr + step * i, self.dtype, self._device)
            v.shape = _Size(self.shape[1:])
            views.append(v)
        return tuple(views)


allocations: list = []


Tensor.__module__ = "torch"


@pytest.fixture
def kernel(monkeypatch):
    fake = types.ModuleType("torch")
    fake.Tensor = Tensor
    monkeypatch.setitem(sys.modules, "torch", fake)
    monkeypatch.setattr(runtime, "_torch", {})
    monkeypatch.setattr(runtime, "torch_stream", lambda device: 0x5000 + device)
    monkeypatch.setattr(reduce_mod, "ensure_context", lambda: None)
    spec = kgen.Reduce(op="dot")
    k = object.__new__(reduce_mod.ReduceKernel)
    k.spec = spec
    k._np_dtype = np.dtype("float32")
    k._dtype_name = "float32"
    k._itemsize = 4
    k._arity = spec.arity
    k._empty_error = spec.empty_is_undefined
    k._memo, k._torch_plans, k._torch_results = {}, {}, runtime.TorchResults()
    k.planned, k.launched = [], []

    def steps(n, head, stream):
        k.planned.append((n, head, stream))
        return (("launch", n, head, stream),)

    def go(steps_, ptrs, out_ptr, handle):
        k.launched.append((steps_, tuple(ptrs), out_ptr, handle))

    k._steps, k._go = steps, go
    return k


def test_a_repeat_call_reuses_the_plan_and_skips_the_checks(kernel, monkeypatch):
    x, y = Tensor(1000, 0x10000), Tensor(1000, 0x20000)
    kernel(x, y)
    assert kernel.planned == [(1000, 0, 0x5000)]
    resolved = []
    monkeypatch.setattr(kernel, "_resolve", lambda *a: resolved.append(a))  # must not be reached
    for i in range(1, 4):
        out = kernel(Tensor(1000, 0x10000 + 4096 * i), Tensor(1000, 0x20000 + 4096 * i))
        assert out.shape == ()
    assert resolved == [] and len(kernel.planned) == 1 and len(kernel.launched) == 4
    # Every launch took the call's own pointers.
    assert [launch[1] for launch in kernel.launched] == [(0x10000 + 4096 * i, 0x20000 + 4096 * i) for i in range(4)]


def test_repeat_calls_return_distinct_results_from_batched_allocations(kernel):
    x, y = Tensor(1000, 0x10000), Tensor(1000, 0x20000)
    kernel(x, y)   # the first call: checked, its own result
    allocations.clear()
    kernel.launched.clear()
    results = [kernel(x, y) for _ in range(256 + 3)]
    # One allocation per 256 results (16 bytes apart), not one per call.
    assert allocations == [(256 * 4,), (256 * 4,)]
    ptrs = [r.data_ptr() for r in results]
    assert all(r.shape == () for r in results) and len(set(ptrs)) == len(ptrs)
    assert all(p % 16 == 0 for p in ptrs)
    # Each launch wrote the result that call returned.
    assert [launch[2] for launch in kernel.launched] == ptrs
    # A device of its own, or a stream of its own, gets its own batch; stream= gets new_empty.
    z = kernel(Tensor(1000, 0x10000, device=1), Tensor(1000, 0x20000, device=1))
    assert z.get_device() == 1 and len(allocations) == 3
    kernel(x, y, stream=0x7777)
    assert allocations[-1] == ()


def test_batched_results_follow_shape_size_and_stream():
    from kgen.core.runtime import TorchResults

    allocations.clear()
    pool = TorchResults(batch_bytes=1 << 16, most=256, least=4)
    like = Tensor(1, 0x10000)
    a = [pool.new(like, (3, 5), 0, 0x50) for _ in range(5)]
    # 15 floats padded to 64 bytes: 1024 of them fit 64 KiB, 256 at most are made.
    assert allocations == [(256 * 16,)]
    assert all(t.shape == (3, 5) for t in a) and len({t.data_ptr() for t in a}) == 5
    assert sorted(t.data_ptr() - a[0].data_ptr() for t in a) == sorted(-64 * i for i in range(5))
    pool.new(like, (3, 5), 0, 0x51)   # another stream: another batch
    assert len(allocations) == 2
    big = pool.new(like, (100, 100), 0, 0x50)   # 40 KB: fewer than 4 fit, so new_empty
    assert allocations[-1] == (100, 100) and big.shape == (100, 100)
    pool.new(like, (0, 7), 0, 0x50)   # empty: new_empty
    assert allocations[-1] == (0, 7)


def test_default_pool_batches_few_row_results_up_to_one_mebibyte():
    """The default TorchResults batches a 1 MiB result (4 to a 4 MiB batch: a 64 x 4096
    float32 product's, which a new_empty a call after the launch kept 5 µs longer on the
    host) and leaves a result past 1 MiB to one allocation, then a spare made by restock."""
    from kgen.core.runtime import TorchResults

    allocations.clear()
    pool = TorchResults()
    like = Tensor(1, 0x10000)
    firsts = [pool.new(like, (64, 4096), 0, 0x50) for _ in range(4)]
    assert allocations == [(4 * 64 * 4096,)]
    assert sorted(t.data_ptr() - firsts[-1].data_ptr() for t in firsts) == [0, 1 << 20, 2 << 20, 3 << 20]
    pool.new(like, (65, 4096), 0, 0x50)   # 1040 KiB: fewer than 4 fit, so new_empty
    assert allocations[-1] == (65, 4096) and len(allocations) == 2
    pool.restock(like, (65, 4096), 0, 0x50, None, lambda stream: False)
    assert allocations[-1] == (65, 4096) and len(allocations) == 3


def test_restock_makes_the_next_batch_or_spare_after_the_launch():
    from kgen.core.runtime import TorchResults

    def capturing(stream):
        return stream == 0x70

    allocations.clear()
    pool = TorchResults(batch_bytes=1 << 16, most=4, least=4, spare_bytes=1 << 16, spares=2)
    like = Tensor(1, 0x10000)
    first = [pool.new(like, (3, 5), 0, 0x50) for _ in range(4)]   # one batch of 4
    assert allocations == [(4 * 16,)]
    pool.restock(like, (3, 5), 0, 0x50, None, capturing)   # used up: the next batch is made now
    assert allocations == [(4 * 16,), (4 * 16,)]
    pool.restock(like, (3, 5), 0, 0x50, None, capturing)   # still full: nothing
    nxt = pool.new(like, (3, 5), 0, 0x50)
    assert len(allocations) == 2 and nxt.data_ptr() not in {t.data_ptr() for t in first}
    # 40 KB results (fewer than 4 fit a batch) within spare_bytes: one spare, made by restock.
    big = pool.new(like, (100, 100), 0, 0x50)
    assert allocations[-1] == (100, 100) and len(allocations) == 3
    pool.restock(like, (100, 100), 0, 0x50, None, capturing)
    pool.restock(like, (100, 100), 0, 0x50, None, capturing)
    assert len(allocations) == 4
    spare = pool.new(like, (100, 100), 0, 0x50)
    assert len(allocations) == 4 and spare.data_ptr() != big.data_ptr()
    assert pool.new(like, (100, 100), 0, 0x50).data_ptr() not in (big.data_ptr(), spare.data_ptr())
    # At most `spares` signatures keep a spare; past spare_bytes none is made.
    for stream in (0x60, 0x61, 0x62):
        pool.restock(like, (100, 100), 0, stream, None, capturing)
    assert len(pool._spares) <= 2
    before = len(allocations)
    pool.restock(like, (200, 200), 0, 0x50, None, capturing)   # 160 KB > 64 KiB
    pool.restock(like, (0, 7), 0, 0x50, None, capturing)       # empty
    assert len(allocations) == before
    # A stream capturing a graph gets nothing made ahead from the graph's pool.
    pool.new(like, (100, 100), 0, 0x70)
    pool.restock(like, (100, 100), 0, 0x70, None, capturing)
    assert len(allocations) == before + 1 and not any(key[3] == 0x70 for key in pool._spares)


@pytest.mark.parametrize("change", ["length", "alignment", "device", "stream", "out"])
def test_a_call_that_launches_differently_gets_its_own_plan(kernel, change):
    kernel(Tensor(1000, 0x10000), Tensor(1000, 0x20000))
    x, y, kw = Tensor(1000, 0x10000), Tensor(1000, 0x20000), {}
    if change == "length":
        x, y = Tensor(999, 0x10000), Tensor(999, 0x20000)
    elif change == "alignment":   # 4 bytes past a 16-byte boundary: a scalar head of 3 elements
        x, y = Tensor(1000, 0x10004), Tensor(1000, 0x20004)
    elif change == "device":
        x, y = Tensor(1000, 0x10000, device=1), Tensor(1000, 0x20000, device=1)
    elif change == "stream":
        kw["stream"] = 0x7777
    else:
        kw["out"] = Tensor(1, 0x30000)
    kernel(x, y, **kw)
    assert len(kernel.planned) == 2 and kernel.planned[0] != kernel.planned[1] or change == "out"
    assert len(kernel._torch_plans) == 2
    if change == "alignment":
        assert kernel.planned[1][1] == 3
    if change == "stream":
        assert kernel.launched[-1][3] == 0x7777


@pytest.mark.parametrize("bad, message", [
    (lambda: (Tensor(1000, 0x10000, device=-1), Tensor(1000, 0x20000, device=-1)), "CPU torch tensor"),
    (lambda: (Tensor(1000, 0x10000), Tensor(999, 0x20000)), "differ in length"),
    (lambda: (Tensor(1000, 0x10000, dtype=FLOAT64), Tensor(1000, 0x20000, dtype=FLOAT64)), "dtype float64"),
    (lambda: (Tensor(1000, 0x10000, stride=2), Tensor(1000, 0x20000, stride=2)), "contiguous"),
])
def test_a_call_that_fails_its_checks_is_never_remembered(kernel, bad, message):
    for _ in range(2):   # the second call is checked again, not waved through by a plan
        with pytest.raises(ArrayError, match=message):
            kernel(*bad())
    assert kernel._torch_plans == {} and kernel.launched == []


def test_a_wrong_out_is_refused_on_every_call(kernel):
    x, y = Tensor(1000, 0x10000), Tensor(1000, 0x20000)
    for _ in range(2):
        with pytest.raises(ArrayError, match="out must be"):
            kernel(x, y, out=Tensor(1, 0x30000, dtype=FLOAT64))
    assert kernel._torch_plans == {}
