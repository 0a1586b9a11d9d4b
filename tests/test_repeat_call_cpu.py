"""CPU checks of kgen.matmul's repeat path on torch tensors: after a first call, a call with
the same signature (shapes, strides, dtypes, devices, 16-byte alignment class of each
pointer, allow_tf32; out=None, the current stream, beta 0) goes straight to the kernel's
resolved launches (kgen.core.kernel.RepeatCall) with its own pointers and a result of its
own; anything else goes the long way; a kernel that releases its workspaces sends the next
call the long way too. torch is replaced by a stand-in module, so this runs without torch
and without a GPU (tests/test_launch_gpu.py runs the real thing)."""
from __future__ import annotations

import sys
import types

import pytest

import kgen
from kgen.core import kernel as kernel_module
from kgen.core import runtime
from kgen.core.kernel import RepeatCall
from kgen.ops import tensorcore
from kgen.tune import dispatch


class _Dtype:
    def __init__(self, name, size):
        self.name, self.size = name, size

    def __str__(self):
        return f"torch.{self.name}"


BF16, F32 = _Dtype("bfloat16", 2), _Dtype("float32", 4)
allocations: list = []


class Tensor:
    """The accessors kgen's torch path reads, for 0-2 dimensions."""

    def __init__(self, shape, ptr, dtype=BF16, device=0, strides=None):
        self.shape, self._ptr, self.dtype, self._device = tuple(shape), ptr, dtype, device
        if strides is None:
            strides = (shape[1], 1) if len(shape) == 2 else (1,) * len(shape)
        self._strides = tuple(strides)

    def data_ptr(self):
        return self._ptr

    def stride(self, dim=None):
        return self._strides if dim is None else self._strides[dim]

    def dim(self):
        return len(self.shape)

    def get_device(self):
        return self._device

    def element_size(self):
        return self.dtype.size

    def new_empty(self, shape, dtype=None):
        allocations.append((tuple(shape), (dtype or self.dtype).name))
        return Tensor(shape, 0x100000 * len(allocations), dtype or self.dtype, self._device)

    def reshape(self, shape):
        if getattr(self, "scattered", False):
            # strides no view can fold (as torch's reshape then does): a copy elsewhere
            return self.new_empty(shape)
        return Tensor(shape, self._ptr, self.dtype, self._device)

    def as_strided(self, size, stride):
        return Tensor(size, self._ptr, self.dtype, self._device, stride)

    def unbind(self, dim=0):
        step = self._strides[0] * self.element_size()
        return tuple(Tensor(self.shape[1:], self._ptr + step * i, self.dtype, self._device)
                     for i in range(self.shape[0]))


Tensor.__module__ = "torch"


class FakeKernel:
    """A kernel whose long call and resolved call are both recorded."""

    def __init__(self):
        self.calls, self.launched, self.live = [], [], [True]
        self.results = runtime.TorchResults()

    def __call__(self, A, B, out=None, *, alpha=1.0, beta=0.0, stream=None):
        self.calls.append((A.shape, out is not None, stream, beta))
        return out if out is not None else A.new_empty((A.shape[0], B.shape[1]))

    def repeat_call(self, A, B):
        def go(pa, pb, pc, alpha, stream):
            self.launched.append((pa, pb, pc, alpha, stream))
        return RepeatCall(go, self.results, (A.shape[0], B.shape[1]), None, A.get_device(), self.live)


@pytest.fixture
def fake(monkeypatch):
    torch = types.ModuleType("torch")
    torch.Tensor = Tensor
    torch.bfloat16, torch.float32 = BF16, F32
    monkeypatch.setitem(sys.modules, "torch", torch)
    monkeypatch.setattr(runtime, "_torch", {})
    monkeypatch.setattr(runtime, "torch_stream", lambda device: 0x5000 + device)
    monkeypatch.setattr(kernel_module, "stream_capturing", lambda stream: False)
    monkeypatch.setattr(dispatch, "_fast", {})
    monkeypatch.setattr(dispatch, "_repeat", {})
    allocations.clear()
    k = FakeKernel()

    def first(A, B, allow_tf32=False):
        dispatch._fast[("matmul", A.shape, A.stride(), B.shape, B.stride(), A.dtype, allow_tf32)] = k
        return kgen.matmul(A, B, allow_tf32=allow_tf32)

    return k, first


def _pair(ptr_a=0x10000, ptr_b=0x800000, M=7, N=4608, K=2112, **kw):
    return Tensor((M, K), ptr_a, **kw), Tensor((K, N), ptr_b, strides=(1, K), **kw)


def test_a_repeat_call_takes_the_resolved_launches_with_its_own_pointers(fake):
    k, first = fake
    first(*_pair())
    assert len(k.calls) == 1 and len(dispatch._repeat) == 1
    outs = []
    for i in range(1, 6):
        A, B = _pair(0x10000 + 0x1000 * i, 0x800000 + 0x2000 * i)
        outs.append(kgen.matmul(A, B, alpha=0.5))
    assert len(k.calls) == 1, "no repeat call went the long way"
    assert [(pa, pb, alpha, stream) for pa, pb, _, alpha, stream in k.launched] == \
        [(0x10000 + 0x1000 * i, 0x800000 + 0x2000 * i, 0.5, 0x5000) for i in range(1, 6)]
    # Each call wrote the result it returned, and every result is its own.
    assert [pc for _, _, pc, _, _ in k.launched] == [o.data_ptr() for o in outs]
    assert len({o.data_ptr() for o in outs}) == 5 and all(o.shape == (7, 4608) for o in outs)
    # 7 x 4608 bfloat16 results (63 KiB): 65 a batch of 4 MiB, one allocation for these five.
    assert allocations[1:] == [((65 * 7 * 4608,), "bfloat16")]


def _logged(k, monkeypatch) -> list:
    """A log of the fake kernel's launches and of every allocation, in the order they happen."""
    log: list = []

    class Launches(list):
        def append(self, item):
            log.append(("launch", item[2]))
            super().append(item)

    k.launched = Launches()
    real = Tensor.new_empty

    def new_empty(self, shape, dtype=None):
        t = real(self, shape, dtype)
        log.append(("alloc", t.data_ptr()))
        return t

    monkeypatch.setattr(Tensor, "new_empty", new_empty)
    return log


def test_a_result_too_large_to_batch_is_made_after_the_launch_for_the_next_call(fake, monkeypatch):
    k, first = fake
    first(*_pair(M=160))
    log = _logged(k, monkeypatch)
    # 160 x 4608 bfloat16 (1440 KiB): fewer than 4 fit a batch of 4 MiB, so one result at a time.
    outs = [kgen.matmul(*_pair(0x10000 + 0x1000 * i, 0x800000, M=160)) for i in range(1, 5)]
    ptrs = [o.data_ptr() for o in outs]
    assert len(set(ptrs)) == 4 and all(o.shape == (160, 4608) for o in outs)
    # The first repeat call allocates its own result; from then on each launch is followed
    # by the allocation of the next call's result, and the next call launches into it.
    assert log == [("alloc", ptrs[0]), ("launch", ptrs[0]), ("alloc", ptrs[1]), ("launch", ptrs[1]),
                   ("alloc", ptrs[2]), ("launch", ptrs[2]), ("alloc", ptrs[3]), ("launch", ptrs[3]),
                   ("alloc", log[-1][1])]
    assert log[-1][1] not in ptrs


def test_a_result_past_the_spare_limit_is_allocated_by_its_own_call(fake, monkeypatch):
    k, first = fake
    first(*_pair(M=256, N=16384))
    log = _logged(k, monkeypatch)
    # 256 x 16384 bfloat16 is 8 MiB, past the 4 MiB a spare may hold: nothing is kept ahead.
    outs = [kgen.matmul(*_pair(0x10000 + 0x1000 * i, 0x800000, M=256, N=16384)) for i in range(1, 4)]
    assert log == [e for o in outs for e in (("alloc", o.data_ptr()), ("launch", o.data_ptr()))]


@pytest.mark.parametrize("change", ["shape", "strides", "dtype", "device", "alignment A", "alignment B", "tf32",
                                    "out", "stream", "beta"])
def test_anything_the_launch_depends_on_goes_the_long_way(fake, change):
    k, first = fake
    first(*_pair())
    kw: dict = {}
    A, B = _pair(0x20000, 0x900000)
    if change == "shape":
        A, B = _pair(M=8)
    elif change == "strides":
        B = Tensor((2112, 4608), 0x900000)   # row-major, not the transposed view
    elif change == "dtype":
        A, B = _pair(dtype=F32)
    elif change == "device":
        A, B = _pair(device=1)
    elif change == "alignment A":
        A, B = _pair(0x20004, 0x900000)
    elif change == "alignment B":
        A, B = _pair(0x20000, 0x900008)
    elif change == "tf32":
        kw["allow_tf32"] = True
    elif change == "out":
        kw["out"] = Tensor((7, 4608), 0x700000)
    elif change == "stream":
        kw["stream"] = 0x7777
    else:
        kw["out"], kw["beta"] = Tensor((7, 4608), 0x700000), 1.0
    key = ("matmul", A.shape, A.stride(), B.shape, B.stride(), A.dtype, kw.get("allow_tf32", False))
    dispatch._fast[key] = k
    kgen.matmul(A, B, **kw)
    assert len(k.calls) == 2 and k.launched == []


def test_a_released_kernel_sends_the_next_call_the_long_way_once(fake):
    k, first = fake
    first(*_pair())
    kgen.matmul(*_pair(0x30000, 0xa00000))
    assert len(k.calls) == 1 and len(k.launched) == 1
    k.live[0] = False          # what release() does to the calls resolved so far
    k.live = [True]
    kgen.matmul(*_pair(0x40000, 0xb00000))
    assert len(k.calls) == 2 and len(k.launched) == 1
    kgen.matmul(*_pair(0x50000, 0xc00000))   # resolved again after the long call
    assert len(k.calls) == 2 and len(k.launched) == 2


def _batch(ptr, scattered=False):
    """A (2, 3, 2112) batch of rows (contiguous unless scattered) against the weight of _pair."""
    A = Tensor((2, 3, 2112), ptr, strides=(3 * 2112, 2112, 1))
    A.scattered = scattered
    return A, Tensor((2112, 4608), 0x800000, strides=(1, 2112))


def test_a_folded_batch_repeats_through_the_resolved_launches_in_its_own_shape(fake):
    k, _ = fake
    A, B = _batch(0x10000)
    dispatch._fast[("matmul", (6, 2112), (2112, 1), B.shape, B.stride(), BF16, False)] = k
    C = kgen.matmul(A, B)
    assert C.shape == (2, 3, 4608) and k.calls == [((6, 2112), False, None, 0.0)]
    outs = [kgen.matmul(_batch(0x10000 + 0x1000 * i)[0], B) for i in range(1, 4)]
    assert len(k.calls) == 1, "a repeat of the batch's signature went the long way"
    assert [(pa, pb) for pa, pb, _, _, _ in k.launched] == [(0x10000 + 0x1000 * i, 0x800000) for i in range(1, 4)]
    assert [pc for _, _, pc, _, _ in k.launched] == [o.data_ptr() for o in outs]
    assert all(o.shape == (2, 3, 4608) for o in outs), "results come back in the batch's shape"
    # The 2-D signature has its own resolved launches, with results of the 2-D shape.
    assert kgen.matmul(Tensor((6, 2112), 0x20000), B).shape == (6, 4608) and len(k.calls) == 1


def test_a_batch_that_folds_only_by_a_copy_never_repeats_on_its_pointer(fake):
    k, _ = fake
    A, B = _batch(0x10000, scattered=True)
    dispatch._fast[("matmul", (6, 2112), (2112, 1), B.shape, B.stride(), BF16, False)] = k
    kgen.matmul(A, B)
    kgen.matmul(_batch(0x11000, scattered=True)[0], B)
    assert len(k.calls) == 2 and k.launched == [], "the launches read the copy, never A itself"


def test_forget_drops_the_resolved_calls(fake):
    k, first = fake
    first(*_pair())
    assert dispatch._repeat
    dispatch.forget()
    assert not dispatch._repeat


def test_tensor_kernel_resolves_its_plan_once_and_release_invalidates_it(fake, monkeypatch):
    spec = tensorcore.TensorMatmul.stream_spec({"M": 7, "N": 4608, "K": 2112}, "bfloat16").replace(layout_b="col")
    k = object.__new__(tensorcore.TensorMatmulKernel)
    k.spec = spec
    k._item, k._out_item = 2, 2
    k._plans, k._torch_calls, k._buffers, k._retired = {}, {}, {}, []
    k._torch_results, k._live, k._tail = runtime.TorchResults(), [True], None
    planned, ran = [], []

    def plan(*args):
        planned.append(args)
        return ("plan", len(planned))

    monkeypatch.setattr(k, "_plan", plan)
    monkeypatch.setattr(k, "_go", lambda *args: ran.append(args))
    A, B = _pair()
    call = k.repeat_call(A, B)
    assert planned == [(7, 4608, 2112, 2112, 2112, 4608, True, True, True)]
    out = call(A, 0x10000, 0x800000, 2.0)
    assert out.shape == (7, 4608) and out.dtype is BF16
    assert ran == [(("plan", 1), 0x10000, 0x800000, out.data_ptr(), 2.0, 0.0, 0x5000, 7, 4608, 2112)]
    # The long call k(A, B) of the same signature finds the same plan.
    k(A, B)
    assert len(planned) == 1 and ran[-1][0] == ("plan", 1)
    k.release()
    assert call(A, 0x10000, 0x800000, 1.0) is None, "a released kernel's resolved call refuses"
    again = k.repeat_call(A, B)
    assert len(planned) == 2 and again(A, 0x10000, 0x800000, 1.0) is not None
    assert ran[-1][0] == ("plan", 2)


@pytest.mark.parametrize("module, cls", [("matmul", "MatmulKernel"), ("tensorcore", "TensorMatmulKernel")])
def test_torch_calls_plan_once_per_signature_with_the_familys_key(module, cls):
    """The tiled and tensor-core kernels share one memo of torch calls (TorchPlanMemo): keyed by
    their own family's key, planned on a signature's first call, a hit after; another pointer
    class or shape plans again."""
    import importlib

    mod = importlib.import_module(f"kgen.ops.{module}")
    kernel_class = getattr(mod, cls)
    assert kernel_class.torch_key is mod._torch_key
    k = object.__new__(kernel_class)
    k._torch_calls = {}
    planned = []
    k._torch_plan = lambda A, B, out, key: planned.append(key) or k._torch_calls.setdefault(key, ("plan", key))
    A, B = Tensor((4, 64), 0x1000), Tensor((64, 32), 0x2000)
    first = k._torch_hit(A, B, 0x1000, 0x2000, None)
    assert k._torch_hit(A, B, 0x1000, 0x2000, None) is first and len(planned) == 1
    assert planned[0] == mod._torch_key(A, B, 0x1000, 0x2000, None)
    k._torch_hit(A, B, 0x1008, 0x2000, None)       # A off the 16-byte grid
    k._torch_hit(Tensor((5, 64), 0x1000), B, 0x1000, 0x2000, None)
    assert len(planned) == 3
