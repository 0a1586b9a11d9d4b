"""Every user mistake gets a specific error naming what is wrong and what is allowed, in
Python and in the CLI, and nothing is launched, written or lost. CPU only.

Array checks run in the real kernel classes against a fake device (fake_gpu below):
pycuda's driver is replaced by a recorder, device arrays are numpy buffers dressed as
pycuda GPUArrays or __cuda_array_interface__ objects, so a refused call can be shown
to launch nothing and to leave the caller's output as it was.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import types
from pathlib import Path

import numpy as np
import pytest

import kgen
from kgen import ArrayError, NoGPUError, SpecError, ToolchainError
from kgen.core import compiler, runtime
from kgen.cli.main import main as cli_main

ROOT = Path(__file__).resolve().parents[1]


# ---------------------------------------------------------------------------------
# Specs: wrong types, absurd sizes, impossible tiles, unknown names
# ---------------------------------------------------------------------------------

WRONG_TYPES = [
    (kgen.Matmul, {"tile": "64"}, "tile"),
    (kgen.Matmul, {"tile": (64, 64)}, "tile"),
    (kgen.Matmul, {"tile": (64.0, 64, 16)}, "tile"),
    (kgen.Matmul, {"shared_memory": "yes"}, "shared_memory"),
    (kgen.Matmul, {"shared_memory": 1}, "shared_memory"),
    (kgen.Matmul, {"dtype": 32}, "dtype"),
    (kgen.Reduce, {"block_size": 256.0}, "block_size"),
    (kgen.Reduce, {"block_size": "256"}, "block_size"),
    (kgen.Reduce, {"block_size": True}, "block_size"),
    (kgen.Reduce, {"op": None}, "op"),
    (kgen.Reduce, {"items_per_thread": [4]}, "items_per_thread"),
]


@pytest.mark.parametrize("cls,kwargs,field", WRONG_TYPES)
def test_field_of_the_wrong_type(cls, kwargs, field):
    with pytest.raises(SpecError) as info:
        cls(**kwargs)
    assert str(info.value).startswith(f"{field}=")
    assert "not allowed" in str(info.value)


ABSURD = [
    (kgen.Matmul, {"tile": (0, 16, 16)}, "tile"),
    (kgen.Matmul, {"tile": (-16, 16, 16)}, "tile"),
    (kgen.Matmul, {"tile": (1 << 40, 16, 16)}, "tile"),
    (kgen.Matmul, {"thread_tile": (0, 1)}, "thread_tile"),
    (kgen.Matmul, {"smem_pad": -1}, "smem_pad"),
    (kgen.Reduce, {"block_size": -256}, "block_size"),
    (kgen.Reduce, {"block_size": 0}, "block_size"),
    (kgen.Reduce, {"block_size": 100}, "block_size"),  # not a power of two
    (kgen.Reduce, {"items_per_thread": 0}, "items_per_thread"),
    (kgen.Reduce, {"items_per_thread": 10**9}, "items_per_thread"),
    (kgen.Reduce, {"grid_size": -1}, "grid_size"),
    (kgen.Reduce, {"grid_size": 10**12}, "grid_size"),
]


@pytest.mark.parametrize("cls,kwargs,field", ABSURD)
def test_negative_or_absurd_sizes(cls, kwargs, field):
    with pytest.raises(SpecError, match=field.split("[")[0]):
        cls(**kwargs)


@pytest.mark.parametrize("problem,key", [
    ({"M": -1, "N": 8, "K": 8}, "M"), ({"M": 8, "N": 0, "K": 8}, "N"), ({"M": 8, "N": 8}, "K"),
    ({"M": 8, "N": 8, "K": "8"}, "K"), ({"M": 8.5, "N": 8, "K": 8}, "M"), ({"M": True, "N": 8, "K": 8}, "M"),
])
def test_matmul_problem_sizes(problem, key):
    with pytest.raises(ValueError, match=key):
        kgen.Matmul.normalize_problem(problem)


@pytest.mark.parametrize("problem", [{"n": -1, "op": "sum"}, {"n": "10", "op": "sum"}, {"op": "sum"},
                                     {"n": 10, "op": "mean"}, [10]])
def test_reduce_problem_sizes(problem):
    with pytest.raises(ValueError):
        kgen.Reduce.normalize_problem(problem)


def test_tile_that_does_not_divide():
    with pytest.raises(SpecError, match=r"thread_tile.*divide"):
        kgen.Matmul(tile=(64, 64, 16), thread_tile=(3, 4))
    with pytest.raises(SpecError, match=r"thread_tile.*divide"):
        kgen.Matmul(tile=(64, 60, 16), thread_tile=(4, 8))


def test_more_than_1024_threads():
    with pytest.raises(SpecError, match="1024"):
        kgen.Matmul(tile=(128, 128, 8), thread_tile=(1, 1))
    with pytest.raises(SpecError, match="block_size.*1024"):
        kgen.Reduce(block_size=2048)


def test_shared_memory_over_the_device_limit():
    # 256x256 tiles with BK=64 in float64 need 256 KiB of shared memory: more than any GPU has.
    with pytest.raises(SpecError, match="shared memory"):
        kgen.Matmul(dtype="float64", tile=(256, 256, 64), thread_tile=(16, 16), shared_memory=True)
    # A spec that fits the H100 but not a smaller device is pruned for that device, with the reason.
    spec = kgen.Matmul.default_spec({"M": 4096, "N": 4096, "K": 4096}, "float32")
    if spec.shared_bytes:
        small = {"max_threads_per_block": 1024, "max_shared_per_block_optin": spec.shared_bytes - 1}
        reason = spec.prune_reason({"M": 4096, "N": 4096, "K": 4096}, small)
        assert reason and "shared" in reason


def test_threads_over_the_device_limit_are_pruned():
    spec = kgen.Reduce(block_size=1024)
    assert "1024" in spec.prune_reason({"n": 100, "op": "dot"}, {"max_threads_per_block": 512})


def test_unknown_strategy_and_dtype():
    from kgen.ops import reduce as red

    with pytest.raises(SpecError) as info:
        kgen.Reduce(strategy="quantum")
    for name in red.STRATEGIES:  # the message lists every strategy there is
        assert name in str(info.value)
    with pytest.raises(SpecError, match=r"dtype='float16'.*float32"):
        kgen.Reduce(dtype="float16")
    with pytest.raises(SpecError, match=r"dtype='bfloat16'.*float32"):
        kgen.Matmul(dtype="bfloat16")
    with pytest.raises(SpecError, match=r"op='mean'"):
        kgen.Reduce(op="mean")
    with pytest.raises(SpecError, match=r"mapping='3d'"):
        kgen.Matmul(mapping="3d")


def test_int32_dot_is_refused_with_the_dtypes_it_takes():
    with pytest.raises(SpecError, match=r"dtype='int32'.*float32"):
        kgen.Reduce(op="dot", dtype="int32")


# -- JSON specs ----------------------------------------------------------------------

BAD_JSON = [
    ('{"kernel": "matmul", "tile": [64, 64, 16]', "not valid JSON"),       # truncated
    ('{"kernel": "matmul", "tile": [64, 64, 16],}', "not valid JSON"),     # trailing comma
    ("", "not valid JSON"),
    ("[1, 2]", "JSON object"),
    ('"matmul"', "JSON object"),
    ('{"tile": [64, 64, 16]}', "no 'kernel' field"),
    ('{"kernel": "conv2d"}', "not a known kernel family"),
    ('{"kernel": ["matmul"]}', "not a known kernel family"),
    ('{"kernel": null}', "not a known kernel family"),
    ('{"kernel": "matmul", "tiles": [64, 64, 16]}', "unknown field"),
    ('{"kernel": "matmul", "tile": "big"}', "tile="),
    ('{"kernel": "matmul", "tile": [64, 64, NaN]}', "tile="),
    ('{"kernel": "reduce", "block_size": 1e3}', "block_size="),
    ('{"kernel": "reduce", "strategy": "magic"}', "strategy="),
]


@pytest.mark.parametrize("text,message", BAD_JSON)
def test_malformed_or_incomplete_json(text, message):
    with pytest.raises(SpecError, match=message):
        kgen.spec_from_json(text)


def test_unreadable_json_is_a_spec_error():
    """Valid-looking JSON the parser cannot take (nesting too deep, an integer of
    thousands of digits) is still a SpecError, not a stray RecursionError."""
    with pytest.raises(SpecError, match="not valid JSON"):
        kgen.spec_from_json("[" * 100000 + "]" * 100000)
    with pytest.raises(SpecError, match="not valid JSON"):
        kgen.spec_from_json('{"kernel": "reduce", "block_size": ' + "9" * 5000 + "}")
    with pytest.raises(SpecError, match="unknown field"):
        kgen.spec_from_dict({"kernel": "matmul", 1: 2, "x": 3})


def test_unknown_family_lists_the_known_ones():
    with pytest.raises(SpecError) as info:
        kgen.spec_from_json('{"kernel": "conv2d"}')
    for name in kgen.families():
        assert name in str(info.value)


# -- map expressions ------------------------------------------------------------------

def _custom_field():
    """The Reduce field holding a user map expression, if the family has one."""
    import dataclasses

    names = {f.name for f in dataclasses.fields(kgen.Reduce)}
    return next((n for n in ("map_expr", "map", "expr") if n in names), None)


@pytest.mark.parametrize("expr", ["x +* y", "x * (y", "import os", "x; }", "__syncthreads()", "unknown_fn(x)"])
def test_map_expression_that_does_not_compile_names_it(expr):
    field = _custom_field()
    if field is None:
        pytest.skip("this Reduce has no map-expression field")
    kwargs = {field: expr, "op": "custom", "dtype": "float32"}
    if field == "map_expr":
        kwargs.update(combine="a + b", identity="0")
    with pytest.raises((SpecError, kgen.CompileError)) as info:
        kgen.compile(kgen.Reduce(**kwargs), "sm_90")
    assert expr in str(info.value)


def test_nvcc_failure_of_a_custom_reduction_names_the_expressions(monkeypatch):
    """An expression that passes the family's checks but still trips nvcc: the error
    (from kgen.compile and kgen.build alike) says which expressions were in it."""
    if _custom_field() != "map_expr":
        pytest.skip("this Reduce has no map_expr field")
    from kgen.core import kernel as kernel_mod

    spec = kgen.Reduce(op="custom", dtype="float32", map_expr="x * x", combine="a + b", identity="0")

    def refuse(source, arch, options=(), cache=None):
        raise kgen.CompileError("nvcc failed with exit code 2", ["nvcc"], "kernel.cu(1): error", source)

    monkeypatch.setattr(kernel_mod, "compile_cuda", refuse)
    with pytest.raises(kgen.CompileError, match=r"x \* x"):
        kgen.compile(spec, "sm_90")


# ---------------------------------------------------------------------------------
# Arrays, against a fake device
# ---------------------------------------------------------------------------------

class GPUArray:
    """Looks like a pycuda GPUArray to kgen.core.runtime (type name and gpudata), backed by
    host memory so tests can see whether anything was written."""

    def __init__(self, array: np.ndarray):
        self.array = array
        self.shape = array.shape
        self.strides = array.strides
        self.dtype = array.dtype
        self.size = array.size
        self.gpudata = array.ctypes.data if array.size else None

    def get(self):
        return self.array.copy()


class CAIArray:
    """An object with __cuda_array_interface__ (what torch, CuPy and Numba offer)."""

    def __init__(self, array: np.ndarray, strides=True):
        self.array = array
        self.__cuda_array_interface__ = {
            "shape": array.shape, "typestr": array.dtype.str, "data": (array.ctypes.data, False),
            "strides": array.strides if strides else None, "version": 3,
        }


class _Recorder:
    """Any attribute is a callable that records its call (pycuda Function stand-in)."""

    def __init__(self, log, name="fn"):
        self._log, self._name = log, name
        self.arg_format = ""

    def prepare(self, *args, **kw):
        return self

    def get_attribute(self, *a):
        return 0

    def set_attribute(self, *a):
        return None

    def __call__(self, *args, **kw):
        self._log.append((self._name, args, kw))

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return lambda *args, **kw: self._log.append((f"{self._name}.{name}", args, kw))


class FakeDriver(types.SimpleNamespace):
    class Error(Exception):
        pass

    def __init__(self, launches):
        super().__init__()
        self.launches = launches
        self.function_attribute = types.SimpleNamespace(MAX_DYNAMIC_SHARED_SIZE_BYTES=8)

    def module_from_buffer(self, cubin):
        launches = self.launches
        return types.SimpleNamespace(get_function=lambda name: _Recorder(launches, name))

    def mem_alloc(self, nbytes):
        return 1 << 40  # never dereferenced: nothing runs

    def memset_d32(self, *a):
        pass

    def memcpy_htod(self, *a):
        pass


@pytest.fixture
def fake_gpu(monkeypatch):
    """Returns make(spec) -> a real kernel object of spec's family on a fake device,
    and .launches, the list of launches made through it."""
    launches: list = []
    drv = FakeDriver(launches)
    monkeypatch.setattr(runtime, "driver", lambda: drv)
    monkeypatch.setattr(runtime, "device_limits", lambda: {
        "max_threads_per_block": 1024, "max_shared_per_block_optin": 232448, "multiprocessors": 132,
        "l2_bytes": 50 << 20})
    monkeypatch.setattr(runtime, "device_arch", lambda: "sm_90")
    # Kernels may pack launch arguments with pycuda's struct packer: a stand-in for it.
    packer = types.ModuleType("pycuda._pvt_struct")
    packer.pack = lambda fmt, *args: repr(args).encode()
    monkeypatch.setitem(sys.modules, "pycuda._pvt_struct", packer)
    # The thin launch path (kgen.core.launch): function handles and launches recorded.
    from kgen.core import kernel as kernel_mod
    from kgen.core import launch as launch_mod

    monkeypatch.setattr(kernel_mod.Kernel, "handle", lambda self, name, dynamic_shared=0, carveout=None: 1)
    monkeypatch.setattr(launch_mod, "_libcuda", lambda: types.SimpleNamespace(
        # workspace tickets: a memset that succeeds
        cuLaunchKernel=None, cuLaunchKernelEx=None, cuMemsetD32Async=lambda *args: 0))
    monkeypatch.setattr(launch_mod.Launch, "__call__",
                        lambda self, stream, *args: launches.append((self.name, self.grid, self.block, args)))

    def to_device(a, name):
        a = np.ascontiguousarray(a) if a.size and not (a.flags.c_contiguous or a.flags.f_contiguous) else a
        v = runtime.view(GPUArray(a.copy(order="K")), name)
        v.on_host = True
        return v

    def new_host_output(shape, dtype):
        v = runtime.view(GPUArray(np.full(shape, np.nan, dtype)), "out")
        v.on_host = True
        return v

    monkeypatch.setattr(runtime, "to_device", to_device)
    monkeypatch.setattr(runtime, "new_host_output", new_host_output)
    monkeypatch.setattr(runtime, "empty_like_library",
                        lambda template, shape, dtype: GPUArray(np.full(shape, np.nan, dtype)))
    compiled = compiler.Compiled(cubin=b"\x7fELF", arch="sm_90", key="fake", resources={}, log="", origin="memory")

    def make(spec):
        try:
            return spec.kernel_class(spec, "// fake", compiled)
        except (AttributeError, TypeError, KeyError, NoGPUError) as exc:  # the family grew a new driver need
            pytest.skip(f"{type(spec).__name__}'s kernel needs more of pycuda than the fake offers: {exc!r}")

    make.launches = launches
    return make


def _nan(shape, dtype=np.float32):
    return np.full(shape, np.nan, dtype)


def test_matmul_shapes_that_do_not_match(fake_gpu, rng):
    k = fake_gpu(kgen.Matmul())
    A = rng.standard_normal((5, 7)).astype(np.float32)
    B = rng.standard_normal((6, 3)).astype(np.float32)
    out = _nan((5, 3))
    with pytest.raises(ArrayError, match=r"5x7.*6x3.*inner dimensions"):
        k(A, B, out=out)
    dev_out = GPUArray(_nan((5, 3)))
    with pytest.raises(ArrayError, match="inner dimensions"):
        k(GPUArray(A), GPUArray(B), out=dev_out)
    with pytest.raises(ArrayError, match=r"out has shape \(3, 5\)"):
        k(GPUArray(A), GPUArray(B[:, :].repeat(2, 0)[:7]), out=GPUArray(_nan((3, 5))))
    with pytest.raises(ArrayError, match="2-D"):
        k(A[0], B)
    with pytest.raises(ArrayError, match="2-D"):
        k(GPUArray(A[None]), GPUArray(B))
    assert fake_gpu.launches == []
    assert np.isnan(out).all() and np.isnan(dev_out.array).all()


def test_reduce_lengths_that_do_not_match(fake_gpu, rng):
    k = fake_gpu(kgen.Reduce(op="dot"))
    x = rng.standard_normal(10).astype(np.float32)
    with pytest.raises(ArrayError, match="differ in length"):
        k(x, x[:9])
    with pytest.raises(ArrayError, match="differ in length"):
        k(GPUArray(x), CAIArray(x[:9]), out=GPUArray(_nan((1,))))
    with pytest.raises(ArrayError, match="1-D"):
        k(x.reshape(2, 5), x.reshape(2, 5))
    with pytest.raises(ArrayError, match="takes 2 input"):
        k(x)
    with pytest.raises(ArrayError, match="out must be"):
        k(GPUArray(x), GPUArray(x), out=GPUArray(_nan((2,))))
    assert fake_gpu.launches == []


def test_wrong_and_mixed_dtypes(fake_gpu, rng):
    mm = fake_gpu(kgen.Matmul(dtype="float32"))
    A32 = rng.standard_normal((4, 4)).astype(np.float32)
    with pytest.raises(ArrayError, match=r"A has dtype float64 but this kernel was built for float32"):
        mm(A32.astype(np.float64), A32)
    with pytest.raises(ArrayError, match=r"B has dtype float64.*dtype='float64'"):
        mm(GPUArray(A32), GPUArray(A32.astype(np.float64)))
    with pytest.raises(ArrayError, match=r"out has dtype float64"):
        mm(GPUArray(A32), GPUArray(A32), out=GPUArray(_nan((4, 4), np.float64)))
    with pytest.raises(ArrayError, match="int32"):
        mm(A32.astype(np.int32), A32)
    red = fake_gpu(kgen.Reduce(op="sum", dtype="float64"))
    with pytest.raises(ArrayError, match=r"x has dtype float32 .*float64"):
        red(A32[0])
    dot = fake_gpu(kgen.Reduce(op="dot", dtype="float32"))
    with pytest.raises(ArrayError, match=r"y has dtype float16"):
        dot(A32[0], A32[0].astype(np.float16))
    with pytest.raises(ArrayError, match=r"y has dtype int64"):
        dot(CAIArray(A32[0]), CAIArray(np.arange(4)))
    assert fake_gpu.launches == []


def test_non_contiguous_arrays_that_leading_dimensions_cannot_express(fake_gpu, rng):
    base = rng.standard_normal((8, 16)).astype(np.float32)
    B = rng.standard_normal((8, 4)).astype(np.float32)
    mm = fake_gpu(kgen.Matmul())
    with pytest.raises(ArrayError, match=r"layout_a='row' cannot express"):
        mm(GPUArray(base[:, ::2]), GPUArray(B), out=GPUArray(_nan((8, 4))))
    with pytest.raises(ArrayError, match=r"layout_a='col'"):  # a transposed view: the hint names the fix
        mm(CAIArray(base.T[:8]), GPUArray(B), out=GPUArray(_nan((8, 4))))
    with pytest.raises(ArrayError, match="row-major"):
        mm(GPUArray(base[:, :8]), GPUArray(B), out=GPUArray(np.asfortranarray(_nan((8, 4)))))
    col = fake_gpu(kgen.Matmul(layout_b="col"))
    with pytest.raises(ArrayError, match=r"layout_b='col' cannot express"):
        col(GPUArray(base[:, :8]), GPUArray(B))  # a row-major B for a column-major spec
    red = fake_gpu(kgen.Reduce(op="sum"))
    with pytest.raises(ArrayError, match="contiguous"):
        red(GPUArray(base[0, ::3]))
    assert fake_gpu.launches == []
    # A row slice of a wider matrix is expressible (its leading dimension carries it) and
    # host arrays of any layout are copied, so these launch.
    mm(GPUArray(base[:, :8]), GPUArray(B), out=GPUArray(_nan((8, 4))))
    mm(base[:, ::2], B)
    assert len(fake_gpu.launches) == 2


def test_empty_arrays(fake_gpu):
    mm = fake_gpu(kgen.Matmul())
    for M, N, K in ((0, 4, 3), (4, 0, 3), (0, 0, 0)):
        C = mm(np.ones((M, K), np.float32), np.ones((K, N), np.float32))
        assert isinstance(C, np.ndarray) and C.shape == (M, N)
        C = mm(GPUArray(np.ones((M, K), np.float32)), GPUArray(np.ones((K, N), np.float32)))
        assert C.shape == (M, N)
    assert fake_gpu.launches == []  # nothing to compute, nothing launched
    # K = 0 is defined (C = beta * C): it launches; the GPU suite checks the values.
    mm(np.ones((3, 0), np.float32), np.ones((0, 2), np.float32))
    assert fake_gpu.launches
    for op in ("min", "max"):
        k = fake_gpu(kgen.Reduce(op=op))
        with pytest.raises(ArrayError, match=rf"{op}.*empty"):
            k(np.zeros(0, np.float32))
        with pytest.raises(ArrayError, match="empty"):
            k(GPUArray(np.zeros(0, np.float32)), out=GPUArray(_nan((1,))))


def test_host_and_device_arrays_mixed(fake_gpu, rng):
    A = rng.standard_normal((4, 4)).astype(np.float32)
    mm = fake_gpu(kgen.Matmul())
    host_out = _nan((4, 4))
    with pytest.raises(ArrayError, match=r"mixed \(A on the host, B on the device"):
        mm(A, GPUArray(A), out=host_out)
    with pytest.raises(ArrayError, match=r"mixed.*out on the device"):
        mm(A, A, out=CAIArray(_nan((4, 4))))
    dot = fake_gpu(kgen.Reduce(op="dot"))
    with pytest.raises(ArrayError, match="mixed"):
        dot(CAIArray(A[0]), A[1])
    with pytest.raises(ArrayError, match=r"x is a list"):
        dot([1.0, 2.0], [3.0, 4.0])
    with pytest.raises(ArrayError, match=r"B is a str"):
        mm(A, "B")
    assert fake_gpu.launches == [] and np.isnan(host_out).all()


def test_the_fake_device_does_launch_valid_calls(fake_gpu, rng):
    """The control for the "nothing launched" assertions above: valid calls launch."""
    x = rng.standard_normal(1000).astype(np.float32)
    fake_gpu(kgen.Reduce(op="dot"))(x, x)
    fake_gpu(kgen.Reduce(op="sum"))(GPUArray(x), out=GPUArray(_nan((1,))))
    fake_gpu(kgen.Matmul())(x.reshape(25, 40), x.reshape(40, 25))
    assert len(fake_gpu.launches) >= 3


def test_beta_without_out(fake_gpu, rng):
    A = rng.standard_normal((4, 4)).astype(np.float32)
    with pytest.raises(ArrayError, match="beta"):
        fake_gpu(kgen.Matmul())(A, A, beta=1.0)


def test_device_array_checks_without_pycuda():
    """runtime's array helpers need no driver: strides that are not whole elements and
    masked arrays are refused with the argument's name."""
    a = np.zeros(8, np.float32)
    cai = CAIArray(a)
    cai.__cuda_array_interface__["strides"] = (6,)
    with pytest.raises(ArrayError, match=r"x has strides \(6,\)"):
        runtime.view(cai, "x")
    masked = CAIArray(a)
    masked.__cuda_array_interface__["mask"] = object()
    with pytest.raises(ArrayError, match="masked"):
        runtime.view(masked, "x")
    with pytest.raises(ArrayError, match="x is a dict"):
        runtime.view({}, "x")
    # data that starts inside an element (4 bytes into a float64) is refused by name, with the
    # element size; an element-aligned start is taken
    odd = CAIArray(np.zeros(8, np.float64))
    odd.__cuda_array_interface__["data"] = (0x7F0000001004, False)
    with pytest.raises(ArrayError, match=r"B starts at address 0x7f0000001004.*multiple of its element size "
                                         r"\(8 bytes for float64\)"):
        runtime.view(odd, "B")
    odd.__cuda_array_interface__["data"] = (0x7F0000001008, False)
    assert runtime.view(odd, "B").ptr == 0x7F0000001008
    v = runtime.view(CAIArray(np.zeros((3, 0), np.float32)), "A")
    assert v.shape == (3, 0) and v.strides == (1, 1)  # empty: row-major, whatever it said


# ---------------------------------------------------------------------------------
# Toolchain and device missing
# ---------------------------------------------------------------------------------

@pytest.fixture
def no_nvcc(monkeypatch, tmp_path):
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    monkeypatch.delenv("CUDA_HOME", raising=False)
    monkeypatch.delenv("CUDA_PATH", raising=False)
    monkeypatch.setattr(compiler, "CUDA_ROOTS", ())
    compiler.clear_memory_cache()
    yield
    compiler.clear_memory_cache()


def test_nvcc_missing_from_path(no_nvcc, tmp_path, monkeypatch):
    monkeypatch.setenv("KGEN_CACHE_DIR", str(tmp_path / "cache"))
    with pytest.raises(ToolchainError, match=r"nvcc was not found on PATH.*CUDA toolkit"):
        kgen.compile(kgen.Reduce(), "sm_90")
    assert not (tmp_path / "cache").exists()  # nothing written
    # Rendering needs no toolchain.
    assert "kgen_" in kgen.render(kgen.Reduce())


def test_nvcc_missing_in_the_cli_is_one_line(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("CUDA_HOME", "CUDA_PATH")}
    env.update(PATH=str(tmp_path), KGEN_CACHE_DIR=str(tmp_path / "cache"), PYTHONPATH=str(ROOT))
    code = ("import sys; import kgen.core.compiler as c; c.CUDA_ROOTS = (); "
            "from kgen.cli.main import main; sys.exit(main(sys.argv[1:]))")
    proc = subprocess.run([sys.executable, "-c", code, "demo", "--out", str(tmp_path / "demo")],
                          capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode != 0
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("kgen: error: nvcc was not found"), proc.stderr


def test_broken_nvcc_is_a_toolchain_error(tmp_path, monkeypatch):
    fake = tmp_path / "bin" / "nvcc"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\necho 'nvcc: libcudart missing' >&2\nexit 127\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", str(fake.parent))
    monkeypatch.setenv("KGEN_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(compiler, "_version_memo", {})
    with pytest.raises(ToolchainError, match=r"--version failed with exit code 127: nvcc: libcudart missing"):
        kgen.compile(kgen.Reduce(), "sm_90")


@pytest.mark.parametrize("arch", ["sm90", "compute_90", "gfx90a", "", "sm_9"])
def test_bad_arch(arch, monkeypatch):
    with pytest.raises(ValueError, match="arch="):
        kgen.compile(kgen.Reduce(), arch or "x")
    monkeypatch.setenv("KGEN_ARCH", arch or "sm 90")
    with pytest.raises(ValueError, match="arch="):
        kgen.core.kernel.default_arch()


def test_not_a_spec():
    with pytest.raises(TypeError, match="kgen spec"):
        kgen.build({"kernel": "matmul"})
    with pytest.raises(TypeError, match="kgen spec"):
        kgen.render("matmul")


class _FakePycuda:
    """Installs a fake pycuda.driver into sys.modules for one test."""

    def __init__(self, monkeypatch, init_error=None, count=1):
        drv = types.ModuleType("pycuda.driver")

        def init():
            if init_error:
                raise init_error

        drv.init = init
        drv.Device = types.SimpleNamespace(count=lambda: count)
        pkg = types.ModuleType("pycuda")
        pkg.driver = drv
        pkg.VERSION_TEXT = "fake"
        monkeypatch.setitem(sys.modules, "pycuda", pkg)
        monkeypatch.setitem(sys.modules, "pycuda.driver", drv)
        monkeypatch.setattr(runtime, "_state", {})
        kgen.core.kernel._built.clear()


def test_no_pycuda(monkeypatch):
    monkeypatch.setitem(sys.modules, "pycuda", None)
    monkeypatch.setitem(sys.modules, "pycuda.driver", None)
    monkeypatch.setattr(runtime, "_state", {})
    with pytest.raises(NoGPUError, match="pycuda is not importable.*Rendering, emitting and compiling work"):
        kgen.build(kgen.Matmul())
    ok, why = runtime.gpu_available()
    assert not ok and "pycuda" in why


def test_no_gpu_present(monkeypatch):
    _FakePycuda(monkeypatch, count=0)
    with pytest.raises(NoGPUError, match="no CUDA device is present"):
        kgen.build(kgen.Matmul())


def test_driver_that_cannot_start(monkeypatch):
    _FakePycuda(monkeypatch, init_error=RuntimeError("cuInit failed: no CUDA-capable device is detected"))
    with pytest.raises(NoGPUError, match="could not start: cuInit failed"):
        kgen.build(kgen.Reduce())


def test_device_index_out_of_range(monkeypatch):
    _FakePycuda(monkeypatch, count=2)
    monkeypatch.setenv("KGEN_DEVICE", "5")
    with pytest.raises(NoGPUError, match="KGEN_DEVICE=5 but only 2"):
        kgen.build(kgen.Reduce())


@pytest.mark.parametrize("argv", [["bench", "matmul"], ["bench", "reduce"], ["tune", "matmul", "--shape", "64x64x64"],
                                  ["tune", "reduce", "--n", "1000"]])
def test_gpu_commands_without_a_gpu_are_one_line(argv, tmp_path):
    """With pycuda unavailable (as on a machine without CUDA), the commands that need a
    GPU exit with status 2 and one line saying what is missing."""
    code = ("import sys; sys.modules['pycuda'] = None; sys.modules['pycuda.driver'] = None; "
            "from kgen.cli.main import main; sys.exit(main(sys.argv[1:]))")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "KGEN_CACHE_DIR": str(tmp_path / "cache")}
    proc = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True, env=env,
                          timeout=300, cwd=tmp_path)
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert "pycuda" in lines[0] or "torch" in lines[0]


def test_unusable_cache_folder_in_the_cli(tmp_path, monkeypatch, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("KGEN_CACHE_DIR", str(blocker / "cache"))
    assert cli_main(["cache", "info"]) == 0
    assert "entries   0" in capsys.readouterr().out
    assert cli_main(["cache", "clear"]) == 0


def test_no_gpu_in_the_cli(monkeypatch, capsys):
    _FakePycuda(monkeypatch, count=0)
    assert cli_main(["info"]) == 0
    assert "device    none (no CUDA device is present)" in capsys.readouterr().out


# ---------------------------------------------------------------------------------
# The CLI: one line on stderr, exit status 2, nothing written
# ---------------------------------------------------------------------------------

@pytest.mark.parametrize("spec,message", [
    ('{"kernel": "matmul", "tile": [64, 64', "not valid JSON"),
    ('{"kernel": "conv2d"}', "not a known kernel family"),
    ('{"kernel": "matmul", "tile": "big"}', "tile='big' is not allowed"),
    ('{"kernel": "reduce", "strategy": "magic"}', "strategy='magic'"),
    ('{"kernel": "reduce", "dtype": "float16"}', "dtype='float16'"),
    ('{"kernel": "matmul", "tile": [128, 128, 8], "thread_tile": [1, 1]}', "1024"),
    ("no-such-spec.json", "neither inline JSON"),
])
def test_cli_bad_spec_is_one_line(spec, message, capsys, tmp_path):
    out = tmp_path / "k.cu"
    assert cli_main(["emit", spec, "-o", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("kgen: error:") and message in err[0], err
    assert not out.exists()
    assert cli_main(["render", spec]) == 2


def test_cli_spec_file_errors(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_bytes(b"\xff\xfe{")
    assert cli_main(["render", str(bad)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(bad) in err[0]
    incomplete = tmp_path / "incomplete.json"
    incomplete.write_text('{"kernel": "reduce", "op": "dot"')
    assert cli_main(["render", str(incomplete)]) == 2
    assert "not valid JSON" in capsys.readouterr().err


def test_cli_exit_status_in_a_process(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "kgen", "render", '{"kernel": "nope"}'], capture_output=True,
                          text=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0 and "not a known kernel family" in proc.stderr
    assert proc.stdout == ""


def test_every_error_is_a_value_error_or_runtime_error():
    """Callers can catch kgen's errors by the builtin family they belong to."""
    assert issubclass(SpecError, ValueError) and issubclass(ArrayError, ValueError)
    assert issubclass(ToolchainError, RuntimeError) and issubclass(NoGPUError, RuntimeError)
    assert issubclass(kgen.CompileError, RuntimeError)
    json.dumps([str(e) for e in (SpecError("x"), ArrayError("y"))])


# ---------------------------------------------------------------------------------
# The tuned entry points check their arguments before choosing or building a kernel
# ---------------------------------------------------------------------------------

def test_dispatch_refuses_bad_calls_before_building(monkeypatch):
    def no_build(*a, **k):
        raise AssertionError("a kernel was built for a call that should have been refused")

    monkeypatch.setattr(kgen.core.kernel, "build", no_build)
    a = np.ones((3, 4), np.float32)
    with pytest.raises(ArrayError, match="inner dimensions"):
        kgen.matmul(a, np.ones((5, 2), np.float32))
    with pytest.raises(ArrayError, match=r"\(4,\) and B \(3, 4\): the inner dimensions differ \(4 and 3\)"):
        kgen.matmul(a[0], a)
    with pytest.raises(ArrayError, match="does not batch over B"):
        kgen.matmul(a, np.ones((2, 4, 3), np.float32))
    with pytest.raises(ArrayError, match="at least one dimension"):
        kgen.matmul(np.float32(2.0) * np.ones((), np.float32), a)
    with pytest.raises(ArrayError, match=r"out has shape \(2, 4\) but A \(2, 1, 3\) @ B \(3, 4\) "
                                         r"has shape \(2, 1, 4\)"):
        kgen.matmul(np.ones((2, 1, 3), np.float32), a, out=np.ones((2, 4), np.float32))
    with pytest.raises(ArrayError, match="int16"):
        kgen.matmul(a.astype(np.int16), a.T.astype(np.int16))
    with pytest.raises(ArrayError, match=r"B is a list"):
        kgen.matmul(a, [[1.0]])
    x = np.ones(10, np.float32)
    with pytest.raises(ArrayError, match=r"op='mean'"):
        kgen.reduce(x, op="mean")
    with pytest.raises(ArrayError, match="leave y out"):
        kgen.reduce(x, x, op="sum")
    with pytest.raises(ArrayError, match=r"x must be 1-D, got shape \(2, 5\): dot takes two vectors"):
        kgen.dot(np.ones((2, 5), np.float32), np.ones((2, 5), np.float32))
    with pytest.raises(ArrayError, match="int32"):
        kgen.dot(x.astype(np.int32), x.astype(np.int32))


def test_repeat_calls_reuse_their_launch_plan(fake_gpu, rng):
    mm = fake_gpu(kgen.Matmul())
    A = GPUArray(rng.standard_normal((70, 50)).astype(np.float32))
    B = GPUArray(rng.standard_normal((50, 30)).astype(np.float32))
    for _ in range(3):
        mm(A, B, out=GPUArray(_nan((70, 30))))
    assert len(mm._launch_plans) == 1, "one shape, layout and alignment class: one plan"
    assert len(fake_gpu.launches) == 3 and len({repr(launch[:3]) for launch in fake_gpu.launches}) == 1
    mm(GPUArray(rng.standard_normal((71, 50)).astype(np.float32)), B, out=GPUArray(_nan((71, 30))))
    assert len(mm._launch_plans) == 2, "a new shape makes a new plan"
    red = fake_gpu(kgen.Reduce(op="sum"))
    for n in (1000, 1000, 1000):
        red(GPUArray(rng.standard_normal(n).astype(np.float32)), out=GPUArray(_nan((1,))))
    assert len(red._memo) == 1, "fresh arrays of one length and alignment reuse the launch steps"


def test_public_dot_names_a_length_mismatch_before_it_seeks_a_kernel(monkeypatch):
    """kgen.dot checks y against x before dispatch looks for a kernel, so the error names the
    lengths on any machine (here no kernel may be sought at all)."""
    from kgen.tune import dispatch

    monkeypatch.setattr(dispatch, "_kernel", lambda *a, **k: pytest.fail("a kernel was sought for a bad call"))
    x = np.ones(10, np.float32)
    with pytest.raises(ArrayError, match="x and y differ in length: 10 and 9"):
        kgen.dot(x, x[:9])
    with pytest.raises(ArrayError, match=r"differ in length: 10 and \(2, 5\)"):
        kgen.dot(x, x.reshape(2, 5))


def test_public_calls_name_a_mixed_dtype_or_a_wrong_out_before_they_seek_a_kernel(monkeypatch):
    """kgen.matmul and kgen.dot check that both operands share one dtype, and matmul that out=
    has the product's shape and dtype, before dispatch looks for a kernel: the error names the
    dtypes or shapes on any machine (here no kernel may be sought at all)."""
    from kgen.tune import dispatch

    monkeypatch.setattr(dispatch, "_kernel", lambda *a, **k: pytest.fail("a kernel was sought for a bad call"))
    A, B = np.ones((3, 4), np.float32), np.ones((4, 6), np.float32)
    with pytest.raises(ArrayError, match="A has dtype float32 but B float64: both must have one dtype"):
        kgen.matmul(A, B.astype(np.float64))
    with pytest.raises(ArrayError, match="A has dtype float32 but B int32"):
        kgen.matmul(A, B.astype(np.int32))
    with pytest.raises(ArrayError, match=r"out has shape \(3, 5\) but the product is 3x6"):
        kgen.matmul(A, B, out=np.ones((3, 5), np.float32))
    with pytest.raises(ArrayError, match="A has dtype float32 but out float64: pass an out of dtype float32"):
        kgen.matmul(A, B, out=np.ones((3, 6), np.float64))
    with pytest.raises(ArrayError, match=r"out has shape \(6, 6\) but A \(2, 3, 4\) @ B \(4, 6\) has shape"):
        kgen.matmul(np.ones((2, 3, 4), np.float32), B, out=np.ones((6, 6), np.float32))
    with pytest.raises(ArrayError, match="beta != 0 needs out="):
        kgen.matmul(A, B, beta=1.0)
    for bad in ("2", 1j, None):
        with pytest.raises(ArrayError, match=f"alpha must be a real number, got {re.escape(repr(bad))}"):
            kgen.matmul(A, B, alpha=bad)
    with pytest.raises(ArrayError, match="beta must be a real number"):
        kgen.matmul(A, B, out=np.ones((3, 6), np.float32), beta="1")
    x = np.ones(10, np.float32)
    with pytest.raises(ArrayError, match="x has dtype float32 but y float64: both must have one dtype"):
        kgen.dot(x, x.astype(np.float64))
    with pytest.raises(ArrayError, match="y is a list"):
        kgen.dot(x, [1.0] * 10)
    # A well-formed call gets as far as seeking its kernel.
    with pytest.raises(pytest.fail.Exception, match="a kernel was sought"):
        kgen.matmul(A, B, out=np.ones((3, 6), np.float32), alpha=np.float32(2), beta=1)
    with pytest.raises(pytest.fail.Exception, match="a kernel was sought"):
        kgen.dot(x, x)
